"""The canonical trajectory schema: one step shape for recording, importing, scoring and
exporting. Versioned (``schema_version``); ``steplab schema`` prints its JSON Schema.
:func:`as_trajectory` turns a Trajectory or its dict into a Trajectory (the one coercion)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from trainer_core.errors import InputError, describe_validation_error

SCHEMA_VERSION = "1.0"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TaskRef(_Model):
    id: str = Field("", description="The task's id (in its task set, or the source's own id).")
    task_set: str = Field("", description="The task set it belongs to, when known.")
    domain: str = Field("generic", description="Domain profile name.")
    prompt: str = Field("", description="What the agent was asked to do.")


class Step(_Model):
    index: int = Field(..., ge=0, description="0-based position in the trajectory.")
    thought: str = Field("", description="The agent's reasoning before the action.")
    tool: str = Field(..., description="The tool called (canonical name, after aliases).")
    params: dict[str, Any] = Field(default_factory=dict, description="The tool's parameters.")
    observation: str = Field("", description="What the environment returned.")
    exit_code: int | None = Field(None, description="Exit code of a command, when there was one.")
    error: str | None = Field(None, description="Error kind or message when the step failed.")
    started_at: datetime | None = Field(None, description="When the step started.")
    duration: float | None = Field(None, ge=0, description="Seconds the environment took.")
    tokens_in: int | None = Field(
        None, ge=0, description="Prompt tokens the policy used for this step."
    )
    tokens_out: int | None = Field(None, ge=0, description="Completion tokens for this step.")
    reward: float | None = Field(None, description="The step reward the environment gave, if any.")
    metadata: dict[str, Any] = Field(default_factory=dict)


class Outcome(_Model):
    success: bool | None = Field(None, description="Did the episode solve the task? None: unknown.")
    score: float | None = Field(None, description="A 0..1 score when the checker gives one.")
    tests_passed: int | None = Field(None, ge=0)
    tests_failed: int | None = Field(None, ge=0)
    partial_credit: float | None = Field(None, ge=0, le=1)
    terminated: bool = Field(False, description="The episode ended by itself (submit, finish).")
    truncated: bool = Field(False, description="The episode was cut short (step or time limit).")
    metadata: dict[str, Any] = Field(default_factory=dict)


class Usage(_Model):
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    duration: float = 0.0


class Trajectory(_Model):
    schema_version: str = Field(SCHEMA_VERSION, description="Version of this schema.")
    task: TaskRef = Field(default_factory=TaskRef)
    agent: str = Field(
        "", description="The agent framework or policy kind (swe-agent, openhands, scripted, ...)."
    )
    model: str = Field("", description="The model behind the policy, when known.")
    policy: str = Field("", description="The Steplab policy name, when it came from a rollout.")
    environment: str = Field("", description="The environment id, e.g. steplab/sandbox.")
    steps: list[Step] = Field(default_factory=list)
    outcome: Outcome = Field(default_factory=Outcome)
    usage: Usage = Field(default_factory=Usage)
    metadata: dict[str, Any] = Field(default_factory=dict)
    source_format: str = Field(
        "steplab", description="Where it came from: steplab, swe-agent, openhands, inspect, ..."
    )

    def to_json(self) -> str:
        return self.model_dump_json(exclude_none=False)


def as_trajectory(value: Any) -> Trajectory:
    """``value`` as a :class:`Trajectory`: a Trajectory is returned as it is, a mapping (its
    dict, e.g. parsed JSON) is validated; anything else, or an invalid mapping, raises
    InputError saying what is wrong."""
    if isinstance(value, Trajectory):
        return value
    if isinstance(value, Mapping):
        try:
            return Trajectory.model_validate(dict(value))
        except ValidationError as exc:
            raise InputError(
                f"invalid trajectory: {describe_validation_error(exc, whole='trajectory')}"
            ) from None
    raise InputError(f"a trajectory is a Trajectory or its dict, not {type(value).__name__}")


def trajectory_json_schema() -> dict[str, Any]:
    return Trajectory.model_json_schema()


def trajectory_json_schema_text() -> str:
    return json.dumps(trajectory_json_schema(), indent=2, sort_keys=True)
