"""The datasets app's job kind: exporting a snapshot (``datasets.export``).

For a DPO snapshot launched with ``build_pairs`` the job first builds preference pairs among the
selected trajectories from the reward-model version's totals (``rewards.services.preferences_build``;
pairs that exist are kept). Then it selects the snapshot's rows (``selectors.export_records``), lets
``trainer_core.datasets.writer`` write them under ``STEPLAB_DATA_DIR/datasets/<id>-<name>/`` with
a card, and records the files. Resumable: a re-run writes the same bytes again.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from django.conf import settings

from trainer_core.datasets.writer import write_dataset
from webapp.datasets import selectors, services, token_check
from webapp.datasets.models import DatasetSnapshot
from webapp.jobs import kinds
from webapp.jobs.context import JobContext
from webapp.jobs.names import Kinds, Queue, Tasks
from webapp.rewards.services import preferences_build
from webapp.trajectories.gdi import reuse_record


def register() -> None:
    kinds.register_kind(
        kinds.JobKind(
            name=Kinds.EXPORT_DATASET,
            label="Export a dataset",
            task_name=Tasks.EXPORT_DATASET,
            queue=Queue.DEFAULT,
            resumable=True,
            detail_template="datasets/partials/export_job_detail.html",
            description="Write an SFT / DPO / GRPO / PRM / benchmark dataset snapshot.",
        )
    )


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60] or "dataset"


def _writer_options(snapshot: DatasetSnapshot) -> dict[str, Any]:
    """How the writer splits this kind of snapshot."""
    extra: dict[str, Any] = {"overwrite": True}  # a resumed job writes the same bytes again
    if snapshot.kind == "bench":
        extra["splits"] = {"test": 1.0}
    elif snapshot.kind in ("grpo", "dpo"):
        extra["split_by"] = "task_id"  # a task's rows stay in one split
    if isinstance(snapshot.query.get("splits"), dict):  # e.g. {"train": 1.0} in a pipeline
        extra["splits"] = {str(k): float(v) for k, v in snapshot.query["splits"].items()}
    return extra


def _build_pairs(ctx: JobContext, snapshot: DatasetSnapshot) -> dict[str, int] | None:
    """The preference pairs the job was asked to build first, among the selected trajectories;
    what building gave (None when it was not asked to)."""
    options = ctx.params.get("build_pairs")
    if not options or snapshot.kind != "dpo" or snapshot.reward_model is None:
        return None
    ids = selectors.selection_ids(snapshot=snapshot)
    ctx.progress(0.05, f"Building preference pairs among {len(ids)} trajectories…", force=True)
    if not ids:
        return {"candidates": 0, "pairs": 0, "created": 0}
    built = preferences_build(
        reward_model=snapshot.reward_model,
        method=options.get("method", "outside_in"),
        min_margin=float(options.get("min_margin", 0.1)),
        trajectory_ids=ids,
        user=snapshot.created_by,
    )
    ctx.log(
        f"preference pairs: {built['pairs']} from {built['candidates']} scored trajectories "
        f"({built['created']} new), {options.get('method', 'outside_in')}, "
        f"min margin {options.get('min_margin', 0.1)}"
    )
    return built


def export_run(*, ctx: JobContext) -> None:
    snapshot = selectors.snapshot_for_job(snapshot_id=ctx.params.get("snapshot_id"))
    built = _build_pairs(ctx, snapshot)

    def on_selected(n: int) -> None:
        ctx.progress(0.1, f"Selected {n} trajectories; reading them…", force=True)

    included: list[int] = []
    records, selected = selectors.export_records(
        snapshot=snapshot, on_selected=on_selected, built=built, included=included
    )
    if built is not None:
        selected = {**selected, "pairs_built": built["created"]}
    directory = (
        Path(settings.STEPLAB_DATA_DIR) / "datasets" / f"{snapshot.pk}-{_slug(snapshot.name)}"
    )
    ctx.progress(0.5, "Writing the files…", force=True)
    card = {
        "name": snapshot.name,
        "kind": snapshot.kind,
        "query": snapshot.query,
        "reward_model": str(snapshot.reward_model) if snapshot.reward_model else None,
        "label_source": snapshot.label_source,
        "seed": snapshot.seed,
        "steplab_dataset_id": snapshot.pk,
    }
    if built is not None:
        # what building gave among the selection (not how many were new: the same inputs write
        # the same card)
        card["pairs_built"] = {
            **ctx.params["build_pairs"],
            "pairs": built["pairs"],
            "scored": built["candidates"],
        }
    writer_kind = {"sft_knowlyr": "sft", "bench": "benchmark"}.get(snapshot.kind, snapshot.kind)
    files = write_dataset(
        records,
        directory,
        name=snapshot.name,
        kind=writer_kind,
        seed=snapshot.seed,
        card=card,
        **_writer_options(snapshot),
    )
    policy = token_check.policy_for_check(policy_id=ctx.params.get("token_policy"))
    if policy is not None:  # the drift check: a mismatch fails the export, files unrecorded
        ctx.progress(0.8, f"Checking the tokens for policy {policy.name}…", force=True)
        result = token_check.snapshot_token_check(
            snapshot=snapshot, directory=str(files.directory), policy=policy
        )
        ctx.log(result["summary"])
    services.snapshot_record_files(snapshot=snapshot, files=files, selected=selected)
    reuse_record(dataset_id=snapshot.pk, ids=included)  # their GDI's reuse (docs/gdi.md)
    total = sum(files.counts.values())
    ctx.set_result(counts=snapshot.counts)
    ctx.progress(1.0, f"Wrote {total} rows ({files.duplicates} duplicates left out).", force=True)
