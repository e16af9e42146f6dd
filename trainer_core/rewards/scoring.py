"""Scoring a trajectory: every step on every rubric, then the step totals, the process, outcome
and efficiency parts and the trajectory total.

A :class:`RewardConfig` — rubrics, layer weights, total weights, profile name — is what a
reward-model version snapshots (:meth:`RewardConfig.to_dict`); scoring reads only it.

Where each rubric's score comes from, by its evaluator:

``rule``
    :func:`trainer_core.rewards.rules.step_rule_scores`, through
    :data:`~trainer_core.rewards.rubrics.RULE_FOR_RUBRIC` (``info_utilization`` ← ``info_use``,
    ``non_redundancy`` ← min(redundancy, regression), ``tool_success`` ← ``success``), each
    halved on a step whose call failed (:func:`~trainer_core.rewards.rules.rubric_value`). The
    rules see the steps, the task prompt and the user's dialogue turns
    (:func:`~trainer_core.rewards.rules.trajectory_texts`). A rule rubric no rule scores is
    unscored.
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
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, is_dataclass
from typing import Any, NamedTuple

from trainer_core.errors import ConfigError
from trainer_core.recording.importers import import_path
from trainer_core.recording.schema import (
    Step,
    Trajectory,
    as_trajectory,
    is_assistant_turn,
    is_message,
)
from trainer_core.rewards.combine import (
    LayerWeights,
    TotalWeights,
    process_score,
    step_total,
    trajectory_total,
)
from trainer_core.rewards.judge import FileCache, Judge, JudgeConfig
from trainer_core.rewards.rubrics import (
    DESCRIPTIONS,
    EVALUATORS,
    Rubric,
    rubric_set,
)
from trainer_core.rewards.rules import (
    RuleContext,
    efficiency,
    outcome_score,
    step_rule_rows,
    trajectory_texts,
)
from trainer_core.rewards.step_scores import (
    NO_JUDGE,
    NOT_JUDGED,
    NOT_SENT,
    RubricScore,
    StepScore,
    StepScorer,
)

__all__ = [
    "FileScore",
    "RewardConfig",
    "RubricScore",
    "StepScore",
    "TrajectoryScore",
    "score_files",
    "score_trajectories",
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
        give equal fingerprints, any change of a weight, rubric or evaluator a new one. (Worked
        out once, and again after the config changed: it is stamped on every score.)"""
        derived = self._derived()
        value = derived.get("fingerprint")
        if value is None:
            text = json.dumps(self.to_dict(), sort_keys=True, separators=(",", ":"))
            value = derived["fingerprint"] = hashlib.sha256(text.encode()).hexdigest()[:16]
        return value

    def _derived(self) -> dict[str, Any]:
        """What is worked out from this config once (the fingerprint, the step weights), kept
        while what it is worked out from — rubrics, layers, totals, profile, calibration — stays
        the same (compared each time; the same objects compare at once)."""
        key = (self.profile, tuple(self.rubrics), self.layers, self.totals, self.calibration)
        derived = self.__dict__.get("_derived_values")
        if derived is None or derived["key"] != key:
            derived = self.__dict__["_derived_values"] = {"key": key}
        return derived

    def step_weights(self) -> tuple[tuple[str, float], ...]:
        """(rubric id, rubric weight × its layer's weight) of the rubrics with a weight above 0,
        in the rubrics' order: what :func:`~trainer_core.rewards.combine.step_total` sums."""
        derived = self._derived()
        weights = derived.get("step_weights")
        if weights is None:
            pairs = ((r.id, r.weight * self.layers.weight(r.evaluator)) for r in self.rubrics)
            weights = derived["step_weights"] = tuple((i, w) for i, w in pairs if w > 0)
        return weights


# --- results -------------------------------------------------------------------------------------
# RubricScore and StepScore (one step's) are in trainer_core.rewards.step_scores, with the scorer
# that gives the tool steps theirs.


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


def _reference(trajectory: Trajectory, reference_steps: int | None) -> int | None:
    if reference_steps is not None:
        return reference_steps
    value = (trajectory.metadata or {}).get("reference_steps")
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None


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


