"""Task health: each task's pass rate over every policy and run, and the detections built on it
(docs/task-health.md). Pure maths on counts; the web app gathers them from its trajectories.

Inputs
    :class:`Cell`: the outcomes of one policy on one task (episodes, successes).
    :class:`RerunGroup`: outcomes of *identical reruns* of one policy on one task — episodes
    that should have had the same outcome. Which episodes those are is the caller's choice, made
    with :func:`rerun_mode`: a *deterministic* policy (the scripted policy without mistakes, a
    local model at temperature 0) reruns identically on every episode of a task, so all its
    episodes of the task form one group; a *seeded* policy (the scripted policy with mistakes, a
    local model sampling at a temperature) reruns identically only under the same episode seed
    (and episode number), so each (seed, episode) is one group; hosted APIs and inference
    servers (not bit-reproducible even at temperature 0), imported logs and policies Steplab
    does not know have no identical reruns. An episode cut short by a step or time limit
    (``truncated``) is no checker's verdict: it is in no rerun group.

Detections (each needs the minimum evidence in :class:`Thresholds`)
    ``always_fail`` / ``always_pass``: every measured episode failed / passed, with at least
    ``min_episodes`` of them from at least ``min_policies`` policies. Reference policies (which
    play the task's reference solution) are left out of these counts: the reference passing is
    what it is for; its own result is the ``reference_fails`` detection.
    ``reference_fails``: the reference solution was played and failed every time.
    ``flaky``: at least ``min_flip_groups`` rerun groups of ``min_reruns`` or more episodes hold
    both a pass and a fail — the outcome flipped where nothing should have changed (a flaky
    checker or environment).
    ``false_negative``: the strongest policy — the non-reference policy with the highest pass
    rate over the task set, among those with at least ``strongest_min_set_episodes`` episodes in
    it — failed all of its ``strongest_min_episodes`` or more episodes of the task, while the
    reference solution passed it at least once: the checker may reject valid solutions.

Pass rates come with the Wilson score interval (:func:`wilson`: the formula of
:func:`trainer_core.evaluation.stats.wilson_interval`, its quantile from the standard library so
that a health page does not import scipy).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

from trainer_core.errors import InputError

__all__ = [
    "FLAGS",
    "Cell",
    "RerunGroup",
    "SetHealth",
    "TaskHealth",
    "Thresholds",
    "health_of_tasks",
    "is_reference",
    "rerun_mode",
    "strongest_policy",
    "wilson",
]

#: the detections, in the order pages list them, with a short label
FLAGS: dict[str, str] = {
    "always_fail": "always fails",
    "always_pass": "always passes",
    "flaky": "flaky (outcome flips on identical reruns)",
    "false_negative": "possible false-negative checker",
    "reference_fails": "reference solution fails",
}

DETERMINISTIC = "deterministic"
SEEDED = "seeded"


def wilson(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of ``successes / n``; ``(0.0, 1.0)`` when ``n`` is 0."""
    if n <= 0:
        return (0.0, 1.0)
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = successes / n
    denominator = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (max(0.0, center - half), min(1.0, center + half))


def rerun_mode(kind: str, parameters: Mapping[str, Any] | None) -> str | None:
    """How a policy reruns (see the module docstring): ``"deterministic"``, ``"seeded"``, or
    None when its episodes are never identical reruns."""
    parameters = parameters or {}
    if kind == "scripted":
        mistakes = parameters.get("mistakes") or {}
        probabilities = [v for v in mistakes.values() if isinstance(v, (int, float))]
        return SEEDED if any(p > 0 for p in probabilities) else DETERMINISTIC
    if kind == "local":
        temperature = parameters.get("temperature", 0.7)
        try:
            return DETERMINISTIC if float(temperature) == 0.0 else SEEDED
        except (TypeError, ValueError):
            return None
    return None


