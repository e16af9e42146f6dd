"""A pipeline's configuration (validated YAML) and its plan: an optional baseline evaluation of
the starting policy, then per iteration collect → score → [calibrate] → dataset → train →
register → evaluate. The calibrate stage runs only in an iteration with a ``calibrate:`` block.
Pure: no database. The runner that follows the plan is in ``jobs.py``."""

from __future__ import annotations

from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
)

from trainer_core import safeparse
from trainer_core.policies.chat_format import DEFAULT_INSTRUCTIONS
from trainer_core.training.grpo import GRPOConfig
from webapp.common.errors import ApplicationError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CollectStage(_Strict):
    policy: str = Field(
        "current",
        description="'current' (the starting policy, then each iteration's trained one) or the "
        "name of a policy, e.g. 'scripted' for reference trajectories.",
    )
    episodes_per_task: int = Field(1, ge=1, le=64)
    max_steps: int = Field(6, ge=1, le=200)
    concurrency: int = Field(2, ge=1, le=64)
    temperature: float | None = Field(
        None, ge=0, description="Sampling temperature for a local model (None: the policy's own)."
    )
    task_set: str = Field(
        "",
        description="The task set to play, by name ('' : the pipeline's train task set). Never "
        "the evaluation set: e.g. a set of tasks to practise on with a reward, where no "
        "reference was learned.",
    )
    num_tasks: int = Field(0, ge=0, description="Play only N tasks of the set (0: all).")
    task_offset: int = Field(0, ge=0, description="...starting at this position (by task id).")
    reuse: bool = Field(
        False,
        description="Reuse a finished collect run that played exactly this (the same policy on "
        "every task of the set, as many episodes, the same step limit) instead of playing it "
        "again, when the policy plays deterministically (a scripted policy without mistakes, a "
        "local model at temperature 0); the seed then does not matter. Not with num_tasks or "
        "task_offset.",
    )


class DatasetStage(_Strict):
    kind: Literal["sft", "sft_knowlyr", "dpo", "grpo", "prm"] = "sft"
    outcome: Literal["", "success", "failure"] = Field(
        "", description="Keep only trajectories with this outcome ('' keeps all)."
    )
    min_score: float | None = Field(None, description="Keep trajectories scoring at least this.")


class TrainStage(_Strict):
    method: Literal["sft", "dpo", "grpo"] = "sft"
    values: dict[str, Any] = Field(default_factory=dict, description="Trainer config fields.")


class CalibrateStage(_Strict):
    """Calibrate the reward model on this iteration's collected (training) trajectories through
    the real calibration path — an annotation queue, step labels, a fit, a new reward-model
    version — with labels from a simulated annotator, then re-score the iteration with it."""

    annotator: Literal["simulated"] = Field(
        "simulated",
        description="Who labels: 'simulated' (a scripted labeller that marks the steps on the "
        "task's reference path good and the others bad; the only one a pipeline can wait for).",
    )
    error_rate: float = Field(
        0.0, ge=0, le=1, description="Probability that the annotator flips a label (seeded)."
    )
    trajectories: int = Field(
        50, ge=1, le=500, description="Queue at most N of the iteration's collected trajectories."
    )
    max_steps: int = Field(
        50, ge=1, le=200, description="Label at most the first N steps of a trajectory."
    )
    seed: int = Field(0, description="Seeds which trajectories are queued and the label errors.")
    folds: int = Field(5, ge=2, le=20, description="Cross-validation folds of the fit.")


class Iteration(_Strict):
    collect: CollectStage = Field(default_factory=CollectStage)
    calibrate: CalibrateStage | None = Field(
        None, description="Optional: calibrate the reward model after scoring (see above)."
    )
    dataset: DatasetStage = Field(default_factory=DatasetStage)
    train: TrainStage = Field(default_factory=TrainStage)

    @model_serializer(mode="wrap")
    def _without_absent_calibrate(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """An iteration without a calibrate stage is stored and shown as before (no
        ``calibrate: null``)."""
        data = handler(self)
        if data.get("calibrate") is None:
            data.pop("calibrate", None)
        return data


class EvaluateStage(_Strict):
    samples_per_task: int = Field(1, ge=1, le=100)
    max_steps: int = Field(6, ge=1, le=200)
    concurrency: int = Field(2, ge=1, le=64)
    seed: int = 0


class PipelineConfig(_Strict):
    baseline: bool = Field(True, description="Evaluate the starting policy first.")
    seed: int = 0
    evaluate: EvaluateStage = Field(default_factory=EvaluateStage)
    iterations: list[Iteration] = Field(min_length=1, max_length=50)


def parse_config(data: Any) -> PipelineConfig:
    """A pipeline configuration from a dict or YAML text, with errors that say which field."""
    if isinstance(data, str):
        try:
            data = safeparse.load_yaml(data) or {}
        except yaml.YAMLError as exc:
            raise ApplicationError(f"The pipeline configuration is not valid YAML: {exc}") from None
    try:
        config = PipelineConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'config'}: {e['msg']}" for e in exc.errors()
        )
        raise ApplicationError(f"The pipeline configuration is invalid: {problems}") from None
    for iteration in config.iterations:  # options stored before the estimators were corrected
        if iteration.train.method == "grpo":
            iteration.train.values = GRPOConfig.upgrade_options(iteration.train.values)
    return config


ITERATION_STAGES = ("collect", "score", "dataset", "train", "register", "evaluate")
CALIBRATE_AFTER = "score"  # an iteration with a calibrate block runs it after this stage


def iteration_stages(iteration: Iteration) -> tuple[str, ...]:
    """The stages of one iteration, in order: calibrate only where it is configured."""
    if iteration.calibrate is None:
        return ITERATION_STAGES
    at = ITERATION_STAGES.index(CALIBRATE_AFTER) + 1
    return (*ITERATION_STAGES[:at], "calibrate", *ITERATION_STAGES[at:])


def plan(config: PipelineConfig) -> list[tuple[int, str]]:
    steps: list[tuple[int, str]] = [(0, "baseline")] if config.baseline else []
    for number, iteration in enumerate(config.iterations, start=1):
        steps += [(number, name) for name in iteration_stages(iteration)]
    return steps


def stage_key(iteration: int, name: str) -> str:
    return f"{iteration}:{name}"


PROMPT_PARAMETERS = ("system", "list_tools", "max_new_tokens", "top_p", "device")


def prompt_parameters(policy) -> dict[str, Any]:
    """How the starting policy is prompted and decodes: every policy the pipeline registers is
    prompted the same way, and its training data carries the same system prompt."""
    parameters = policy.parameters or {}
    return {k: parameters[k] for k in PROMPT_PARAMETERS if k in parameters}


def training_system(policy) -> str | None:
    """The system prompt to train with when it is not the tools' listing (``list_tools`` off)."""
    parameters = policy.parameters or {}
    if parameters.get("list_tools", True):
        return None
    return (parameters.get("system") or DEFAULT_INSTRUCTIONS).strip()
