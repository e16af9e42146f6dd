"""The checkpoint layout (no model needed): which directories are a run's complete checkpoints,
in which order, and which one a resume picks."""

from __future__ import annotations

import pytest

from trainer_core.errors import ConfigError
from trainer_core.training.checkpoint import (
    TRAINER_STATE,
    checkpoint_due,
    checkpoint_path,
    find_checkpoint,
    list_checkpoints,
)
from trainer_core.training.config import TrainConfig


def make(root, name, *, complete=True):
    path = root / name
    path.mkdir(parents=True)
    if complete:
        (path / TRAINER_STATE).write_text('{"step": 0}')
    return path


def test_list_checkpoints_keeps_complete_ones_sorted_by_step(tmp_path):
    ten = make(tmp_path, "checkpoint-10")
    two = make(tmp_path, "checkpoint-2")
    make(tmp_path, "checkpoint-3", complete=False)  # being written, or cut short
    make(tmp_path, "checkpoint-x")
    make(tmp_path, "other-4")
    (tmp_path / "checkpoint-5").write_text("a file, not a checkpoint")
    assert list_checkpoints(tmp_path) == [(2, two), (10, ten)]
    assert list_checkpoints(str(tmp_path)) == [(2, two), (10, ten)]
    assert find_checkpoint(tmp_path) == ten == list_checkpoints(tmp_path)[-1][1]
    assert find_checkpoint(two) == two
    assert checkpoint_path(tmp_path, 10) == ten


def test_list_checkpoints_of_nothing_is_empty(tmp_path):
    assert list_checkpoints(tmp_path / "missing") == []
    assert list_checkpoints(tmp_path) == []
    with pytest.raises(ConfigError, match="no complete checkpoint"):
        find_checkpoint(tmp_path)


def test_checkpoint_due_every_save_every_steps_and_the_last():
    config = TrainConfig(model_dir="m", output_dir="o", max_steps=7, save_every=3)
    assert [s for s in range(1, 8) if checkpoint_due(config, s)] == [3, 6, 7]
    config.save_every = 0
    assert [s for s in range(1, 8) if checkpoint_due(config, s)] == [7]