def is_reference(kind: str, parameters: Mapping[str, Any] | None) -> bool:
    """Whether a policy plays the task's reference solution as written (scripted, no mistakes)."""
    return kind == "scripted" and rerun_mode(kind, parameters) == DETERMINISTIC


@dataclass(frozen=True)
class Thresholds:
    """The minimum evidence of each detection (docs/task-health.md); every one is settable on the
    health page, in ``steplab tasks health`` and in the API."""

    min_episodes: int = 5
    """always_fail / always_pass: at least this many measured (non-reference) episodes."""
    min_policies: int = 1
    """always_fail / always_pass: from at least this many policies."""
    min_reruns: int = 2
    """flaky: a rerun group counts when it has at least this many episodes."""
    min_flip_groups: int = 1
    """flaky: at least this many rerun groups hold both a pass and a fail."""
    strongest_min_set_episodes: int = 10
    """false_negative: the strongest policy is chosen among those with this many episodes in the set."""
    strongest_min_episodes: int = 2
    """false_negative: the strongest policy failed at least this many episodes of the task (all of them)."""
    confidence: float = 0.95
    """The level of the pass rate's Wilson interval."""

    def validate(self) -> Thresholds:
        for name in (
            "min_episodes",
            "min_policies",
            "min_flip_groups",
            "strongest_min_set_episodes",
            "strongest_min_episodes",
        ):
            if not 1 <= getattr(self, name) <= 1_000_000:
                raise InputError(
                    f"{name} must be between 1 and 1000000 (got {getattr(self, name)})"
                )
        if not 2 <= self.min_reruns <= 1_000_000:
            raise InputError(f"min_reruns must be between 2 and 1000000 (got {self.min_reruns})")
        if not 0 < self.confidence < 1:
            raise InputError(f"confidence is a level in (0, 1), e.g. 0.95 (got {self.confidence})")
        return self

    @classmethod
    def from_values(cls, values: Mapping[str, Any]) -> Thresholds:
        """Thresholds from text or numbers by name (absent or empty: the default); InputError
        naming the value that is not a number or out of range."""
        given: dict[str, Any] = {}
        for name, default in cls().__dict__.items():
            raw = values.get(name)
            if raw in (None, ""):
                continue
            try:
                given[name] = type(default)(raw)
            except (TypeError, ValueError):
                raise InputError(f"{name} must be a number (got {raw!r})") from None
        return cls(**given).validate()

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Cell:
    """The outcomes of one policy on one task."""

    task: Hashable
    policy: str
    episodes: int
    successes: int


@dataclass(frozen=True)
class RerunGroup:
    """Identical reruns of one policy on one task (``key``: what they share beyond the policy,
    e.g. ``"seed 7, episode 0"``; ``""`` for a deterministic policy's episodes)."""

    task: Hashable
    policy: str
    key: str
    episodes: int
    successes: int

    @property
    def flipped(self) -> bool:
        return 0 < self.successes < self.episodes


@dataclass
class TaskHealth:
    """One task's figures and detections."""

    task: Hashable
    episodes: int = 0
    successes: int = 0
    policies: int = 0
    measured_episodes: int = 0  # of non-reference policies
    measured_successes: int = 0
    measured_policies: int = 0
    reference_episodes: int = 0
    reference_successes: int = 0
    rerun_groups: int = 0  # groups with at least min_reruns episodes
    flipped: list[RerunGroup] = field(default_factory=list)
    strongest: tuple[int, int] | None = None  # the strongest policy's (episodes, successes) here
    interval: tuple[float, float] = (0.0, 1.0)
    flags: list[str] = field(default_factory=list)

    @property
    def pass_rate(self) -> float | None:
        return self.successes / self.episodes if self.episodes else None

    @property
    def flip_rate(self) -> float | None:
        return len(self.flipped) / self.rerun_groups if self.rerun_groups else None


