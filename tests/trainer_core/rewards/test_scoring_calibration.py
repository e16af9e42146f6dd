"""A calibration in the reward config: fitted rubric weights and the monotone map change the step
totals; the uncalibrated total stays available; the snapshot and fingerprint carry it."""

from __future__ import annotations

import json

import pytest

from tests.trainer_core.policies.fake_llm_servers import FakeLLMServer
from tests.trainer_core.rewards.test_scoring import (
    JUDGED,
    KEY_ENV,
    _answers,
    _judge,
    coding_trajectory,
)
from trainer_core.calibration.fit import fit_calibration
from trainer_core.errors import ConfigError
from trainer_core.rewards.rubrics import rubric_set
from trainer_core.rewards.scoring import RewardConfig, score_trajectory

# rules alone score the coding trajectory: info_utilization [1, 1, 1, .7],
# non_redundancy [1, 0, 1, 1]; uncalibrated step totals [1, .5, 1, .85]
RAW_TOTALS = [1.0, 0.5, 1.0, 0.85]
CALIBRATION = {
    "rubric_weights": {"info_utilization": 1.0, "non_redundancy": 0.0},
    "isotonic": {"x": [0.0, 1.0], "y": [0.2, 0.8]},
    "n": 40,
}


def calibrated(calibration=CALIBRATION, **overrides) -> RewardConfig:
    return RewardConfig.for_profile("coding", calibration=calibration, **overrides)


def test_fitted_weights_and_the_map_give_the_step_totals():
    result = score_trajectory(coding_trajectory(), calibrated(), reference_steps=3)
    # info_utilization alone, through .2 + .6·v
    assert [s.total for s in result.steps] == pytest.approx([0.8, 0.8, 0.8, 0.62])
    assert [s.raw_total for s in result.steps] == pytest.approx(RAW_TOTALS)
    assert result.process == pytest.approx((0.8 * 3 + 0.62) / 4)
    # total = .4·outcome(.75) + .5·process + .1·efficiency(.75)
    assert result.total == pytest.approx(0.3 + 0.5 * 0.755 + 0.075)
    data = json.loads(json.dumps(result.to_dict()))
    assert data["steps"][1]["raw_total"] == 0.5 and data["steps"][1]["total"] == 0.8


def test_without_a_calibration_raw_total_is_the_total_and_the_snapshot_is_unchanged():
    config = RewardConfig.for_profile("coding")
    result = score_trajectory(coding_trajectory(), config)
    assert [s.total for s in result.steps] == [s.raw_total for s in result.steps]
    assert [s.total for s in result.steps] == pytest.approx(RAW_TOTALS)
    assert "calibration" not in config.to_dict() and not config.calibrated
    assert RewardConfig.for_profile("coding", calibration={}).calibration is None


def test_a_step_with_no_fitted_rubric_scored_keeps_its_raw_total_through_the_map():
    # the fitted weight sits on a model rubric and no judge runs: every step falls back
    config = calibrated({"rubric_weights": {"goal_progress": 1.0}, **_map(0.1, 0.9)})
    result = score_trajectory(coding_trajectory(), config)
    assert [s.total for s in result.steps] == pytest.approx([0.1 + 0.8 * t for t in RAW_TOTALS])


def test_a_map_alone_keeps_the_versions_weights_and_layers():
    config = calibrated({"rubric_weights": {}, **_map(0.0, 0.5)})
    result = score_trajectory(coding_trajectory(), config)
    assert [s.total for s in result.steps] == pytest.approx([0.5 * t for t in RAW_TOTALS])


def _map(low: float, high: float) -> dict:
    return {"isotonic": {"x": [0.0, 1.0], "y": [low, high]}}


def test_the_snapshot_round_trips_and_the_fingerprint_changes():
    config = calibrated()
    data = json.loads(json.dumps(config.to_dict()))
    assert data["calibration"] == CALIBRATION
    again = RewardConfig.from_dict(data)
    assert again == config and again.fingerprint() == config.fingerprint()
    assert again.calibrated
    plain = RewardConfig.for_profile("coding")
    assert config.fingerprint() != plain.fingerprint()
    moved = calibrated({**CALIBRATION, **_map(0.2, 0.9)})
    assert moved.fingerprint() != config.fingerprint()


@pytest.mark.parametrize(
    ("calibration", "message"),
    [
        ({"rubric_weights": {"tone": 1.0}}, "rubric\\(s\\) tone that this reward model"),
        ({"rubric_weights": {"info_utilization": -1}}, "must be a number ≥ 0"),
        ({"isotonic": {"x": [0, 1], "y": [0.9, 0.1]}}, "non-decreasing y"),
        ({"isotonic": [0, 1]}, 'an isotonic map is {"x"'),
        ("linear", "calibration is a mapping"),
    ],
)
def test_invalid_calibrations_are_config_errors(calibration, message):
    with pytest.raises(ConfigError, match=message):
        calibrated(calibration)


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-scoring-test")
    with FakeLLMServer() as fake:
        yield fake


def test_a_model_rubric_weighted_only_by_the_calibration_is_still_judged(server):
    server.enqueue(*[_answers(JUDGED)] * 4)
    rubrics = rubric_set("coding", {"goal_progress": 0.0, "info_utilization": 1.0})
    config = RewardConfig(
        rubrics=rubrics,
        profile="coding",
        calibration={"rubric_weights": {"goal_progress": 1.0}},
    )
    result = score_trajectory(coding_trajectory(), config, judge=_judge(server))
    assert "goal_progress" in server.requests[0].json["system"]
    # the goal_progress scores alone make the totals; the raw totals ignore them (weight 0)
    assert [s.total for s in result.steps] == [0.5, 0.0, 1.0, 1.0]
    assert [s.raw_total for s in result.steps] == pytest.approx([1.0, 1.0, 1.0, 0.7])


def test_a_fitted_calibration_applies_in_scoring():
    rows = [
        {
            "rubrics": {"info_utilization": i / 29, "non_redundancy": 1.0 - i / 29},
            "model": 0.5,
            "human": i / 29,
        }
        for i in range(30)
    ]
    result = fit_calibration(rows, ["info_utilization", "non_redundancy"], n_resamples=100)
    assert result.rubric_weights["info_utilization"] == pytest.approx(1.0, abs=0.01)
    config = calibrated(result.to_dict())
    scored = score_trajectory(coding_trajectory(), config)
    # the fitted map is close to the identity on info_utilization
    assert [s.total for s in scored.steps] == pytest.approx([1.0, 1.0, 1.0, 0.7], abs=0.04)
