"""Reads behind task health (docs/task-health.md): each task's pass rate over every policy and run
(every finished trajectory of the task with an outcome: collect runs, evaluation runs, pipelines,
RL samples, imports), the detections of :mod:`trainer_core.evaluation.task_health`, and the
episodes behind each detection. The health page, the task page's panel, ``steplab tasks
health``, the API and the RL curriculum read them here.

It lives in rollouts because it needs the policies (which of them rerun identically, which play
the reference solution) and the trajectories; the tasks app below owns the quarantine.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.db.models.fields.json import KeyTextTransform

from trainer_core.errors import InputError
from trainer_core.evaluation.task_health import (
    DETERMINISTIC,
    FLAGS,
    SEEDED,
    Cell,
    RerunGroup,
    SetHealth,
    TaskHealth,
    Thresholds,
    health_of_tasks,
    is_reference,
    rerun_mode,
    wilson,
)
from webapp.common.errors import ApplicationError
from webapp.rollouts.models import Policy
from webapp.tasks.models import Task, TaskSet
from webapp.tasks.selectors import quarantined_task_ids
from webapp.trajectories.models import Trajectory

#: the most (task, policy) cells and rerun groups one health computation reads; beyond, the
#: page says the figures are partial
MAX_CELLS = 50_000
MAX_RERUN_GROUPS = 50_000
#: tasks per page of the health table, episodes per page of a detection's episodes
TASKS_PER_PAGE = 50
EPISODES_PER_PAGE = 50
#: flipped rerun groups whose episodes a flaky detection links to
MAX_FLIPPED_SHOWN = 50


def thresholds_from(*, values: Any) -> Thresholds:
    """Thresholds from a query string or options (defaults for what is absent); ApplicationError
    saying which value is wrong."""
    try:
        return Thresholds.from_values(values)
    except InputError as exc:
        raise ApplicationError(f"Invalid threshold: {exc}") from None


@dataclass(frozen=True)
class PolicyModes:
    reference: set[str]
    deterministic: set[str]
    seeded: set[str]


def policy_modes() -> PolicyModes:
    """Which stored policies play the reference solution, and how each reruns."""
    reference, deterministic, seeded = set(), set(), set()
    for name, kind, parameters in Policy.objects.values_list("name", "kind", "parameters"):
        mode = rerun_mode(kind, parameters)
        if is_reference(kind, parameters):
            reference.add(name)
        if mode == DETERMINISTIC:
            deterministic.add(name)
        elif mode == SEEDED:
            seeded.add(name)
    return PolicyModes(reference, deterministic, seeded)


def _outcomes(task_filter: Q):
    return Trajectory.objects.filter(
        task_filter, task__isnull=False, status=Trajectory.Status.FINISHED, success__isnull=False
    )


def policy_label(*, policy: str, agent: str, model: str) -> str:
    """The policy a trajectory counts under: its policy's name, or for an imported log its
    agent and model."""
    return policy or f"import: {agent or '?'} / {model or '?'}"


def _cells(task_filter: Q) -> tuple[list[Cell], bool]:
    rows = list(
        _outcomes(task_filter)
        .values("task_id", "policy", "agent", "model")
        .annotate(n=Count("id"), s=Count("id", filter=Q(success=True)))
        .order_by("task_id", "policy", "agent", "model")[: MAX_CELLS + 1]
    )
    merged: dict[tuple[int, str], list[int]] = {}
    for row in rows[:MAX_CELLS]:
        key = (row["task_id"], policy_label(policy=row["policy"], agent=row["agent"], model=row["model"]))  # fmt: skip
        merged.setdefault(key, [0, 0])
        merged[key][0] += row["n"]
        merged[key][1] += row["s"]
    cells = [Cell(task, policy, n, s) for (task, policy), (n, s) in merged.items()]
    return cells, len(rows) > MAX_CELLS


def _reruns(task_filter: Q, modes: PolicyModes) -> tuple[list[RerunGroup], bool]:
    """Groups of identical reruns, two or more episodes each, none cut short: a deterministic
    policy's episodes of a task; a seeded policy's of the same task, seed and episode number."""
    ended = _outcomes(task_filter).exclude(outcome__truncated=True)
    fixed = list(
        ended.filter(policy__in=sorted(modes.deterministic))
        .values("task_id", "policy")
        .annotate(n=Count("id"), s=Count("id", filter=Q(success=True)))
        .filter(n__gte=2)
        .order_by("task_id", "policy")[: MAX_RERUN_GROUPS + 1]
    )
    rows = list(
        ended.filter(policy__in=sorted(modes.seeded))
        .annotate(
            seed=KeyTextTransform("seed", "metadata"), ep=KeyTextTransform("episode", "metadata")
        )
        .filter(seed__isnull=False)
        .values("task_id", "policy", "seed", "ep")
        .annotate(n=Count("id"), s=Count("id", filter=Q(success=True)))
        .filter(n__gte=2)
        .order_by("task_id", "policy", "seed", "ep")[: MAX_RERUN_GROUPS + 1]
    )
    groups = [RerunGroup(r["task_id"], r["policy"], "", r["n"], r["s"]) for r in fixed]
    for r in rows[:MAX_RERUN_GROUPS]:
        key = f"seed {r['seed']}, episode {r['ep']}"
        groups.append(RerunGroup(r["task_id"], r["policy"], key, r["n"], r["s"]))
    return groups[:MAX_RERUN_GROUPS], len(fixed) + len(rows) > MAX_RERUN_GROUPS


@dataclass
class HealthReport:
    """A task set's health: the figures, the flags, and what was left out."""

    task_set: TaskSet
    health: SetHealth
    tasks: dict[int, Task]
    quarantined: set[int]
    partial: bool

    def rows(self, *, flag: str = "") -> list[dict[str, Any]]:
        """One row per task (by external id), those with ``flag`` only when given."""
        out = []
        for pk, task in sorted(self.tasks.items(), key=lambda kv: kv[1].external_id):
            h = self.health.tasks[pk]
            if flag and flag not in h.flags:
                continue
            out.append(_row(task, h, pk in self.quarantined))
        return out


