"""Reads for the dataset pages and for the export job: which trajectories, scores, labels and
pairs a snapshot selects, as the items ``trainer_core.datasets`` turns into rows."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Any

from django.db.models import Max, QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

from trainer_core.datasets import bench, dpo, grpo, prm, sft
from trainer_core.datasets.items import ExportItem
from trainer_core.envs import make
from trainer_core.policies.chat_format import system_prompt
from trainer_core.tasks.model import Task as TaskSpec
from webapp.calibration.models import LabelEdit, StepLabel
from webapp.calibration.selectors import visible_to
from webapp.common.errors import ApplicationError
from webapp.datasets.models import DatasetSnapshot
from webapp.rewards.models import PreferencePair, StepScore, TrajectoryScore
from webapp.tasks.models import Task
from webapp.tasks.selectors import quarantined_task_ids_query
from webapp.trajectories.models import Step, Trajectory
from webapp.trajectories.selectors import Filters, trajectory_list, trajectory_specs

MAX_TRAJECTORIES = 200_000
CARD_LIMIT = 20_000


def snapshot_list(*, limit: int = 200) -> QuerySet[DatasetSnapshot]:
    return DatasetSnapshot.objects.select_related("reward_model", "job")[:limit]


def snapshot_keyset(*, before_id: int | None, limit: int, kind: str = "") -> list[DatasetSnapshot]:
    """Up to ``limit`` snapshots (of ``kind``), newest (highest id) first, before ``before_id``."""
    rows = DatasetSnapshot.objects.select_related("reward_model", "job").order_by("-pk")
    if kind:
        rows = rows.filter(kind=kind)
    if before_id is not None:
        rows = rows.filter(pk__lt=before_id)
    return list(rows[:limit])


def snapshot_get(*, id: int) -> DatasetSnapshot:
    """The snapshot; Http404 when there is none."""
    return get_object_or_404(DatasetSnapshot.objects.select_related("reward_model", "job"), pk=id)


def snapshot_find(*, id: int | None) -> DatasetSnapshot | None:
    return DatasetSnapshot.objects.filter(pk=id).first() if id is not None else None


def snapshot_for_job(*, snapshot_id: int | None) -> DatasetSnapshot:
    """The snapshot an export job writes (ApplicationError: deleted since launch)."""
    snapshot = DatasetSnapshot.objects.filter(pk=snapshot_id).first()
    if snapshot is None:
        raise ApplicationError(f"Dataset {snapshot_id} no longer exists.")
    return snapshot


def snapshot_card(*, snapshot: DatasetSnapshot) -> str:
    """The dataset card (README.md) as written, or "" before the export has written it."""
    if snapshot.directory and (Path(snapshot.directory) / "README.md").exists():
        return (Path(snapshot.directory) / "README.md").read_text(encoding="utf-8")[:CARD_LIMIT]
    return ""


def snapshot_file_path(*, snapshot: DatasetSnapshot, name: str) -> Path:
    """The path of one of the snapshot's files, by its name in ``files``; Http404 for any other
    name, or a path that would leave the dataset's directory."""
    entry = (snapshot.files or {}).get(name)
    if not entry or not snapshot.directory:
        raise Http404("No such file in this dataset.")
    path = (Path(snapshot.directory) / entry["path"]).resolve()
    if Path(snapshot.directory).resolve() not in path.parents or not path.is_file():
        raise Http404("No such file in this dataset.")
    return path


# --- what an export selects ----------------------------------------------------------------------


def _trajectory_ids(snapshot: DatasetSnapshot) -> list[int]:
    query = snapshot.query or {}
    filters = Filters.from_query({k: str(v) for k, v in query.items() if v not in (None, "")})
    selected = trajectory_list(filters=filters).filter(status="finished")
    # quarantined tasks' trajectories never enter a dataset (docs/task-health.md)
    selected = selected.exclude(task_id__in=quarantined_task_ids_query())
    qs = _by_gdi(selected, query)
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


