"""The Task model: what an agent is asked to do and how its outcome is checked, and the
``ToolSpec`` of a tool the agent may call (shared by environments, sandboxes and policies)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from trainer_core.errors import InputError


class ToolCall(BaseModel):
    """One action: a tool, its parameters, and optionally the thought before it."""

    model_config = ConfigDict(extra="forbid")

    tool: str
    params: dict[str, Any] = Field(default_factory=dict)
    thought: str | None = None


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the agent sees it: a name, what it does, JSON-schema parameters."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
    category: str = "execute"

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "parameters": dict(self.parameters),
        }


class Task(BaseModel):
    """A task. Only ``prompt`` is required; the rest depends on the domain."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field("", description="Unique id within its task set, e.g. 'arith-train-00042'.")
    prompt: str = Field(..., description="What the agent is asked to do.")
    domain: str = Field(
        "generic", description="Domain profile name: coding, conversation, arithmetic, ..."
    )
    environment: str = Field("", description="Registered environment id, e.g. 'steplab/sandbox'.")
    expected_answer: Any = Field(None, description="The answer an outcome checker compares with.")
    checker: str = Field("", description="Outcome checker name: exact, number, test_command, ...")
    answer_schema: str = Field(
        "", description="How to extract the answer: answer_tag, boxed, last_line, raw."
    )
    files: dict[str, str] = Field(
        default_factory=dict, description="Files to create in the workspace: path -> content."
    )
    repo: str = Field(
        "",
        description="A repository directory or tarball copied into the workspace: beside the "
        "task file, an archive uploaded with the task set, or under STEPLAB_TASK_REPO_ROOTS "
        "(trainer_core/tasks/repos.py).",
    )
    base_commit: str = Field("", description="Commit to check out in the repository.")
    setup: list[str] = Field(
        default_factory=list, description="Shell commands run in the workspace before the episode."
    )
    test_command: str = Field(
        "", description="Command whose result decides success (coding tasks)."
    )
    reference_solution: list[ToolCall] = Field(
        default_factory=list, description="Tool calls that solve the task."
    )
    reference_steps: int | None = Field(
        None, description="How many steps a good solution takes (efficiency)."
    )
    metadata: dict[str, Any] = Field(default_factory=dict)


def coerce_task(
    task: Task | dict[str, Any] | str | None, *, domain: str = "generic"
) -> Task | None:
    """A Task object, a dict of task fields, or a plain prompt string → Task."""
    if task is None or isinstance(task, Task):
        return task
    if isinstance(task, str):
        return Task(prompt=task, domain=domain)
    if isinstance(task, dict):
        data = dict(task)
        data.setdefault("domain", domain)
        try:
            return Task.model_validate(data)
        except Exception as exc:
            raise InputError(f"invalid task: {exc}") from None
    raise InputError(
        f"a task is a Task, a dict of task fields or a prompt string, not {type(task).__name__}"
    )