def _is_message(step: Any) -> bool:
    """:func:`~trainer_core.recording.schema.is_message`, at once for a Step (the steps of a
    Trajectory are)."""
    return step.kind == "message" if type(step) is Step else is_message(step)


def _is_tool(step: Any) -> bool:
    return not is_message(step)


def _is_assistant_turn(step: Any) -> bool:
    """:func:`~trainer_core.recording.schema.is_assistant_turn`, at once for a Step."""
    if type(step) is Step:
        return step.kind != "message" or step.role == "assistant"
    return is_assistant_turn(step)


class _RuleLayer:
    """The rule layer's scores of one trajectory's steps (by position) and why they are below
    1.0; empty when no rubric is rule-evaluated. The rules see the steps and what the agent saw
    besides them (the task prompt, the user's turns), nothing else."""

    def __init__(
        self, trajectory: Trajectory, steps: list[Any], any_rule: bool, profile: Any
    ) -> None:
        """``steps``: the trajectory's tool steps (no rule applies to a message); ``any_rule``:
        whether any rubric is rule-evaluated (:func:`_model_rubrics`)."""
        self.scores: list[tuple[float, ...]] = []  # step_rule_rows: in RULE_NAMES order
        self.reasons: list[dict[str, str]] = []
        if steps and any_rule:
            ctx = rule_context(profile)
            # (no step is a message when every step is a tool step)
            context = trajectory_texts(trajectory, messages=len(steps) != len(trajectory.steps))
            self.scores = step_rule_rows(steps, ctx, reasons=self.reasons, context=context)


#: RuleContext of the profiles scored with lately: id(profile) -> (profile, its tool list, how
#: many tools it had, the context). A profile is not changed once made (the webapp makes a new
#: one per version); one whose tool list was replaced or grown gets a new context all the same.
_RULE_CONTEXTS: dict[int, tuple[Any, Any, int, RuleContext]] = {}
_RULE_CONTEXTS_KEPT = 64


def rule_context(profile: Any) -> RuleContext:
    """``RuleContext.from_profile(profile)``, made once per profile and reused for every
    trajectory scored with it (with the tool names it inferred)."""
    tools = getattr(profile, "tools", None)
    count = len(tools) if tools is not None else 0
    entry = _RULE_CONTEXTS.get(id(profile))
    if entry is not None and entry[0] is profile and entry[1] is tools and entry[2] == count:
        return entry[3]
    ctx = RuleContext.from_profile(profile)
    if len(_RULE_CONTEXTS) >= _RULE_CONTEXTS_KEPT:
        _RULE_CONTEXTS.clear()
    _RULE_CONTEXTS[id(profile)] = (profile, tools, count, ctx)
    return ctx


class _ModelLayer:
    """The judge's verdicts on one trajectory's steps (one call of ``judge.judge_trajectory``
    for the model rubrics that count), and what reading them found: the judge's errors and
    whether any step got a usable score."""

    def __init__(
        self,
        trajectory: Trajectory,
        judge: Any,
        should_stop: Callable[[], str | None] | None,
        rubrics: list[Rubric],
        rubric_ids: frozenset[str],
    ) -> None:
        """``rubrics``: the model rubrics that count, and their ids (:func:`_model_rubrics`)."""
        self.rubric_ids = rubric_ids
        self.judge = judge
        self.judgements: dict[int, Any] = {}
        self.usage: Any = None
        self.errors: list[str] = []
        self.judged_any = False
        steps = trajectory.steps
        if judge is not None and rubrics and steps:
            results, self.usage = judge.judge_trajectory(
                trajectory,
                list(rubrics),
                task_prompt=trajectory.task.prompt,
                should_stop=should_stop,
            )
            for judgement in results or ():
                self.judgements[judgement.index] = judgement
        # judgements are keyed by the steps' indices; by positions when no key is a step index
        self.by_position = bool(self.judgements) and not (
            self.judgements.keys() & {s.index for s in steps}
        )

    def judgement(self, position: int, step: Any) -> Any:
        return self.judgements.get(position if self.by_position else step.index)

    def fixed_score(self, rubric: Rubric) -> RubricScore | None:
        """The score of ``rubric`` on every step when it does not depend on the step (it was
        not sent to the judge, or there is no judge), else None."""
        if rubric.id not in self.rubric_ids:
            return NOT_SENT
        if self.judge is None:
            return NO_JUDGE
        return None

    def score(self, rubric: Rubric, judgement: Any) -> RubricScore:
        if rubric.id not in self.rubric_ids:
            return NOT_SENT
        if self.judge is None:
            return NO_JUDGE
        if judgement is None:
            return NOT_JUDGED
        raw = (judgement.scores or {}).get(rubric.id)
        value = _judge_value(raw)
        error = getattr(judgement, "error", None)
        rationale = str(getattr(judgement, "rationale", "") or "")
        if value is None and error:
            self.errors.append(str(error))
            rationale = f"judge error: {error}" + (f"; {rationale}" if rationale else "")
        elif value is None and raw is not None:
            rationale = f"the judge gave {raw!r}, not a score in 0..1" + (
                f"; {rationale}" if rationale else ""
            )
        self.judged_any = self.judged_any or value is not None
        interpolated = bool(getattr(judgement, "interpolated", False))
        return RubricScore(value, "model", rationale, interpolated)


