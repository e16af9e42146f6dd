"""Fitting a calibration of the reward model to human labels, and applying one.

A calibration has two parts, applied to a step in this order (:meth:`Calibration.step_total`):

1. **Rubric weights** (:func:`fit_rubric_weights`): the step total becomes the weighted mean of
   the step's *scored* rubrics, ``Σ w_r s_r / Σ w_r`` — the fitted weights replace the rubrics'
   own weights *and* the layer weights (they were fitted without layers, so they are the
   effective weights). A rubric without a fitted weight (absent from ``rubric_weights``) counts
   0. When no rubric with a fitted weight above 0 is scored on a step, the uncalibrated step
   total is used instead (so calibrating never un-scores a step). An empty ``rubric_weights``
   keeps the version's own weights: the uncalibrated total goes on to step 2.
2. **A monotone map** (:class:`IsotonicMap`, :func:`fit_isotonic`): isotonic regression of the
   human labels on the step-1 totals; between its knots it interpolates linearly, outside them it
   is clamped to the end values.

:func:`fit_calibration` fits both with k-fold cross-validation and reports agreement on held-out
labels before (the uncalibrated total) and after. Labels are on the scores' 0..1 scale (the
caller normalises, e.g. ``(v - 1) / 4`` for a 1–5 scale), since the calibrated total replaces a
0..1 step total.

The JSON a reward-model version stores as its ``calibration`` (:meth:`CalibrationResult.to_dict`)::

    {"rubric_weights": {"goal_progress": 0.41, ...}, "isotonic": {"x": [...], "y": [...]},
     "n": 240, "skipped": 3, "cv": {"folds": 5, "before": {...}, "after": {...}}}

:meth:`Calibration.from_dict` reads it back (only ``rubric_weights`` and ``isotonic`` matter for
scoring).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from trainer_core.calibration.agreement import Interval, model_agreement
from trainer_core.errors import ConfigError, InputError

__all__ = [
    "MIN_LABELS",
    "Calibration",
    "CalibrationResult",
    "IsotonicMap",
    "fit_calibration",
    "fit_isotonic",
    "fit_rubric_weights",
    "weighted_total",
]

MIN_LABELS = 20
"""The fewest labelled steps (a human label and a model score) :func:`fit_calibration` accepts."""

_SMOOTHING = 1e-6
"""In the exact weight objective, a step's prediction is (Σ w s + ε·mean(s)) / (Σ w + ε): equal to
the weighted mean whenever the step's scored rubrics carry weight, and still defined (the plain
mean) when they carry none."""


def _finite(value: Any, what: str, error: type[Exception] = InputError) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise error(f"{what} must be a number or None, not {value!r}")
    value = float(value)
    if math.isnan(value):
        return None
    if not math.isfinite(value):
        raise error(f"{what} must be finite, not {value!r}")
    return value


def weighted_total(
    scores: Mapping[str, float | None], weights: Mapping[str, float]
) -> float | None:
    """``Σ w_r s_r / Σ w_r`` over the rubrics with a weight above 0 and a score; None when there
    is none."""
    top = bottom = 0.0
    for rubric_id, weight in weights.items():
        if weight <= 0:
            continue
        value = scores.get(rubric_id)
        if value is None or isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if not math.isfinite(value):
            continue
        top += weight * value
        bottom += weight
    return top / bottom if bottom > 0 else None


# --- rubric weights ------------------------------------------------------------------------------


def _weight_objective(w: np.ndarray, s: np.ndarray, scored: np.ndarray, h: np.ndarray):
    """Σ (prediction − human)² and its gradient, with the smoothed weighted mean (see
    :data:`_SMOOTHING`)."""
    ws = np.where(scored, w[None, :], 0.0)
    counts = scored.sum(axis=1)
    plain = np.where(scored, s, 0.0).sum(axis=1) / counts
    top = (ws * s).sum(axis=1) + _SMOOTHING * plain
    bottom = ws.sum(axis=1) + _SMOOTHING
    prediction = top / bottom
    residual = prediction - h
    # ∂prediction_i/∂w_r = (s_ir − prediction_i) / bottom_i for the scored rubrics of row i
    slope = np.where(scored, (s - prediction[:, None]) / bottom[:, None], 0.0)
    return float(residual @ residual), 2.0 * (residual @ slope)


def fit_rubric_weights(
    rubric_scores: Sequence[Mapping[str, float | None]],
    human: Sequence[float],
    rubric_ids: Sequence[str],
) -> dict[str, float]:
    """Rubric weights ``w ≥ 0, Σ w = 1`` that fit ``human ≈ Σ w_r s_r / Σ w_r`` over each step's
    scored rubrics, by least squares.

    How: (1) a linearised start — with every rubric scored, ``Σ_r w_r (s_r − h) = Σ w s − h``, so
    minimising ``‖D w‖²`` with ``D_ir = s_ir − h_i`` (0 where rubric r is unscored) subject to
    ``w ≥ 0``, ``Σ w = 1`` is the constrained least-squares problem, solved by
    :func:`scipy.optimize.nnls` with the sum constraint as a heavily weighted extra row, then
    normalised; (2) from there SLSQP (:func:`scipy.optimize.minimize`, bounds 0..1, Σ w = 1) on
    the exact objective, which with missing scores is not linear in ``w``. The better of the two
    is kept.

    Missing scores (None): a rubric unscored on a step is left out of that step's weighted mean,
    as in scoring. Steps with no score on any of ``rubric_ids``, or no human label, are left out.
    A rubric scored on no step gets weight 0. Needs at least as many usable steps as rubrics that
    were scored (and 2)."""
    from scipy.optimize import minimize, nnls

    ids = list(rubric_ids)
    if not ids:
        raise InputError("fit_rubric_weights needs at least one rubric id")
    if len(set(ids)) != len(ids):
        raise InputError("rubric_ids must not repeat an id")
    rubric_scores, human = list(rubric_scores), list(human)
    if len(rubric_scores) != len(human):
        raise InputError(
            f"one human label per step: {len(rubric_scores)} steps, {len(human)} labels"
        )
    rows, labels = [], []
    for i, (scores, label) in enumerate(zip(rubric_scores, human, strict=True)):
        if not isinstance(scores, Mapping):
            raise InputError(f"step {i}: rubric scores are a mapping of rubric id → score")
        h = _finite(label, f"human label of step {i}")
        values = [_finite(scores.get(r), f"step {i}, rubric {r!r}") for r in ids]
        if h is None or all(v is None for v in values):
            continue
        rows.append([math.nan if v is None else v for v in values])
        labels.append(h)
    s = np.asarray(rows, dtype=float).reshape(len(rows), len(ids))
    scored = ~np.isnan(s)
    used = scored.any(axis=0)
    needed = max(2, int(used.sum()))
    if len(rows) < needed:
        raise InputError(
            f"fitting {int(used.sum())} rubric weight(s) needs at least {needed} labelled steps "
            f"with a rubric score; got {len(rows)}"
        )
    h = np.asarray(labels, dtype=float)
    s, scored = np.where(scored, s, 0.0)[:, used], scored[:, used]
    k = s.shape[1]
    weights = np.ones(k) / k
    if k > 1:
        d = np.where(scored, s - h[:, None], 0.0)
        big = 1e3 * (1.0 + float(np.abs(d).sum()))
        start, _ = nnls(np.vstack([d, np.full((1, k), big)]), np.append(np.zeros(len(h)), big))
        if start.sum() > 0:
            start = start / start.sum()
        else:
            start = weights
        result = minimize(
            _weight_objective,
            start,
            args=(s, scored, h),
            jac=True,
            method="SLSQP",
            bounds=[(0.0, 1.0)] * k,
            constraints=[
                {"type": "eq", "fun": lambda w: w.sum() - 1.0, "jac": lambda w: np.ones(k)}
            ],
            options={"maxiter": 500, "ftol": 1e-12},
        )
        candidates = [start]
        if np.all(np.isfinite(result.x)):
            candidates.append(np.clip(result.x, 0.0, None) / np.clip(result.x, 0.0, None).sum())
        weights = min(candidates, key=lambda w: _weight_objective(w, s, scored, h)[0])
    fitted = dict.fromkeys(ids, 0.0)
    for rubric_id, weight in zip(
        [r for r, u in zip(ids, used, strict=True) if u], weights, strict=True
    ):
        fitted[rubric_id] = float(weight)
    return fitted


# --- the monotone map ----------------------------------------------------------------------------


@dataclass(frozen=True)
class IsotonicMap:
    """A non-decreasing map given by knots: linear between them, clamped outside them."""

    x: Sequence[float]
    """Strictly increasing inputs (model scores)."""
    y: Sequence[float]
    """Non-decreasing outputs (human labels)."""

    def __post_init__(self) -> None:
        x = [_finite(v, "an isotonic knot x", ConfigError) for v in self.x]
        y = [_finite(v, "an isotonic knot y", ConfigError) for v in self.y]
        if not x or len(x) != len(y) or None in x or None in y:
            raise ConfigError(
                "an isotonic map needs x and y: equally long, non-empty lists of numbers"
            )
        if any(b <= a for a, b in zip(x, x[1:], strict=False)):
            raise ConfigError("isotonic knots need strictly increasing x")
        if any(b < a for a, b in zip(y, y[1:], strict=False)):
            raise ConfigError("isotonic knots need non-decreasing y (the map is monotone)")
        object.__setattr__(self, "x", tuple(x))
        object.__setattr__(self, "y", tuple(y))

    def __call__(self, value: float | None) -> float | None:
        """The mapped value (None stays None)."""
        if value is None:
            return None
        return float(np.interp(float(value), self.x, self.y))

    def apply(self, values: Sequence[float] | np.ndarray) -> np.ndarray:
        """The map over an array of values."""
        return np.interp(np.asarray(values, dtype=float), self.x, self.y)

    def to_dict(self) -> dict[str, list[float]]:
        return {"x": list(self.x), "y": list(self.y)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IsotonicMap:
        if not isinstance(data, Mapping) or not {"x", "y"} <= set(data):
            raise ConfigError('an isotonic map is {"x": [...], "y": [...]}')
        x, y = data["x"], data["y"]
        if not isinstance(x, list | tuple) or not isinstance(y, list | tuple):
            raise ConfigError("an isotonic map's x and y are lists of numbers")
        return cls(x=list(x), y=list(y))


def fit_isotonic(model: Sequence[float], human: Sequence[float]) -> IsotonicMap:
    """The increasing isotonic regression of ``human`` on ``model``
    (:func:`scipy.optimize.isotonic_regression`), pairs with a None left out. Equal model scores
    are pooled first (their labels averaged, weighted by count); each block of the fit becomes
    two knots, its first and last model score."""
    from scipy.optimize import isotonic_regression

    model, human = list(model), list(human)
    if len(model) != len(human):
        raise InputError(f"one human label per model score: {len(model)} ≠ {len(human)}")
    pairs = [
        (m, h)
        for i, (a, b) in enumerate(zip(model, human, strict=True))
        if (m := _finite(a, f"model score {i}")) is not None
        and (h := _finite(b, f"human label {i}")) is not None
    ]
    if not pairs:
        raise InputError("fitting an isotonic map needs at least one (model score, label) pair")
    m = np.asarray([p[0] for p in pairs])
    h = np.asarray([p[1] for p in pairs])
    xs, inverse, counts = np.unique(m, return_inverse=True, return_counts=True)
    means = np.bincount(inverse, weights=h) / counts
    result = isotonic_regression(means, weights=counts.astype(float), increasing=True)
    fitted, blocks = result.x, result.blocks
    knots_x: list[float] = []
    knots_y: list[float] = []
    for start, stop in zip(blocks[:-1], blocks[1:], strict=True):
        for index in dict.fromkeys((int(start), int(stop) - 1)):
            knots_x.append(float(xs[index]))
            knots_y.append(float(fitted[start]))
    # rounding can break monotonicity by an ulp
    knots_y = list(np.maximum.accumulate(knots_y))
    return IsotonicMap(knots_x, [float(v) for v in knots_y])


# --- a calibration, applied ----------------------------------------------------------------------


@dataclass(frozen=True)
class Calibration:
    """What scoring applies (see the module doc)."""

    rubric_weights: dict[str, float] = field(default_factory=dict)
    isotonic: IsotonicMap | None = None

    def step_total(
        self, scores: Mapping[str, float | None], raw_total: float | None
    ) -> float | None:
        """The calibrated step total from the step's rubric scores and its uncalibrated total."""
        base = weighted_total(scores, self.rubric_weights) if self.rubric_weights else None
        if base is None:
            base = raw_total
        if base is None or self.isotonic is None:
            return base
        return self.isotonic(base)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rubric_weights": dict(self.rubric_weights),
            "isotonic": self.isotonic.to_dict() if self.isotonic else None,
        }

    @classmethod
    def from_dict(
        cls, data: Mapping[str, Any], rubric_ids: Sequence[str] | None = None
    ) -> Calibration:
        """Read a stored calibration (other keys — n, cv — are ignored). ``rubric_ids``: the
        reward model's rubrics; a weight for any other rubric is a ConfigError."""
        if not isinstance(data, Mapping):
            raise ConfigError(
                'a calibration is a mapping {"rubric_weights": {...}, "isotonic": {"x", "y"}}'
            )
        raw_weights = data.get("rubric_weights") or {}
        if not isinstance(raw_weights, Mapping):
            raise ConfigError("calibration rubric_weights is a mapping of rubric id → weight")
        weights: dict[str, float] = {}
        for rubric_id, weight in raw_weights.items():
            value = _finite(weight, f"calibration weight of {rubric_id!r}", ConfigError)
            if value is None or value < 0:
                raise ConfigError(f"calibration weight of {rubric_id!r} must be a number ≥ 0")
            weights[str(rubric_id)] = value
        if weights and not any(w > 0 for w in weights.values()):
            raise ConfigError("every calibration weight is 0; refit the calibration")
        if rubric_ids is not None:
            unknown = sorted(set(weights) - set(rubric_ids))
            if unknown:
                raise ConfigError(
                    f"the calibration weighs rubric(s) {', '.join(unknown)} that this reward "
                    f"model does not have ({', '.join(rubric_ids)}); refit it for these rubrics"
                )
        raw_map = data.get("isotonic")
        isotonic = IsotonicMap.from_dict(raw_map) if raw_map is not None else None
        return cls(rubric_weights=weights, isotonic=isotonic)