def _row(task: Task, h: TaskHealth, quarantined: bool) -> dict[str, Any]:
    return {
        "task": task,
        "task_id": task.pk,
        "external_id": task.external_id,
        "episodes": h.episodes,
        "successes": h.successes,
        "pass_rate": h.pass_rate,
        "low": h.interval[0],
        "high": h.interval[1],
        "policies": h.policies,
        "reference": (h.reference_episodes, h.reference_successes),
        "strongest": h.strongest,
        "rerun_groups": h.rerun_groups,
        "flipped": len(h.flipped),
        "flags": h.flags,
        "flag_labels": [(f, FLAGS[f]) for f in h.flags],
        "quarantined": quarantined,
    }


def task_set_health(*, task_set: TaskSet, thresholds: Thresholds | None = None) -> HealthReport:
    """The health of every task of ``task_set`` (bounded: see :data:`MAX_CELLS`)."""
    where = Q(task__task_set=task_set)
    modes = policy_modes()
    cells, cut = _cells(where)
    reruns, cut_reruns = _reruns(where, modes)
    tasks = {t.pk: t for t in Task.objects.filter(task_set=task_set).only("pk", "external_id", "task_set_id")}  # fmt: skip
    health = health_of_tasks(
        [c for c in cells if c.task in tasks],
        [g for g in reruns if g.task in tasks],
        reference=modes.reference,
        thresholds=thresholds,
        tasks=tasks,
    )
    return HealthReport(
        task_set=task_set,
        health=health,
        tasks=tasks,
        quarantined=quarantined_task_ids(task_ids=tasks),
        partial=cut or cut_reruns,
    )


def task_set_health_page(
    *, task_set: TaskSet, thresholds: Thresholds | None = None, flag: str = "", page: Any = None
) -> tuple[HealthReport, Any]:
    """The report and one page (:data:`TASKS_PER_PAGE`) of its rows (those with ``flag``)."""
    report = task_set_health(task_set=task_set, thresholds=thresholds)
    flag = flag if flag in FLAGS else ""
    return report, Paginator(report.rows(flag=flag), TASKS_PER_PAGE).get_page(page)


