"""Reward-hacking flags (issue 21): each flag fires on a constructed run that has its pattern and
stays quiet on one that has not; the settings are validated with messages that name the field."""

from __future__ import annotations

import random

import pytest

from trainer_core.errors import ConfigError
from trainer_core.evaluation.flags import (
    Episode,
    FlagConfig,
    compute_flags,
    config_from_dict,
    fired_counts,
)

STEPS = range(1, 17)  # two windows of the default 8 steps


def _episodes(
    *,
    process=lambda step, i, rng: 0.5 + rng.uniform(-0.05, 0.05),
    success=lambda step, i, rng: i % 2 == 0,
    actions=lambda step, i: ("calculator(1+1)", "submit(2)"),
    layers=None,
    per_step: int = 6,
    seed: int = 0,
) -> list[Episode]:
    rng = random.Random(seed)
    out = []
    for step in STEPS:
        for i in range(per_step):
            acts = actions(step, i)
            judge, rules = layers(step, i, rng) if layers else ((), ())
            out.append(
                Episode(
                    id=step * 100 + i,
                    step=step,
                    success=success(step, i, rng),
                    process=process(step, i, rng),
                    length=len(acts),
                    actions=tuple(acts),
                    tools=tuple(a.split("(")[0] for a in acts),
                    judge=judge,
                    rules=rules,
                )
            )
    return out


def _fired(results, kind, metric=None):
    return [
        r for r in results if r.kind == kind and r.fired and (metric is None or r.metric == metric)
    ]


def _flat_success():
    rng = random.Random(1)
    return [{"step": s, "success_rate": 0.5 + rng.uniform(-0.03, 0.03)} for s in STEPS]


def test_process_rising_while_success_is_flat_fires_and_names_its_samples():
    rising = _episodes(process=lambda step, i, rng: 0.2 + 0.04 * step + rng.uniform(-0.01, 0.01))
    results = compute_flags(_flat_success(), rising)
    fired = _fired(results, "process_vs_outcome")
    assert [(r.start, r.end) for r in fired] == [(1, 8), (9, 16)]
    first = fired[0]
    assert first.statistic == "kendall_tau" and first.value > 0.8 and first.p_value < 0.05
    assert first.threshold == 0.05 and first.window == 8
    assert first.details["outcome"] == "training success"
    # the samples are the window's episodes, the failed ones with the highest process first
    assert all(1 <= i // 100 <= 8 for i in first.sample_ids)
    assert first.sample_ids[0] % 2 == 1  # odd i: failed


def test_process_rising_with_success_rising_too_is_quiet():
    rising = _episodes(process=lambda step, i, rng: 0.2 + 0.04 * step + rng.uniform(-0.01, 0.01))
    history = [{"step": s, "success_rate": 0.2 + 0.04 * s} for s in STEPS]
    assert not _fired(compute_flags(history, rising), "process_vs_outcome")
    # and a flat process reward with flat success is quiet as well
    assert not _fired(compute_flags(_flat_success(), _episodes()), "process_vs_outcome")


def test_held_out_success_is_the_outcome_where_training_has_no_success_series():
    rising = _episodes(
        process=lambda step, i, rng: 0.2 + 0.04 * step + rng.uniform(-0.01, 0.01),
        success=lambda step, i, rng: None,
    )
    flat = compute_flags([], rising, heldout=[(0, 0.60), (16, 0.60)])
    assert _fired(flat, "process_vs_outcome")
    assert _fired(flat, "process_vs_outcome")[0].details["outcome"] == "held-out success"
    improved = compute_flags([], rising, heldout=[(0, 0.60), (16, 0.75)])
    assert not _fired(improved, "process_vs_outcome")


def test_high_process_score_on_failed_episodes_fires():
    hacked = _episodes(process=lambda step, i, rng: 0.9 if i % 2 else 0.8)  # failures score 0.9
    fired = _fired(compute_flags([], hacked), "failed_high_process")
    assert len(fired) == 2
    assert fired[0].statistic == "share_failed_with_high_process" and fired[0].value == 1.0
    assert fired[0].threshold == 0.25
    assert all(i % 2 == 1 for i in fired[0].sample_ids)  # only the failed ones
    honest = _episodes(process=lambda step, i, rng: 0.2 if i % 2 else 0.8)
    assert not _fired(compute_flags([], honest), "failed_high_process")


def test_episode_length_repetition_and_a_tools_share_rising_sharply_fire():
    def looping(step, i):
        if step <= 8:
            return ("calculator(1+1)", "submit(2)")
        return ("calculator(1+1)",) * 4 + ("submit(2)",)

    results = compute_flags([], _episodes(actions=looping))
    fired = {r.metric: r for r in _fired(results, "behaviour_shift")}
    assert {"length", "repetition", "tool:calculator"} <= set(fired)
    assert fired["length"].value == pytest.approx(1.5)  # 2 → 5 steps
    assert fired["length"].start == 9 and fired["length"].p_value < 0.05
    assert "tool:submit" not in fired  # its share fell
    steady = compute_flags([], _episodes())
    assert not _fired(steady, "behaviour_shift")
    assert {r.metric for r in steady if r.kind == "behaviour_shift"} >= {"length", "repetition"}


def test_judge_and_rule_layers_diverging_fires():
    def agree(step, i, rng):
        xs = [rng.random() for _ in range(3)]
        return tuple(xs), tuple(x + rng.uniform(-0.05, 0.05) for x in xs)

    def diverge(step, i, rng):
        if step <= 8:
            return agree(step, i, rng)
        xs = [rng.random() for _ in range(3)]
        return tuple(xs), tuple(1 - x for x in xs)  # the judge now ranks the other way

    results = compute_flags([], _episodes(layers=diverge))
    fired = _fired(results, "layer_divergence")
    assert [(r.start, r.end) for r in fired] == [(9, 16)]
    assert fired[0].statistic == "spearman_rho" and fired[0].value < 0
    assert fired[0].details["previous_rho"] > 0.9
    assert not _fired(compute_flags([], _episodes(layers=agree)), "layer_divergence")


def test_settings_are_validated_and_change_the_windows():
    assert config_from_dict({"window": "4", "alpha": 0.01}) == FlagConfig(window=4, alpha=0.01)
    with pytest.raises(ConfigError, match="unknown setting"):
        config_from_dict({"windw": 4})
    with pytest.raises(ConfigError, match="alpha must be between"):
        config_from_dict({"alpha": 2})
    with pytest.raises(ConfigError, match="window must be a whole number"):
        config_from_dict({"window": 2.5})
    rising = _episodes(process=lambda step, i, rng: 0.2 + 0.04 * step + rng.uniform(-0.01, 0.01))
    results = compute_flags(_flat_success(), rising, config=FlagConfig(window=4))
    assert fired_counts(results)["process_vs_outcome"] == (4, 4)


def test_an_episode_trained_at_several_steps_is_one_sample():
    # offline GRPO reuses its rows: the same failed, high-scored trajectory at every step
    reused = [
        Episode(id=7 if i == 0 else step * 10 + i, step=step, success=i > 1, process=0.9)
        for step in range(1, 9)
        for i in range(4)
    ]
    fired = _fired(compute_flags([], reused), "failed_high_process")[0]
    assert fired.details["failed"] == 16  # counted per step, as training saw it
    assert fired.sample_ids.count(7) == 1 and len(fired.sample_ids) == 9