def _model_rubrics(config: RewardConfig) -> tuple[list[Rubric], frozenset[str], bool]:
    """(the model rubrics that count — a weight above 0, or a fitted one — and their ids; whether
    any rubric is rule-evaluated), worked out once per config."""
    derived = config._derived()
    found = derived.get("model rubrics")
    if found is None:
        fitted = config.fitted_weights
        rubrics = [
            r
            for r in config.rubrics
            if r.evaluator == "model" and (r.weight > 0 or fitted.get(r.id, 0.0) > 0)
        ]
        any_rule = any(r.evaluator == "rule" for r in config.rubrics)
        found = derived["model rubrics"] = (rubrics, frozenset(r.id for r in rubrics), any_rule)
    return found


NOT_APPLICABLE_TO_MESSAGES = "not applicable: an assistant message, not a tool call"
NO_TOOL_CALL_NO_JUDGE = (
    "the trajectory has no tool call for the rules to score (its turns are messages) and no "
    "judge was given; score it with a judge"
)


def _score_message(step: Any, config: RewardConfig, model: _ModelLayer) -> StepScore:
    """An assistant message (a turn without a tool call): the judge's rubrics as on any step;
    the rule rubrics are not applicable to it (unscored), human ones are left to annotators."""
    judgement = model.judgements.get(step.index) if not model.by_position else None
    rubric_scores: dict[str, RubricScore] = {}
    for rubric in config.rubrics:
        if rubric.evaluator == "rule":
            rubric_scores[rubric.id] = RubricScore(None, "rule", NOT_APPLICABLE_TO_MESSAGES)
        elif rubric.evaluator == "model":
            rubric_scores[rubric.id] = model.score(rubric, judgement)
        else:
            rubric_scores[rubric.id] = RubricScore(
                None, "human", "human-evaluated: annotators score it"
            )
    total, raw_total = config.step_total({rid: s.value for rid, s in rubric_scores.items()})
    return StepScore(step.index, rubric_scores, total, raw_total)


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
    trajectory = as_trajectory(trajectory)
    profile = _resolve_profile(profile, config.profile)
    # the agent's own turns are scored: tool steps and assistant messages (user and system
    # messages carry no step reward); the rules score the tool steps
    all_steps = trajectory.steps
    tools = [s for s in all_steps if (s.kind != "message" if type(s) is Step else _is_tool(s))]
    messages = len(tools) != len(all_steps)
    steps = [s for s in all_steps if _is_assistant_turn(s)] if messages else tools

    # 1. the layers: rules over the whole trajectory, then the judge (one call per judged step)
    model_rubrics, model_rubric_ids, any_rule = _model_rubrics(config)
    rules = _RuleLayer(trajectory, tools, any_rule, profile)
    model = _ModelLayer(trajectory, judge, should_stop, model_rubrics, model_rubric_ids)

    # 2. every step on every rubric, and the step totals
    scorer = StepScorer(config, rules, model)
    if messages:
        scored_steps, position = [], 0
        for step in steps:
            if _is_message(step):
                scored_steps.append(_score_message(step, config, model))
            else:
                scored_steps.append(scorer.score(position, step))
                position += 1
    else:
        scored_steps = scorer.score_all(steps)

    # 3. the trajectory: outcome, efficiency, process and the total (or why it is unscored)
    tool_steps = len(tools)
    outcome = outcome_score(trajectory.outcome, getattr(profile, "outcome", None))
    eff = efficiency(tool_steps, _reference(trajectory, reference_steps))
    process = process_score([s.total for s in scored_steps])
    reason = None
    if steps and process is None:
        stopped = bool(should_stop and should_stop())
        reason = _unscored_reason(config, judge, model.judged_any, model.errors, stopped)
        if not tool_steps and judge is None:
            reason = NO_TOOL_CALL_NO_JUDGE
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
        judge_usage=model.usage,
        config_fingerprint=config.fingerprint(),
    )


