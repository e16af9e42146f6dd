"""The advantage estimators: hand-computed groups, the worked DeepSeekMath example, and their
invariants as properties (hypothesis)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trainer_core.errors import ConfigError
from trainer_core.training.advantages import (
    ESTIMATORS,
    estimate,
    mixed_advantages,
    outcome_advantages,
    process_advantages,
)

TOL = 1e-4


def _approx(rows):
    return [pytest.approx(r, abs=TOL) for r in rows]


def test_a_group_whose_steps_all_score_the_same_gives_zero_everywhere():
    """[[1, 1]] × 4 (the demo's rule scores on arithmetic): nothing to learn, 0 everywhere. The
    old step-level estimator gave every submit step of [[1, 2]] × 4 −10,000: now the outcome
    estimator gives 0, and process supervision gives the four identical samples identical
    advantages — the later, higher-scored step up (DeepSeekMath's formula), never ±10,000."""
    rewards = [1.0] * 4
    same = [[1.0, 1.0]] * 4
    for name in ESTIMATORS:
        assert estimate(name, rewards, same) == [[0.0, 0.0]] * 4, name
    steps = [[1.0, 2.0]] * 4
    assert estimate("outcome", rewards, steps) == [[0.0, 0.0]] * 4
    process = estimate("process", rewards, steps)
    assert all(row == process[0] for row in process)
    assert process[0][0] == pytest.approx(0.0, abs=TOL) and 0 < process[0][1] < 1


def test_successes_get_positive_and_failures_negative_advantages():
    """Two successes and two failures, each with a calculator step and a submit step."""
    rewards = [1.0, 1.0, 0.0, 0.0]
    steps = [[1.0, 1.0], [1.0, 1.0], [1.0, 0.0], [0.0, 0.0]]
    for name in ("outcome", "mixed"):
        rows = estimate(name, rewards, steps)
        assert all(a > 0 for a in rows[0] + rows[1]), name
        assert rows[2][-1] < 0 and rows[3][-1] < 0, name
    # outcome: (R - 0.5) / std, std = sqrt(1/3) (unbiased)
    a = 0.5 / math.sqrt(1 / 3)
    assert estimate("outcome", rewards, steps) == _approx([[a, a], [a, a], [-a, -a], [-a, -a]])


def test_deepseekmath_process_supervision_worked_example():
    """Two samples, step rewards [1, 0] and [0.5]: mean over all three 0.5, unbiased std 0.5;
    normalised [1, −1] and [0]; advantages = the sums from each step on: [0, −1] and [0]."""
    assert process_advantages([[1.0, 0.0], [0.5]]) == _approx([[0.0, -1.0], [0.0]])
    # an unscored step takes no part and contributes 0
    assert process_advantages([[1.0, None, 0.0], [0.5]]) == _approx([[0.0, -1.0, -1.0], [0.0]])
    # mixed: the outcome advantage plus the weighted process one, step by step
    rows = mixed_advantages([1.0, 0.0], [[1.0, 0.0], [0.5]], process_weight=0.5)
    a = 0.5 / math.sqrt(0.5)
    assert rows == _approx([[a + 0.0, a - 0.5], [-a + 0.0]])


def test_dr_grpo_drops_the_std_and_bad_input_is_refused():
    assert outcome_advantages([1.0, 0.0, 0.0, 1.0], scale=False) == _approx([0.5, -0.5, -0.5, 0.5])
    assert outcome_advantages([0.7]) == [0.0]
    with pytest.raises(ConfigError, match="one each"):
        estimate("outcome", [1.0], [[0.0], [1.0]])
    with pytest.raises(ConfigError, match="unknown advantage estimator"):
        estimate("reward_to_go", [1.0, 0.0], [[0.0], [1.0]])


# --- invariants, as properties --------------------------------------------------------------------

# Rewards on a 0.05 grid in [-5, 5]: distinct values differ enough that the 1e-8 added to the
# std cannot show at 1e-4.
rewards_st = st.integers(min_value=-100, max_value=100).map(lambda k: k / 20)


@st.composite
def groups(draw):
    size = draw(st.integers(min_value=2, max_value=6))
    lengths = [draw(st.integers(min_value=1, max_value=5)) for _ in range(size)]
    rewards = [draw(rewards_st) for _ in range(size)]
    steps = [[draw(rewards_st) for _ in range(n)] for n in lengths]
    return rewards, steps


def _close(a, b) -> bool:
    return all(
        len(x) == len(y) and all(abs(p - q) <= TOL for p, q in zip(x, y, strict=True))
        for x, y in zip(a, b, strict=True)
    )


@settings(max_examples=200, deadline=None)
@given(groups(), st.sampled_from(ESTIMATORS))
def test_adding_a_constant_to_every_reward_changes_nothing(group, name):
    rewards, steps = group
    shifted_r = [r + 3.25 for r in rewards]
    shifted_s = [[s + 3.25 for s in row] for row in steps]
    assert _close(estimate(name, rewards, steps), estimate(name, shifted_r, shifted_s))


@settings(max_examples=200, deadline=None)
@given(groups(), st.sampled_from(ESTIMATORS), st.sampled_from([0.5, 2.0, 7.0]))
def test_scaling_every_reward_changes_nothing_where_std_normalised(group, name, factor):
    rewards, steps = group
    scaled_r = [r * factor for r in rewards]
    scaled_s = [[s * factor for s in row] for row in steps]
    assert _close(estimate(name, rewards, steps), estimate(name, scaled_r, scaled_s))


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=2, max_value=6), st.integers(min_value=1, max_value=5), rewards_st)
def test_one_reward_everywhere_gives_exactly_zero(size, length, value):
    rewards = [value] * size
    steps = [[value] * length for _ in range(size)]
    for name in ESTIMATORS:
        assert estimate(name, rewards, steps) == [[0.0] * length] * size


@settings(max_examples=200, deadline=None)
@given(groups())
def test_identical_samples_give_zero_under_outcome(group):
    rewards, steps = group
    size = len(rewards)
    same = estimate("outcome", [rewards[0]] * size, [steps[0]] * size)
    assert same == [[0.0] * len(steps[0])] * size


@settings(max_examples=200, deadline=None)
@given(groups())
def test_outcome_advantages_sum_to_zero_and_process_is_a_reward_to_go(group):
    rewards, steps = group
    assert abs(sum(outcome_advantages(rewards))) <= TOL
    rows = process_advantages(steps)
    for row in rows:  # A_t - A_{t+1} is step t's own normalised reward: the sums run forward
        assert len(row) == len({*range(len(row))})
    flat = [s for row in steps for s in row]
    if max(flat) != min(flat):
        # the first steps' advantages sum every normalised reward, which sum to zero
        assert abs(sum(row[0] for row in rows)) <= TOL