def task_health(*, task: Task, thresholds: Thresholds | None = None) -> dict[str, Any]:
    """One task's health: its row, the set's strongest policy, and its outcomes per policy with
    their Wilson intervals."""
    report = task_set_health(task_set=task.task_set, thresholds=thresholds)
    h = report.health.tasks[task.pk]
    confidence = report.health.thresholds.confidence
    modes = policy_modes()
    per_policy = [
        {
            "policy": c.policy,
            "episodes": c.episodes,
            "successes": c.successes,
            "pass_rate": c.successes / c.episodes,
            "interval": wilson(c.successes, c.episodes, confidence),
            "reference": c.policy in modes.reference,
            "reruns": "deterministic"
            if c.policy in modes.deterministic
            else "seeded"
            if c.policy in modes.seeded
            else "",  # fmt: skip
        }
        for c in _cells(Q(task=task))[0]
    ]
    return {
        "task": task,
        "row": _row(task, h, task.pk in report.quarantined),
        "health": h,
        "strongest": report.health.strongest,
        "strongest_rate": report.health.strongest_rate,
        "thresholds": report.health.thresholds,
        "per_policy": sorted(per_policy, key=lambda r: (-r["episodes"], r["policy"])),
        "flipped": h.flipped[:MAX_FLIPPED_SHOWN],
        "partial": report.partial,
    }


#: what each detection's episodes are
EPISODE_KINDS = {
    "all": "every episode with an outcome",
    "pass": "passed episodes",
    "fail": "failed episodes",
    **FLAGS,
}


def _label_filter(label: str) -> Q:
    if label.startswith("import: "):
        agent, _, model = label.removeprefix("import: ").partition(" / ")
        return Q(policy="", agent="" if agent == "?" else agent, model="" if model == "?" else model)  # fmt: skip
    return Q(policy=label)


def _group_filter(group: RerunGroup) -> Q:
    """The episodes of one rerun group (those cut short are in none)."""
    where = Q(policy=group.policy) & ~Q(outcome__truncated=True)
    if not group.key:  # a deterministic policy's episodes of the task
        return where
    seed, _, episode = group.key.removeprefix("seed ").partition(", episode ")
    return where & Q(metadata__seed=_number(seed), metadata__episode=_number(episode))


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        return text


def health_episodes(
    *, task: Task, kind: str, thresholds: Thresholds | None = None, page: Any = None
) -> tuple[str, Any]:
    """The episodes behind one detection of ``task`` (``kind``: one of :data:`EPISODE_KINDS`),
    newest first, one page (:data:`EPISODES_PER_PAGE`) at a time, and what they are."""
    if kind not in EPISODE_KINDS:
        raise ApplicationError(f"Unknown kind {kind!r}: one of {', '.join(EPISODE_KINDS)}.")
    qs = _outcomes(Q(task=task))
    if kind in ("pass", "always_pass"):
        qs = qs.filter(success=True)
    elif kind in ("fail", "always_fail"):
        qs = qs.filter(success=False)
    elif kind in ("flaky", "false_negative", "reference_fails"):
        qs = qs.filter(_detection_filter(task=task, kind=kind, thresholds=thresholds))
    rows = qs.only("id", "policy", "agent", "model", "success", "metadata", "created_at", "step_count")  # fmt: skip
    return EPISODE_KINDS[kind], Paginator(rows.order_by("-id"), EPISODES_PER_PAGE).get_page(page)


def _detection_filter(*, task: Task, kind: str, thresholds: Thresholds | None) -> Q:
    modes = policy_modes()
    if kind == "reference_fails":
        return Q(policy__in=sorted(modes.reference), success=False)
    detail = task_health(task=task, thresholds=thresholds)
    if kind == "flaky":
        groups = detail["flipped"]
        if not groups:
            return Q(pk__in=[])
        where = Q()
        for group in groups:
            where |= _group_filter(group)
        return where
    strongest = detail["strongest"]
    if strongest is None:
        return Q(pk__in=[])
    return (_label_filter(strongest) & Q(success=False)) | Q(
        policy__in=sorted(modes.reference), success=True
    )


# --- for the RL curriculum ----------------------------------------------------------------------


def task_pass_counts(*, task_ids: Iterable[int]) -> dict[int, tuple[int, int]]:
    """``{task id: (successes, episodes)}`` over every stored outcome of these tasks (a task
    without any is absent)."""
    ids = list(task_ids)
    rows = (
        _outcomes(Q(task_id__in=ids))
        .values("task_id")
        .annotate(n=Count("id"), s=Count("id", filter=Q(success=True)))
        .order_by()
    )
    return {r["task_id"]: (r["s"], r["n"]) for r in rows}
