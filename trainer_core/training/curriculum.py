"""The order in which a trainer sees its examples: a seeded shuffle per epoch, or a curriculum
with a pacing schedule (knowlyr-trainer's ``CurriculumSampler``, made deterministic and
resumable). Pure Python, no torch.

Pacing
    The examples are ranked once per run from easiest to hardest (:func:`rank_easiest_first`;
    ties in a seeded order, so the ranking is the same in every process and on resume). Epoch
    ``e`` trains on the easiest ``ceil(n * r_e)`` of them (at least one), shuffled, where
    ``r_e = start_ratio + (1 - start_ratio) * e / warmup_epochs`` until ``e`` reaches
    ``warmup_epochs`` and ``1.0`` from then on (:func:`pacing_ratio`). An epoch is one pass over
    the examples eligible in it, so the early epochs are shorter. The eligible sets only grow:
    an example once in stays in.

Positions
    :class:`ExampleOrder` maps a position of the run (micro-batch ``i`` of ``size`` examples
    takes positions ``i*size .. (i+1)*size - 1``) to an example index, as a function of the seed
    and the position only, so a run resumed at step ``k`` sees exactly the examples an
    uninterrupted run sees there. Without a curriculum every epoch is the seeded shuffle of all
    the examples (the order Steplab's trainers have always used).

Near a target pass rate
    An RL run's samplers can draw each group's task with a weight that falls with the distance
    of the task's measured pass rate from a target (:func:`pick_near_target`): tasks the policy
    always solves or never solves teach GRPO nothing (their groups have no reward variance).
"""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Sequence

__all__ = [
    "ExampleOrder",
    "eligible_count",
    "pacing_ratio",
    "pass_rate_estimate",
    "pick_near_target",
    "rank_easiest_first",
    "target_weight",
]


def pacing_ratio(epoch: int, *, start_ratio: float, warmup_epochs: int) -> float:
    """The fraction of the examples (the easiest) that epoch ``epoch`` trains on: ``start_ratio``
    at epoch 0, linearly up to ``1.0`` at epoch ``warmup_epochs`` and after (``warmup_epochs`` of
    0: 1.0 from the start)."""
    if warmup_epochs <= 0 or epoch >= warmup_epochs:
        return 1.0
    return start_ratio + (1.0 - start_ratio) * epoch / warmup_epochs


def eligible_count(n: int, epoch: int, *, start_ratio: float, warmup_epochs: int) -> int:
    """How many of ``n`` examples epoch ``epoch`` trains on: ``ceil(n * ratio)``, at least 1."""
    ratio = pacing_ratio(epoch, start_ratio=start_ratio, warmup_epochs=warmup_epochs)
    # round() first: 0.3 * 10 is 3.0000000000000004 in floating point, not more than 3
    return min(n, max(1, math.ceil(round(n * ratio, 9))))


def rank_easiest_first(keys: Sequence[Hashable], *, seed: int) -> list[int]:
    """Indices of ``keys`` from the easiest (smallest key) to the hardest; equal keys in a seeded
    order (fixed for the run, so the eligible set of an epoch is the same in every process)."""
    order = list(range(len(keys)))
    random.Random(seed * 1_000_003 - 1).shuffle(order)  # the tie-break
    order.sort(key=lambda i: keys[i])  # stable: equal keys keep the seeded order
    return order


