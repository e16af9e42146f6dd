"""The learning protocol's table: per-seed and pooled rates with Wilson intervals, exact McNemar
pooled over (seed, task) pairs, Holm over the family, and a plain verdict."""

from __future__ import annotations

import pytest
from scipy import stats

from trainer_core.errors import InputError
from trainer_core.evaluation.protocol import protocol_report, verdict


def _outcomes(pattern: dict[int, str]) -> dict[int, dict[str, bool]]:
    return {seed: {f"t{i}": c == "1" for i, c in enumerate(bits)} for seed, bits in pattern.items()}


def test_pooled_mcnemar_counts_every_seed_task_pair_and_holm_corrects_the_family():
    results = {
        "base": _outcomes({0: "0000000000", 1: "0000000000"}),
        "SFT": _outcomes({0: "1111000000", 1: "1110000000"}),
        "GRPO": _outcomes({0: "1111110000", 1: "0111111100"}),
    }
    report = protocol_report(results, suite="arithmetic")
    assert [s.pooled.successes for s in report.stages] == [0, 7, 13]
    sft = report.stage("SFT")
    assert sft.per_seed[0].successes == 4 and sft.pooled.n == 20
    low, high = stats.binomtest(7, 20).proportion_ci(method="wilson")
    assert sft.pooled.low == pytest.approx(low) and sft.pooled.high == pytest.approx(high)
    step = report.comparison("SFT", "GRPO")
    # seed 0: 2 gained, 0 lost; seed 1: 5 gained (t3..t7), 1 lost (t0)
    assert (step.per_seed[1].gains, step.per_seed[1].losses) == (5, 1)
    assert (step.pooled.gains, step.pooled.losses) == (7, 1)
    assert step.pooled.p_value == pytest.approx(stats.binomtest(7, 8, 0.5).pvalue)
    assert step.pooled.effect == pytest.approx(7 / 20 - 1 / 20)
    ps = sorted(c.pooled.p_value for c in report.comparisons)
    assert len(report.comparisons) == 3  # SFT vs base, GRPO vs SFT, GRPO vs base
    assert min(c.pooled.p_adjusted for c in report.comparisons) == pytest.approx(ps[0] * 3)
    assert "not significant" in verdict(step)  # 7 vs 1 discordant: p = 0.07
    assert "significantly better" in verdict(report.comparison("base", "GRPO"))
    text = "\n".join(report.lines())
    assert "seed 0" in text and "Holm" in text and "GRPO is significantly better than base" in text


def test_stages_must_share_seeds_and_tasks():
    good = _outcomes({0: "10"})
    with pytest.raises(InputError, match="same tasks"):
        protocol_report({"a": good, "b": {0: {"t0": True, "t9": False}}}, suite="s")
    with pytest.raises(InputError, match="seeds"):
        protocol_report({"a": good, "b": _outcomes({1: "10"})}, suite="s")


def test_an_evaluation_cut_short_is_compared_on_the_tasks_every_stage_played_and_said_so():
    results = {
        "SFT": _outcomes({0: "1100"}),
        "GRPO": {0: {"t0": True, "t1": True, "t2": True}},  # t3 never played
    }
    report = protocol_report(results, suite="s", common_tasks=True)
    assert report.stage("SFT").pooled.n == 3 and report.stage("GRPO").pooled.successes == 3
    assert report.notes == [
        "seed 0: 1 of SFT's tasks left out: not every stage played them (only 3 tasks compared)"
    ]
    assert "note: seed 0: 1 of SFT's tasks left out" in "\n".join(report.lines())
