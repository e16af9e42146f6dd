"""Comparing two runs (a, b): significance tests, each returning a :class:`TestResult`.

Every ``effect`` is oriented **b minus a** (positive: b did better):

* :func:`paired_bootstrap`: mean of the per-task differences, BCa interval (scipy's bootstrap,
  ``paired=True``); two-sided p = 2 × the smaller share of resampled mean differences on either
  side of 0 (counting 0 on both sides), with the +1 correction ``(count + 1) / (B + 1)`` so a
  finite bootstrap never claims p = 0; capped at 1;
* :func:`mcnemar`: exact McNemar (a two-sided binomial test on the discordant pairs); effect =
  (b-only − a-only) / pairs; :func:`sign_test` is the same test on paired numbers (ties dropped;
  effect = (pairs b wins − pairs a wins) / pairs, so its sign always agrees with the test's);
* :func:`paired_t` (mean difference and its t interval), :func:`wilcoxon` (effect: the median
  difference), :func:`welch_t` (difference of means and its interval), :func:`mann_whitney`
  (effect: the rank-biserial correlation ``2·U_b / (n_a·n_b) − 1`` in [−1, 1]).

A single test's ``p_adjusted`` is its own p and ``significant`` is ``p < alpha``;
:func:`apply_correction` replaces both across a family of tests (:func:`adjust`: Holm or
Bonferroni). A test that cannot be computed returns ``p_value=None`` with the reason in ``note``;
small samples say so in ``note`` as well.

:func:`compare_runs` pairs runs **by task** (tasks both ran). Per-task values are the task's mean
reward when every episode of both runs has a reward, otherwise its success rate (or pick with
``metric``). McNemar pairs episode i of task t in a with episode i of task t in b (input order),
for i below the smaller sample count; with several samples per task those pairs are not
independent, so read its p-value as indicative. The unpaired tests (Welch, Mann-Whitney) use
every episode of each run, shared tasks or not. The correction runs across all six tests.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

import numpy as np

from trainer_core.errors import InputError
from trainer_core.evaluation.stats import (
    EpisodeRecord,
    bootstrap_statistic,
    episode_value,
    group_by_task,
)

__all__ = [
    "METHODS",
    "MIN_N",
    "Comparison",
    "TestResult",
    "adjust",
    "apply_correction",
    "compare_runs",
    "mann_whitney",
    "mcnemar",
    "paired_bootstrap",
    "paired_t",
    "sign_test",
    "welch_t",
    "wilcoxon",
]


def _stats():
    """scipy.stats, imported on first use: it takes about a second to import, and the web app
    and its workers import this module at start."""
    from scipy import stats

    return stats


METHODS = ("holm", "bonferroni", "none")
MIN_N = 10
"""Below this many pairs (or observations per group) a result carries a small-sample note."""


@dataclass
class TestResult:
    """One test's outcome; see the module doc for what ``effect`` means per test."""

    __test__ = False  # not a pytest test class

    name: str
    statistic: float | None
    p_value: float | None
    p_adjusted: float | None
    significant: bool | None
    effect: float | None
    low: float | None
    high: float | None
    n: int
    note: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _float(x: Any) -> float | None:
    return None if x is None or not np.isfinite(x) else float(x)


def _result(name, n, alpha, *, stat=None, p=None, effect=None, low=None, high=None, notes=()):
    p = None if p is None else min(1.0, max(0.0, float(p)))
    return TestResult(
        name=name,
        statistic=_float(stat),
        p_value=p,
        p_adjusted=p,
        significant=None if p is None else p < alpha,
        effect=_float(effect),
        low=_float(low),
        high=_float(high),
        n=int(n),
        note="; ".join(note for note in notes if note),
    )


def _small(n: int, what: str = "pairs") -> str:
    return f"only {n} {what}: low power, treat the p-value as indicative" if n < MIN_N else ""


