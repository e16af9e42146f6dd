"""A step's scores: :class:`RubricScore` (one rubric on one step), :class:`StepScore` (every
rubric on one step and the step total) and :class:`StepScorer`, which gives the tool steps of one
trajectory theirs from the rule layer's scores and the judge's verdicts
(:func:`trainer_core.rewards.scoring.score_trajectory` calls it; the module doc there says where
each rubric's score comes from).

What does not depend on the step is worked out once per reward config (:func:`step_plan`), and
so is a step's whole result whenever it follows from its rule scores and their reasons alone (no
judge): the steps that score alike share their :class:`RubricScore` objects (immutable) and get
a copy of the same rubric dict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from trainer_core.rewards.rubrics import RULE_FOR_RUBRIC
from trainer_core.rewards.rules import RULE_NAMES, rubric_value

__all__ = ["HUMAN", "NOT_JUDGED", "NOT_SENT", "NO_JUDGE", "RubricScore", "StepScore", "StepScorer"]


@dataclass(frozen=True)
class RubricScore:
    """One rubric's score on one step. Immutable: a scoring pass gives the steps that score
    alike the same object."""

    value: float | None
    """0..1, or None: unscored."""
    layer: str
    """rule, model or human (the rubric's evaluator)."""
    rationale: str = ""
    interpolated: bool = False
    """The judge did not see this step and filled it from its neighbours."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "layer": self.layer,
            "rationale": self.rationale,
            "interpolated": self.interpolated,
        }


@dataclass(slots=True)
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


NOT_SENT = RubricScore(None, "model", "weight 0: not sent to the judge")
NO_JUDGE = RubricScore(None, "model", "no judge was given")
NOT_JUDGED = RubricScore(None, "model", "the judge did not score this step")
HUMAN = RubricScore(None, "human", "human-evaluated: annotators score it")

#: at most this many distinct rule-score combinations (with their reasons, for the steps that
#: have some) are kept per config, each for :class:`StepScorer`
SAME_SCORES_KEPT = 1024


def rule_rationale(rule: str, why: Mapping[str, str]) -> str:
    """Why a rule rubric is below 1.0 on a step: its rule's reasons, then the call's failure
    (which lowers every rule rubric, see :func:`~trainer_core.rewards.rules.rubric_value`)."""
    keys = ("redundancy", "regression") if rule == "non_redundancy" else (rule,)
    parts = [why[k] for k in keys if k in why]
    if rule != "success" and "success" in why:
        parts.append(why["success"])
    return "; ".join(parts)


class StepScorer:
    """Scores the tool steps of one trajectory. Where each rubric's score comes from is worked
    out once per config (:func:`step_plan`): a rule (the rule layer's), the judge (its verdict
    on the step), or the same score on every step — an unscored one: a model rubric without a
    judge or with weight 0, a human rubric, a rule rubric that no rule scores.

    ``rules``: the rule layer's ``scores`` (rows in RULE_NAMES order) and ``reasons`` (a dict per
    step) of the tool steps; ``model``: the judge's layer (``judgements``, ``judgement()``,
    ``score()``, ``fixed_score()``, ``judge``, ``rubric_ids``)."""

    __slots__ = (
        "alike", "config", "explained", "judged", "model", "per_step", "reasons", "scores",
        "template", "unexplained", "weights",
    )  # fmt: skip

    def __init__(self, config: Any, rules: Any, model: Any) -> None:
        self.config, self.model = config, model
        self.scores, self.reasons = rules.scores, rules.reasons
        self.judged = bool(model.judgements)
        (
            self.template,
            self.per_step,
            self.weights,
            self.alike,
            self.unexplained,
            self.explained,
        ) = step_plan(config, model)

    def score(self, position: int, step: Any) -> StepScore:
        """The tool step at ``position`` among the tool steps, on every rubric, and its total."""
        row, why = (self.scores[position], self.reasons[position]) if self.scores else ((), None)
        if not self.judged and self.weights is not None:
            # no verdict: the step's scores follow from its rule scores and their reasons alone,
            # the same on every step with the same ones (worked out once)
            if why:
                same = self._same(self.explained, (row, *why.keys(), *why.values()), row, why, step)
            else:
                same = self._same(self.unexplained, row, row, None, step)
            return StepScore(step.index, same[0].copy(), same[1], same[1])
        return self._score(row, why, position, step)

    def score_all(self, steps: list[Any]) -> list[StepScore]:
        """:meth:`score` of each of ``steps``, the tool steps of a trajectory, in order."""
        if self.judged or self.weights is None or not self.scores:
            return [self.score(position, step) for position, step in enumerate(steps)]
        unexplained, explained = self.unexplained, self.explained
        out: list[StepScore] = []
        append, new = out.append, StepScore
        for step, row, why in zip(steps, self.scores, self.reasons, strict=True):
            if why:
                key = (row, *why.keys(), *why.values())
                same = explained.get(key)
                if same is None:
                    same = self._same(explained, key, row, why, step)
            else:
                same = unexplained.get(row)
                if same is None:
                    same = self._same(unexplained, row, row, None, step)
            append(new(step.index, same[0].copy(), same[1], same[1]))
        return out

    def _same(self, kept: dict, key: Any, row: tuple[float, ...], why: Any, step: Any) -> tuple:
        """(rubric scores, total) of a step with these rule scores and reasons (and no verdict),
        kept under ``key`` for the next step with the same ones (``kept``: ``unexplained`` by the
        rule scores, ``explained`` by the scores and the reasons' keys and texts; up to
        :data:`SAME_SCORES_KEPT` in each)."""
        same = kept.get(key)
        if same is None:
            scored = self._score(row, why, -1, step)
            same = (scored.rubrics, scored.total)
            if len(kept) < SAME_SCORES_KEPT:
                kept[key] = same
        return same

    def _score(self, row: tuple[float, ...], why: Any, position: int, step: Any) -> StepScore:
        judgement = self.model.judgement(position, step) if self.judged else None
        rule_scores = dict(zip(RULE_NAMES, row, strict=True)) if row else {}
        rubric_scores = self.template.copy()
        for rubric_id, source, what in self.per_step:
            if source is _RULE:
                value = rubric_value(rule_scores, what)
                rationale = rule_rationale(what, why) if why else ""
                if rationale:
                    rubric_scores[rubric_id] = RubricScore(value, "rule", rationale)
                else:
                    alike = self.alike.get(value)
                    if alike is None:
                        alike = self.alike[value] = RubricScore(value, "rule", "")
                    rubric_scores[rubric_id] = alike
            else:
                rubric_scores[rubric_id] = self.model.score(what, judgement)
        weights = self.weights
        if weights is None:
            values = {rid: s.value for rid, s in rubric_scores.items()}
            total, raw_total = self.config.step_total(values)
        else:  # combine.step_total's sums, in its order (the template's scores are all None)
            weighted = total_weight = 0.0
            for rubric_id, weight in weights:
                value = rubric_scores[rubric_id].value
                if value is not None:
                    weighted += weight * value
                    total_weight += weight
            total = raw_total = weighted / total_weight if total_weight > 0 else None
        return StepScore(step.index, rubric_scores, total, raw_total)


_FIXED, _RULE, _MODEL = 0, 1, 2


def step_plan(config: Any, model: Any) -> tuple[Any, ...]:
    """(the rubric scores that are the same on every step, in the rubrics' order, None where a
    step has its own; the others as (rubric id, _RULE or _MODEL, the rule or the rubric); their
    weights in the step total, None with a calibration; the shared rule scores without a
    reason, by value; the scores and total of a step without a verdict, by its rule scores when
    it has no reasons, by its rule scores and reasons when it has some), worked out once per
    config (a RewardConfig) and judge setting."""
    key = ("step plan", model.judge is None, model.rubric_ids)
    derived = config._derived()
    plan = derived.get(key)
    if plan is not None:
        return plan
    template: dict[str, RubricScore | None] = {}
    per_step: list[tuple[str, int, Any]] = []
    for rubric in config.rubrics:
        fixed: RubricScore | None = None
        if rubric.evaluator == "rule":
            rule = RULE_FOR_RUBRIC.get(rubric.id)
            if rule is None:
                why = f"no rule scores {rubric.id!r}; make it model- or human-evaluated"
                fixed = RubricScore(None, "rule", why)
            else:
                per_step.append((rubric.id, _RULE, rule))
        elif rubric.evaluator == "model":
            fixed = model.fixed_score(rubric)
            if fixed is None:
                per_step.append((rubric.id, _MODEL, rubric))
        else:
            fixed = HUMAN
        template[rubric.id] = fixed
    # the fixed scores are unscored (None): the step total sums the others alone
    weights = None
    if not config.calibrated:
        weight_of = dict(config.step_weights())
        weights = tuple((r, weight_of[r]) for r, _, _ in per_step if r in weight_of)
    plan = derived[key] = (template, tuple(per_step), weights, {}, {}, {})
    return plan