# --- fitting with cross-validation ---------------------------------------------------------------


@dataclass
class CalibrationResult:
    rubric_weights: dict[str, float]
    """Fitted on all rows; empty when no row had a rubric score (the map alone calibrates)."""
    isotonic: IsotonicMap
    """Fitted on all rows."""
    before: dict[str, Interval]
    """Agreement of the uncalibrated totals with the labels (every row is held out once)."""
    after: dict[str, Interval]
    """Agreement of the calibrated totals on held-out folds, pooled over the folds."""
    n: int
    """Rows used."""
    folds: int
    skipped: int = 0
    """Rows left out: no human label or no model score."""

    @property
    def calibration(self) -> Calibration:
        return Calibration(dict(self.rubric_weights), self.isotonic)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rubric_weights": dict(self.rubric_weights),
            "isotonic": self.isotonic.to_dict(),
            "n": self.n,
            "skipped": self.skipped,
            "cv": {
                "folds": self.folds,
                "before": {k: v.to_dict() for k, v in self.before.items()},
                "after": {k: v.to_dict() for k, v in self.after.items()},
            },
        }


def _fit_one(
    scores: list[dict[str, float | None]], model: np.ndarray, human: np.ndarray, ids: list[str]
) -> Calibration:
    weights: dict[str, float] = {}
    with_scores = [i for i, row in enumerate(scores) if any(row.get(r) is not None for r in ids)]
    if ids and len(with_scores) >= max(2, len(ids)):
        weights = fit_rubric_weights(
            [scores[i] for i in with_scores], [float(human[i]) for i in with_scores], ids
        )
    reweighted = Calibration(weights, None)
    base = [reweighted.step_total(row, float(m)) for row, m in zip(scores, model, strict=True)]
    return Calibration(weights, fit_isotonic(base, human.tolist()))


