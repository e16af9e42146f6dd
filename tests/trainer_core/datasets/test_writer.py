"""write_dataset(): files that load with Hugging Face `datasets` in TRL's vocabulary, de-duplicated,
split by seed whatever the input order, byte-identical when written again, with a dataset card."""

from __future__ import annotations

import json
import random

import pytest
import yaml

from trainer_core.datasets import (
    ExportItem,
    dpo_records,
    grpo_groups,
    prm_records,
    read_jsonl,
    sft_records,
    write_dataset,
)
from trainer_core.envs import make
from trainer_core.errors import ConfigError, InputError
from trainer_core.policies.scripted import ScriptedPolicy
from trainer_core.rollouts.collect import collect
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks

SPLITS = ("train", "validation", "test")


@pytest.fixture(scope="module")
def items() -> list[ExportItem]:
    """Real episodes of the scripted policy (with mistakes) on tool arithmetic, 6 tasks × 3."""
    tools = [t.as_dict() for t in make("steplab/arithmetic").available_tools]
    results = collect(
        "steplab/arithmetic",
        arithmetic_tasks("train", n=6),
        lambda seed: ScriptedPolicy(mistakes={"wrong_tool": 0.3, "wrong_answer": 0.4}, seed=seed),
        episodes_per_task=3,
        max_steps=6,
        seed=11,
    )
    return [
        ExportItem(
            trajectory_id=number,
            trajectory=r.trajectory,
            step_ids=[100 * number + s.index for s in r.trajectory.steps],
            reward=1.0 if r.trajectory.outcome.success else 0.0,
            step_rewards=[0.1 if s.error else 0.9 for s in r.trajectory.steps],
            tools=tools,
            source={"reward_model": 2, "selected_by": "min_reward=0"},
        )
        for number, r in enumerate(results, 1)
    ]


def load(fmt: str, files, tmp_path):
    from datasets import load_dataset

    ext = "jsonl" if fmt == "json" else fmt
    data_files = {s: str(files.directory / f"data/{s}.{ext}") for s, n in files.counts.items() if n}
    return load_dataset(fmt, data_files=data_files, cache_dir=str(tmp_path / "hf-cache"))


def file_bytes(files) -> dict[str, bytes]:
    paths = {**files.files, "README.md": files.card}
    return {rel: path.read_bytes() for rel, path in paths.items()}


def test_sft_dataset_loads_with_datasets_in_trl_format(items, tmp_path):
    from trl.data_utils import is_conversational

    rows = list(sft_records(items))
    files = write_dataset(
        rows, tmp_path / "sft", name="arith-sft", kind="sft", seed=0, splits=(0.6, 0.2, 0.2)
    )
    unique = len({json.dumps(r["messages"], sort_keys=True) for r in rows})
    assert files.rows == unique == sum(files.counts.values())
    assert files.duplicates == len(rows) - unique > 0  # the scripted policy repeats itself
    assert set(files.files) == {f"data/{s}.{f}" for s in SPLITS for f in ("jsonl", "parquet")}
    from_json, from_parquet = load("json", files, tmp_path), load("parquet", files, tmp_path)
    columns = sorted(rows[0])
    for split in SPLITS:
        assert from_json[split].num_rows == from_parquet[split].num_rows == files.counts[split]
        assert sorted(from_json[split].column_names) == columns == files.columns
        # the same rows from both formats, exactly as written: messages keep their own keys
        assert (
            list(from_json[split])
            == list(from_parquet[split])
            == read_jsonl(files.files[f"data/{split}.jsonl"])
        )
        for row in from_parquet[split]:
            assert is_conversational(row)
            assert all(
                isinstance(m, dict) and {"role", "content"} <= set(m) for m in row["messages"]
            )
            assert not any(v is None for m in row["messages"] for v in m.values())
            assistant = [m for m in row["messages"] if m["role"] == "assistant"]
            assert len(row["step_ids"]) == len(assistant) == len(row["step_rewards"]) > 0
            assert isinstance(row["trajectory_id"], int)
            assert json.loads(row["tools"])[0]["type"] == "function"
    features = from_parquet["train"].features
    assert str(features["messages"]) == "List(Json(decode=True))"
    assert features["step_ids"].feature.dtype == "int64"
    # the dataset card's configs make the directory itself loadable
    from datasets import load_dataset

    whole = load_dataset(str(files.directory), cache_dir=str(tmp_path / "hf-cache"))
    assert {s: whole[s].num_rows for s in whole} == files.counts


