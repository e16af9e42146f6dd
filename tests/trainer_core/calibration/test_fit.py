"""Fitting a calibration: planted rubric weights come back, the isotonic map lowers held-out
error, the stored form round-trips."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy.optimize import isotonic_regression

from trainer_core.calibration.fit import (
    MIN_LABELS,
    Calibration,
    IsotonicMap,
    fit_calibration,
    fit_isotonic,
    fit_rubric_weights,
    weighted_total,
)
from trainer_core.errors import ConfigError, InputError

IDS = ["goal", "tool", "params", "info"]
PLANTED = {"goal": 0.5, "tool": 0.3, "params": 0.2, "info": 0.0}


def planted_rows(n: int, seed: int, missing: float = 0.0, noise: float = 0.05):
    """Rubric scores on 0..1, some missing; the human label is the planted weighted mean over
    the scored rubrics, plus noise."""
    rng = np.random.default_rng(seed)
    scores, labels = [], []
    for _ in range(n):
        row = {r: (None if rng.uniform() < missing else float(rng.uniform())) for r in IDS}
        if all(v is None for v in row.values()):
            row["goal"] = float(rng.uniform())
        truth = weighted_total(row, PLANTED)
        if truth is None:  # only "info" (weight 0) scored: the label follows it
            truth = row["info"]
        scores.append(row)
        labels.append(float(np.clip(truth + rng.normal(0, noise), 0, 1)))
    return scores, labels


# --- rubric weights --------------------------------------------------------------------------


def test_planted_weights_are_recovered_from_complete_scores():
    scores, labels = planted_rows(300, seed=1)
    weights = fit_rubric_weights(scores, labels, IDS)
    assert list(weights) == IDS
    assert sum(weights.values()) == pytest.approx(1.0)
    assert all(w >= 0 for w in weights.values())
    for rubric, planted in PLANTED.items():
        assert weights[rubric] == pytest.approx(planted, abs=0.05), rubric


def test_planted_weights_are_recovered_when_a_fifth_of_the_scores_are_missing():
    scores, labels = planted_rows(300, seed=2, missing=0.2)
    weights = fit_rubric_weights(scores, labels, IDS)
    for rubric, planted in PLANTED.items():
        assert weights[rubric] == pytest.approx(planted, abs=0.05), rubric


def test_a_rubric_scored_nowhere_gets_weight_zero_and_unusable_steps_are_left_out():
    scores, labels = planted_rows(100, seed=3)
    scores = [dict(row, judge_only=None) for row in scores]
    scores.append({r: None for r in IDS})  # no score at all: left out
    labels.append(1.0)
    scores.append({"goal": 0.2})  # no label: left out
    labels.append(None)
    weights = fit_rubric_weights(scores, labels, [*IDS, "judge_only"])
    assert weights["judge_only"] == 0.0
    assert weights["goal"] == pytest.approx(0.5, abs=0.05)


def test_a_negative_relation_is_not_given_a_negative_weight():
    rng = np.random.default_rng(4)
    good, bad = rng.uniform(size=80), rng.uniform(size=80)
    labels = np.clip(good - 0.5 * bad + 0.25, 0, 1)
    scores = [{"good": float(g), "bad": float(b)} for g, b in zip(good, bad, strict=True)]
    weights = fit_rubric_weights(scores, labels.tolist(), ["good", "bad"])
    assert weights["bad"] == 0.0 and weights["good"] == 1.0


def test_fit_rubric_weights_says_what_is_wrong():
    with pytest.raises(InputError, match="needs at least 2 labelled steps"):
        fit_rubric_weights([{"goal": 0.5}], [0.5], ["goal"])
    with pytest.raises(InputError, match="one human label per step: 2 steps, 1 labels"):
        fit_rubric_weights([{"goal": 0.5}, {"goal": 0.1}], [0.5], ["goal"])
    with pytest.raises(InputError, match="rubric 'goal' must be a number"):
        fit_rubric_weights([{"goal": "high"}, {"goal": 0.1}], [0.5, 0.2], ["goal"])


# --- the isotonic map ------------------------------------------------------------------------


def test_isotonic_fit_by_hand_and_against_scipy():
    # PAVA on 0, 2, 1, 3: the middle pair pools to 1.5
    fitted = fit_isotonic([0, 1, 2, 3], [0, 2, 1, 3])
    assert fitted.x == (0.0, 1.0, 2.0, 3.0) and fitted.y == (0.0, 1.5, 1.5, 3.0)
    assert fitted(0.5) == pytest.approx(0.75)  # linear between knots
    assert fitted(1.7) == pytest.approx(1.5)
    assert fitted(-4) == 0.0 and fitted(9) == 3.0  # clamped
    assert fitted(None) is None

    rng = np.random.default_rng(5)
    x = rng.uniform(size=200)
    y = x**2 + rng.normal(0, 0.1, size=200)
    fitted = fit_isotonic(x.tolist(), y.tolist())
    order = np.argsort(x)
    expected = isotonic_regression(y[order]).x
    assert fitted.apply(x[order]) == pytest.approx(expected, abs=1e-12)
    assert len(fitted.x) < 200  # flat blocks keep their two ends only
    assert list(fitted.y) == sorted(fitted.y)


def test_equal_model_scores_are_pooled():
    fitted = fit_isotonic([0.0, 0.0, 1.0, None], [1.0, 0.0, 2.0, 5.0])
    assert fitted.to_dict() == {"x": [0.0, 1.0], "y": [0.5, 2.0]}


def test_isotonic_map_round_trips_and_rejects_a_non_monotone_map():
    fitted = IsotonicMap([0.0, 0.5, 1.0], [0.1, 0.4, 0.9])
    assert IsotonicMap.from_dict(json.loads(json.dumps(fitted.to_dict()))) == fitted
    with pytest.raises(ConfigError, match="non-decreasing y"):
        IsotonicMap.from_dict({"x": [0, 1], "y": [1, 0]})
    with pytest.raises(ConfigError, match="strictly increasing x"):
        IsotonicMap([0, 0], [0, 1])
    with pytest.raises(ConfigError, match="equally long"):
        IsotonicMap([0, 1], [0])


# --- the calibration, applied ----------------------------------------------------------------


def test_calibration_step_total_reweights_then_maps_and_falls_back_to_the_raw_total():
    calibration = Calibration.from_dict(
        {
            "rubric_weights": {"goal": 0.75, "tool": 0.25, "info": 0.0},
            "isotonic": {"x": [0.0, 1.0], "y": [0.2, 0.8]},
            "n": 40,
        }
    )
    # (.75·.4 + .25·.8) / 1 = .5 → .2 + .6·.5
    assert calibration.step_total({"goal": 0.4, "tool": 0.8, "info": 1.0}, 0.9) == pytest.approx(
        0.5
    )
    # only goal scored: its score → .2 + .6·.6
    assert calibration.step_total({"goal": 0.6, "tool": None}, 0.1) == pytest.approx(0.56)
    # no rubric with a fitted weight scored: the raw total goes through the map
    assert calibration.step_total({"info": 1.0}, 0.5) == pytest.approx(0.5)
    assert calibration.step_total({}, None) is None
    with pytest.raises(ConfigError, match="rubric\\(s\\) tool that this reward model"):
        Calibration.from_dict({"rubric_weights": {"goal": 1, "tool": 0}}, ["goal"])
    with pytest.raises(ConfigError, match="every calibration weight is 0"):
        Calibration.from_dict({"rubric_weights": {"goal": 0}})


# --- fitting with cross-validation -----------------------------------------------------------


def test_the_isotonic_map_lowers_held_out_error_of_a_monotone_distorted_model():
    rng = np.random.default_rng(6)
    truth = rng.uniform(size=150)
    rows = [
        {"model": float(t**3), "human": float(np.clip(t + rng.normal(0, 0.05), 0, 1))}
        for t in truth
    ]
    result = fit_calibration(rows, [], n_resamples=200)
    assert result.rubric_weights == {} and result.n == 150 and result.folds == 5
    before, after = result.before["mae"], result.after["mae"]
    assert after.value < 0.5 * before.value
    assert after.high < before.low  # not an accident of the sample
    assert result.after["pearson"].value > result.before["pearson"].value
    # the rank statistics cannot change much under a monotone map (ties aside)
    assert result.after["spearman"].value == pytest.approx(
        result.before["spearman"].value, abs=0.02
    )


def test_fit_calibration_recovers_weights_and_beats_the_uncalibrated_total():
    scores, labels = planted_rows(200, seed=7)
    # the uncalibrated total: equal weights, squashed towards the middle
    raw = [0.25 + 0.5 * weighted_total(row, dict.fromkeys(IDS, 1.0)) for row in scores]
    rows = [
        {"rubrics": row, "model": model, "human": label}
        for row, model, label in zip(scores, raw, labels, strict=True)
    ]
    rows.append({"rubrics": {}, "model": None, "human": 0.3})  # skipped: no model score
    result = fit_calibration(rows, IDS, n_resamples=200)
    for rubric, planted in PLANTED.items():
        assert result.rubric_weights[rubric] == pytest.approx(planted, abs=0.05)
    assert result.after["mae"].value < result.before["mae"].value
    assert result.after["pearson"].low > result.before["pearson"].high
    assert (result.n, result.skipped) == (200, 1)

    stored = json.loads(json.dumps(result.to_dict()))
    assert set(stored) == {"rubric_weights", "isotonic", "n", "skipped", "cv"}
    assert stored["cv"]["folds"] == 5
    assert set(stored["cv"]["after"]["mae"]) == {"value", "low", "high", "n"}
    again = Calibration.from_dict(stored, IDS)
    assert again == result.calibration
    row = scores[0]
    assert again.step_total(row, raw[0]) == pytest.approx(
        result.isotonic(weighted_total(row, result.rubric_weights))
    )


def test_too_few_labels_say_how_many_are_needed():
    rows = [{"model": 0.5, "human": 0.5}] * 7 + [{"model": None, "human": 0.2}]
    with pytest.raises(InputError, match=f"at least {MIN_LABELS} labelled steps.*got 7") as error:
        fit_calibration(rows, [])
    assert "1 more lacked a label or a model score" in str(error.value)
    assert f"label {MIN_LABELS - 7} more" in str(error.value)
    with pytest.raises(InputError, match="outside 0..1"):
        fit_calibration([{"model": 0.5, "human": 4}] * 30, [])
    with pytest.raises(InputError, match="folds must be a whole number ≥ 2"):
        fit_calibration([{"model": 0.5, "human": 0.5}] * 30, [], folds=1)
