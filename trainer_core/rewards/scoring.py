"""Scoring a trajectory: every step on every rubric, then the step totals, the process, outcome
and efficiency parts and the trajectory total.

A :class:`RewardConfig` — rubrics, layer weights, total weights, profile name — is what a
reward-model version snapshots (:meth:`RewardConfig.to_dict`); scoring reads only it.

Where each rubric's score comes from, by its evaluator:

``rule``
    :func:`trainer_core.rewards.rules.step_rule_scores`, through
    :data:`~trainer_core.rewards.rubrics.RULE_FOR_RUBRIC` (``info_utilization`` ← ``info_use``,
    ``non_redundancy`` ← min(redundancy, regression)). A rule rubric no rule scores is unscored.
``model``
    The LLM judge when one is given (``judge.judge_trajectory``), else unscored — None, never a
    neutral 0.5 (knowlyr-reward fills 0.5 when there is no judge, which pulls every step total
    towards the middle). A judge value that is not a number in 0..1 is unscored too.
``human``
    Unscored here; annotation and calibration fill them.

A calibration (``RewardConfig.calibration``, fitted by
:func:`trainer_core.calibration.fit.fit_calibration`) changes only the step totals, after the
rubrics are scored: the fitted rubric weights replace the rubrics' own weights and the layer
weights (a rubric without a fitted weight counts 0; a step on which no rubric with a fitted weight
is scored keeps its uncalibrated total), then the total goes through the fitted monotone map (see
:mod:`trainer_core.calibration.fit`). ``StepScore.raw_total`` keeps the uncalibrated total; the
process score and the trajectory total are built from the calibrated step totals.

A trajectory whose steps have no score at all (e.g. a domain whose rubrics are all
model-evaluated, scored without a judge) is *unscored*: its process and total are None and
``unscored_reason`` says why; its outcome and efficiency are still reported.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any

from trainer_core.errors import ConfigError, InputError
from trainer_core.recording.schema import Trajectory
from trainer_core.rewards.combine import (
    LayerWeights,
    TotalWeights,
    process_score,
    step_total,
    trajectory_total,
)
from trainer_core.rewards.rubrics import (
    DESCRIPTIONS,
    EVALUATORS,
    RULE_FOR_RUBRIC,
    Rubric,
    rubric_set,
)
from trainer_core.rewards.rules import RuleContext, efficiency, outcome_score, step_rule_scores

__all__ = [
    "RewardConfig",
    "RubricScore",
    "StepScore",
    "TrajectoryScore",
    "score_trajectory",
]

ALL_MODEL_NO_JUDGE = "all rubrics of this domain are model-evaluated and no judge was given"


# --- configuration -------------------------------------------------------------------------------


@dataclass
class RewardConfig:
    """What a reward-model version scores with. ``to_dict()`` is the stored snapshot."""

    rubrics: list[Rubric]
    """The rubrics (id, description, evaluator rule|model|human, weight)."""
    layers: LayerWeights = field(default_factory=LayerWeights)
    """Weight of each scoring layer in a step total."""
    totals: TotalWeights = field(default_factory=TotalWeights)
    """Weights of outcome, process and efficiency in the trajectory total."""
    profile: str = "generic"
    """The domain profile's name (tool categories for the rules, the outcome fields)."""
    calibration: dict[str, Any] | None = None
    """A fitted calibration (``CalibrationResult.to_dict()``: rubric_weights, isotonic, n, cv);
    None: uncalibrated. See the module doc."""

    def __post_init__(self) -> None:
        self.rubrics = list(self.rubrics)
        if not self.rubrics:
            raise ConfigError("a reward model needs at least one rubric")
        ids: set[str] = set()
        for rubric in self.rubrics:
            if not isinstance(rubric, Rubric):
                raise ConfigError(f"rubrics are Rubric objects, not {type(rubric).__name__}")
            if rubric.id in ids:
                raise ConfigError(f"rubric {rubric.id!r} appears twice")
            ids.add(rubric.id)
            if rubric.evaluator not in EVALUATORS:
                raise ConfigError(
                    f"rubric {rubric.id!r}: evaluator must be one of {', '.join(EVALUATORS)}, "
                    f"not {rubric.evaluator!r}"
                )
            weight = rubric.weight
            if isinstance(weight, bool) or not isinstance(weight, int | float):
                raise ConfigError(f"rubric {rubric.id!r}: weight must be a number")
            if not math.isfinite(weight) or weight < 0:
                raise ConfigError(f"rubric {rubric.id!r}: weight must be finite and ≥ 0")
        if not any(r.weight > 0 for r in self.rubrics):
            raise ConfigError("every rubric weight is 0; give at least one a weight above 0")
        if not isinstance(self.layers, LayerWeights) or not isinstance(self.totals, TotalWeights):
            raise ConfigError("layers and totals are LayerWeights and TotalWeights")
        if not isinstance(self.profile, str) or not self.profile:
            raise ConfigError("profile is the domain profile's name, e.g. 'coding'")
        self._calibration = None
        if self.calibration is not None and not isinstance(self.calibration, Mapping):
            raise ConfigError(
                'calibration is a mapping {"rubric_weights": {...}, "isotonic": {"x", "y"}}, '
                f"not {type(self.calibration).__name__}"
            )
        if self.calibration:
            from trainer_core.calibration.fit import Calibration

            # a JSON-clean copy: the snapshot and the fingerprint see exactly what is stored
            try:
                self.calibration = json.loads(json.dumps(dict(self.calibration), allow_nan=False))
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"calibration must be JSON data: {exc}") from None
            self._calibration = Calibration.from_dict(
                self.calibration, [r.id for r in self.rubrics]
            )
        else:
            self.calibration = None

    @property
    def calibrated(self) -> bool:
        return self._calibration is not None

    @property
    def fitted_weights(self) -> dict[str, float]:
        """The calibration's rubric weights (empty without one, or with a map alone)."""
        return dict(self._calibration.rubric_weights) if self._calibration is not None else {}

    def step_total(self, scores: Mapping[str, float | None]) -> tuple[float | None, float | None]:
        """(calibrated total, uncalibrated total) of a step's rubric scores; the two are equal
        without a calibration."""
        raw = step_total(scores, self.rubrics, self.layers)
        if self._calibration is None:
            return raw, raw
        return self._calibration.step_total(scores, raw), raw

    @classmethod
    def for_profile(cls, profile: Any, **overrides: Any) -> RewardConfig:
        """The built-in rubrics of a profile (a DomainProfile or a name), its ``rubric_weights``
        applied, default layer and total weights (``overrides`` replace fields)."""
        if isinstance(profile, str):
            name, weights = profile, None
        else:
            name, weights = profile.name, (profile.rubric_weights or None)
        values: dict[str, Any] = {"rubrics": rubric_set(name, weights), "profile": name}
        values.update(overrides)
        return cls(**values)

    def rubric(self, rubric_id: str) -> Rubric | None:
        return next((r for r in self.rubrics if r.id == rubric_id), None)

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "profile": self.profile,
            "rubrics": [
                {
                    "id": r.id,
                    "description": r.description,
                    "evaluator": r.evaluator,
                    "weight": float(r.weight),
                }
                for r in self.rubrics
            ],
            "layers": self.layers.to_dict(),
            "totals": self.totals.to_dict(),
        }
        if self.calibration is not None:  # absent when None: uncalibrated fingerprints unchanged
            data["calibration"] = self.calibration
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RewardConfig:
        if not isinstance(data, Mapping):
            raise ConfigError("a reward config is a mapping with profile, rubrics, layers, totals")
        unknown = sorted(set(data) - {"profile", "rubrics", "layers", "totals", "calibration"})
        if unknown:
            raise ConfigError(
                f"unknown reward config key(s) {', '.join(unknown)}; "
                "known: profile, rubrics, layers, totals, calibration"
            )
        raw_rubrics = data.get("rubrics")
        if not isinstance(raw_rubrics, list):
            raise ConfigError("a reward config needs 'rubrics': a list of {id, evaluator, weight}")
        rubrics = []
        for position, item in enumerate(raw_rubrics):
            if not isinstance(item, Mapping) or not isinstance(item.get("id"), str):
                raise ConfigError(f"rubric {position}: a mapping with at least an 'id' string")
            extra = sorted(set(item) - {"id", "description", "evaluator", "weight"})
            if extra:
                raise ConfigError(f"rubric {item['id']!r}: unknown key(s) {', '.join(extra)}")
            # a built-in rubric id without description / evaluator gets the built-in ones
            description, evaluator = DESCRIPTIONS.get(item["id"], ("", "model"))
            rubrics.append(
                Rubric(
                    id=item["id"],
                    description=str(item.get("description") or description),
                    evaluator=item.get("evaluator") or evaluator,
                    weight=item.get("weight", 1.0),
                )
            )
        try:
            layers = LayerWeights.from_dict(data.get("layers"))
            totals = TotalWeights.from_dict(data.get("totals"))
        except TypeError as exc:
            raise ConfigError(f"invalid weights: {exc}") from None
        return cls(
            rubrics=rubrics,
            layers=layers,
            totals=totals,
            profile=data.get("profile") or "generic",
            calibration=data.get("calibration") or None,
        )

    def fingerprint(self) -> str:
        """16 hex digits of the SHA-256 of the canonical JSON of :meth:`to_dict`: equal configs
        give equal fingerprints, any change of a weight, rubric or evaluator a new one."""
        text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