@dataclass
class SetHealth:
    """The health of a task set's tasks, and the strongest policy the false-negative check used."""

    tasks: dict[Hashable, TaskHealth]
    strongest: str | None
    strongest_rate: tuple[int, int] | None  # (episodes, successes) over the set
    thresholds: Thresholds

    def flagged(self, flag: str) -> list[TaskHealth]:
        return [h for h in self.tasks.values() if flag in h.flags]

    def counts(self) -> dict[str, int]:
        return {flag: len(self.flagged(flag)) for flag in FLAGS}


def strongest_policy(
    cells: Iterable[Cell], *, reference: set[str], min_episodes: int
) -> tuple[str, int, int] | None:
    """``(policy, episodes, successes)`` of the non-reference policy with the highest pass rate
    over ``cells`` among those with at least ``min_episodes`` episodes (ties: more episodes,
    then the name); None when no policy has enough."""
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for cell in cells:
        if cell.policy in reference:
            continue
        totals[cell.policy][0] += cell.episodes
        totals[cell.policy][1] += cell.successes
    eligible = [(p, n, s) for p, (n, s) in totals.items() if n >= min_episodes]
    if not eligible:
        return None
    return max(eligible, key=lambda row: (row[2] / row[1], row[1], row[0]))


def health_of_tasks(
    cells: Iterable[Cell],
    reruns: Iterable[RerunGroup],
    *,
    reference: set[str],
    thresholds: Thresholds | None = None,
    tasks: Iterable[Hashable] = (),
) -> SetHealth:
    """Every task's :class:`TaskHealth` (``tasks``: include these even without any outcome).
    ``reruns``: the groups of identical reruns (see the module docstring)."""
    t = (thresholds or Thresholds()).validate()
    cells = list(cells)
    out: dict[Hashable, TaskHealth] = {task: TaskHealth(task=task) for task in tasks}
    seen: dict[Hashable, set[str]] = defaultdict(set)
    measured: dict[Hashable, set[str]] = defaultdict(set)
    groups = list(reruns)
    for cell in cells:
        h = out.setdefault(cell.task, TaskHealth(task=cell.task))
        h.episodes += cell.episodes
        h.successes += cell.successes
        seen[cell.task].add(cell.policy)
        if cell.policy in reference:
            h.reference_episodes += cell.episodes
            h.reference_successes += cell.successes
        else:
            h.measured_episodes += cell.episodes
            h.measured_successes += cell.successes
            measured[cell.task].add(cell.policy)
    for group in groups:
        if group.episodes >= t.min_reruns and group.task in out:
            h = out[group.task]
            h.rerun_groups += 1
            if group.flipped:
                h.flipped.append(group)
    best = strongest_policy(cells, reference=reference, min_episodes=t.strongest_min_set_episodes)
    if best is not None:
        for cell in cells:
            if cell.policy == best[0]:
                out[cell.task].strongest = (cell.episodes, cell.successes)
    for task, h in out.items():
        h.policies, h.measured_policies = len(seen[task]), len(measured[task])
        h.interval = wilson(h.successes, h.episodes, t.confidence)
        h.flags = _flags(h, t)
    return SetHealth(
        tasks=out,
        strongest=best[0] if best else None,
        strongest_rate=(best[1], best[2]) if best else None,
        thresholds=t,
    )


def _flags(h: TaskHealth, t: Thresholds) -> list[str]:
    flags = []
    enough = h.measured_episodes >= t.min_episodes and h.measured_policies >= t.min_policies
    if enough and h.measured_successes == 0:
        flags.append("always_fail")
    if enough and h.measured_successes == h.measured_episodes:
        flags.append("always_pass")
    if len(h.flipped) >= t.min_flip_groups:
        flags.append("flaky")
    if (
        h.strongest is not None
        and h.strongest[0] >= t.strongest_min_episodes
        and h.strongest[1] == 0
        and h.reference_successes > 0
    ):
        flags.append("false_negative")
    if h.reference_episodes and h.reference_successes == 0:
        flags.append("reference_fails")
    return flags
