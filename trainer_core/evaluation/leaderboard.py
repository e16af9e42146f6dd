"""Leaderboards: a score with an interval per entry, pairwise tests, rank bounds and tie groups.

**Score** (``metric``): ``"success"`` — the success rate over all the entry's episodes with a
Wilson interval; ``"reward"`` — the mean reward with a BCa bootstrap interval (every episode needs
a reward). Rows are sorted by score, highest first, equal scores by key.

**Pairwise tests** (``matrix``): for every pair of entries x above y in the rows, on the tasks both
ran, per-task mean values: for ``"success"`` an exact **sign test** (tasks where one entry's
success rate is higher than the other's; ties dropped — with one sample per task this is exact
McNemar), chosen over the bootstrap because it stays exact on few tasks; its effect is (tasks x
wins − tasks y wins) / shared tasks. For ``"reward"`` a **paired bootstrap** of the mean
difference. ``matrix[(x, y)].effect`` is oriented x − y (positive: the upper entry did better;
:meth:`Leaderboard.pair` gives either orientation). The p-values are corrected together across
the whole matrix (``correction``, Holm by default); "significantly better" below means: the
corrected test is significant at ``alpha`` and its effect favours that entry. Pairs with no shared
task are never significant.

**Ranks** (as Chatbot Arena's "Rank (UB)", with the corrected pairwise test in place of
non-overlapping intervals):

* ``rank`` = ``rank_upper`` = 1 + the number of entries significantly better than this one: the
  best rank the entry could statistically hold. Entries nothing beats all share rank 1;
* ``rank_lower`` = the number of entries *not* significantly worse than this one (itself
  included) = N − the number significantly worse: the worst rank it could statistically hold.

**Tie groups** (SWE-bench style): walk the rows top-down; the first row leads group 1, each next
row joins the current group unless it is significantly different (either way) from the group's
leader, in which case it leads a new group numbered one higher. Groups are contiguous in the rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

import numpy as np

from trainer_core.errors import InputError
from trainer_core.evaluation.compare import (
    METHODS,
    TestResult,
    apply_correction,
    paired_bootstrap,
    sign_test,
)
from trainer_core.evaluation.stats import (
    EpisodeRecord,
    check_confidence,
    episode_value,
    group_by_task,
    summarize,
)

__all__ = ["Entry", "Leaderboard", "Row", "build_leaderboard"]


@dataclass
class Entry:
    """One contender: a unique ``key``, a display ``label`` and its evaluated episodes."""

    key: str
    label: str
    episodes: list[EpisodeRecord]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Row:
    key: str
    label: str
    rank: int
    rank_upper: int
    rank_lower: int
    tie_group: int
    score: float
    low: float
    high: float
    n: int
    tasks: int
    mean_steps: float
    mean_tokens: float
    mean_cost: float
    mean_reward: float | None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Leaderboard:
    rows: list[Row]
    matrix: dict[tuple[str, str], TestResult]
    metric: str
    confidence: float
    correction: str
    alpha: float
    notes: list[str] = field(default_factory=list)

    def pair(self, x: str, y: str) -> TestResult:
        """The test of x against y with ``effect`` (and interval) oriented x − y, whichever of
        them is higher in the rows."""
        if (x, y) in self.matrix:
            return self.matrix[(x, y)]
        if (y, x) not in self.matrix:
            raise InputError(f"no comparison of {x!r} and {y!r} on this leaderboard")
        r = self.matrix[(y, x)]

        def neg(v: float | None) -> float | None:
            return None if v is None else -v

        return replace(r, effect=neg(r.effect), low=neg(r.high), high=neg(r.low))

    def as_dict(self) -> dict[str, Any]:
        return {
            "metric": self.metric,
            "confidence": self.confidence,
            "correction": self.correction,
            "alpha": self.alpha,
            "notes": list(self.notes),
            "rows": [r.as_dict() for r in self.rows],
            "matrix": [
                {"first": x, "second": y, **r.as_dict()} for (x, y), r in self.matrix.items()
            ],
        }


def _per_task(episodes: list[EpisodeRecord], metric: str) -> dict[str, float]:
    groups = group_by_task(episodes)
    return {t: float(np.mean([episode_value(e, metric) for e in g])) for t, g in groups.items()}


def _pairwise(
    keys: tuple[str, str], upper: dict, lower: dict, metric: str, seed: int
) -> TestResult:
    shared = [t for t in upper if t in lower]
    x = [lower[t] for t in shared]  # a: the lower entry, so effect = upper − lower
    y = [upper[t] for t in shared]
    if metric == "success":
        name = "sign test (success rate per shared task)"
        return sign_test(x, y, name=name, labels=(keys[1], keys[0]))
    return paired_bootstrap(x, y, seed=seed, name="paired bootstrap (mean reward per shared task)")


def build_leaderboard(
    entries: Sequence[Entry],
    *,
    metric: Literal["success", "reward"] = "success",
    confidence: float = 0.95,
    correction: Literal["holm", "bonferroni", "none"] = "holm",
    alpha: float = 0.05,
    seed: int = 0,
) -> Leaderboard:
    """Rank ``entries`` (see the module doc for every definition)."""
    if metric not in ("success", "reward"):
        raise InputError(f"metric must be 'success' or 'reward', not {metric!r}")
    if correction not in METHODS:
        raise InputError(f"unknown correction {correction!r}; use one of {', '.join(METHODS)}")
    check_confidence(confidence)
    if not 0 < alpha < 1:
        raise InputError(f"alpha is a significance level in (0, 1), e.g. 0.05, not {alpha!r}")
    keys = [e.key for e in entries]
    if len(set(keys)) != len(keys):
        raise InputError("leaderboard entries need unique keys; found a key twice")
    for e in entries:
        if not e.episodes:
            raise InputError(f"entry {e.key!r} has no episodes; evaluate it or leave it out")
        if metric == "reward" and any(ep.reward is None for ep in e.episodes):
            raise InputError(
                f"entry {e.key!r} has episodes without a reward; score them or use metric='success'"
            )

    scored = []
    for e in entries:
        s = summarize(e.episodes, k=1, confidence=confidence, seed=seed)
        if metric == "success":
            score, low, high = s.success_rate, s.success_low, s.success_high
        else:
            score, low, high = s.mean_reward, s.reward_low, s.reward_high
        scored.append((e, s, score, low, high))
    scored.sort(key=lambda item: (-item[2], item[0].key))
    order = [item[0].key for item in scored]
    values = {e.key: _per_task(e.episodes, metric) for e in entries}

    pairs = [(order[i], order[j]) for i in range(len(order)) for j in range(i + 1, len(order))]
    tests = apply_correction(
        [_pairwise((x, y), values[x], values[y], metric, seed) for x, y in pairs], correction, alpha
    )
    matrix = dict(zip(pairs, tests, strict=True))

    better: dict[str, set[str]] = {k: set() for k in order}
    worse: dict[str, set[str]] = {k: set() for k in order}
    for (x, y), r in matrix.items():
        if r.significant and r.effect:
            top, bottom = (x, y) if r.effect > 0 else (y, x)
            better[bottom].add(top)
            worse[top].add(bottom)

    groups: dict[str, int] = {}
    leader, group = None, 0
    for key in order:
        if leader is None or key in better[leader] or key in worse[leader]:
            leader, group = key, group + 1
        groups[key] = group

    rows = []
    for e, s, score, low, high in scored:
        rows.append(
            Row(
                key=e.key,
                label=e.label,
                rank=1 + len(better[e.key]),
                rank_upper=1 + len(better[e.key]),
                rank_lower=len(order) - len(worse[e.key]),
                tie_group=groups[e.key],
                score=float(score),
                low=float(low),
                high=float(high),
                n=s.n,
                tasks=s.tasks,
                mean_steps=s.mean_steps,
                mean_tokens=s.mean_tokens,
                mean_cost=s.mean_cost,
                mean_reward=s.mean_reward,
            )
        )
    notes = [f"{x} and {y} share no task: not compared" for (x, y), r in matrix.items() if r.n == 0]
    return Leaderboard(rows, matrix, metric, confidence, correction, alpha, notes)