# --- results -------------------------------------------------------------------------------------


@dataclass
class RubricScore:
    value: float | None
    """0..1, or None: unscored."""
    layer: str
    """rule, model or human (the rubric's evaluator)."""
    rationale: str = ""
    interpolated: bool = False
    """The judge did not see this step and filled it from its neighbours."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class StepScore:
    index: int
    rubrics: dict[str, RubricScore]
    total: float | None
    """The step total: calibrated when the config carries a calibration."""
    raw_total: float | None = None
    """The uncalibrated step total (equal to ``total`` without a calibration)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "total": self.total,
            "raw_total": self.raw_total,
            "rubrics": {k: v.to_dict() for k, v in self.rubrics.items()},
        }


def _usage_dict(usage: Any) -> dict[str, Any] | None:
    if usage is None:
        return None
    if hasattr(usage, "to_dict"):
        return usage.to_dict()
    if is_dataclass(usage):
        return asdict(usage)
    return {
        name: getattr(usage, name, None)
        for name in ("calls", "cache_hits", "tokens_in", "tokens_out", "cost")
    }


@dataclass
class TrajectoryScore:
    steps: list[StepScore]
    process: float | None
    outcome: float | None
    efficiency: float | None
    total: float | None
    unscored_reason: str | None = None
    judge_usage: Any = None
    """The judge's JudgeUsage (calls, cache_hits, tokens_in, tokens_out, cost); None: no judge."""
    config_fingerprint: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "process": self.process,
            "outcome": self.outcome,
            "efficiency": self.efficiency,
            "unscored_reason": self.unscored_reason,
            "config_fingerprint": self.config_fingerprint,
            "judge_usage": _usage_dict(self.judge_usage),
            "steps": [s.to_dict() for s in self.steps],
        }