def _paired(a: Sequence[float], b: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.ndim != 1 or x.shape != y.shape:
        raise InputError(
            f"paired tests need two flat lists of equal length, not {len(a)}, {len(b)}"
        )
    if not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise InputError("paired tests need finite numbers; drop or fill missing values first")
    return x, y


def _diff_of_means(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    return np.mean(y, axis=axis) - np.mean(x, axis=axis)


def paired_bootstrap(
    a: Sequence[float],
    b: Sequence[float],
    n_resamples: int = 2000,
    seed: int = 0,
    confidence: float = 0.95,
    *,
    alpha: float = 0.05,
    name: str = "paired bootstrap (mean difference)",
) -> TestResult:
    """Paired bootstrap of the mean difference b − a (see the module doc)."""
    x, y = _paired(a, b)
    n, d = len(x), y - x
    effect = float(d.mean()) if n else None
    if n < 2:
        return _result(name, n, alpha, effect=effect, notes=["needs at least 2 pairs"])
    if np.all(d == d[0]):
        p = 1.0 if effect == 0 else 2.0 / (n_resamples + 1)
        notes = ["every pair differs by the same amount", _small(n)]
        return _result(
            name, n, alpha, stat=effect, p=p, effect=effect, low=effect, high=effect, notes=notes
        )
    low, high, dist = bootstrap_statistic(
        (x, y),
        _diff_of_means,
        paired=True,
        confidence=confidence,
        n_resamples=n_resamples,
        seed=seed,
    )
    p = 2 * (min(np.sum(dist <= 0), np.sum(dist >= 0)) + 1) / (len(dist) + 1)
    return _result(
        name, n, alpha, stat=effect, p=p, effect=effect, low=low, high=high, notes=[_small(n)]
    )


def _exact_sign(name, b_wins: int, a_wins: int, n: int, effect, alpha: float, labels=("a", "b")):
    discordant = a_wins + b_wins
    if n == 0:
        return _result(name, 0, alpha, notes=["no pairs"])
    if discordant == 0:
        return _result(name, n, alpha, stat=0, p=1.0, effect=effect, notes=["no discordant pairs"])
    p = _stats().binomtest(b_wins, discordant, 0.5).pvalue
    notes = [f"{b_wins} pairs favour {labels[1]}, {a_wins} favour {labels[0]}"]
    smallest = min(1.0, 2 * 0.5**discordant)
    if smallest >= alpha:
        notes.append(f"only {discordant} discordant pairs: p cannot go below {smallest:.3g}")
    return _result(name, n, alpha, stat=b_wins, p=p, effect=effect, notes=notes)


def mcnemar(
    a: Sequence[bool],
    b: Sequence[bool],
    *,
    alpha: float = 0.05,
    name: str = "McNemar exact (success)",
) -> TestResult:
    """Exact McNemar test on paired successes; ``statistic`` = pairs only b solved."""
    if len(a) != len(b):
        raise InputError(f"McNemar needs paired outcomes of equal length, not {len(a)}, {len(b)}")
    x, y = np.asarray(a, dtype=bool), np.asarray(b, dtype=bool)
    b_only, a_only, n = int(np.sum(y & ~x)), int(np.sum(x & ~y)), len(x)
    return _exact_sign(name, b_only, a_only, n, (b_only - a_only) / n if n else None, alpha)


def sign_test(
    a: Sequence[float],
    b: Sequence[float],
    *,
    alpha: float = 0.05,
    name: str = "sign test (exact)",
    labels: tuple[str, str] = ("a", "b"),
) -> TestResult:
    """Exact sign test on paired numbers (pairs with b > a vs b < a, ties dropped); effect =
    (b wins − a wins) / pairs. On 0/1 values it is McNemar's test. ``labels`` name a and b in
    the note."""
    x, y = _paired(a, b)
    b_wins, a_wins, n = int(np.sum(y > x)), int(np.sum(y < x)), len(x)
    effect = (b_wins - a_wins) / n if n else None
    return _exact_sign(name, b_wins, a_wins, n, effect, alpha, labels)


def paired_t(
    a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95, alpha: float = 0.05
) -> TestResult:
    """Paired t-test of b − a (:func:`scipy.stats.ttest_rel`); effect: the mean difference."""
    name, (x, y) = "paired t", _paired(a, b)
    n, d = len(x), y - x
    effect = float(d.mean()) if n else None
    if n < 2:
        return _result(name, n, alpha, effect=effect, notes=["needs at least 2 pairs"])
    if np.all(d == d[0]):
        if effect == 0:
            return _result(name, n, alpha, stat=0, p=1.0, effect=0, notes=["no differences"])
        return _result(
            name, n, alpha, effect=effect, notes=["constant differences: t is undefined"]
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # near-constant data: scipy's own note
        r = _stats().ttest_rel(y, x)
    ci = r.confidence_interval(confidence)
    return _result(
        name, n, alpha, stat=r.statistic, p=r.pvalue, effect=effect, low=ci.low, high=ci.high,
        notes=[_small(n)],
    )  # fmt: skip


def wilcoxon(a: Sequence[float], b: Sequence[float], *, alpha: float = 0.05) -> TestResult:
    """Wilcoxon signed-rank test of b − a (zero differences dropped); effect: median difference."""
    name, (x, y) = "Wilcoxon signed-rank", _paired(a, b)
    d = y - x
    n, nonzero = len(d), int(np.sum(d != 0))
    if n == 0:
        return _result(name, 0, alpha, notes=["no pairs"])
    median = float(np.median(d))
    if nonzero == 0:
        return _result(
            name, n, alpha, stat=0, p=1.0, effect=median, notes=["all differences are zero"]
        )
    r = _stats().wilcoxon(y, x)
    notes = [_small(nonzero, "non-zero differences")]
    if nonzero < 6:
        notes.append("fewer than 6 non-zero differences: p cannot go below 0.05")
    return _result(name, n, alpha, stat=r.statistic, p=r.pvalue, effect=median, notes=notes)


def _groups(a: Sequence[float], b: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.ndim != 1 or y.ndim != 1 or not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        raise InputError("unpaired tests need two flat lists of finite numbers")
    return x, y


def welch_t(
    a: Sequence[float], b: Sequence[float], *, confidence: float = 0.95, alpha: float = 0.05
) -> TestResult:
    """Welch's t-test (unequal variances); effect: mean(b) − mean(a)."""
    name, (x, y) = "Welch t", _groups(a, b)
    n, smaller = len(x) + len(y), min(len(x), len(y))
    if smaller < 2:
        return _result(name, n, alpha, notes=["needs at least 2 values per run"])
    effect = float(y.mean() - x.mean())
    if np.ptp(x) == 0 and np.ptp(y) == 0:
        p = 1.0 if effect == 0 else None
        return _result(name, n, alpha, p=p, effect=effect, notes=["no variation: t is undefined"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # one run constant: still defined
        r = _stats().ttest_ind(y, x, equal_var=False)
    ci = r.confidence_interval(confidence)
    return _result(
        name, n, alpha, stat=r.statistic, p=r.pvalue, effect=effect, low=ci.low, high=ci.high,
        notes=[_small(smaller, "values in the smaller run")],
    )  # fmt: skip


def mann_whitney(a: Sequence[float], b: Sequence[float], *, alpha: float = 0.05) -> TestResult:
    """Two-sided Mann-Whitney U of b vs a; ``statistic`` = U of b, effect = rank-biserial."""
    name, (x, y) = "Mann-Whitney U", _groups(a, b)
    n, smaller = len(x) + len(y), min(len(x), len(y))
    if smaller < 1:
        return _result(name, n, alpha, notes=["needs at least 1 value per run"])
    if np.all(np.concatenate([x, y]) == x[0]):
        return _result(name, n, alpha, p=1.0, effect=0.0, notes=["all values are equal"])
    r = _stats().mannwhitneyu(y, x, alternative="two-sided")
    effect = 2 * r.statistic / (len(x) * len(y)) - 1
    notes = [_small(smaller, "values in the smaller run")]
    return _result(name, n, alpha, stat=r.statistic, p=r.pvalue, effect=effect, notes=notes)


def adjust(
    p_values: Sequence[float | None], method: Literal["holm", "bonferroni", "none"] = "holm"
) -> list[float | None]:
    """Family-wise adjusted p-values. None passes through and does not count toward m. Holm:
    the i-th smallest p (1-based) times (m − i + 1), made monotone by a running maximum, capped
    at 1. Bonferroni: p × m, capped at 1."""
    if method not in METHODS:
        raise InputError(f"unknown correction {method!r}; use one of {', '.join(METHODS)}")
    present = [(i, float(p)) for i, p in enumerate(p_values) if p is not None]
    if any(not 0 <= p <= 1 for _, p in present):
        raise InputError("p-values must lie in [0, 1]")
    out: list[float | None] = [None if p is None else float(p) for p in p_values]
    m = len(present)
    if method == "bonferroni":
        for i, p in present:
            out[i] = min(1.0, p * m)
    elif method == "holm":
        running = 0.0
        for rank, (i, p) in enumerate(sorted(present, key=lambda ip: ip[1])):
            running = max(running, min(1.0, p * (m - rank)))
            out[i] = running
    return out


def apply_correction(
    results: Sequence[TestResult], method: str = "holm", alpha: float = 0.05
) -> list[TestResult]:
    """Copies of ``results`` with ``p_adjusted`` and ``significant`` corrected as one family."""
    adjusted = adjust([r.p_value for r in results], method)  # type: ignore[arg-type]
    return [
        replace(r, p_adjusted=p, significant=None if p is None else p < alpha)
        for r, p in zip(results, adjusted, strict=True)
    ]


@dataclass
class Comparison:
    """:func:`compare_runs`' answer. ``metric``: what the per-task values are (reward or success)."""

    shared_tasks: int
    only_a: int
    only_b: int
    paired: list[TestResult]
    unpaired: list[TestResult]
    correction: str
    alpha: float
    metric: str = "reward"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def compare_runs(
    a: Sequence[EpisodeRecord],
    b: Sequence[EpisodeRecord],
    *,
    correction: Literal["holm", "bonferroni", "none"] = "holm",
    alpha: float = 0.05,
    seed: int = 0,
    metric: Literal["reward", "success"] | None = None,
) -> Comparison:
    """Compare run b with run a (effects are b − a; see the module doc)."""
    if not a or not b:
        raise InputError("compare_runs needs episodes in both runs")
    if correction not in METHODS:
        raise InputError(f"unknown correction {correction!r}; use one of {', '.join(METHODS)}")
    if not 0 < alpha < 1:
        raise InputError(f"alpha is a significance level in (0, 1), e.g. 0.05, not {alpha!r}")
    all_rewarded = all(e.reward is not None for e in [*a, *b])
    if metric is None:
        metric = "reward" if all_rewarded else "success"
    elif metric == "reward" and not all_rewarded:
        raise InputError(
            "metric='reward' needs a reward on every episode; score them or use 'success'"
        )
    elif metric not in ("reward", "success"):
        raise InputError(f"metric must be 'reward' or 'success', not {metric!r}")
    ga, gb = group_by_task(a), group_by_task(b)
    shared = [t for t in ga if t in gb]
    xa = [float(np.mean([episode_value(e, metric) for e in ga[t]])) for t in shared]
    xb = [float(np.mean([episode_value(e, metric) for e in gb[t]])) for t in shared]
    sa, sb = [], []
    for t in shared:
        for ea, eb in zip(ga[t], gb[t], strict=False):
            sa.append(ea.success)
            sb.append(eb.success)
    label = f"mean {metric} per task"
    paired = [
        paired_bootstrap(xa, xb, seed=seed, alpha=alpha, name=f"paired bootstrap ({label})"),
        mcnemar(sa, sb, alpha=alpha, name="McNemar exact (success, episode i of each shared task)"),
        replace(paired_t(xa, xb, alpha=alpha), name=f"paired t ({label})"),
        replace(wilcoxon(xa, xb, alpha=alpha), name=f"Wilcoxon signed-rank ({label})"),
    ]
    va, vb = [episode_value(e, metric) for e in a], [episode_value(e, metric) for e in b]
    unpaired = [
        replace(welch_t(va, vb, alpha=alpha), name=f"Welch t ({metric} per episode)"),
        replace(mann_whitney(va, vb, alpha=alpha), name=f"Mann-Whitney U ({metric} per episode)"),
    ]
    corrected = apply_correction([*paired, *unpaired], correction, alpha)
    return Comparison(
        shared_tasks=len(shared),
        only_a=sum(1 for t in ga if t not in gb),
        only_b=sum(1 for t in gb if t not in ga),
        paired=corrected[: len(paired)],
        unpaired=corrected[len(paired) :],
        correction=correction,
        alpha=alpha,
        metric=metric,
    )