def score_trajectories(
    trajectories: Sequence[Trajectory | Mapping[str, Any]],
    config: RewardConfig,
    **kwargs: Any,
) -> list[TrajectoryScore]:
    """:func:`score_trajectory` for each (same keyword arguments)."""
    return [score_trajectory(t, config, **kwargs) for t in trajectories]


# --- agent log files -----------------------------------------------------------------------------


class FileScore(NamedTuple):
    """One scored trajectory of a file: the file's name (``archive.zip:member`` for a member of
    a zip), the trajectory's position in it, the trajectory and its score."""

    file: str
    index: int
    trajectory: Trajectory
    score: TrajectoryScore


def score_files(
    paths: Iterable[str | os.PathLike[str]],
    *,
    domain: str = "coding",
    judge: JudgeConfig | Mapping[str, Any] | None = None,
    cache_path: str | os.PathLike[str] | None = None,
) -> Iterator[FileScore]:
    """Score agent logs (any format :func:`~trainer_core.recording.importers.import_path` reads,
    zip archives included) on ``domain``'s rubrics: the rule layer, and the LLM judge when
    ``judge`` (a JudgeConfig or its dict) is given, with its answers cached in the SQLite file
    ``cache_path`` (used only with a judge). No database.

    The settings are checked here, before any file is read: an invalid judge config raises
    ConfigError, a missing API key PolicyError (no call is made). The files are then read one at
    a time as the iterator is consumed, and a :class:`FileScore` comes out per trajectory (print
    a line each as they come); a file that cannot be imported raises ImportFailure (an
    InputError) naming it. An unknown domain scores with the default rubric set, tools inferred
    from their names.
    """
    profile = _resolve_profile(None, domain)
    config = RewardConfig.for_profile(profile if profile is not None else domain)
    scorer = _file_judge(judge, cache_path)
    return _score_paths(list(paths), config, profile, scorer)


def _file_judge(
    judge: JudgeConfig | Mapping[str, Any] | None, cache_path: str | os.PathLike[str] | None
) -> Judge | None:
    """The judge of ``score_files``, checked ready (its key is set); None without a config."""
    if judge is None:
        return None
    config = JudgeConfig.from_dict(judge)
    cache = FileCache(cache_path) if cache_path else None
    scorer = Judge(config, cache=cache)
    try:
        scorer.check_ready()
    except Exception:
        if cache is not None:
            cache.close()
        raise
    return scorer


def _score_paths(
    paths: list[str | os.PathLike[str]], config: RewardConfig, profile: Any, judge: Judge | None
) -> Iterator[FileScore]:
    try:
        for path in paths:
            for result in import_path(path):
                for number, trajectory in enumerate(result.trajectories):
                    scored = score_trajectory(trajectory, config, profile=profile, judge=judge)
                    yield FileScore(result.file, number, trajectory, scored)
    finally:
        if judge is not None and isinstance(judge.cache, FileCache):
            judge.cache.close()