def _by_gdi(qs: QuerySet[Trajectory], query: dict[str, Any]) -> QuerySet[Trajectory]:
    """The GDI filters of a snapshot's query (docs/gdi.md): ``min_gdi`` keeps trajectories whose
    stored GDI is at least that, ``top_gdi`` the N with the highest GDI (ties: the newest) among
    what the other filters select. A trajectory whose GDI was never computed has none: it passes
    neither."""
    if query.get("min_gdi") not in (None, ""):
        qs = qs.filter(gdi__total__gte=float(query["min_gdi"]))
    if query.get("top_gdi") not in (None, ""):
        top = qs.filter(gdi__isnull=False).order_by("-gdi__total", "-pk")
        qs = Trajectory.objects.filter(
            pk__in=list(top.values_list("pk", flat=True)[: int(query["top_gdi"])])
        )
    return qs


def _tools_for(environment: str, cache: dict[str, Any]) -> list[dict] | None:
    """The tools an environment offers (JSON-schema specs), for the system prompt and the
    "tools" column; None when the environment is unknown or cannot start here."""
    if not environment:
        return None
    if environment not in cache:
        try:
            env = make(environment, wrappers=False)
            try:
                cache[environment] = [t.as_dict() for t in env.available_tools]
            finally:
                env.close()
        except Exception:  # noqa: BLE001 - an unknown or unavailable env: no tool list
            cache[environment] = None
    return cache[environment]


def _items(snapshot: DatasetSnapshot, ids: list[int]) -> dict[int, Any]:
    specs = trajectory_specs(ids=ids)
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
    """Mean human label per step, of items complete for everyone (blind overlap)."""
    sums: dict[tuple[int, int], list[float]] = defaultdict(list)
    labels = StepLabel.objects.filter(trajectory_id__in=ids, value__isnull=False)
    for tid, index, value in visible_to(rows=labels, user=None).values_list(
        "trajectory_id", "index", "value"
    ):
        sums[(tid, index)].append(value)
    out: dict[int, dict[int, float]] = defaultdict(dict)
    for (tid, index), values in sums.items():
        out[tid][index] = sum(values) / len(values)
    return out


def label_snapshot() -> dict[str, Any]:
    """What the human labels were at export time: counts and the newest edit (provenance)."""
    return {
        "step_labels": StepLabel.objects.filter(value__isnull=False).count(),
        "last_label_edit": LabelEdit.objects.aggregate(m=Max("id"))["m"],
        "human_pairs": PreferencePair.objects.filter(source="human").count(),
    }


def selection_ids(*, snapshot: DatasetSnapshot) -> list[int]:
    """The finished trajectories the snapshot's query selects (its filters and minimum total)."""
    return _trajectory_ids(snapshot)


def dpo_pairs(*, reward_model_id: int | None, label_source: str) -> QuerySet[PreferencePair]:
    """The preference pairs a DPO export may use: people's (``label_source="human"``), or those
    built from the totals of reward-model version ``reward_model_id``."""
    pairs = PreferencePair.objects.filter(status=PreferencePair.Status.PAIR)
    if label_source == DatasetSnapshot.LabelSource.HUMAN:
        return pairs.filter(source=PreferencePair.Source.HUMAN)
    return pairs.filter(source=PreferencePair.Source.RULES, reward_model_id=reward_model_id)