def test_same_records_in_any_order_give_byte_identical_files(items, tmp_path):
    rows = list(sft_records(items))
    first = write_dataset(rows, tmp_path / "a", name="x", kind="sft", seed=5, card={"q": 1})
    shuffled = list(rows)
    random.Random(0).shuffle(shuffled)
    again = write_dataset(shuffled, tmp_path / "b", name="x", kind="sft", seed=5, card={"q": 1})
    assert file_bytes(first) == file_bytes(again)
    assert first.sha256 == again.sha256 and len(first.sha256) == len(first.files) + 1
    other_seed = write_dataset(rows, tmp_path / "c", name="x", kind="sft", seed=6, card={"q": 1})
    assert other_seed.counts == first.counts
    assert file_bytes(other_seed) != file_bytes(first)  # another seed, another assignment


def test_splits_are_exact_fractions_of_units_and_split_by_keeps_groups_together(tmp_path):
    rows = [
        {"prompt": f"question {i}", "task_id": f"task-{i % 10}", "trajectory_id": i}
        for i in range(100)
    ]
    files = write_dataset(
        rows, tmp_path / "a", name="q", kind="benchmark", splits=(0.8, 0.1, 0.1), formats=["jsonl"]
    )
    assert files.counts == {"train": 80, "validation": 10, "test": 10}
    assert set(files.files) == {f"data/{s}.jsonl" for s in SPLITS}
    grouped = write_dataset(
        rows, tmp_path / "b", name="q", kind="benchmark", splits=(0.8, 0.1, 0.1), split_by="task_id"
    )
    seen: dict[str, str] = {}
    for split in SPLITS:
        for row in read_jsonl(grouped.directory / f"data/{split}.jsonl"):
            assert seen.setdefault(row["task_id"], split) == split
    assert sorted(grouped.counts.values()) == [10, 10, 80]  # 8, 1 and 1 of the 10 tasks
    only_test = write_dataset(
        rows[:3], tmp_path / "c", name="q", kind="benchmark", splits={"test": 1.0}
    )
    assert only_test.counts == {"test": 3} and set(only_test.files) == {
        "data/test.jsonl",
        "data/test.parquet",
    }


def test_duplicates_are_dropped_whatever_their_ids_and_counted(items, tmp_path):
    rows = list(sft_records(items[:1]))
    copies = [{**rows[0], "trajectory_id": 1000 + i, "step_ids": [i]} for i in range(4)]
    files = write_dataset(rows + copies, tmp_path / "d", name="d", kind="sft", splits=(1, 0, 0))
    assert (files.rows, files.duplicates, files.counts["train"]) == (1, 4, 1)
    (kept,) = read_jsonl(files.files["data/train.jsonl"])
    assert kept == min(
        rows + copies,
        key=lambda r: json.dumps(r, sort_keys=True, ensure_ascii=False, separators=(",", ":")),
    )
    kept_all = write_dataset(
        rows + copies, tmp_path / "e", name="d", kind="sft", splits=(1, 0, 0), dedupe=False
    )
    assert (kept_all.rows, kept_all.duplicates) == (5, 0)


