"""Preference pairs (chosen, rejected) from scored trajectories of the same task.

Candidates are grouped by task; within a task they are ranked by score, highest first, ties
broken by id (integers by value before strings, strings in order), so the same input always
gives the same pairs in the same order. Tasks come in the order of their ids. Two scores within
:data:`TIE_EPSILON` of each other are a *tie*: a tied pair is never a training pair (nothing
says which is better). Margins are compared with ``min_margin`` with a tolerance of
:data:`TIE_EPSILON` (0.9 - 0.8 counts as a margin of 0.1).

``outside_in`` (knowlyr-reward's method)
    Best with worst, second-best with second-worst, ... while the margin is at least
    ``min_margin`` (the margins shrink inwards, so the first pair below it ends the task). Each
    trajectory is in at most one pair; the pairs are the most clear-cut ones.
``adjacent``
    Each neighbour pair in rank order — 1st with 2nd, 2nd with 3rd, ... — whose margin is at
    least ``min_margin``, ties skipped. Neighbours are the hardest pairs the scorer still
    separates; a trajectory can be in two pairs.
``uncertain``
    Candidates for human judgement, not training pairs: the neighbour pairs (in rank order) the
    scorer cannot separate confidently — margin below ``uncertain_margin`` (default:
    ``min_margin``), ties included — or, when ``band=(lo, hi)`` is given, the neighbour pairs
    among the candidates whose scores both lie in the band (e.g. around the middle, where the
    scorer is least sure). The ``chosen`` side is only the scorer's guess.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from trainer_core.errors import ConfigError

__all__ = ["METHODS", "TIE_EPSILON", "Candidate", "Pair", "build_pairs"]

METHODS: tuple[str, ...] = ("outside_in", "adjacent", "uncertain")
TIE_EPSILON = 1e-9


@dataclass(frozen=True)
class Candidate:
    id: Any
    """The trajectory's id (int or str)."""
    task_id: str
    score: float
    """Its trajectory total under one reward-model version."""


@dataclass(frozen=True)
class Pair:
    chosen_id: Any
    rejected_id: Any
    task_id: str
    margin: float
    """chosen's score minus rejected's (≥ 0)."""
    method: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _id_key(value: Any) -> tuple[int, float, str]:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return (0, float(value), "")
    return (1, 0.0, str(value))


def _check_number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, not {value!r}")
    if value < 0:
        raise ConfigError(f"{name} must be ≥ 0, not {value!r}")
    return float(value)


def _ranked_groups(candidates: Iterable[Candidate]) -> list[tuple[str, list[Candidate]]]:
    groups: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        score = candidate.score
        if isinstance(score, bool) or not isinstance(score, int | float):
            continue
        if not math.isfinite(score):
            continue
        groups.setdefault(str(candidate.task_id), []).append(candidate)
    out = []
    for task_id in sorted(groups):
        ranked = sorted(groups[task_id], key=lambda c: (-c.score, _id_key(c.id)))
        out.append((task_id, ranked))
    return out


def _pair(chosen: Candidate, rejected: Candidate, task_id: str, method: str) -> Pair:
    return Pair(chosen.id, rejected.id, task_id, max(0.0, chosen.score - rejected.score), method)


def build_pairs(
    candidates: Iterable[Candidate],
    *,
    method: str = "outside_in",
    min_margin: float = 0.1,
    band: tuple[float, float] | None = None,
    uncertain_margin: float | None = None,
) -> list[Pair]:
    """Preference pairs per task by ``method`` (see the module doc). Candidates whose score is
    not a finite number are left out; a task with fewer than two candidates gives no pair."""
    if method not in METHODS:
        raise ConfigError(f"unknown pairing method {method!r}; use one of {', '.join(METHODS)}")
    min_margin = _check_number("min_margin", min_margin)
    threshold = (
        min_margin
        if uncertain_margin is None
        else _check_number("uncertain_margin", uncertain_margin)
    )
    if band is not None:
        if method != "uncertain":
            raise ConfigError("band is for method='uncertain' only")
        try:
            lo, hi = (float(band[0]), float(band[1]))
        except (TypeError, ValueError, IndexError):
            raise ConfigError(f"band is a pair of numbers (lo, hi), not {band!r}") from None
        if not (math.isfinite(lo) and math.isfinite(hi)) or lo > hi:
            raise ConfigError(f"band must be (lo, hi) with lo ≤ hi, not {band!r}")

    pairs: list[Pair] = []
    for task_id, ranked in _ranked_groups(candidates):
        if method == "outside_in":
            left, right = 0, len(ranked) - 1
            while left < right:
                margin = ranked[left].score - ranked[right].score
                if margin <= TIE_EPSILON or margin + TIE_EPSILON < min_margin:
                    break
                pairs.append(_pair(ranked[left], ranked[right], task_id, method))
                left += 1
                right -= 1
        elif method == "adjacent":
            for upper, lower in zip(ranked, ranked[1:], strict=False):
                margin = upper.score - lower.score
                if margin <= TIE_EPSILON or margin + TIE_EPSILON < min_margin:
                    continue
                pairs.append(_pair(upper, lower, task_id, method))
        else:
            if band is not None:
                pool = [c for c in ranked if lo <= c.score <= hi]
                pairs.extend(
                    _pair(upper, lower, task_id, method)
                    for upper, lower in zip(pool, pool[1:], strict=False)
                )
            else:
                for upper, lower in zip(ranked, ranked[1:], strict=False):
                    if upper.score - lower.score + TIE_EPSILON < threshold:
                        pairs.append(_pair(upper, lower, task_id, method))
    return pairs