def dpo_empty_message(
    *, snapshot: DatasetSnapshot, selected: int, built: dict[str, int] | None = None
) -> str:
    """Why a DPO export has no pair, and what to do: the step that is missing, not the filters
    unless the filters are the cause. ``built``: what building pairs in the same job gave."""
    if selected == 0:
        return (
            "The selection matched no finished trajectory, so there is nothing to pair: widen "
            "the filters."
        )
    if snapshot.label_source == DatasetSnapshot.LabelSource.HUMAN:
        return (
            f"None of the {selected} selected trajectories is in a preference pair people chose: "
            "human pairs come from pairwise annotation queues. Label pairs there first, or export "
            "from reward-model scores with “Build preference pairs first”."
        )
    version = snapshot.reward_model.label if snapshot.reward_model else "(none)"
    if built is not None and built.get("candidates", 0) == 0:
        return (
            f"None of the {selected} selected trajectories has a total from reward-model version "
            f"{version}, so no pair could be built: score them with that version first "
            "(Rewards → Score), then export again."
        )
    if built is not None:
        return (
            f"Building preference pairs from the totals of the {built['candidates']} scored "
            f"trajectories (of {selected} selected) gave no pair: a pair needs two scored "
            "trajectories of the same task whose totals differ by at least the minimum margin. "
            "Collect more attempts per task, or lower the margin."
        )
    total = dpo_pairs(reward_model_id=snapshot.reward_model_id, label_source="model").count()
    return (
        f"No preference pair of reward-model version {version} joins two of the {selected} "
        f"selected trajectories (the version has {total} pair(s) in all): DPO exports pairs, and "
        "these trajectories have not been paired yet. Export again with “Build preference pairs "
        "first” ticked (this job then builds them from the version's totals), or build them on "
        "the Preference pairs page (Rewards → Pairs, or `steplab preferences`)."
    )


def snapshot_again(*, id: int) -> dict[str, Any]:
    """The dataset form filled in as snapshot ``id`` was (a free name, the same kind, version,
    labels, filters and seed), with “Build preference pairs first” ticked: what a DPO export that
    found no pair offers to run again."""
    snapshot = snapshot_get(id=id)
    query = snapshot.query or {}
    return {
        **{k: v for k, v in query.items() if isinstance(v, (str, int, float))},
        "name": free_name(name=snapshot.name),
        "kind": snapshot.kind,
        "reward_model": snapshot.reward_model_id,
        "label_source": snapshot.label_source,
        "seed": snapshot.seed,
        "build_pairs": True,
        "pair_method": "outside_in",
        "min_margin": 0.1,
    }


def free_name(*, name: str) -> str:
    """``name``, or ``name-2``, ``name-3``… when a snapshot has it already."""
    taken = set(
        DatasetSnapshot.objects.filter(name__startswith=name[:110]).values_list("name", flat=True)
    )
    if name not in taken:
        return name
    n = 2
    while f"{name[:110]}-{n}" in taken:
        n += 1
    return f"{name[:110]}-{n}"


def export_records(*, snapshot: DatasetSnapshot, on_selected=None, built=None, included=None):
    """The rows of the snapshot (in trainer_core.datasets' vocabulary) and what was selected
    (counts for the card). ``on_selected(n)`` is told how many trajectories were selected;
    ``built``: what building DPO pairs in the same job gave (for the message when none);
    ``included`` (a list) is extended with the ids of the trajectories the rows come from.
    ApplicationError when a DPO selection has no pair, saying which step is missing."""
    included = [] if included is None else included
    kind = snapshot.kind
    if kind == "bench":
        tasks = (
            Task.objects.filter(task_set__name=snapshot.query.get("task_set"))
            .exclude(pk__in=quarantined_task_ids_query())
            .order_by("external_id")
        )
        return bench.benchmark_records(TaskSpec.model_validate(t.data) for t in tasks), {}
    if kind == "dpo":
        allowed = set(_trajectory_ids(snapshot))
        if on_selected is not None:
            on_selected(len(allowed))
        chosen = [
            p
            for p in dpo_pairs(
                reward_model_id=snapshot.reward_model_id, label_source=snapshot.label_source
            ).order_by("pk")
            if p.chosen_id in allowed and p.rejected_id in allowed
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
        if not triples:
            raise ApplicationError(
                dpo_empty_message(snapshot=snapshot, selected=len(allowed), built=built)
            )
        included.extend(sorted({t[k].trajectory_id for t in triples for k in (0, 1)}))
        return dpo.dpo_records(triples), {"pairs": len(triples)}
    ids = _trajectory_ids(snapshot)
    if on_selected is not None:
        on_selected(len(ids))
    items = list(_items(snapshot, ids).values())
    included.extend(item.trajectory_id for item in items)
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