class ExampleOrder:
    """Which example each position of the run trains on (see the module docstring).

    ``rank``: the examples from easiest to hardest (:func:`rank_easiest_first`) for a curriculum,
    None for none (every epoch shuffles all ``n`` examples). ``start_ratio`` and
    ``warmup_epochs``: the pacing schedule (:func:`pacing_ratio`).
    """

    def __init__(
        self,
        n: int,
        *,
        seed: int,
        rank: Sequence[int] | None = None,
        start_ratio: float = 1.0,
        warmup_epochs: int = 0,
    ):
        if n < 1:
            raise ValueError("ExampleOrder needs at least one example")
        if rank is not None and sorted(rank) != list(range(n)):
            raise ValueError("rank must be a permutation of range(n)")
        self.n, self.seed = n, seed
        self.rank = list(range(n)) if rank is None else list(rank)
        self.start_ratio = start_ratio if rank is not None else 1.0
        self.warmup_epochs = warmup_epochs if rank is not None else 0
        self._cached: tuple[int, list[int]] | None = None

    def ratio(self, epoch: int) -> float:
        """The fraction of the examples epoch ``epoch`` trains on."""
        return pacing_ratio(epoch, start_ratio=self.start_ratio, warmup_epochs=self.warmup_epochs)

    def size(self, epoch: int) -> int:
        """How many examples epoch ``epoch`` trains on (its length in positions)."""
        return eligible_count(
            self.n, epoch, start_ratio=self.start_ratio, warmup_epochs=self.warmup_epochs
        )

    def eligible(self, epoch: int) -> list[int]:
        """The examples epoch ``epoch`` trains on, easiest first."""
        return self.rank[: self.size(epoch)]

    def warmup_positions(self) -> int:
        """Positions before the first epoch that trains on every example."""
        return sum(self.size(e) for e in range(self.warmup_epochs))

    def locate(self, position: int) -> tuple[int, int]:
        """``(epoch, offset within the epoch)`` of a position of the run."""
        for epoch in range(self.warmup_epochs):
            if position < self.size(epoch):
                return epoch, position
            position -= self.size(epoch)
        return self.warmup_epochs + position // self.n, position % self.n

    def epoch_order(self, epoch: int) -> list[int]:
        """The examples of epoch ``epoch`` in the order it trains on them: its eligible examples
        shuffled with a generator seeded by the seed and the epoch."""
        if self._cached is None or self._cached[0] != epoch:
            order = self.eligible(epoch)  # without a curriculum: range(n), every epoch
            random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
            self._cached = (epoch, order)
        return self._cached[1]

    def at(self, position: int) -> int:
        """The example index position ``position`` of the run trains on."""
        epoch, offset = self.locate(position)
        return self.epoch_order(epoch)[offset]


# --- sampling tasks near a target pass rate (RL runs; docs/task-health.md) ------------------------

#: the smallest weight a measured task keeps, so that no task is starved for good (its pass rate
#: may have moved since it was measured)
TARGET_FLOOR = 0.02


def pass_rate_estimate(successes: int, episodes: int) -> float | None:
    """The task's pass rate as the curriculum sees it: the Jeffreys posterior mean
    ``(successes + 1/2) / (episodes + 1)``, which keeps one lucky episode from reading as 0 or 1;
    None when the task has no outcome yet."""
    if episodes <= 0:
        return None
    return (successes + 0.5) / (episodes + 1)


def target_weight(rate: float | None, *, target: float, bandwidth: float) -> float:
    """The sampling weight of a task whose pass rate is ``rate``: a Gaussian kernel
    ``exp(-((rate - target) / bandwidth)² / 2)`` — 1 at the target, 0.61 one bandwidth away,
    0.14 two away — floored at :data:`TARGET_FLOOR`; 1 (the most) for a task never played."""
    if rate is None:
        return 1.0
    z = (rate - target) / bandwidth
    return max(TARGET_FLOOR, math.exp(-0.5 * z * z))


def pick_near_target(
    counts: Sequence[tuple[int, int]], *, target: float, bandwidth: float, seed: int
) -> int:
    """The index of the task to play next among tasks with these ``(successes, episodes)``
    counts, drawn with probability proportional to :func:`target_weight` of their
    :func:`pass_rate_estimate`, by a generator seeded with ``seed`` (the same counts and seed
    give the same pick)."""
    if not counts:
        raise ValueError("pick_near_target needs at least one task")
    weights = [
        target_weight(pass_rate_estimate(s, n), target=target, bandwidth=bandwidth)
        for s, n in counts
    ]
    return random.Random(seed).choices(range(len(counts)), weights=weights)[0]
