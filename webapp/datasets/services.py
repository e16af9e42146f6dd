"""Dataset snapshots: select trajectories, scores, labels and pairs from the database, and let
``trainer_core.datasets`` write the files (every dataset file is written there)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Max

from webapp.common.errors import ApplicationError
from webapp.datasets.models import DatasetSnapshot
from webapp.jobs import kinds, task_names
from webapp.jobs.context import JobContext

KIND = "datasets.export"
MAX_TRAJECTORIES = 200_000


def register() -> None:
    kinds.register_kind(
        kinds.JobKind(
            name=KIND,
            label="Export a dataset",
            task_name=task_names.EXPORT_DATASET,
            queue="default",
            resumable=True,
            detail_template="datasets/partials/export_job_detail.html",
            description="Write an SFT / DPO / GRPO / PRM / benchmark dataset snapshot.",
        )
    )


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
    from webapp.jobs.services import job_enqueue

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
            kind=KIND, params={"snapshot_id": snapshot.pk}, user=user, parent=parent_job,
            message="Waiting for a worker to export the dataset.",
        )  # fmt: skip
        snapshot.save(update_fields=["job"])
    return snapshot


# --- selection -----------------------------------------------------------------------------------


def _trajectory_ids(snapshot: DatasetSnapshot) -> list[int]:
    from webapp.rewards.models import TrajectoryScore
    from webapp.trajectories import selectors

    query = snapshot.query or {}
    filters = selectors.Filters.from_query(
        {k: str(v) for k, v in query.items() if v not in (None, "")}
    )
    qs = selectors.trajectory_list(filters).filter(status="finished")
    ids = list(qs.order_by("pk").values_list("pk", flat=True)[:MAX_TRAJECTORIES])
    min_total = query.get("min_score")
    if snapshot.reward_model_id and min_total not in (None, ""):
        keep = set(
            TrajectoryScore.objects.filter(
                reward_model_id=snapshot.reward_model_id,
                trajectory_id__in=ids,
                total__gte=float(min_total),
            ).values_list("trajectory_id", flat=True)
        )
        ids = [i for i in ids if i in keep]
    return ids


def _tools_for(environment: str, cache: dict[str, Any]) -> list[dict] | None:
    """The tools an environment offers (JSON-schema specs), for the system prompt and the
    "tools" column; None when the environment is unknown or cannot start here."""
    if not environment:
        return None
    if environment not in cache:
        try:
            from trainer_core.envs import make

            env = make(environment, wrappers=False)
            try:
                cache[environment] = [t.as_dict() for t in env.available_tools]
            finally:
                env.close()
        except Exception:  # noqa: BLE001 - an unknown or unavailable env: no tool list
            cache[environment] = None
    return cache[environment]


def _items(snapshot: DatasetSnapshot, ids: list[int]) -> dict[int, Any]:
    from trainer_core.datasets.items import ExportItem
    from trainer_core.policies.chat_format import system_prompt
    from webapp.rewards.models import StepScore, TrajectoryScore
    from webapp.trajectories.models import Step, Trajectory
    from webapp.trajectories.selectors import trajectory_specs

    specs = trajectory_specs(ids)
    step_ids: dict[int, list[int]] = {i: [] for i in ids}
    for tid, pk in (
        Step.objects.filter(trajectory_id__in=ids)
        .order_by("trajectory_id", "index")
        .values_list("trajectory_id", "pk")
    ):
        step_ids[tid].append(pk)
    totals: dict[int, float | None] = {}
    step_rewards: dict[int, dict[int, float | None]] = {}
    if snapshot.reward_model_id:
        totals = dict(
            TrajectoryScore.objects.filter(
                reward_model_id=snapshot.reward_model_id, trajectory_id__in=ids
            ).values_list("trajectory_id", "total")
        )
        for tid, index, total in StepScore.objects.filter(
            reward_model_id=snapshot.reward_model_id, trajectory_id__in=ids
        ).values_list("trajectory_id", "index", "total"):
            step_rewards.setdefault(tid, {})[index] = total
    labels = _human_step_labels(ids) if snapshot.label_source == "human" else {}
    tools_cache: dict[str, Any] = {}
    # the system prompt to train with: the query's (a pipeline passes the one its policy is
    # prompted with, e.g. instructions only for a model trained on its tools), else the tools'
    fixed_system = snapshot.query.get("system") if "system" in (snapshot.query or {}) else None
    rows = {
        row.pk: row
        for row in Trajectory.objects.filter(pk__in=ids).only("pk", "environment", "reward")
    }
    items = {}
    for tid in ids:
        spec = specs.get(tid)
        if spec is None:
            continue
        tools = _tools_for(rows[tid].environment, tools_cache)
        n = len(spec.steps)
        items[tid] = ExportItem(
            trajectory_id=tid,
            trajectory=spec,
            step_ids=step_ids.get(tid),
            reward=totals.get(tid, rows[tid].reward),
            step_rewards=[step_rewards.get(tid, {}).get(i) for i in range(n)]
            if tid in step_rewards
            else None,
            step_labels=[labels.get(tid, {}).get(i) for i in range(n)] if tid in labels else None,
            tools=tools,
            system=fixed_system
            if fixed_system is not None
            else (system_prompt(tools) if tools else None),
            source={
                "reward_model": snapshot.reward_model_id,
                "label_source": snapshot.label_source,
            },
        )
    return items


def _human_step_labels(ids: list[int]) -> dict[int, dict[int, float]]:
    from collections import defaultdict

    from webapp.calibration.models import StepLabel

    sums: dict[tuple[int, int], list[float]] = defaultdict(list)
    for tid, index, value in StepLabel.objects.filter(
        trajectory_id__in=ids, value__isnull=False
    ).values_list("trajectory_id", "index", "value"):
        sums[(tid, index)].append(value)
    out: dict[int, dict[int, float]] = defaultdict(dict)
    for (tid, index), values in sums.items():
        out[tid][index] = sum(values) / len(values)
    return out


def _label_snapshot() -> dict[str, Any]:
    from webapp.calibration.models import LabelEdit, StepLabel
    from webapp.rewards.models import PreferencePair

    return {
        "step_labels": StepLabel.objects.filter(value__isnull=False).count(),
        "last_label_edit": LabelEdit.objects.aggregate(m=Max("id"))["m"],
        "human_pairs": PreferencePair.objects.filter(source="human").count(),
    }


def _records(snapshot: DatasetSnapshot, ctx: JobContext | None = None):
    from trainer_core.datasets import bench, dpo, grpo, prm, sft

    kind = snapshot.kind
    if kind == "bench":
        from trainer_core.tasks.model import Task as TaskSpec
        from webapp.tasks.models import Task

        tasks = Task.objects.filter(task_set__name=snapshot.query.get("task_set")).order_by(
            "external_id"
        )
        return bench.benchmark_records(TaskSpec.model_validate(t.data) for t in tasks), {}
    if kind == "dpo":
        from webapp.rewards.models import PreferencePair

        pairs = PreferencePair.objects.filter(status=PreferencePair.Status.PAIR)
        if snapshot.label_source == "human":
            pairs = pairs.filter(source=PreferencePair.Source.HUMAN)
        else:
            pairs = pairs.filter(
                source=PreferencePair.Source.RULES, reward_model_id=snapshot.reward_model_id
            )
        allowed = set(_trajectory_ids(snapshot))
        chosen = [
            p for p in pairs.order_by("pk") if p.chosen_id in allowed and p.rejected_id in allowed
        ]
        items = _items(
            snapshot, sorted({p.chosen_id for p in chosen} | {p.rejected_id for p in chosen})
        )
        triples = [
            (
                items[p.chosen_id],
                items[p.rejected_id],
                {"margin": p.margin, "source": p.source, "pair_id": p.pk, "method": p.method},
            )
            for p in chosen
            if p.chosen_id in items and p.rejected_id in items
        ]
        return dpo.dpo_records(triples), {"pairs": len(triples)}
    ids = _trajectory_ids(snapshot)
    if ctx is not None:
        ctx.progress(0.1, f"Selected {len(ids)} trajectories; reading them…", force=True)
    items = list(_items(snapshot, ids).values())
    if kind == "sft":
        return sft.sft_records(items), {"trajectories": len(items)}
    if kind == "sft_knowlyr":
        return sft.sft_records(items, fmt="knowlyr"), {"trajectories": len(items)}
    if kind == "grpo":
        return grpo.grpo_groups(items), {"trajectories": len(items)}
    return (
        prm.prm_records(items, label_source=snapshot.label_source),
        {"trajectories": len(items)},
    )


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60] or "dataset"


def export_run(*, ctx: JobContext) -> None:
    from trainer_core.datasets.writer import write_dataset

    snapshot = DatasetSnapshot.objects.filter(pk=ctx.params.get("snapshot_id")).first()
    if snapshot is None:
        raise ApplicationError(f"Dataset {ctx.params.get('snapshot_id')} no longer exists.")
    records, selected = _records(snapshot, ctx)
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
    writer_kind = {"sft_knowlyr": "sft", "bench": "benchmark"}.get(snapshot.kind, snapshot.kind)
    extra: dict[str, Any] = {"overwrite": True}  # a resumed job writes the same bytes again
    if snapshot.kind == "bench":
        extra["splits"] = {"test": 1.0}
    elif snapshot.kind in ("grpo", "dpo"):
        extra["split_by"] = "task_id"  # a task's rows stay in one split
    if isinstance(snapshot.query.get("splits"), dict):  # e.g. {"train": 1.0} in a pipeline
        extra["splits"] = {str(k): float(v) for k, v in snapshot.query["splits"].items()}
    files = write_dataset(
        records,
        directory,
        name=snapshot.name,
        kind=writer_kind,
        seed=snapshot.seed,
        card=card,
        **extra,
    )
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
    snapshot.label_snapshot = _label_snapshot()
    snapshot.save(update_fields=["directory", "counts", "files", "label_snapshot"])
    total = sum(files.counts.values())
    ctx.set_result(counts=snapshot.counts)
    ctx.progress(1.0, f"Wrote {total} rows ({files.duplicates} duplicates left out).", force=True)