def test_dpo_grpo_and_prm_files_have_trl_columns_and_types(items, tmp_path):
    by_task: dict[str, list[ExportItem]] = {}
    for item in items:
        by_task.setdefault(item.trajectory.task.id, []).append(item)
    pairs = []
    for group in by_task.values():
        ranked = sorted(group, key=lambda i: -i.reward)
        if ranked[0].reward > ranked[-1].reward:
            pairs.append((ranked[0], ranked[-1], {"method": "outside_in"}))
    assert pairs
    datasets = {
        "dpo": list(dpo_records(pairs)),
        "grpo": list(grpo_groups(items)),
        "prm": list(prm_records(items)),
    }
    for kind, rows in datasets.items():
        files = write_dataset(rows, tmp_path / kind, name=kind, kind=kind, splits=(1, 0, 0))
        assert files.counts["train"] + files.duplicates == len(rows)
        loaded = {fmt: load(fmt, files, tmp_path)["train"] for fmt in ("json", "parquet")}
        assert list(loaded["json"]) == list(loaded["parquet"])
        row = loaded["parquet"][0]
        if kind == "dpo":
            assert {"prompt", "chosen", "rejected", "chosen_step_ids", "rejected_step_ids"} <= set(
                row
            )
            assert [m["role"] for m in row["prompt"]] == ["system", "user"]
            assert row["chosen"][0]["role"] == row["rejected"][0]["role"] == "assistant"
            assert row["chosen_trajectory_id"] != row["rejected_trajectory_id"]
        elif kind == "grpo":
            assert len(row["completions"]) == len(row["rewards"]) == len(row["trajectory_ids"]) >= 2
            assert (
                isinstance(row["completions"][0], list)
                and row["completions"][0][0]["role"] == "assistant"
            )
            assert all(isinstance(ids, list) and ids for ids in row["step_ids"])
        else:
            assert isinstance(row["prompt"], str) and row["prompt"].startswith("<|im_start|>")
            assert all(isinstance(c, str) for c in row["completions"])
            assert all(isinstance(label, bool) for label in row["labels"])
            assert len(row["labels"]) == len(row["completions"]) == len(row["step_ids"])
            assert str(loaded["parquet"].features["labels"]) == "List(Value('bool'))"


def test_card_describes_the_dataset_and_its_provenance(items, tmp_path):
    query = {"query": {"min_reward": 0.5, "tasks": ["arith-train-0000001"]}, "reward_model": 2}
    files = write_dataset(
        list(sft_records(items)), tmp_path / "c", name="arith", kind="sft", seed=3, card=query
    )
    text = files.card.read_text()
    assert text.startswith("---\n")
    front = yaml.safe_load(text.split("---\n")[1])
    assert front["steplab"]["provenance"] == query
    assert front["steplab"]["seed"] == 3 and front["steplab"]["counts"] == files.counts
    assert front["steplab"]["duplicates"] == files.duplicates
    paths = {f["path"] for config in front["configs"] for f in config["data_files"]}
    assert paths == set(files.files)
    assert front["configs"][0]["config_name"] == "default"
    assert {f["name"] for f in front["dataset_info"]["features"]} == set(files.columns)
    for rel, digest in files.sha256.items():
        if rel != "README.md":
            assert f"`{rel}` sha256 `{digest}`" in text
    assert "| `messages` |" in text and "| `step_ids` |" in text


def test_bad_input_and_options_are_refused_with_a_message(tmp_path):
    row = {"messages": [{"role": "user", "content": "x"}], "trajectory_id": 1, "step_ids": []}
    with pytest.raises(InputError, match="no records"):
        write_dataset([], tmp_path / "a", name="a", kind="sft")
    with pytest.raises(InputError, match="not plain JSON"):
        write_dataset([{**row, "reward": float("nan")}], tmp_path / "a", name="a", kind="sft")
    with pytest.raises(ConfigError, match="sum to 1"):
        write_dataset([row], tmp_path / "a", name="a", kind="sft", splits=(0.5, 0.2, 0.2))
    with pytest.raises(ConfigError, match="unknown dataset kind"):
        write_dataset([row], tmp_path / "a", name="a", kind="kto")
    with pytest.raises(ConfigError, match="formats"):
        write_dataset([row], tmp_path / "a", name="a", kind="sft", formats=["csv"])
    with pytest.raises(ConfigError, match="split_by"):
        write_dataset([row], tmp_path / "a", name="a", kind="sft", split_by="task")
    write_dataset([row], tmp_path / "a", name="a", kind="sft", splits=(1, 0, 0))
    with pytest.raises(ConfigError, match="not empty"):
        write_dataset([row], tmp_path / "a", name="a", kind="sft")
    again = write_dataset(
        [row], tmp_path / "a", name="a", kind="sft", splits=(0, 0, 1), overwrite=True
    )
    assert sorted(p.name for p in (tmp_path / "a" / "data").iterdir()) == [
        "test.jsonl",
        "test.parquet",
    ]
    assert again.counts == {"train": 0, "validation": 0, "test": 1}