# --- scoring -------------------------------------------------------------------------------------


def _judge_value(value: Any) -> float | None:
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    value = float(value)
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        return None
    return value


def _resolve_profile(profile: Any, name: str) -> Any:
    if profile is not None:
        return profile
    from trainer_core.envs.profiles import get_profile

    try:
        return get_profile(name)
    except ConfigError:
        return None  # an unknown domain: tool categories are inferred from tool names


def _coerce_trajectory(trajectory: Any) -> Trajectory:
    if isinstance(trajectory, Trajectory):
        return trajectory
    if isinstance(trajectory, Mapping):
        from pydantic import ValidationError

        from trainer_core.errors import describe_validation_error

        try:
            return Trajectory.model_validate(dict(trajectory))
        except ValidationError as exc:
            raise InputError(
                f"invalid trajectory: {describe_validation_error(exc, whole='trajectory')}"
            ) from None
    raise InputError(f"a trajectory is a Trajectory or a dict, not {type(trajectory).__name__}")


def _reference(trajectory: Trajectory, reference_steps: int | None) -> int | None:
    if reference_steps is not None:
        return reference_steps
    value = (trajectory.metadata or {}).get("reference_steps")
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


def _rule_rationale(rule: str, why: Mapping[str, str]) -> str:
    if rule == "non_redundancy":
        parts = [why[k] for k in ("redundancy", "regression") if k in why]
    else:
        parts = [why[rule]] if rule in why else []
    return "; ".join(parts)