def fit_calibration(
    rows: Sequence[Mapping[str, Any]],
    rubric_ids: Sequence[str],
    *,
    folds: int = 5,
    seed: int = 0,
    n_resamples: int = 1000,
) -> CalibrationResult:
    """Fit rubric weights and an isotonic map to human labels, with ``folds``-fold
    cross-validation.

    ``rows``: one per labelled step, ``{"rubrics": {rubric id: score or None}, "model": the
    uncalibrated step total, "human": the label on 0..1}`` (``rubrics`` may be absent: then only
    the map is fitted). Rows without a human label or a model score are skipped (counted in
    ``skipped``). The rows are shuffled (``seed``) and split into ``folds``; each fold's
    calibrated totals come from a calibration fitted on the other folds, and ``after`` is the
    agreement of those held-out totals with the labels; ``before`` that of the uncalibrated
    totals. The returned weights and map are fitted on all rows."""
    ids = [str(r) for r in rubric_ids]
    if isinstance(folds, bool) or not isinstance(folds, int) or folds < 2:
        raise InputError(f"folds must be a whole number ≥ 2, not {folds!r}")
    scores: list[dict[str, float | None]] = []
    model: list[float] = []
    human: list[float] = []
    skipped = 0
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise InputError(f"row {i} must be a mapping with rubrics, model and human")
        rubrics = row.get("rubrics") or {}
        if not isinstance(rubrics, Mapping):
            raise InputError(f"row {i}: rubrics is a mapping of rubric id → score or None")
        h = _finite(row.get("human"), f"row {i}: the human label")
        m = _finite(row.get("model"), f"row {i}: the model score")
        if h is None or m is None:
            skipped += 1
            continue
        if not 0.0 <= h <= 1.0:
            raise InputError(
                f"row {i}: the human label {h} is outside 0..1; put labels on the scores' 0..1 "
                "scale first (e.g. (v - 1) / 4 for a 1–5 scale)"
            )
        scores.append({r: _finite(rubrics.get(r), f"row {i}, rubric {r!r}") for r in ids})
        model.append(m)
        human.append(h)
    n = len(human)
    needed = max(MIN_LABELS, 2 * folds)
    if n < needed:
        raise InputError(
            f"fitting a calibration with {folds}-fold cross-validation needs at least {needed} "
            f"labelled steps with a model score; got {n}"
            + (f" ({skipped} more lacked a label or a model score)" if skipped else "")
            + f" — label {needed - n} more"
        )
    m_arr, h_arr = np.asarray(model), np.asarray(human)
    order = np.random.default_rng(seed).permutation(n)
    held_out = np.empty(n)
    for test in np.array_split(order, folds):
        train = np.setdiff1d(order, test)
        calibration = _fit_one([scores[i] for i in train], m_arr[train], h_arr[train], ids)
        for i in test:
            held_out[i] = calibration.step_total(scores[i], model[i])
    final = _fit_one(scores, m_arr, h_arr, ids)
    options = {"n_resamples": n_resamples, "seed": seed}
    return CalibrationResult(
        rubric_weights=final.rubric_weights,
        isotonic=final.isotonic,
        before=model_agreement(human, model, **options),
        after=model_agreement(human, held_out.tolist(), **options),
        n=n,
        folds=folds,
        skipped=skipped,
    )
