"""The methods by name and train_from_yaml, the one call `steplab train METHOD --config FILE`
makes: a YAML file or text in, the trainer's result out, SteplabErrors that say what to fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer_core.errors import ConfigError
from trainer_core.training import config_class, train_from_yaml
from trainer_core.training.config import TrainResult, config_to_yaml


def test_config_class_names_every_method():
    assert [config_class(m).__name__ for m in ("sft", "dpo", "grpo")] == [
        "SFTConfig",
        "DPOConfig",
        "GRPOConfig",
    ]
    with pytest.raises(ConfigError, match="unknown training method 'ppo'; use one of sft, dpo"):
        config_class("ppo")


def test_bad_configs_are_config_errors_before_any_training(tmp_path):
    with pytest.raises(ConfigError, match="unknown training method"):
        train_from_yaml("ppo", "model_dir: m")
    with pytest.raises(ConfigError, match="config file .*missing.yaml.* not found"):
        train_from_yaml("sft", str(tmp_path / "missing.yaml"))
    with pytest.raises(ConfigError, match="not found"):
        train_from_yaml("sft", tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="unknown option.*bogus"):
        train_from_yaml("sft", "model_dir: m\noutput_dir: o\nbogus: 1\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        train_from_yaml("sft", "model_dir: [")
    (tmp_path / "c.yaml").write_text("model_dir: m\noutput_dir: o\n")  # no dataset
    with pytest.raises(ConfigError, match="dataset is empty"):
        train_from_yaml("sft", tmp_path / "c.yaml")


def test_train_from_a_yaml_file(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("accelerate")
    from trainer_core.training.sft import SFTConfig
    from trainer_core.training.tiny import build_tiny_model

    model_dir = build_tiny_model(tmp_path / "tiny", hidden_size=32, num_layers=2)
    messages = [
        {"role": "user", "content": "What is 2 + 3?"},
        {"role": "assistant", "content": "5"},
    ]
    data = tmp_path / "train.jsonl"
    data.write_text(json.dumps({"messages": messages}) + "\n")
    config = SFTConfig(
        model_dir=str(model_dir),
        output_dir=str(tmp_path / "run"),
        dataset=str(data),
        max_steps=2,
        batch_size=1,
        device="cpu",
    )
    path = tmp_path / "run.yaml"
    path.write_text(config_to_yaml(config))
    events = []
    result = train_from_yaml("sft", str(path), on_progress=events.append)
    assert isinstance(result, TrainResult) and result.steps == 2
    assert Path(result.checkpoint_dir) == tmp_path / "run" / "checkpoint-2"
    assert [e.step for e in events] == [0, 1, 2]
