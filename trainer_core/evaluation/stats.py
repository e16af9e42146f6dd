"""Descriptive statistics of a run's episodes.

* :func:`wilson_interval`: the Wilson score interval of a success rate (good at small n and near
  0 or 1, unlike the normal approximation);
* :func:`pass_at_k` (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"): from
  n samples of a task of which c succeed, the unbiased estimate of the chance that at least one of
  k samples succeeds, ``1 - C(n-c, k) / C(n, k)``;
* :func:`pass_hat_k` (pass^k, Yao et al. 2024, tau-bench): the unbiased estimate of the chance that
  *all* k samples succeed, ``C(c, k) / C(n, k)`` — a measure of consistency;
* :func:`bootstrap_mean_interval`: a BCa bootstrap interval of a mean (:func:`scipy.stats.bootstrap`);
* :func:`summarize`: all of the above for a list of :class:`EpisodeRecord`.

Episodes are treated as independent draws in :func:`summarize`'s intervals (the Wilson interval
of the success rate, the bootstrap interval of the mean reward). With several samples per task
they are correlated within a task, so these intervals are somewhat narrow for the population of
tasks; the comparisons in :mod:`trainer_core.evaluation.compare` pair by task instead.
"""

from __future__ import annotations

import math
import operator
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from trainer_core.errors import InputError

__all__ = [
    "EpisodeRecord",
    "Summary",
    "bootstrap_mean_interval",
    "bootstrap_statistic",
    "check_confidence",
    "episode_value",
    "group_by_task",
    "mean_pass_at_k",
    "mean_pass_hat_k",
    "pass_at_k",
    "pass_hat_k",
    "summarize",
    "wilson_interval",
]


def _stats():
    """scipy.stats, imported on first use: it takes about a second to import, and the web app
    and its workers import this module at start."""
    from scipy import stats

    return stats


@dataclass
class EpisodeRecord:
    """One evaluated episode: the task it ran, whether it succeeded, its reward (None when it was
    not scored), and what it used."""

    task: str
    success: bool
    reward: float | None = None
    steps: int = 0
    tokens: int = 0
    cost: float = 0.0

    def __post_init__(self) -> None:
        if self.reward is not None and not math.isfinite(self.reward):
            raise InputError(
                f"episode of task {self.task!r} has reward {self.reward!r}; a reward must be a "
                "finite number, or None when the episode was not scored"
            )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def episode_value(episode: EpisodeRecord, metric: str) -> float:
    """The episode's reward (``metric="reward"``) or its success as 0/1 (``"success"``)."""
    if metric == "reward":
        if episode.reward is None:
            raise InputError(f"an episode of task {episode.task!r} has no reward; score it first")
        return float(episode.reward)
    return float(bool(episode.success))


def check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise InputError(f"confidence is a level in (0, 1), e.g. 0.95, not {confidence!r}")


