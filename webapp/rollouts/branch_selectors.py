"""Reads of branch sets (docs/branching.md): whether a step can be branched and why not, a set
with its continuations and pairs, the sets of a trajectory's steps, the exports' rows."""

from __future__ import annotations

from typing import Any

from django.http import Http404

from trainer_core.datasets.branch_pairs import pair_dpo_records, pair_prm_records
from trainer_core.datasets.items import ExportItem, ExportStats
from trainer_core.envs import UnknownEnvironment
from trainer_core.envs import spec as env_spec
from trainer_core.policies.chat_format import system_prompt
from trainer_core.recording.schema import Step as StepSpec
from trainer_core.recording.schema import Trajectory as TrajectorySpec
from trainer_core.rollouts.branching import (
    BranchRefused,
    prefix_actions,
)
from trainer_core.rollouts.branching import (
    branch_refusal as core_refusal,
)
from webapp.rollouts.models import BranchContinuation, BranchSet
from webapp.trajectories.models import Step, Trajectory
from webapp.trajectories.selectors import trajectory_specs

#: branch sets listed on a trajectory's page
SETS_SHOWN = 50
EXPORT_KINDS = ("dpo", "prm")


def trajectory_refusal(*, trajectory: Trajectory) -> str | None:
    """Why this trajectory cannot be branched at any step (None: it can)."""
    known = True
    if trajectory.environment:
        try:
            env_spec(trajectory.environment)
        except UnknownEnvironment:
            known = False
    return core_refusal(
        source=trajectory.source,
        environment=trajectory.environment,
        has_task=trajectory.task_id is not None,
        known_environment=known,
    )


def branch_refusal(*, trajectory: Trajectory, step: int) -> str | None:
    """Why step ``step`` of this trajectory cannot be branched (None: it can)."""
    refusal = trajectory_refusal(trajectory=trajectory)
    if refusal:
        return refusal
    if trajectory.status == Trajectory.Status.RUNNING:
        return "This trajectory is still running; branch it once it has ended."
    try:
        prefix_actions(_steps_until(trajectory=trajectory, step=step), step)
    except BranchRefused as exc:
        return str(exc)
    return None


#: what the prefix check reads of each step up to the branch step
_PREFIX_FIELDS = ("index", "kind", "role", "text", "tool", "params", "metadata")


def _steps_until(*, trajectory: Trajectory, step: int) -> TrajectorySpec:
    """The trajectory with only its steps up to ``step``, and only what the prefix check reads
    (one query; a long trajectory's later steps are not loaded)."""
    rows = (
        Step.objects.filter(trajectory=trajectory, index__lte=step)
        .order_by("index")
        .values_list(*_PREFIX_FIELDS)
    )
    steps = []
    for values in rows:
        data = dict(zip(_PREFIX_FIELDS, values, strict=True))
        data["role"] = data["role"] or None
        steps.append(StepSpec.model_construct(**data))
    return TrajectorySpec.model_construct(steps=steps)


def branch_set_get(*, id: int) -> BranchSet:
    try:
        return BranchSet.objects.select_related("parent", "policy", "job").get(pk=id)
    except BranchSet.DoesNotExist:
        raise Http404("No such branch set.") from None


def branch_set_for_job(*, id: Any) -> BranchSet:
    return BranchSet.objects.select_related("parent", "parent__task", "policy").get(pk=id)


def pending_continuations(*, branch_set: BranchSet) -> list[BranchContinuation]:
    return list(
        branch_set.continuations.filter(status=BranchContinuation.Status.PENDING).order_by("number")
    )


def continuation_specs(*, continuations: list[BranchContinuation]) -> list[TrajectorySpec]:
    """The continuations' trajectories in the canonical schema, in the given order."""
    specs = trajectory_specs(ids=[c.trajectory_id for c in continuations])
    return [specs[c.trajectory_id] for c in continuations]


