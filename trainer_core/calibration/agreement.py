"""Agreement statistics, each with a bootstrap confidence interval.

Between annotators (the human-to-human ceiling):

* Krippendorff's alpha (the ``krippendorff`` package) at the interval, ordinal or nominal level,
  on reliability data (annotators × units, missing labels as None/NaN). The package builds a
  units × values × values array, so with many distinct labels (continuous ones) interval alpha
  is computed in closed form instead (the same number), and ordinal or nominal alpha is refused;
* Cohen's kappa for exactly two annotators on the units both labelled: unweighted, or linearly or
  quadratically weighted. Weights use the distance between *positions* of the sorted categories
  (as scikit-learn does), so 1, 2, 5 are three equally spaced categories.

Between people and the reward model (the human-to-model figure): Pearson, Spearman, Kendall's
tau-b (scipy), the mean absolute error, and the pairwise concordance — among the pairs of units
whose human labels differ, the fraction the model orders the same way, a pair the model ties
counting half (so a constant model scores 0.5, a perfect one 1.0, a reversed one 0.0; it equals
(1 + Somers' D of the model given the human labels) / 2, and the AUC when labels are binary).

Undefined is None, never a made-up number: a correlation needs at least
:data:`MIN_CORRELATION_N` pairs and variation on both sides; alpha needs two values and a unit
labelled twice; kappa needs two categories. A statistic that is defined on fewer than
:data:`MIN_BOOTSTRAP_N` units gets its value without an interval.

Bootstrap intervals come from :func:`scipy.stats.bootstrap` with the **BCa** method (bias
corrected and accelerated), resampling *units* — a step with all its labels, a (human, model)
pair — never individual ratings. BCa was chosen over the percentile method because it covers at
least as well at small n: on correlated normal pairs (true Pearson 0.5), over 1000 replications
with 500 resamples each, a nominal 95 % BCa interval covered the true value 92.6 % of the time at
n = 30 and 93.8 % at n = 100 (percentile: 92.2 %, 93.7 %); for the MAE 93.2 % and 94.4 %
(percentile: 92.3 %, 94.6 %). Expect intervals a little narrow below ~50 units. When BCa is
undefined (every resample gives the same value, e.g. perfect agreement) the percentile interval of
the same resamples is used. Above :data:`BCA_MAX_N` units the agreement functions use the
percentile method (BCa's jackknife costs n more evaluations; at that size the two agree).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from trainer_core.errors import InputError

__all__ = [
    "BCA_MAX_N",
    "LEVELS",
    "MIN_BOOTSTRAP_N",
    "MIN_CORRELATION_N",
    "MODEL_METRICS",
    "Interval",
    "agreement_by",
    "agreement_summary",
    "bootstrap_interval",
    "cohen_kappa",
    "confusion_matrix",
    "grouped",
    "human_agreement",
    "kendall",
    "krippendorff_alpha",
    "mae",
    "model_agreement",
    "pairwise_concordance",
    "pearson",
    "reliability_curve",
    "spearman",
]

LEVELS: tuple[str, ...] = ("interval", "ordinal", "nominal")


def _stats():
    """scipy.stats, imported on first use: it takes about a second to import, and the web app
    and its workers import this module at start."""
    from scipy import stats

    return stats


MIN_BOOTSTRAP_N = 10
"""Fewer units than this: the statistic's value, no interval (a bootstrap of a handful of units
says nothing about the spread)."""
MIN_CORRELATION_N = 3
"""Pearson, Spearman and Kendall need at least this many pairs."""
MODEL_METRICS: tuple[str, ...] = ("pearson", "spearman", "kendall", "mae", "concordance")
"""The keys of :func:`model_agreement`, in display order."""

_PAIRWISE_MAX_N = 1000
"""Up to this many units, Kendall's tau and the concordance are bootstrapped through an n × n
pair matrix (:func:`_pair_statistic`); above it scipy's O(n log n) kendalltau runs once per
resample."""
BCA_MAX_N = 1000
"""Above this many units the agreement functions use percentile intervals: BCa's jackknife costs
n more evaluations of the statistic, and at that size the two methods agree closely."""
_BATCH_ELEMENTS = 4_000_000
"""About how many array elements one vectorised batch of resamples may hold."""


@dataclass(frozen=True)
class Interval:
    """A statistic with its bootstrap confidence interval. ``value`` None: undefined (too few
    units, no variation); ``low``/``high`` None: no interval (too few units to resample, or the
    resamples are undefined). ``n``: the units it was computed on."""

    value: float | None
    low: float | None
    high: float | None
    n: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# --- input helpers -------------------------------------------------------------------------------


def _number(value: Any, what: str) -> float | None:
    """A finite float; None for None or NaN; InputError for anything that is not a number."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise InputError(f"{what} must be a number or None, not {value!r}")
    value = float(value)
    if math.isnan(value):
        return None
    if not math.isfinite(value):
        raise InputError(f"{what} must be finite, not {value!r}")
    return value


