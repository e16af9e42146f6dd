"""Comparisons: each test against a direct scipy call on fixed data, McNemar and Holm against
values worked by hand, degenerate inputs (no crash, a note), and compare_runs' pairing."""

from __future__ import annotations

import json

import numpy as np
import pytest
from scipy import stats

from trainer_core.errors import InputError
from trainer_core.evaluation.compare import (
    adjust,
    apply_correction,
    compare_runs,
    mann_whitney,
    mcnemar,
    paired_bootstrap,
    paired_t,
    sign_test,
    welch_t,
    wilcoxon,
)
from trainer_core.evaluation.stats import EpisodeRecord

RNG = np.random.default_rng(11)
A = RNG.normal(0.5, 0.2, 25)
B = A + RNG.normal(0.08, 0.1, 25)  # b better than a, paired
C = RNG.normal(0.6, 0.3, 18)  # an unpaired group of another size


def test_paired_t_matches_scipy():
    r = paired_t(A, B)
    ref = stats.ttest_rel(B, A)
    ci = ref.confidence_interval(0.95)
    assert (r.statistic, r.p_value) == pytest.approx((ref.statistic, ref.pvalue))
    assert (r.low, r.high) == pytest.approx((ci.low, ci.high))
    assert r.effect == pytest.approx(np.mean(B - A)) and r.effect > 0
    assert r.n == 25 and r.significant is True


def test_wilcoxon_matches_scipy_and_handles_zero_differences():
    r = wilcoxon(A, B)
    ref = stats.wilcoxon(B, A)
    assert (r.statistic, r.p_value) == pytest.approx((ref.statistic, ref.pvalue))
    assert r.effect == pytest.approx(np.median(B - A))
    same = wilcoxon(A, A)
    assert same.p_value == 1.0 and same.significant is False and "zero" in same.note
    few = wilcoxon([0.0, 0.0, 0.0], [1.0, 1.0, 2.0])
    assert "cannot go below 0.05" in few.note


def test_welch_and_mann_whitney_match_scipy():
    r = welch_t(A, C)
    ref = stats.ttest_ind(C, A, equal_var=False)
    ci = ref.confidence_interval(0.95)
    assert (r.statistic, r.p_value, r.low, r.high) == pytest.approx(
        (ref.statistic, ref.pvalue, ci.low, ci.high)
    )
    assert r.effect == pytest.approx(C.mean() - A.mean()) and r.n == 43
    m = mann_whitney(A, C)
    ref = stats.mannwhitneyu(C, A, alternative="two-sided")
    assert (m.statistic, m.p_value) == pytest.approx((ref.statistic, ref.pvalue))
    assert m.effect == pytest.approx(2 * ref.statistic / (25 * 18) - 1)
    assert mann_whitney([1, 1], [1, 1, 1]).p_value == 1.0
    assert mann_whitney([0, 0, 0], [1, 1, 1]).effect == 1.0  # every b above every a
    assert welch_t([1.0, 1.0], [1.0, 1.0]).p_value == 1.0
    assert welch_t([1.0], [2.0, 3.0]).p_value is None


def test_mcnemar_worked_example():
    # 9 pairs only b solved, 1 only a solved, 5 both: exact two-sided p = 2 * (1 + 10) / 2**10
    a = [False] * 9 + [True] + [True] * 5
    b = [True] * 9 + [False] + [True] * 5
    r = mcnemar(a, b)
    assert r.p_value == pytest.approx(22 / 1024)
    assert r.statistic == 9 and r.n == 15
    assert r.effect == pytest.approx((9 - 1) / 15)
    assert r.significant is True
    reverse = mcnemar(b, a)
    assert reverse.p_value == pytest.approx(r.p_value) and reverse.effect == pytest.approx(
        -r.effect
    )
    assert mcnemar([True, False], [True, False]).p_value == 1.0
    assert "cannot go below" in mcnemar([False] * 3, [True] * 3).note
    with pytest.raises(InputError):
        mcnemar([True], [True, False])


def test_sign_test_on_zero_one_values_is_mcnemar():
    a = [0, 0, 1, 1, 0, 1, 0, 0]
    b = [1, 1, 1, 0, 1, 1, 1, 0]
    r, m = sign_test(a, b), mcnemar([bool(x) for x in a], [bool(x) for x in b])
    assert (r.p_value, r.effect) == pytest.approx((m.p_value, m.effect))
    # the effect counts wins, so its sign agrees with the test even where the mean does not
    w = sign_test([0, 0, 0, 1], [0.25, 0.25, 0.25, 0])
    assert w.effect == pytest.approx((3 - 1) / 4) and w.statistic == 3
    assert w.p_value == pytest.approx(stats.binomtest(3, 4).pvalue)