def branch_set_detail(*, branch_set: BranchSet) -> dict[str, Any]:
    """The set's continuations (with their trajectories) and its pairs, for the page and API."""
    continuations = list(branch_set.continuations.select_related("trajectory").order_by("number"))
    by_id = {c.trajectory_id: c.number for c in continuations if c.trajectory_id}
    pairs = [
        {**p, "chosen_number": by_id.get(p["chosen"]), "rejected_number": by_id.get(p["rejected"])}
        for p in branch_set.pairs
    ]
    return {"branch_set": branch_set, "continuations": continuations, "pairs": pairs}


def branch_sets_of(*, trajectory: Trajectory) -> list[BranchSet]:
    """The branch sets of this trajectory's steps, by step then newest first."""
    return list(
        BranchSet.objects.filter(parent=trajectory)
        .select_related("policy", "job")
        .order_by("step_index", "-id")[:SETS_SHOWN]
    )


def _items(branch_set: BranchSet) -> dict[int, ExportItem]:
    ids = sorted({p[side] for p in branch_set.pairs for side in ("chosen", "rejected")})
    specs = trajectory_specs(ids=ids)
    step_ids: dict[int, list[int]] = {i: [] for i in ids}
    for tid, pk in (
        Step.objects.filter(trajectory_id__in=ids)
        .order_by("trajectory_id", "index")
        .values_list("trajectory_id", "pk")
    ):
        step_ids[tid].append(pk)
    rewards = dict(Trajectory.objects.filter(pk__in=ids).values_list("pk", "reward"))
    tools = list(branch_set.tools or []) or None
    return {
        tid: ExportItem(
            trajectory_id=tid,
            trajectory=specs[tid],
            step_ids=step_ids[tid],
            reward=rewards.get(tid),
            tools=tools,
            system=system_prompt(tools) if tools else None,
        )
        for tid in ids
        if tid in specs
    }


def _lineage(branch_set: BranchSet, pair: dict[str, Any]) -> dict[str, Any]:
    return {
        "parent_trajectory_id": branch_set.parent_id,
        "branch_step": branch_set.step_index,
        "branch_set_id": branch_set.pk,
        "policy": branch_set.policy.name,
        "chosen_continuation_id": pair["chosen"],
        "rejected_continuation_id": pair["rejected"],
        "divergent_step": pair["divergent_step"],
        "value_estimate": branch_set.value,
        "value_interval": [branch_set.value_low, branch_set.value_high],
    }


def branch_export_rows(*, branch_set: BranchSet, kind: str) -> tuple[list[dict], ExportStats]:
    """The set's pairs as step-level DPO rows (``dpo``) or PRM labels (``prm``), each with its
    lineage; bounded by the set's pair cap."""
    if kind not in EXPORT_KINDS:
        raise Http404("Export DPO pairs (dpo) or PRM labels (prm).")
    items = _items(branch_set)
    stats = ExportStats()
    pairs = [p for p in branch_set.pairs if p["chosen"] in items and p["rejected"] in items]
    if kind == "dpo":
        triples = [
            (items[p["chosen"]], items[p["rejected"]], _lineage(branch_set, p)) for p in pairs
        ]
        return list(pair_dpo_records(triples, stats=stats)), stats
    sides = []
    for p in pairs:
        lineage = _lineage(branch_set, p)
        sides.append((items[p["chosen"]], p["divergent_step"], True, lineage))
        sides.append((items[p["rejected"]], p["divergent_step"], False, lineage))
    return list(pair_prm_records(sides, stats=stats)), stats


def branch_form_context(*, trajectory_id: int, step: int) -> dict[str, Any]:
    """The "Branch from here" form's context: the trajectory, the step, why it cannot be
    branched (None: it can), and the branch sets already made at that step."""
    from webapp.trajectories.selectors import trajectory_get

    row = trajectory_get(id=trajectory_id, source_file=False)
    return {
        "row": row,
        "step": step,
        "refusal": branch_refusal(trajectory=row, step=step),
        "existing": [s for s in branch_sets_of(trajectory=row) if s.step_index == step],
    }


def trajectory_branches(*, trajectory_id: int) -> dict[str, Any]:
    from webapp.trajectories.selectors import trajectory_get

    row = trajectory_get(id=trajectory_id, source_file=False)
    return {
        "row": row,
        "branch_sets": branch_sets_of(trajectory=row),
        "refusal": trajectory_refusal(trajectory=row),
    }
