"""The dataset file layout has one owner: what write_dataset writes is what the trainers read
(split_path, find_split), and readers still accept a directory with <split>.jsonl or a file."""

from __future__ import annotations

import json

import pytest

from trainer_core.datasets import find_split, read_jsonl, split_path, write_dataset
from trainer_core.errors import ConfigError
from trainer_core.training.data import read_rows

ROWS = [
    {"messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": "a"}]}
    for i in range(20)
]


def test_the_writers_files_are_where_split_path_says(tmp_path):
    files = write_dataset(ROWS, tmp_path / "snap", name="n", kind="sft", seed=0)
    for split, count in files.counts.items():
        if count:
            assert files.files[f"data/{split}.jsonl"] == split_path(tmp_path / "snap", split)
            assert split_path(tmp_path / "snap", split, fmt="parquet").is_file()
    assert split_path("d", "train") == split_path("d", "train", fmt="jsonl")
    assert str(split_path("d", "test")).endswith("d/data/test.jsonl")


def test_the_trainers_read_the_writers_output(tmp_path):
    files = write_dataset(ROWS, tmp_path / "snap", name="n", kind="sft", seed=0)
    train_file = files.files["data/train.jsonl"]
    assert find_split(tmp_path / "snap") == train_file
    assert find_split(tmp_path / "snap", "test") == files.files["data/test.jsonl"]
    assert read_rows(tmp_path / "snap") == read_jsonl(train_file)
    assert len(read_rows(str(tmp_path / "snap"))) == files.counts["train"]


def test_a_file_and_the_older_directory_layout_are_still_read(tmp_path):
    (tmp_path / "train.jsonl").write_text(json.dumps(ROWS[0]) + "\n\n" + json.dumps(ROWS[1]))
    assert find_split(tmp_path) == tmp_path / "train.jsonl"
    assert read_rows(tmp_path) == ROWS[:2]
    assert find_split(tmp_path / "train.jsonl", "test") == tmp_path / "train.jsonl"
    # the writer's layout comes first when both are there
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "train.jsonl").write_text(json.dumps(ROWS[2]) + "\n")
    assert find_split(tmp_path) == tmp_path / "data" / "train.jsonl"
    assert read_rows(tmp_path) == ROWS[2:3]


def test_a_missing_split_names_both_places(tmp_path):
    with pytest.raises(ConfigError, match="not found") as caught:
        find_split(tmp_path, "validation")
    message = str(caught.value)
    assert "data/validation.jsonl" in message and str(tmp_path / "validation.jsonl") in message
    with pytest.raises(ConfigError, match="dataset .* not found"):
        read_rows(tmp_path / "nothing.jsonl")