def test_paired_bootstrap_interval_matches_scipy_and_p_value_behaves():
    r = paired_bootstrap(A, B, seed=5)
    ref = stats.bootstrap(
        (A, B),
        lambda x, y, axis: np.mean(y, axis=axis) - np.mean(x, axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=2000,
        method="BCa",
        rng=np.random.default_rng(5),
    )
    assert (r.low, r.high) == pytest.approx(tuple(ref.confidence_interval), rel=1e-9)
    dist = ref.bootstrap_distribution
    expected_p = min(1.0, 2 * (min(np.sum(dist <= 0), np.sum(dist >= 0)) + 1) / 2001)
    assert r.p_value == pytest.approx(expected_p)
    assert r.effect == pytest.approx(np.mean(B - A)) and r.low < r.effect < r.high
    assert r.significant is True
    assert paired_bootstrap(A, B, seed=5) == r  # deterministic with a seed
    noise = np.random.default_rng(2).normal(0, 0.1, 25)
    null = paired_bootstrap(A, A + noise - noise.mean(), seed=1)  # mean difference exactly 0
    assert null.p_value > 0.2 and null.low < 0 < null.high
    same = paired_bootstrap(A, A)
    assert same.p_value == 1.0 and same.low == same.high == 0.0
    one = paired_bootstrap([1.0], [2.0])
    assert one.p_value is None and "at least 2" in one.note
    assert "only 3 pairs" in paired_bootstrap([0, 1, 0], [1, 1, 0.5]).note


def test_constant_and_tiny_inputs_do_not_crash():
    t = paired_t([1.0, 2.0, 3.0], [2.0, 3.0, 4.0])
    assert t.p_value is None and "undefined" in t.note
    assert paired_t([1.0, 2.0], [1.0, 2.0]).p_value == 1.0
    assert wilcoxon([], []).p_value is None
    with pytest.raises(InputError):
        paired_t([1.0, 2.0], [1.0])
    with pytest.raises(InputError):
        welch_t([1.0, float("nan")], [1.0, 2.0])


def test_holm_hand_worked():
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> running max 0.06
    assert adjust([0.01, 0.04, 0.03, 0.005], "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert adjust([0.01, None, 0.04, 0.03, 0.005], "holm") == pytest.approx(
        [0.03, None, 0.06, 0.06, 0.02]
    )
    assert adjust([0.5, 0.9], "holm") == [1.0, 1.0]
    assert adjust([0.01, None, 0.2], "bonferroni") == pytest.approx([0.02, None, 0.4])
    assert adjust([0.01, None], "none") == [0.01, None]
    assert adjust([None], "holm") == [None]
    with pytest.raises(InputError, match="holm"):
        adjust([0.1], "bh")
    with pytest.raises(InputError):
        adjust([1.5], "holm")


def test_apply_correction_sets_significance_from_adjusted_p():
    results = [mcnemar([False] * 9 + [True], [True] * 9 + [False]), paired_t(A, B), welch_t(A, C)]
    corrected = apply_correction(results, "bonferroni", alpha=0.05)
    assert corrected[0].p_adjusted == pytest.approx(3 * results[0].p_value)  # 0.064
    assert corrected[0].significant is False and results[0].significant is True
    assert corrected[0].p_value == results[0].p_value


def _run(success_by_task: dict[str, list[int]], reward_shift: float | None = 0.0):
    return [
        EpisodeRecord(
            t, bool(ok), reward=None if reward_shift is None else ok + reward_shift + 0.01 * i
        )
        for t, outcomes in success_by_task.items()
        for i, ok in enumerate(outcomes)
    ]


def test_compare_runs_pairs_by_task_and_corrects_all_tests():
    a = _run({"t1": [0, 1], "t2": [1, 0], "t3": [1, 1], "only_a": [1]})
    b = _run({"t1": [1, 1], "t2": [0, 1], "t3": [1, 1], "only_b1": [0], "only_b2": [0]}, 0.1)
    c = compare_runs(a, b, seed=3)
    assert (c.shared_tasks, c.only_a, c.only_b) == (3, 1, 2)
    assert c.metric == "reward" and c.correction == "holm"
    assert [r.n for r in c.paired] == [3, 6, 3, 3]  # 3 shared tasks; 6 paired episodes
    mc = c.paired[1]
    # episode i pairs with episode i: t1 #0 and t2 #1 only b solved, t2 #0 only a solved
    assert mc.statistic == 2 and mc.effect == pytest.approx((2 - 1) / 6)
    assert c.paired[2].effect == pytest.approx(np.mean([0.6, 0.1, 0.1]))
    assert [r.n for r in c.unpaired] == [7 + 8, 7 + 8]
    everything = [*c.paired, *c.unpaired]
    expected = adjust([r.p_value for r in everything], "holm")
    assert [r.p_adjusted for r in everything] == pytest.approx(expected)
    assert all(r.significant is (r.p_adjusted < 0.05) for r in everything if r.p_value is not None)
    assert all("only 3 pairs" in r.note for r in (c.paired[0], c.paired[2]))
    json.dumps(c.as_dict())


def test_compare_runs_falls_back_to_success_and_handles_no_shared_tasks():
    a = _run({"t1": [0, 1], "t2": [0]}, None)
    b = _run({"t1": [1, 1], "t2": [1]})
    c = compare_runs(a, b)
    assert c.metric == "success"
    assert c.paired[0].effect == pytest.approx(np.mean([0.5, 1.0]))
    with pytest.raises(InputError, match="reward"):
        compare_runs(a, b, metric="reward")
    disjoint = compare_runs(_run({"x": [1, 0]}), _run({"y": [1, 1]}), correction="none")
    assert disjoint.shared_tasks == 0
    assert all(r.p_value is None and r.note for r in disjoint.paired)
    assert disjoint.unpaired[0].n == 4
    with pytest.raises(InputError):
        compare_runs([], b)
    with pytest.raises(InputError):
        compare_runs(a, b, correction="fdr")
