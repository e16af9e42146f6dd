"""Advantage estimators for GRPO on agent trajectories, each exactly as published.

A *group* is G trajectories sampled for one prompt. Trajectory ``i`` has an outcome reward
``R_i`` (did the episode succeed: the environment's, or the reward model's outcome) and, per
step (assistant turn) ``t``, a step reward ``r_{i,t}`` — the reward model's step total, never
with the outcome added. Each estimator gives every step of every trajectory one advantage; every
token of a step is trained with its step's advantage.

``outcome`` — GRPO (Shao et al. 2024, *DeepSeekMath*, §4.1.2, outcome supervision)::

    A_{i,t} = (R_i − mean_j R_j) / (std_j R_j + ε)       for every step t of trajectory i

with the group's unbiased std. ``scale=False`` is the Dr. GRPO variant (Liu et al. 2025,
*Understanding R1-Zero-Like Training*), which drops the division: ``A_{i,t} = R_i − mean_j R_j``.

``process`` — GRPO with process supervision (DeepSeekMath §4.1.3)::

    r̃_{i,t} = (r_{i,t} − mean(r)) / (std(r) + ε)          mean and unbiased std over ALL step
                                                          rewards of all trajectories of the group
    A_{i,t} = Σ_{k ≥ t} r̃_{i,k}                           the normalised rewards of t and after

``mixed`` — the outcome advantage plus ``process_weight`` × the process advantage.

A group whose rewards are all the same number has no signal: every advantage is exactly 0 (not a
near-zero difference divided by ε). An unscored step (``None``) takes no part in the mean and std
and contributes 0 to the sums. Adding a constant to every reward changes nothing; multiplying
every reward by a positive constant changes nothing where the estimator divides by the std.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from trainer_core.errors import ConfigError

__all__ = [
    "ESTIMATORS",
    "STD_EPS",
    "describe_estimator",
    "estimate",
    "mixed_advantages",
    "outcome_advantages",
    "process_advantages",
]

ESTIMATORS = ("outcome", "process", "mixed")
STD_EPS = 1e-8
"""ε: keeps a division defined; small enough that a scaled group's advantages stay the same."""


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    """Mean and unbiased std (0 for fewer than two values)."""
    n = len(values)
    mean = math.fsum(values) / n
    if n < 2:
        return mean, 0.0
    return mean, math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))


def outcome_advantages(rewards: Sequence[float], *, scale: bool = True) -> list[float]:
    """GRPO's group-relative advantage of each trajectory's outcome reward (see the module
    docstring; ``scale=False``: Dr. GRPO). Shapes: ``rewards`` [G] → [G]."""
    values = [float(r) for r in rewards]
    if not values:
        return []
    if max(values) == min(values):
        return [0.0] * len(values)
    mean, std = _mean_std(values)
    denom = std + STD_EPS if scale else 1.0
    return [(v - mean) / denom for v in values]


def process_advantages(step_rewards: Sequence[Sequence[float | None]]) -> list[list[float]]:
    """DeepSeekMath's process-supervision advantages (see the module docstring). Shapes:
    ``step_rewards`` [G][T_i] (None: unscored) → [G][T_i]."""
    scored = [float(r) for steps in step_rewards for r in steps if r is not None]
    if not scored or max(scored) == min(scored):
        return [[0.0] * len(steps) for steps in step_rewards]
    mean, std = _mean_std(scored)
    out = []
    for steps in step_rewards:
        normalised = [0.0 if r is None else (float(r) - mean) / (std + STD_EPS) for r in steps]
        to_go, acc = [], 0.0
        for value in reversed(normalised):  # A_t = Σ_{k ≥ t} r̃_k
            acc += value
            to_go.append(acc)
        out.append(to_go[::-1])
    return out


def mixed_advantages(
    rewards: Sequence[float],
    step_rewards: Sequence[Sequence[float | None]],
    *,
    process_weight: float = 1.0,
    scale: bool = True,
) -> list[list[float]]:
    """The outcome advantage of each trajectory at each of its steps, plus ``process_weight``
    × the process advantage of the step. Shapes: [G], [G][T_i] → [G][T_i]."""
    outcome = outcome_advantages(rewards, scale=scale)
    process = process_advantages(step_rewards)
    return [
        [a + process_weight * p for p in steps] for a, steps in zip(outcome, process, strict=True)
    ]


def estimate(
    estimator: str,
    rewards: Sequence[float],
    step_rewards: Sequence[Sequence[float | None]],
    *,
    process_weight: float = 1.0,
    scale: bool = True,
) -> list[list[float]]:
    """The advantages of one group's steps under ``estimator`` (``outcome``, ``process`` or
    ``mixed``). ``rewards`` [G] are the outcome rewards, ``step_rewards`` [G][T_i] the step
    rewards (only ``process`` and ``mixed`` read them). Returns [G][T_i]."""
    if len(rewards) != len(step_rewards):
        raise ConfigError(
            f"{len(rewards)} outcome rewards for {len(step_rewards)} trajectories: one each"
        )
    if estimator == "outcome":
        return [
            [a] * len(steps)
            for a, steps in zip(outcome_advantages(rewards, scale=scale), step_rewards, strict=True)
        ]
    if estimator == "process":
        return process_advantages(step_rewards)
    if estimator == "mixed":
        return mixed_advantages(rewards, step_rewards, process_weight=process_weight, scale=scale)
    raise ConfigError(
        f"unknown advantage estimator {estimator!r}; use one of {', '.join(ESTIMATORS)}"
    )


def describe_estimator(name: str, *, process_weight: float = 1.0, scale: bool = True) -> str:
    """One line saying which estimator a run uses and what it computes (pages, the CLI)."""
    outcome = (
        "GRPO: each completion's outcome reward minus the group mean, over the group's std"
        if scale
        else "Dr. GRPO: each completion's outcome reward minus the group mean"
    )
    process = (
        "DeepSeekMath process supervision: the reward model's step scores normalised over the "
        "group, summed from each step on"
    )
    if name == "outcome":
        return f"outcome ({outcome}, at every step)"
    if name == "process":
        return f"process ({process})"
    if name == "mixed":
        return f"mixed (outcome: {outcome}; plus {process_weight:g} × process: {process})"
    return name
