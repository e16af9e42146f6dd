"""Dataset snapshots exported by a real worker: SFT, DPO, GRPO, PRM and benchmark files in TRL's
vocabulary, reproducible byte for byte, every row carrying its trajectory and step ids."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tests.workers.test_scoring_job import _coding_trajectory, _import
from trainer_core.tasks.files import dump_tasks_jsonl
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
from webapp.datasets import services
from webapp.datasets.models import DatasetSnapshot
from webapp.jobs.models import Job, JobStatus
from webapp.rewards import services as rewards
from webapp.tasks.services import task_set_import
from webapp.trajectories.models import Step

pytestmark = [pytest.mark.worker]


def _finished(job_id: int) -> Job | None:
    job = Job.objects.get(pk=job_id)
    return job if job.is_terminal else None


def _export(name, kind, **kwargs) -> DatasetSnapshot:
    snapshot = services.snapshot_create(name=name, kind=kind, **kwargs)
    job = wait_for(lambda: _finished(snapshot.job_id), timeout=90, what=f"{kind} export")
    assert job.status == JobStatus.SUCCEEDED, job.error
    snapshot.refresh_from_db()
    return snapshot


def _rows(snapshot: DatasetSnapshot, split: str = "train") -> list[dict]:
    path = Path(snapshot.directory) / snapshot.files[f"data/{split}.jsonl"]["path"]
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_exports_in_trls_vocabulary_reproducibly(celery_worker, operator):
    from datasets import load_dataset

    rewards.rubrics_seed(domain="coding")
    # four attempts at one task (same prompt), so pairs and groups exist
    ids = _import(
        *[
            _coding_trajectory("shared", repeat_read=r, success=s)
            for r in (False, True)
            for s in (True, False)
        ]
    )
    version = rewards.reward_model_create(domain="coding")
    run = rewards.scoring_launch(reward_model=version, trajectory_ids=ids)
    wait_for(lambda: _finished(run.job_id), timeout=90, what="scoring")
    rewards.preferences_build(reward_model=version, method="adjacent", min_margin=0.0)

    sft = _export("sft-a", "sft", reward_model=version, seed=3)
    rows = [
        r
        for split in ("train", "validation", "test")
        if f"data/{split}.jsonl" in sft.files
        for r in _rows(sft, split)
    ]
    # success and failure with the same steps train on the same text: one row each
    assert len(rows) == 2 == sft.total and sft.counts["duplicates"] == 2
    row = rows[0]
    assert {"messages", "trajectory_id", "step_ids"} <= set(row)
    assert row["messages"][0]["role"] in ("system", "user")
    assert any(m.get("tool_calls") for m in row["messages"] if m["role"] == "assistant")
    db_steps = list(
        Step.objects.filter(trajectory_id=row["trajectory_id"])
        .order_by("index")
        .values_list("pk", flat=True)
    )
    assert row["step_ids"] == db_steps
    loaded = load_dataset(
        "parquet",
        data_files=str(Path(sft.directory) / sft.files["data/train.parquet"]["path"]),
        split="train",
    )
    assert "messages" in loaded.column_names

    again = _export("sft-b", "sft", reward_model=version, seed=3)
    assert again.files["data/train.jsonl"]["sha256"] == sft.files["data/train.jsonl"]["sha256"]

    success_only = _export("sft-ok", "sft", reward_model=version, query={"outcome": "success"})
    assert success_only.total == 2

    dpo = _export("dpo", "dpo", reward_model=version)
    pairs = [
        r
        for split in ("train", "validation", "test")
        if f"data/{split}.jsonl" in dpo.files
        for r in _rows(dpo, split)
    ]
    assert pairs and {"prompt", "chosen", "rejected", "chosen_trajectory_id"} <= set(pairs[0])

    prm = _export("prm", "prm", reward_model=version)
    step_rows = [
        r
        for split in ("train", "validation", "test")
        if f"data/{split}.jsonl" in prm.files
        for r in _rows(prm, split)
    ]
    assert step_rows and {"prompt", "completions", "labels", "step_ids"} <= set(step_rows[0])
    assert len(step_rows[0]["completions"]) == len(step_rows[0]["labels"])

    tasks = arithmetic_tasks("heldout", n=5)
    task_set_import(text=dump_tasks_jsonl(tasks), name="bench-set")
    bench = _export("bench", "bench", query={"task_set": "bench-set"})
    assert bench.counts["test"] == 5


def test_grpo_needs_groups_of_the_same_task(celery_worker, operator):
    rewards.rubrics_seed(domain="coding")
    ids = _import(
        *[
            _coding_trajectory("same", repeat_read=bool(i % 2), success=bool(i % 2))
            for i in range(2)
        ]
    )
    from webapp.trajectories.models import Trajectory

    Trajectory.objects.filter(pk__in=ids).update(task_ref="one-task")
    version = rewards.reward_model_create(domain="coding")
    run = rewards.scoring_launch(reward_model=version, trajectory_ids=ids)
    wait_for(lambda: _finished(run.job_id), timeout=90, what="scoring")
    grpo = _export("grpo", "grpo", reward_model=version)
    groups = [
        r
        for split in ("train", "validation", "test")
        if f"data/{split}.jsonl" in grpo.files
        for r in _rows(grpo, split)
    ]
    assert len(groups) == 1
    assert len(groups[0]["completions"]) == len(groups[0]["rewards"]) == 2
    assert sorted(groups[0]["trajectory_ids"]) == sorted(ids)
