"""Dataset snapshots: create one (its export job writes the files through
``trainer_core.datasets``, the one writer of every dataset file) and record what was written."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from webapp.common.errors import ApplicationError
from webapp.datasets.models import DatasetSnapshot
from webapp.datasets.selectors import label_snapshot
from webapp.jobs.names import Kinds
from webapp.jobs.services import job_enqueue


def snapshot_create(
    *,
    name: str,
    kind: str,
    query: dict[str, Any] | None = None,
    reward_model=None,
    label_source: str = DatasetSnapshot.LabelSource.MODEL,
    seed: int = 0,
    user=None,
    parent_job=None,
) -> DatasetSnapshot:
    if kind not in DatasetSnapshot.Kind.values:
        raise ApplicationError(f"Unknown dataset kind {kind!r}.")
    if DatasetSnapshot.objects.filter(name=name).exists():
        raise ApplicationError(f"A dataset named {name!r} exists already; choose another name.")
    query = dict(query or {})
    if kind in ("dpo", "grpo") or (kind == "prm" and label_source == "model"):
        if reward_model is None and not (kind == "dpo" and label_source == "human"):
            raise ApplicationError(
                f"A {kind} dataset needs the reward-model version that scores it."
            )
    if kind == "bench" and not query.get("task_set"):
        raise ApplicationError("A benchmark dataset needs a task set.")
    with transaction.atomic():
        snapshot = DatasetSnapshot.objects.create(
            name=name,
            kind=kind,
            query=query,
            reward_model=reward_model,
            label_source=label_source,
            seed=seed,
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        snapshot.job = job_enqueue(
            kind=Kinds.EXPORT_DATASET, params={"snapshot_id": snapshot.pk}, user=user, parent=parent_job,
            message="Waiting for a worker to export the dataset.",
        )  # fmt: skip
        snapshot.save(update_fields=["job"])
    return snapshot


def snapshot_record_files(*, snapshot: DatasetSnapshot, files, selected: dict[str, int]) -> None:
    """Record what the export wrote: the directory, the counts per split, every file with its
    hash and size, and the human labels at this moment (provenance)."""
    snapshot.directory = str(files.directory)
    snapshot.counts = {**files.counts, "duplicates": files.duplicates, **selected}
    snapshot.files = {
        name: {
            "path": str(path.relative_to(files.directory)),
            "sha256": files.sha256.get(name, ""),
            "bytes": path.stat().st_size,
        }
        for name, path in sorted(files.files.items())
    }
    snapshot.label_snapshot = label_snapshot()
    snapshot.save(update_fields=["directory", "counts", "files", "label_snapshot"])
