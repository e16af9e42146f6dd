"""Evaluation statistics: Wilson against scipy and a published value, pass@k / pass^k against
brute-force enumeration of k-subsets, the bootstrap against a direct scipy call, summaries."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from scipy import stats

from trainer_core.errors import InputError
from trainer_core.evaluation.stats import (
    EpisodeRecord,
    bootstrap_mean_interval,
    mean_pass_at_k,
    mean_pass_hat_k,
    pass_at_k,
    pass_hat_k,
    summarize,
    wilson_interval,
)


def test_wilson_known_value():
    low, high = wilson_interval(8, 10)
    assert low == pytest.approx(0.4902, abs=5e-5)
    assert high == pytest.approx(0.9433, abs=5e-5)


@pytest.mark.parametrize("confidence", [0.8, 0.9, 0.95, 0.99])
@pytest.mark.parametrize(
    ("successes", "n"), [(0, 1), (1, 1), (0, 7), (3, 7), (7, 7), (1, 250), (123, 250)]
)
def test_wilson_matches_scipy(successes, n, confidence):
    ci = stats.binomtest(successes, n).proportion_ci(confidence_level=confidence, method="wilson")
    assert wilson_interval(successes, n, confidence) == pytest.approx((ci.low, ci.high), abs=1e-12)


def test_wilson_edges_and_errors():
    assert wilson_interval(0, 0) == (0.0, 1.0)
    assert wilson_interval(0, 5)[0] == 0.0
    assert wilson_interval(5, 5)[1] == 1.0
    assert wilson_interval(8, 10, 0.99)[0] < wilson_interval(8, 10, 0.9)[0]
    for args in [(11, 10), (-1, 10), (1, -1)]:
        with pytest.raises(InputError):
            wilson_interval(*args)
    with pytest.raises(InputError, match="confidence"):
        wilson_interval(1, 2, 1.5)
    with pytest.raises(InputError, match="whole number"):
        wilson_interval(1.5, 2)


def _brute(n: int, c: int, k: int, combine) -> float:
    outcomes = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(outcomes, k))
    return sum(combine(s) for s in subsets) / len(subsets)


def test_pass_at_k_and_pass_hat_k_match_enumeration():
    for n in range(1, 8):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert pass_at_k(n, c, k) == pytest.approx(_brute(n, c, k, any), abs=1e-12)
                assert pass_hat_k(n, c, k) == pytest.approx(_brute(n, c, k, all), abs=1e-12)


def test_pass_at_1_is_success_rate_and_large_n_is_stable():
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_hat_k(10, 3, 1) == pytest.approx(0.3)
    exact = 1 - math.comb(990, 100) / math.comb(1000, 100)
    assert pass_at_k(1000, 10, 100) == pytest.approx(exact, rel=1e-12)
    assert pass_hat_k(1000, 900, 100) == pytest.approx(
        math.comb(900, 100) / math.comb(1000, 100), rel=1e-9
    )


def test_pass_at_k_rejects_bad_counts():
    with pytest.raises(InputError, match="k=5 needs at least 5 samples"):
        pass_at_k(3, 1, 5)
    with pytest.raises(InputError):
        pass_hat_k(3, 4, 1)
    with pytest.raises(InputError):
        pass_at_k(0, 0, 1)
    with pytest.raises(InputError):
        pass_at_k(3, 1, 0)


def test_mean_pass_over_tasks():
    per_task = [(5, 0), (5, 2), (5, 5)]
    assert mean_pass_at_k(per_task, 2) == pytest.approx((0 + 0.7 + 1) / 3)
    assert mean_pass_hat_k(per_task, 2) == pytest.approx((0 + 0.1 + 1) / 3)
    with pytest.raises(InputError):
        mean_pass_at_k([], 1)


def test_bootstrap_mean_interval_matches_scipy_and_is_seeded():
    values = np.random.default_rng(3).exponential(size=40)
    expected = stats.bootstrap(
        (values,),
        np.mean,
        n_resamples=2000,
        confidence_level=0.9,
        method="BCa",
        rng=np.random.default_rng(7),
    ).confidence_interval
    low, high = bootstrap_mean_interval(values, confidence=0.9, seed=7)
    assert (low, high) == pytest.approx((expected.low, expected.high), rel=1e-9)
    assert low < values.mean() < high
    assert bootstrap_mean_interval(values, seed=7) == bootstrap_mean_interval(values, seed=7)
    assert bootstrap_mean_interval(values, seed=7) != bootstrap_mean_interval(values, seed=8)


def test_bootstrap_mean_interval_degenerate_inputs():
    assert bootstrap_mean_interval([0.25]) == (0.25, 0.25)
    assert bootstrap_mean_interval([1.0] * 30) == (1.0, 1.0)
    low, high = bootstrap_mean_interval([0.0] * 29 + [1.0])  # almost constant: no crash, no NaN
    assert 0.0 <= low <= 1 / 30 <= high <= 1.0
    with pytest.raises(InputError):
        bootstrap_mean_interval([])
    with pytest.raises(InputError):
        bootstrap_mean_interval([1.0, float("nan")])


def _episodes() -> list[EpisodeRecord]:
    # task a: 3 samples, 2 succeed; task b: 2 samples, 0 succeed; task c: 4 samples, 4 succeed
    spec = {"a": [1, 1, 0], "b": [0, 0], "c": [1, 1, 1, 1]}
    out = []
    for task, results in spec.items():
        for i, ok in enumerate(results):
            out.append(
                EpisodeRecord(
                    task, bool(ok), reward=0.5 * ok + 0.1 * i, steps=2 + i, tokens=100, cost=0.01
                )
            )
    return out


def test_summarize_counts_intervals_and_pass_k():
    episodes = _episodes()
    s = summarize(episodes, k=3)
    assert (s.n, s.successes, s.tasks, s.k) == (9, 6, 3, 3)
    assert s.success_rate == pytest.approx(6 / 9)
    assert (s.success_low, s.success_high) == pytest.approx(wilson_interval(6, 9))
    rewards = [e.reward for e in episodes]
    assert s.mean_reward == pytest.approx(np.mean(rewards))
    assert (s.reward_low, s.reward_high) == pytest.approx(bootstrap_mean_interval(rewards))
    # task b has only 2 samples, so pass@3 is not estimable for every task and is left out
    assert sorted(s.pass_at_k) == [1, 2] and sorted(s.pass_hat_k) == [1, 2]
    assert s.pass_at_k[1] == pytest.approx((2 / 3 + 0 + 1) / 3)
    assert s.pass_at_k[2] == pytest.approx((1.0 + 0 + 1) / 3)
    assert s.pass_hat_k[2] == pytest.approx((1 / 3 + 0 + 1) / 3)
    assert s.mean_steps == pytest.approx(np.mean([e.steps for e in episodes]))
    assert (s.mean_tokens, s.mean_cost) == pytest.approx((100, 0.01))
    assert s.per_task == {"a": (3, 2), "b": (2, 0), "c": (4, 4)}
    assert json.loads(json.dumps(s.as_dict()))["pass_at_k"]["2"] == pytest.approx(s.pass_at_k[2])


def test_summarize_without_rewards_and_errors():
    s = summarize([EpisodeRecord("t", True), EpisodeRecord("t", False, reward=None)], k=1)
    assert s.mean_reward is s.reward_low is s.reward_high is None
    assert s.rewarded == 0 and s.pass_at_k == {1: 0.5}
    with pytest.raises(InputError):
        summarize([], k=1)
    with pytest.raises(InputError):
        summarize(_episodes(), k=0)
    with pytest.raises(InputError, match="finite"):
        EpisodeRecord("t", True, reward=float("inf"))