def _unscored_reason(
    config: RewardConfig, judge: Any, judged: bool, errors: list[str], stopped: bool
) -> str:
    weighted = [r for r in config.rubrics if r.weight > 0]
    evaluators = {r.evaluator for r in weighted}
    if judge is None and evaluators == {"model"}:
        return ALL_MODEL_NO_JUDGE
    if judge is None and evaluators <= {"model", "human"}:
        return (
            "every rubric of this domain is model- or human-evaluated, no judge was given and "
            "human scores come from annotation"
        )
    if judge is not None and evaluators <= {"model", "human"}:
        if stopped:
            return "the judge was stopped before it scored any step"
        if errors:
            return f"the judge scored no step: {errors[0]}"
        if not judged:
            return "the judge returned no usable score for any step"
    if evaluators == {"human"}:
        return "every rubric of this domain is human-evaluated; annotators score them"
    return "no rubric could be scored on any step"


def score_trajectory(
    trajectory: Trajectory | Mapping[str, Any],
    config: RewardConfig,
    *,
    profile: Any = None,
    judge: Any = None,
    reference_steps: int | None = None,
    should_stop: Callable[[], str | None] | None = None,
) -> TrajectoryScore:
    """Score every step of ``trajectory`` on ``config``'s rubrics and combine (see the module doc).

    ``profile``: the DomainProfile (default: the built-in profile named by ``config.profile``;
    tools are inferred from their names when there is none). ``judge``: an object with
    ``judge_trajectory(trajectory, rubrics, task_prompt=..., should_stop=...)`` returning
    ``(judgements, usage)`` (:mod:`trainer_core.rewards.judge`); None scores no model rubric.
    ``reference_steps``: a good solution's length (the task's ``reference_steps``), for
    efficiency; else the trajectory's ``metadata["reference_steps"]``; else no efficiency part.
    ``should_stop``: passed to the judge (a spend cap); steps it did not judge stay unscored.
    """
    if not isinstance(config, RewardConfig):
        raise ConfigError("config is a RewardConfig (RewardConfig.from_dict(snapshot))")
    trajectory = _coerce_trajectory(trajectory)
    profile = _resolve_profile(profile, config.profile)
    steps = list(trajectory.steps)

    # rule layer
    rule_rubrics = [r for r in config.rubrics if r.evaluator == "rule"]
    rule_scores: list[dict[str, float]] = []
    reasons: list[dict[str, str]] = []
    if rule_rubrics and steps:
        rule_scores = step_rule_scores(steps, RuleContext.from_profile(profile), reasons=reasons)

    # model layer
    fitted = config.fitted_weights
    model_rubrics = [
        r
        for r in config.rubrics
        if r.evaluator == "model" and (r.weight > 0 or fitted.get(r.id, 0.0) > 0)
    ]
    judgements: dict[int, Any] = {}
    usage = None
    if judge is not None and model_rubrics and steps:
        results, usage = judge.judge_trajectory(
            trajectory,
            model_rubrics,
            task_prompt=trajectory.task.prompt,
            should_stop=should_stop,
        )
        for judgement in results or ():
            judgements[judgement.index] = judgement
    model_ids = {r.id for r in model_rubrics}

    # judgements are keyed by the steps' indices; by positions when no key is a step index
    by_position = bool(judgements) and not (judgements.keys() & {s.index for s in steps})

    scored_steps: list[StepScore] = []
    judge_errors: list[str] = []
    judged_any = False
    for position, step in enumerate(steps):
        rubric_scores: dict[str, RubricScore] = {}
        values: dict[str, float | None] = {}
        why = reasons[position] if position < len(reasons) else {}
        judgement = judgements.get(position if by_position else step.index)
        for rubric in config.rubrics:
            if rubric.evaluator == "rule":
                rule = RULE_FOR_RUBRIC.get(rubric.id)
                if rule is None:
                    score = RubricScore(
                        None,
                        "rule",
                        f"no rule scores {rubric.id!r}; make it model- or human-evaluated",
                    )
                else:
                    score = RubricScore(
                        rule_scores[position][rule], "rule", _rule_rationale(rule, why)
                    )
            elif rubric.evaluator == "model":
                if rubric.id not in model_ids:
                    score = RubricScore(None, "model", "weight 0: not sent to the judge")
                elif judge is None:
                    score = RubricScore(None, "model", "no judge was given")
                elif judgement is None:
                    score = RubricScore(None, "model", "the judge did not score this step")
                else:
                    raw = (judgement.scores or {}).get(rubric.id)
                    value = _judge_value(raw)
                    error = getattr(judgement, "error", None)
                    rationale = str(getattr(judgement, "rationale", "") or "")
                    if value is None and error:
                        judge_errors.append(str(error))
                        rationale = f"judge error: {error}" + (
                            f"; {rationale}" if rationale else ""
                        )
                    elif value is None and raw is not None:
                        rationale = f"the judge gave {raw!r}, not a score in 0..1" + (
                            f"; {rationale}" if rationale else ""
                        )
                    judged_any = judged_any or value is not None
                    score = RubricScore(
                        value,
                        "model",
                        rationale,
                        bool(getattr(judgement, "interpolated", False)),
                    )
            else:
                score = RubricScore(None, "human", "human-evaluated: annotators score it")
            rubric_scores[rubric.id] = score
            values[rubric.id] = score.value
        total, raw_total = config.step_total(values)
        scored_steps.append(StepScore(step.index, rubric_scores, total, raw_total))

    spec = getattr(profile, "outcome", None)
    outcome = outcome_score(trajectory.outcome, spec)
    eff = efficiency(len(steps), _reference(trajectory, reference_steps))
    process = process_score(s.total for s in scored_steps)
    reason = None
    if steps and process is None:
        stopped = bool(should_stop and should_stop())
        reason = _unscored_reason(config, judge, judged_any, judge_errors, stopped)
        total = None
    else:
        total = trajectory_total(outcome, process, eff, config.totals)
        if total is None:
            reason = "the trajectory has no steps and no known outcome"
    return TrajectoryScore(
        steps=scored_steps,
        process=process,
        outcome=outcome,
        efficiency=eff,
        total=total,
        unscored_reason=reason,
        judge_usage=usage,
        config_fingerprint=config.fingerprint(),
    )


def score_trajectories(
    trajectories: Sequence[Trajectory | Mapping[str, Any]],
    config: RewardConfig,
    **kwargs: Any,
) -> list[TrajectoryScore]:
    """:func:`score_trajectory` for each (same keyword arguments)."""
    return [score_trajectory(t, config, **kwargs) for t in trajectories]
