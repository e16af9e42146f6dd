"""The curriculum near a target pass rate (docs/task-health.md): the weight of each task, the
draws it gives (seeded: the same counts and seed give the same pick), and its options checked."""

from __future__ import annotations

import dataclasses

import pytest

from trainer_core.errors import ConfigError
from trainer_core.training.curriculum import (
    TARGET_FLOOR,
    pass_rate_estimate,
    pick_near_target,
    target_weight,
)
from trainer_core.training.decoupled import DecoupledConfig


def test_the_weight_falls_with_the_distance_from_the_target():
    assert target_weight(0.5, target=0.5, bandwidth=0.15) == 1.0
    assert target_weight(0.65, target=0.5, bandwidth=0.15) == pytest.approx(0.6065, abs=1e-4)
    assert target_weight(1.0, target=0.5, bandwidth=0.15) == TARGET_FLOOR  # floored, not 0
    assert target_weight(None, target=0.2, bandwidth=0.15) == 1.0  # never played: explore it
    assert pass_rate_estimate(0, 0) is None
    assert pass_rate_estimate(1, 1) == 0.75  # one lucky episode does not read as 1


def test_draws_favour_tasks_near_the_target_and_are_seeded():
    counts = [(0, 20), (10, 20), (20, 20), (19, 20)]  # never, half, always, almost always
    picks = [pick_near_target(counts, target=0.5, bandwidth=0.15, seed=s) for s in range(400)]
    share = [picks.count(i) / len(picks) for i in range(4)]
    assert share[1] > 0.85 and share[0] < 0.05 and share[2] < 0.05
    again = [pick_near_target(counts, target=0.5, bandwidth=0.15, seed=s) for s in range(400)]
    assert picks == again
    high = [pick_near_target(counts, target=0.9, bandwidth=0.1, seed=s) for s in range(200)]
    assert high.count(3) > high.count(1)  # 19/20 is nearer 0.9 than 10/20


def test_the_options_have_help_and_are_checked():
    fields = {f.name: f for f in dataclasses.fields(DecoupledConfig)}
    assert "pass rate" in fields["target_pass_rate"].metadata["help"]
    assert "bandwidth" in fields["pass_rate_bandwidth"].metadata["help"].lower()
    base = {"model_dir": "m", "output_dir": "o", "env_id": "steplab/arithmetic", "tasks": "x"}
    DecoupledConfig(**base, target_pass_rate=0.5).validate()
    with pytest.raises(ConfigError, match="target_pass_rate"):
        DecoupledConfig(**base, target_pass_rate=1.5).validate()
    with pytest.raises(ConfigError, match="pass_rate_bandwidth"):
        DecoupledConfig(**base, target_pass_rate=0.5, pass_rate_bandwidth=0).validate()
