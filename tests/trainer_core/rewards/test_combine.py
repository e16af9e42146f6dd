"""Combining rubric scores into step totals, and parts into a trajectory total."""

from __future__ import annotations

import pytest

from trainer_core.errors import ConfigError
from trainer_core.rewards.combine import (
    LayerWeights,
    TotalWeights,
    process_score,
    step_total,
    trajectory_total,
)
from trainer_core.rewards.rubrics import Rubric, rubric_set

CODING_RUBRICS = rubric_set("coding")  # goal .3, tool .2, param .2 (model); info .15, nonred .15


def test_step_total_hand_computed():
    scores = {
        "goal_progress": 0.8,  # model, weight .30
        "tool_selection": 1.0,  # model, weight .20
        "param_correctness": None,  # model, unscored: left out of both sums
        "info_utilization": 0.7,  # rule, weight .15
        "non_redundancy": 0.0,  # rule, weight .15
    }
    layers = LayerWeights(rule=0.6, model=0.4)
    # numerator:   .30*.4*.8 + .20*.4*1.0 + .15*.6*.7 + .15*.6*0.0
    #            = .096      + .080       + .063      + 0        = .239
    # denominator: .30*.4 + .20*.4 + .15*.6 + .15*.6 = .12 + .08 + .09 + .09 = .38
    assert step_total(scores, CODING_RUBRICS, layers) == pytest.approx(0.239 / 0.38)
    assert step_total(scores, CODING_RUBRICS, layers) == pytest.approx(0.6289473684)


def test_layer_weights_change_the_total():
    scores = {"info_utilization": 1.0, "goal_progress": 0.0}
    rubrics = [
        Rubric("goal_progress", "", "model", 0.5),
        Rubric("info_utilization", "", "rule", 0.5),
    ]
    # equal rubric weights: the layer weights decide: .6*1 / (.6 + .4) = .6
    assert step_total(scores, rubrics, LayerWeights(rule=0.6, model=0.4)) == pytest.approx(0.6)
    # model layer off: only the rule rubric counts
    assert step_total(scores, rubrics, LayerWeights(rule=1.0, model=0.0)) == 1.0


def test_step_total_human_layer_and_unknown_ids():
    rubrics = [Rubric("a", "", "human", 1.0), Rubric("b", "", "rule", 1.0)]
    # human 1.0 vs rule .6: (1.0*1.0*0.5 + 1.0*.6*1.0) / (1.0 + .6) = 1.1 / 1.6
    total = step_total({"a": 0.5, "b": 1.0, "not-a-rubric": 0.0}, rubrics, LayerWeights())
    assert total == pytest.approx(1.1 / 1.6)


def test_step_total_none_when_nothing_is_scored():
    assert step_total({}, CODING_RUBRICS, LayerWeights()) is None
    assert step_total({"goal_progress": None}, CODING_RUBRICS, LayerWeights()) is None
    zero = [Rubric("a", "", "rule", 0.0)]
    assert step_total({"a": 1.0}, zero, LayerWeights()) is None


def test_trajectory_total_hand_computed():
    # .4*1.0 + .5*.6289 + .1*.5 = .4 + .31447 + .05 = .76447
    total = trajectory_total(1.0, 0.6289473684, 0.5, TotalWeights())
    assert total == pytest.approx(0.4 + 0.5 * 0.6289473684 + 0.05)


def test_trajectory_total_renormalises_over_existing_parts():
    # no efficiency: (.4*1.0 + .5*.5) / (.4 + .5) = .65 / .9
    assert trajectory_total(1.0, 0.5, None) == pytest.approx(0.65 / 0.9)
    # only process: the process itself
    assert trajectory_total(None, 0.3, None) == pytest.approx(0.3)
    assert trajectory_total(None, None, None) is None
    # a part with weight 0 is left out even when known
    weights = TotalWeights(outcome=1.0, process=0.0, efficiency=0.0)
    assert trajectory_total(0.2, 0.9, 0.9, weights) == pytest.approx(0.2)
    assert trajectory_total(None, 0.9, 0.9, weights) is None


def test_process_is_the_mean_of_existing_step_totals():
    assert process_score([1.0, None, 0.5, 0.0]) == pytest.approx(0.5)
    assert process_score([None, None]) is None
    assert process_score([]) is None


@pytest.mark.parametrize(
    "kwargs",
    [{"rule": -0.1}, {"rule": 0, "model": 0, "human": 0}, {"model": float("nan")}, {"rule": "a"}],
)
def test_invalid_layer_weights(kwargs):
    with pytest.raises(ConfigError):
        LayerWeights(**kwargs)


def test_invalid_total_weights_and_dicts():
    with pytest.raises(ConfigError, match="all 0"):
        TotalWeights(outcome=0, process=0, efficiency=0)
    with pytest.raises(ConfigError, match="unknown layer weight"):
        LayerWeights.from_dict({"rules": 1.0})
    assert LayerWeights.from_dict({"model": 0.5}) == LayerWeights(rule=0.6, model=0.5, human=1.0)
    assert TotalWeights.from_dict(None) == TotalWeights()
    assert TotalWeights().to_dict() == {"outcome": 0.4, "process": 0.5, "efficiency": 0.1}