def _paired(human: Sequence[Any], model: Sequence[Any]) -> tuple[np.ndarray, np.ndarray]:
    """The (human, model) pairs where both are numbers, as two float arrays."""
    human, model = list(human), list(model)
    if len(human) != len(model):
        raise InputError(
            f"human and model scores must pair up: {len(human)} human labels, "
            f"{len(model)} model scores"
        )
    pairs = [
        (h, m)
        for i, (a, b) in enumerate(zip(human, model, strict=True))
        if (h := _number(a, f"human label {i}")) is not None
        and (m := _number(b, f"model score {i}")) is not None
    ]
    if not pairs:
        return np.empty(0), np.empty(0)
    h, m = zip(*pairs, strict=True)
    return np.asarray(h, dtype=float), np.asarray(m, dtype=float)


def _clean(value: Any) -> float | None:
    """A float, or None for None/NaN/inf."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


# --- bootstrap -----------------------------------------------------------------------------------


def _method(n: int) -> str:
    return "BCa" if n <= BCA_MAX_N else "percentile"


def _nan_if_none(value: Any) -> float:
    return math.nan if value is None else float(value)


def bootstrap_interval(
    statistic: Callable[..., Any],
    *samples: Sequence[Any] | np.ndarray,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
    paired: bool = True,
    vectorized: bool = False,
    method: str = "BCa",
    min_n: int = MIN_BOOTSTRAP_N,
    batch: int | None = None,
) -> Interval:
    """``statistic(*samples)`` with a bootstrap confidence interval (:func:`scipy.stats.bootstrap`).

    ``samples``: one array per argument of ``statistic``, one entry per *unit* (``paired``: the
    samples are resampled together, unit by unit — a (human, model) pair stays a pair).
    ``statistic`` returns a float, or None / NaN when undefined. ``vectorized``: it takes an
    ``axis`` keyword and computes along it (much faster). ``method``: ``"BCa"`` (default, see the
    module doc) or ``"percentile"``. Fewer than ``min_n`` units: the value without an interval.
    ``batch``: resamples per call of a vectorised statistic (default: ~4M array elements).
    """
    if not samples:
        raise InputError("bootstrap_interval needs at least one sample")
    if not 0 < confidence < 1:
        raise InputError(f"confidence is a level in (0, 1), e.g. 0.95, not {confidence!r}")
    if n_resamples < 1:
        raise InputError(f"n_resamples must be at least 1, not {n_resamples!r}")
    arrays = [np.asarray(s) for s in samples]
    if paired and len({len(a) for a in arrays}) > 1:
        raise InputError(f"paired samples need equal lengths, not {[len(a) for a in arrays]}")
    n = len(arrays[0]) if paired else sum(len(a) for a in arrays)

    if vectorized:

        def stat(*args: np.ndarray, axis: int = -1) -> Any:
            result = statistic(*args, axis=axis)
            return np.asarray(result, dtype=float)
    else:

        def stat(*args: np.ndarray) -> float:
            return _nan_if_none(statistic(*args))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant resamples, degenerate BCa: handled below
        value = _clean(stat(*arrays, axis=-1) if vectorized else stat(*arrays))
        if value is None or n < max(2, min_n):
            return Interval(value, None, None, n)
        per_resample = n if paired else max(len(a) for a in arrays)
        result = _stats().bootstrap(
            tuple(arrays),
            stat,
            n_resamples=n_resamples,
            batch=batch or max(1, _BATCH_ELEMENTS // max(1, per_resample)),
            vectorized=vectorized,
            paired=paired,
            confidence_level=confidence,
            method=method,
            rng=np.random.default_rng(seed),
        )
    low, high = _clean(result.confidence_interval.low), _clean(result.confidence_interval.high)
    if low is None or high is None:
        distribution = np.asarray(result.bootstrap_distribution, dtype=float)
        if distribution.size and np.all(np.isfinite(distribution)):
            alpha = (1 - confidence) / 2
            low, high = (float(v) for v in np.quantile(distribution, [alpha, 1 - alpha]))
        else:
            low = high = None
    return Interval(value, low, high, n)


# --- between people and the model --------------------------------------------------------------


def _pearson_v(h: np.ndarray, m: np.ndarray, axis: int = -1) -> np.ndarray:
    if h.shape[axis] < MIN_CORRELATION_N:
        return np.full(np.delete(h.shape, axis), np.nan) if h.ndim > 1 else np.asarray(np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", _stats().ConstantInputWarning)
        return np.asarray(_stats().pearsonr(h, m, axis=axis).statistic, dtype=float)


def _spearman_v(h: np.ndarray, m: np.ndarray, axis: int = -1) -> np.ndarray:
    return _pearson_v(_stats().rankdata(h, axis=axis), _stats().rankdata(m, axis=axis), axis=axis)


def _mae_v(h: np.ndarray, m: np.ndarray, axis: int = -1) -> np.ndarray:
    if h.shape[axis] == 0:
        return np.asarray(np.nan)
    return np.mean(np.abs(h - m), axis=axis)


def _pair_counts(h: np.ndarray, m: np.ndarray) -> tuple[int, int, int]:
    """Over the pairs i < j: S = Σ sign(Δh)·sign(Δm) (concordant − discordant), the pairs untied
    in h and the pairs untied in m."""
    i, j = np.triu_indices(len(h), k=1)
    sh = np.sign(h[i] - h[j]).astype(np.int8)
    sm = np.sign(m[i] - m[j]).astype(np.int8)
    return (
        int(np.sum(sh * sm, dtype=np.int64)),
        int(np.count_nonzero(sh)),
        int(np.count_nonzero(sm)),
    )


def _pair_statistic(h: np.ndarray, m: np.ndarray, which: str) -> Callable[..., np.ndarray]:
    """Kendall's tau-b or the concordance as a vectorised statistic of *resampled unit indices*.

    A resample is a count vector c (how often each unit was drawn); a pair of copies of one unit
    is tied on both sides, so over the resample S = ½ cᵀKc with K_ij = sign(h_i − h_j)·sign(m_i −
    m_j), and the untied pairs are ½ cᵀUc with U_ij = [h_i ≠ h_j] — the same numbers
    scipy.stats.kendalltau gives on the resampled data, for a batch of resamples in one matrix
    product (and BCa's jackknife, n resamples of n − 1 units, in another)."""
    n = len(h)
    sh = np.sign(h[:, None] - h[None, :])
    sm = np.sign(m[:, None] - m[None, :])
    k = (sh * sm).astype(np.float32)
    untied_h = (sh != 0).astype(np.float32)
    untied_m = (sm != 0).astype(np.float32) if which == "kendall" else None

    def quadratic(matrix: np.ndarray, counts: np.ndarray) -> np.ndarray:
        return 0.5 * np.einsum("bi,bi->b", counts @ matrix, counts, dtype=np.float64)

    def statistic(index: np.ndarray, axis: int = -1) -> np.ndarray:
        index = np.moveaxis(np.asarray(index), axis, -1)
        shape = index.shape[:-1]
        flat = index.reshape(-1, index.shape[-1]).astype(np.int64)
        rows = len(flat)
        offsets = (np.arange(rows, dtype=np.int64) * n)[:, None]
        counts = np.bincount((flat + offsets).ravel(), minlength=rows * n)
        counts = counts.reshape(rows, n).astype(np.float32)
        s = quadratic(k, counts)
        pairs_h = quadratic(untied_h, counts)
        with np.errstate(divide="ignore", invalid="ignore"):
            if which == "kendall":
                value = s / np.sqrt(pairs_h * quadratic(untied_m, counts))
                if index.shape[-1] < MIN_CORRELATION_N:
                    value = np.full(rows, np.nan)
            else:
                value = 0.5 + s / (2.0 * pairs_h)
        return value.reshape(shape)

    return statistic


def _kendall_scipy(h: np.ndarray, m: np.ndarray) -> float | None:
    if len(h) < MIN_CORRELATION_N:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _clean(_stats().kendalltau(h, m).statistic)


def _untied_pairs(values: np.ndarray) -> int:
    _, counts = np.unique(values, return_counts=True)
    n = len(values)
    return n * (n - 1) // 2 - int(np.sum(counts * (counts - 1) // 2))


def _concordance_scipy(h: np.ndarray, m: np.ndarray) -> float | None:
    """The concordance through scipy's O(n log n) tau-b: S = tau_b · √(untied_h · untied_m)."""
    untied_h, untied_m = _untied_pairs(h), _untied_pairs(m)
    if untied_h == 0:
        return None
    if untied_m == 0:
        return 0.5  # the model ties every pair: each counts half
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tau = _stats().kendalltau(h, m).statistic
    return _clean(0.5 + tau * math.sqrt(untied_h * untied_m) / (2.0 * untied_h))


def pearson(human: Sequence[Any], model: Sequence[Any]) -> float | None:
    """Pearson's r (scipy.stats.pearsonr) over the pairs where both are numbers; None with fewer
    than 3 pairs or a constant side."""
    h, m = _paired(human, model)
    return _clean(_pearson_v(h, m))


def spearman(human: Sequence[Any], model: Sequence[Any]) -> float | None:
    """Spearman's rho (scipy.stats.spearmanr: Pearson on average ranks); None like Pearson."""
    h, m = _paired(human, model)
    if len(h) < MIN_CORRELATION_N:
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", _stats().ConstantInputWarning)
        return _clean(_stats().spearmanr(h, m).statistic)


def kendall(human: Sequence[Any], model: Sequence[Any]) -> float | None:
    """Kendall's tau-b (scipy.stats.kendalltau); None like Pearson."""
    h, m = _paired(human, model)
    return _kendall_scipy(h, m)


def mae(human: Sequence[Any], model: Sequence[Any]) -> float | None:
    """The mean absolute difference; None without pairs."""
    h, m = _paired(human, model)
    return _clean(_mae_v(h, m)) if len(h) else None


def pairwise_concordance(human: Sequence[Any], model: Sequence[Any]) -> float | None:
    """Among the pairs of units with different human labels, the fraction the model orders the
    same way; a pair the model ties counts half. None when no two human labels differ."""
    h, m = _paired(human, model)
    if len(h) > _PAIRWISE_MAX_N:
        return _concordance_scipy(h, m)
    s, untied_h, _ = _pair_counts(h, m)
    return 0.5 + s / (2.0 * untied_h) if untied_h else None


def model_agreement(
    human: Sequence[Any],
    model: Sequence[Any],
    *,
    metrics: Sequence[str] = MODEL_METRICS,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Interval]:
    """Pearson, Spearman, Kendall, MAE and concordance (:data:`MODEL_METRICS`) between human
    labels and model scores, each with a bootstrap interval over units (BCa; percentile above
    :data:`BCA_MAX_N`). Pairs where either side is None are left out; ``n`` is the pairs used.
    ``metrics``: which of :data:`MODEL_METRICS` to compute (the keys follow its order)."""
    h, m = _paired(human, model)
    options = {
        "n_resamples": n_resamples,
        "confidence": confidence,
        "seed": seed,
        "method": _method(len(h)),
    }
    unknown = sorted(set(metrics) - set(MODEL_METRICS))
    if unknown:
        raise InputError(
            f"unknown metric(s) {', '.join(unknown)}; known: {', '.join(MODEL_METRICS)}"
        )
    units = np.arange(len(h))
    result: dict[str, Interval] = {}
    for name in metrics:
        if name in ("kendall", "concordance") and len(h) <= _PAIRWISE_MAX_N:
            statistic = _pair_statistic(h, m, name)
            result[name] = bootstrap_interval(statistic, units, vectorized=True, **options)
        elif name in ("kendall", "concordance"):
            scipy_version = _kendall_scipy if name == "kendall" else _concordance_scipy
            result[name] = bootstrap_interval(scipy_version, h, m, **options)
        else:
            vectorised = {"pearson": _pearson_v, "spearman": _spearman_v, "mae": _mae_v}[name]
            result[name] = bootstrap_interval(vectorised, h, m, vectorized=True, **options)
    return result


# --- between annotators --------------------------------------------------------------------------


def _check_level(level: str) -> None:
    if level not in LEVELS:
        raise InputError(f"level must be one of {', '.join(LEVELS)}, not {level!r}")


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float | np.floating) and math.isnan(value))


