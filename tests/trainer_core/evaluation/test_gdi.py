"""GDI components from constructed inputs: knowlyr's shape (reward clamped, reuse on a log scale
saturating at 100 builds, neutral feedback 0.5, recency 1 / (1 + 0.05 × days)) and its default
weights; weights parsed from text, normalised, and refused with a message when wrong."""

from __future__ import annotations

import math

import pytest

from trainer_core.evaluation.gdi import DEFAULT_WEIGHTS, gdi, parse_weights

pytestmark = pytest.mark.sqlite


def test_each_component_from_constructed_inputs():
    fresh = gdi(reward=0.8, builds=0, feedback=[], age_days=0)
    assert (fresh.reward, fresh.reuse, fresh.feedback, fresh.recency) == (0.8, 0.0, 0.5, 1.0)
    assert fresh.total == pytest.approx(0.35 * 0.8 + 0.20 * 0.5 + 0.15 * 1.0)

    used = gdi(reward=1.7, builds=3, feedback=[1.0, 0.0, 1.0, 1.0], age_days=20)
    assert used.reward == 1.0  # clamped
    assert used.reuse == pytest.approx(math.log(4) / math.log(101), abs=1e-6)
    assert used.feedback == 0.75
    assert used.recency == 0.5  # 1 / (1 + 20 × 0.05)
    assert used.total == pytest.approx(
        0.35 * 1.0 + 0.30 * used.reuse + 0.20 * 0.75 + 0.15 * 0.5, abs=1e-6
    )
    assert gdi(reward=None, builds=500, feedback=[], age_days=-3).as_dict() | {"total": 0} == {
        "reward": 0.0, "reuse": 1.0, "feedback": 0.5, "recency": 1.0, "total": 0,
    }  # fmt: skip


def test_weights_are_parsed_normalised_and_refused_with_a_reason():
    assert parse_weights(None) == pytest.approx(DEFAULT_WEIGHTS)
    only_reward = parse_weights("reward=1, reuse=0, feedback=0, recency=0")
    assert only_reward == {"reward": 1.0, "reuse": 0.0, "feedback": 0.0, "recency": 0.0}
    assert gdi(reward=0.3, builds=9, feedback=[1.0], age_days=0, weights=only_reward).total == 0.3
    doubled = parse_weights({"reward": 0.7})  # the others keep their default; sum → 1
    assert sum(doubled.values()) == pytest.approx(1.0)
    assert doubled["reward"] == pytest.approx(0.7 / 1.35)
    for bad, message in [
        ("speed=1", "Unknown GDI component 'speed'"),
        ("reward", "write name=value"),
        ("reward=x", "is not a number"),
        ("reward=-1", "finite number ≥ 0"),
        ("reward=0,reuse=0,feedback=0,recency=0", "all 0"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_weights(bad)