def _count(value: Any, name: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise InputError(f"{name} must be a whole number, not {value!r}") from None


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of ``successes / n`` at ``confidence``; ``(0.0, 1.0)`` when
    ``n == 0`` (nothing is known). Equal to scipy's ``binomtest(...).proportion_ci("wilson")``."""
    successes, n = _count(successes, "successes"), _count(n, "n")
    check_confidence(confidence)
    if n < 0 or not 0 <= successes <= n:
        raise InputError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return (0.0, 1.0)
    z = float(_stats().norm.ppf(1 - (1 - confidence) / 2))
    p = successes / n
    denominator = 1 + z * z / n
    center = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (max(0.0, center - half), min(1.0, center + half))


def _check_nck(n: int, c: int, k: int, what: str) -> tuple[int, int, int]:
    n, c, k = _count(n, "n"), _count(c, "c"), _count(k, "k")
    if n < 1:
        raise InputError(f"{what} needs at least one sample of the task (n >= 1), got n={n}")
    if not 0 <= c <= n:
        raise InputError(f"{what}: successes c must be between 0 and n={n}, got c={c}")
    if k < 1:
        raise InputError(f"{what}: k must be at least 1, got k={k}")
    if k > n:
        raise InputError(
            f"{what} with k={k} needs at least {k} samples of the task, but it has n={n}; "
            "collect more samples per task or lower k"
        )
    return n, c, k


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k: ``1 - C(n-c, k) / C(n, k)``, computed as the product
    ``1 - prod_{i=n-c+1}^{n} (1 - k/i)`` so that large n does not overflow."""
    n, c, k = _check_nck(n, c, k, "pass@k")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k: ``C(c, k) / C(n, k) = prod_{i=0}^{k-1} (c-i)/(n-i)``."""
    n, c, k = _check_nck(n, c, k, "pass^k")
    if c < k:
        return 0.0
    return float(np.prod(np.arange(c - k + 1, c + 1) / np.arange(n - k + 1, n + 1)))


def _mean_over_tasks(
    estimator: Callable[[int, int, int], float], per_task: Sequence[tuple[int, int]], k: int
) -> float:
    if not per_task:
        raise InputError("need at least one task's (n, c) to average over")
    return float(np.mean([estimator(n, c, k) for n, c in per_task]))


def mean_pass_at_k(per_task: Sequence[tuple[int, int]], k: int) -> float:
    """pass@k averaged over tasks, each given as ``(n_i, c_i)`` (samples, successes)."""
    return _mean_over_tasks(pass_at_k, per_task, k)


def mean_pass_hat_k(per_task: Sequence[tuple[int, int]], k: int) -> float:
    """pass^k averaged over tasks, each given as ``(n_i, c_i)``."""
    return _mean_over_tasks(pass_hat_k, per_task, k)


def _finite(values: Iterable[float], name: str) -> np.ndarray:
    array = np.asarray(list(values), dtype=float)
    if array.ndim != 1 or not np.all(np.isfinite(array)):
        raise InputError(f"{name} must be a flat list of finite numbers")
    return array


def bootstrap_statistic(
    samples: tuple[np.ndarray, ...],
    statistic: Callable[..., Any],
    *,
    paired: bool,
    confidence: float = 0.95,
    n_resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float, np.ndarray]:
    """A BCa interval of a vectorised ``statistic(*samples, axis=...)`` and the bootstrap
    distribution; where BCa is undefined (degenerate resamples) the percentile interval of the
    same resamples. Callers handle n < 2 and constant data before calling."""
    check_confidence(confidence)
    if n_resamples < 1:
        raise InputError(f"n_resamples must be at least 1, not {n_resamples!r}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # degenerate BCa: handled below
        result = _stats().bootstrap(
            samples,
            statistic,
            n_resamples=n_resamples,
            vectorized=True,
            paired=paired,
            confidence_level=confidence,
            method="BCa",
            rng=np.random.default_rng(seed),
        )
    distribution = np.asarray(result.bootstrap_distribution, dtype=float)
    low, high = float(result.confidence_interval.low), float(result.confidence_interval.high)
    if not (math.isfinite(low) and math.isfinite(high)):
        tail = (1 - confidence) / 2
        low, high = (float(q) for q in np.quantile(distribution, [tail, 1 - tail]))
    return low, high, distribution


def _mean(x: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(x, axis=axis)


def bootstrap_mean_interval(
    values: Sequence[float], confidence: float = 0.95, n_resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """A BCa bootstrap interval of the mean of ``values``; ``(mean, mean)`` when there is one
    value or all are equal (the bootstrap has nothing to resample)."""
    check_confidence(confidence)
    x = _finite(values, "values")
    if x.size == 0:
        raise InputError("bootstrap_mean_interval needs at least one value")
    mean = float(x.mean())
    if x.size < 2 or np.all(x == x[0]):
        return (mean, mean)
    low, high, _ = bootstrap_statistic(
        (x,), _mean, paired=False, confidence=confidence, n_resamples=n_resamples, seed=seed
    )
    return (low, high)


def group_by_task(episodes: Iterable[EpisodeRecord]) -> dict[str, list[EpisodeRecord]]:
    """Episodes by task, tasks in order of first appearance, episodes in input order."""
    groups: dict[str, list[EpisodeRecord]] = {}
    for episode in episodes:
        groups.setdefault(episode.task, []).append(episode)
    return groups


@dataclass
class Summary:
    """A run's episodes in numbers. ``success_low``/``success_high``: Wilson interval;
    ``reward_*``: mean over the episodes that have a reward (``rewarded`` of them) with a BCa
    bootstrap interval, None when none has one. ``pass_at_k`` / ``pass_hat_k``: ``{j: value}``
    averaged over tasks for j = 1..k, only for j <= the fewest samples any task has (``k`` is the
    k asked for)."""

    n: int
    successes: int
    success_rate: float
    success_low: float
    success_high: float
    mean_reward: float | None
    reward_low: float | None
    reward_high: float | None
    pass_at_k: dict[int, float]
    pass_hat_k: dict[int, float]
    k: int
    mean_steps: float
    mean_tokens: float
    mean_cost: float
    tasks: int = 0
    rewarded: int = 0
    confidence: float = 0.95
    per_task: dict[str, tuple[int, int]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarize(
    episodes: Sequence[EpisodeRecord], k: int, confidence: float = 0.95, seed: int = 0
) -> Summary:
    """Summarise a run (see :class:`Summary`). ``per_task`` maps task to (samples, successes)."""
    k = _count(k, "k")
    if k < 1:
        raise InputError(f"k must be at least 1, got k={k}")
    check_confidence(confidence)
    if not episodes:
        raise InputError("summarize needs at least one episode")
    n = len(episodes)
    successes = sum(1 for e in episodes if e.success)
    low, high = wilson_interval(successes, n, confidence)
    rewards = [float(e.reward) for e in episodes if e.reward is not None]
    mean_reward = reward_low = reward_high = None
    if rewards:
        mean_reward = float(np.mean(rewards))
        reward_low, reward_high = bootstrap_mean_interval(rewards, confidence, seed=seed)
    groups = group_by_task(episodes)
    per_task = {t: (len(g), sum(1 for e in g if e.success)) for t, g in groups.items()}
    counts = list(per_task.values())
    fewest = min(samples for samples, _ in counts)
    js = range(1, min(k, fewest) + 1)
    return Summary(
        n=n,
        successes=successes,
        success_rate=successes / n,
        success_low=low,
        success_high=high,
        mean_reward=mean_reward,
        reward_low=reward_low,
        reward_high=reward_high,
        pass_at_k={j: mean_pass_at_k(counts, j) for j in js},
        pass_hat_k={j: mean_pass_hat_k(counts, j) for j in js},
        k=k,
        mean_steps=float(np.mean([e.steps for e in episodes])),
        mean_tokens=float(np.mean([e.tokens for e in episodes])),
        mean_cost=float(np.mean([e.cost for e in episodes])),
        tasks=len(groups),
        rewarded=len(rewards),
        confidence=confidence,
        per_task=per_task,
    )