def _label(value: Any, level: str, what: str) -> Any:
    """A label: a number; at the nominal level also a string category. None when missing."""
    if _is_missing(value):
        return None
    if isinstance(value, str) and level == "nominal":
        return value
    if isinstance(value, str):
        raise InputError(
            f"{what} is {value!r}: {level} agreement needs numeric labels "
            "(use level='nominal' for categories)"
        )
    return _number(value, what)


def _sorted_categories(values: Iterable[Any]) -> list[Any]:
    unique = list(dict.fromkeys(values))
    try:
        return sorted(unique)
    except TypeError:  # numbers and strings mixed: order of appearance
        return unique


_PACKAGE_MAX_ELEMENTS = 20_000_000
"""The krippendorff package builds a units × values × values array; past this many elements (many
distinct labels, e.g. continuous ones) interval alpha is computed in closed form instead, and
ordinal / nominal alpha is refused."""


def _unit_sums(counts: np.ndarray, domain: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per pairable unit: the number of labels, their sum and their sum of squares (centred)."""
    counts = counts[counts.sum(axis=1) >= 2]
    x = domain - domain.mean()  # centred: the sums of squares stay accurate
    return counts.sum(axis=1), counts @ x, counts @ (x * x)


def _alpha_from_sums(m: np.ndarray, s1: np.ndarray, s2: np.ndarray, axis: int = -1) -> Any:
    """Interval alpha without the values × values matrices. With the squared difference as the
    distance, Σ o·δ² = A = Σ_u 2(m_u·Σx² − (Σx)²)/(m_u − 1) over each unit's labels and
    (n − 1)·Σ e·δ² = B = 2(n·Σx² − (Σx)²) over all pairable labels, so α = 1 − (n − 1)·A / B —
    the package's number (tests check it). Vectorised along ``axis`` (units)."""
    within = np.sum(2.0 * (m * s2 - s1 * s1) / (m - 1), axis=axis)
    n = np.sum(m, axis=axis).astype(float)
    squares = np.sum(s2, axis=axis)
    total = 2.0 * (n * squares - np.sum(s1, axis=axis) ** 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        alpha = 1.0 - (n - 1.0) * within / total
    return np.where((n >= 2) & (total > 1e-12 * n * squares), alpha, np.nan)


def _too_big_for_the_package(counts: np.ndarray, domain: np.ndarray, level: str) -> bool:
    if counts.shape[0] * len(domain) ** 2 <= _PACKAGE_MAX_ELEMENTS:
        return False
    if level != "interval":
        raise InputError(
            f"{len(domain)} distinct labels over {counts.shape[0]} units are too many for "
            f"{level} alpha; use level='interval' or put the labels on a scale of a few values"
        )
    return True


def _alpha_from_counts(counts: np.ndarray, domain: np.ndarray, level: str) -> float | None:
    import krippendorff

    if len(domain) < 2 or not np.any(counts.sum(axis=1) >= 2):
        return None
    if _too_big_for_the_package(counts, domain, level):
        return _clean(_alpha_from_sums(*_unit_sums(counts, domain)))
    with np.errstate(divide="ignore", invalid="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            value = krippendorff.alpha(
                value_counts=counts, value_domain=domain, level_of_measurement=level
            )
        except ValueError:
            return None
    return _clean(value)


def _value_counts(rows: Sequence[Sequence[Any]], level: str) -> tuple[np.ndarray, np.ndarray]:
    """Reliability data (annotators × units) → (units × categories counts, categories)."""
    labels = [
        [_label(v, level, f"label [{a}][{u}]") for u, v in enumerate(row)]
        for a, row in enumerate(rows)
    ]
    width = {len(row) for row in labels}
    if len(width) > 1:
        raise InputError(
            "reliability data is annotators × units: every annotator's row needs one entry per "
            f"unit (None where missing); got rows of lengths {sorted(width)}"
        )
    categories = _sorted_categories(v for row in labels for v in row if v is not None)
    index = {c: i for i, c in enumerate(categories)}
    units = width.pop() if width else 0
    counts = np.zeros((units, len(categories)), dtype=float)
    for row in labels:
        for u, v in enumerate(row):
            if v is not None:
                counts[u, index[v]] += 1
    domain = (
        np.arange(len(categories), dtype=float)
        if categories and isinstance(categories[0], str)
        else np.asarray(categories, dtype=float)
    )
    return counts, domain


def krippendorff_alpha(
    reliability_data: Sequence[Sequence[Any]] | np.ndarray, level: str = "interval"
) -> float | None:
    """Krippendorff's alpha (the ``krippendorff`` package) of reliability data: one row per
    annotator, one column per unit, None/NaN where an annotator did not label a unit. Labels are
    numbers (or, at the nominal level, strings). None when undefined: fewer than two distinct
    values, or no unit labelled twice. (Many distinct labels: see the module doc.)"""
    _check_level(level)
    counts, domain = _value_counts(np.asarray(reliability_data, dtype=object).tolist(), level)
    return _alpha_from_counts(counts, domain, level)


_KAPPA_WEIGHTS = (None, "linear", "quadratic")


def _kappa_codes(a: np.ndarray, b: np.ndarray, k: int, weights: str | None) -> float | None:
    observed = np.bincount(a * k + b, minlength=k * k).reshape(k, k).astype(float)
    total = observed.sum()
    if total == 0 or k < 2:
        return None
    observed /= total
    expected = np.outer(observed.sum(axis=1), observed.sum(axis=0))
    distance = np.abs(np.subtract.outer(np.arange(k), np.arange(k))).astype(float)
    if weights is None:
        disagreement = (distance > 0).astype(float)
    elif weights == "linear":
        disagreement = distance
    else:
        disagreement = distance**2
    chance = float(np.sum(disagreement * expected))
    if chance <= 0:
        return None  # both annotators always gave the same single category
    return 1.0 - float(np.sum(disagreement * observed)) / chance


def _kappa_pairs(
    a: Sequence[Any], b: Sequence[Any], levels: Sequence[Any] | None
) -> tuple[np.ndarray, np.ndarray, int]:
    a, b = list(a), list(b)
    if len(a) != len(b):
        raise InputError(f"kappa needs one label per unit from each annotator: {len(a)} ≠ {len(b)}")
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if not _is_missing(x) and not _is_missing(y)]
    categories = (
        list(levels) if levels is not None else _sorted_categories(v for p in pairs for v in p)
    )
    index = {c: i for i, c in enumerate(categories)}
    missing = sorted({repr(v) for p in pairs for v in p if v not in index})
    if missing:
        raise InputError(f"labels {', '.join(missing)} are not among the levels {categories!r}")
    codes_a = np.asarray([index[x] for x, _ in pairs], dtype=np.int64)
    codes_b = np.asarray([index[y] for _, y in pairs], dtype=np.int64)
    return codes_a, codes_b, len(categories)


def cohen_kappa(
    a: Sequence[Any],
    b: Sequence[Any],
    weights: str | None = None,
    levels: Sequence[Any] | None = None,
) -> float | None:
    """Cohen's kappa between two annotators' labels of the same units (a[i], b[i] label unit i;
    units either left unlabelled are skipped). ``weights``: None (unweighted), ``"linear"`` or
    ``"quadratic"``, on the positions of the sorted categories. ``levels``: the categories (default:
    those that occur). None when undefined (no shared unit, one category only)."""
    if weights not in _KAPPA_WEIGHTS:
        raise InputError(f"weights must be None, 'linear' or 'quadratic', not {weights!r}")
    codes_a, codes_b, k = _kappa_pairs(a, b, levels)
    return _kappa_codes(codes_a, codes_b, k, weights)


_KAPPA_FOR_LEVEL = {"nominal": None, "ordinal": "linear", "interval": "quadratic"}


def _label_table(
    labels: Iterable[Sequence[Any]], level: str
) -> tuple[list[Hashable], list[Hashable], dict[tuple[Hashable, Hashable], Any]]:
    """(unit, annotator, value) triples → units, annotators (first appearance) and the labels by
    (unit, annotator); a later label of the same unit by the same annotator replaces an earlier
    one (a re-label)."""
    table: dict[tuple[Hashable, Hashable], Any] = {}
    for position, item in enumerate(labels):
        try:
            unit, annotator, value = item
        except (TypeError, ValueError):
            raise InputError(
                f"label {position} must be a (unit_id, annotator_id, value) triple, not {item!r}"
            ) from None
        value = _label(value, level, f"label {position} (unit {unit!r})")
        if value is not None:
            table.pop((unit, annotator), None)  # keep insertion order = latest
            table[(unit, annotator)] = value
    units = list(dict.fromkeys(u for u, _ in table))
    annotators = list(dict.fromkeys(a for _, a in table))
    return units, annotators, table


def human_agreement(
    labels: Iterable[Sequence[Any]],
    level: str = "interval",
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Interval]:
    """Agreement between annotators from ``(unit_id, annotator_id, value)`` labels.

    ``"alpha"``: Krippendorff's alpha at ``level``, always; bootstrapped over the units labelled
    at least twice (``n``: those units). ``"kappa"``: Cohen's kappa, only when the labels come
    from exactly two annotators, on the units both labelled (``n``); weighted by ``level``
    (nominal: unweighted, ordinal: linear, interval: quadratic). Missing values are skipped; a
    unit labelled twice by the same annotator keeps the later label."""
    _check_level(level)
    units, annotators, table = _label_table(labels, level)
    rows = [[table.get((u, a)) for u in units] for a in annotators]
    counts, domain = _value_counts(rows, level)
    pairable = counts[counts.sum(axis=1) >= 2]
    options = {
        "n_resamples": n_resamples,
        "confidence": confidence,
        "seed": seed,
        "method": _method(len(pairable)),
    }

    if len(domain) >= 2 and len(pairable) and _too_big_for_the_package(pairable, domain, level):
        sums = _unit_sums(pairable, domain)
        result = {"alpha": bootstrap_interval(_alpha_from_sums, *sums, vectorized=True, **options)}
    else:

        def alpha_of(index: np.ndarray) -> float | None:
            return _alpha_from_counts(pairable[index], domain, level)

        result = {"alpha": bootstrap_interval(alpha_of, np.arange(len(pairable)), **options)}
    if len(annotators) == 2:
        first, second = annotators
        shared = [u for u in units if (u, first) in table and (u, second) in table]
        codes_a, codes_b, k = _kappa_pairs(
            [table[(u, first)] for u in shared],
            [table[(u, second)] for u in shared],
            _sorted_categories(table.values()),
        )
        weights = _KAPPA_FOR_LEVEL[level]

        def kappa_of(a: np.ndarray, b: np.ndarray) -> float | None:
            return _kappa_codes(a, b, k, weights)

        options["method"] = _method(len(codes_a))
        result["kappa"] = bootstrap_interval(kappa_of, codes_a, codes_b, **options)
    return result


# --- plots ---------------------------------------------------------------------------------------


def reliability_curve(
    model: Sequence[Any], human: Sequence[Any], bins: int = 10
) -> list[dict[str, Any]]:
    """The reliability plot's points: model scores cut into ``bins`` equal-width bins over
    [0, 1] (widened to the scores' range when they leave it), and per bin the count, the mean
    model score and the mean human label (None for an empty bin). The last bin is closed."""
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 1:
        raise InputError(f"bins must be a whole number ≥ 1, not {bins!r}")
    h, m = _paired(human, model)
    low = min(0.0, float(m.min())) if len(m) else 0.0
    high = max(1.0, float(m.max())) if len(m) else 1.0
    edges = np.linspace(low, high, bins + 1)
    which = np.clip(np.searchsorted(edges, m, side="right") - 1, 0, bins - 1)
    points = []
    for b in range(bins):
        inside = which == b
        count = int(inside.sum())
        points.append(
            {
                "bin_low": float(edges[b]),
                "bin_high": float(edges[b + 1]),
                "n": count,
                "mean_model": float(m[inside].mean()) if count else None,
                "mean_human": float(h[inside].mean()) if count else None,
            }
        )
    return points


def confusion_matrix(
    human: Sequence[Any], model: Sequence[Any], levels: Sequence[float]
) -> dict[str, Any]:
    """Counts of (human level, model level): ``counts[i][j]`` is the units labelled
    ``levels[i]`` that the model scored nearest to ``levels[j]``. Model scores — and human labels
    off the levels — snap to the nearest level (a tie to the lower one). ``levels``: numbers on
    the scores' scale, e.g. [0, 0.25, 0.5, 0.75, 1]."""
    points = sorted({_number(v, "a level") for v in levels} - {None})
    if not points:
        raise InputError("confusion_matrix needs at least one level, e.g. [0, 0.5, 1]")
    h, m = _paired(human, model)
    grid = np.asarray(points)

    def snap(values: np.ndarray) -> np.ndarray:
        return np.argmin(np.abs(values[:, None] - grid[None, :]), axis=1)

    counts = np.zeros((len(grid), len(grid)), dtype=int)
    if len(h):
        np.add.at(counts, (snap(h), snap(m)), 1)
    return {"levels": points, "counts": counts.tolist(), "n": int(len(h))}


# --- breakdowns ----------------------------------------------------------------------------------


def grouped(
    records: Iterable[Mapping[str, Any]], key: str | Callable[[Mapping[str, Any]], Any]
) -> dict[Any, list[Mapping[str, Any]]]:
    """Records split by ``key`` (a field name, or a function of the record), groups in order of
    first appearance. Records whose key is missing or None belong to no group (a step without a
    tool is in no tool's breakdown)."""
    groups: dict[Any, list[Mapping[str, Any]]] = {}
    for record in records:
        value = key(record) if callable(key) else record.get(key)
        if value is not None:
            groups.setdefault(value, []).append(record)
    return groups


def agreement_summary(
    records: Iterable[Mapping[str, Any]],
    level: str = "interval",
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> dict[str, Any]:
    """Human-to-human and human-to-model agreement of label records side by side.

    Each record is one annotator's label: ``unit``, ``annotator``, ``value``, and optionally
    ``model`` (the reward model's score of that unit), ``rubric``, ``version`` (and any other
    keys, e.g. ``tool``, ``domain``, for :func:`agreement_by`). An item is a ``(unit, rubric)``:
    ``human`` is :func:`human_agreement` over items; ``model`` is :func:`model_agreement` over
    ``(unit, rubric, version)`` items, the human side being the mean of the item's labels (the
    latest per annotator). ``model`` is empty for non-numeric (nominal string) labels. Counts:
    ``n_labels`` (after re-labels), ``n_items``, ``n_annotators``, ``n_model_pairs``."""
    records = list(records)
    labels = [
        ((r.get("unit"), r.get("rubric")), r.get("annotator"), r.get("value")) for r in records
    ]
    options = {"n_resamples": n_resamples, "confidence": confidence, "seed": seed}
    units, annotators, table = _label_table(labels, level)
    human = human_agreement(labels, level, **options)

    model_part: dict[str, Interval] = {}
    numeric = all(not isinstance(v, str) for v in table.values())
    pairs: dict[tuple[Any, ...], float] = {}
    if numeric:
        by_item: dict[Hashable, list[float]] = {}
        for (item, _), value in table.items():
            by_item.setdefault(item, []).append(value)
        for record in records:
            item = (record.get("unit"), record.get("rubric"))
            score = _number(record.get("model"), f"model score of unit {record.get('unit')!r}")
            key = (*item, record.get("version"))
            if score is not None and item in by_item and key not in pairs:
                pairs[key] = score
        items = list(pairs)
        model_part = model_agreement(
            [float(np.mean(by_item[k[:2]])) for k in items], [pairs[k] for k in items], **options
        )
    return {
        "n_labels": len(table),
        "n_items": len(units),
        "n_annotators": len(annotators),
        "n_model_pairs": len(pairs),
        "human": human,
        "model": model_part,
    }


def agreement_by(
    records: Iterable[Mapping[str, Any]],
    key: str | Callable[[Mapping[str, Any]], Any],
    level: str = "interval",
    **options: Any,
) -> dict[Any, dict[str, Any]]:
    """:func:`agreement_summary` per group of :func:`grouped` (per rubric, tool, domain or
    reward-model version: ``key="rubric"`` ...)."""
    return {
        group: agreement_summary(rows, level, **options)
        for group, rows in grouped(records, key).items()
    }
