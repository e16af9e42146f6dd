"""Reads for decoupled RL runs (issue 19): the run a job works on, its trainer config, which task a
group index plays, whether a sampler may start a group now, and the figures of the run's page
(versions, queue depth, samplers, staleness, the reward curve linked to the groups of each step).
"""

from __future__ import annotations

import random
from datetime import timedelta
from typing import Any

from django.db.models import Avg, Count, Max, Q, Sum
from django.utils import timezone

from trainer_core.training.config import config_from_dict
from trainer_core.training.curriculum import pick_near_target
from webapp.common.errors import ApplicationError
from webapp.jobs.models import TERMINAL_STATUSES, Job
from webapp.jobs.names import Kinds
from webapp.rollouts.health import task_pass_counts
from webapp.training.models import PolicyVersion, RLRun, SampleGroup

#: Groups ready and not yet taken (plus those being sampled) above which samplers wait, as a
#: multiple of the groups a trainer step takes, when the run does not set ``max_queue``.
QUEUE_BATCHES = 4

#: How far back the page's episodes/min of each sampler looks.
RATE_WINDOW = timedelta(minutes=2)


def decoupled_config_class():
    """The decoupled trainer's config dataclass (imported when needed: it is the training stack's)."""
    from trainer_core.training.decoupled import DecoupledConfig

    return DecoupledConfig


def rl_run_for_job(*, run_id: int | None) -> RLRun:
    """The RL run a job works on (ApplicationError: deleted since launch)."""
    run = (
        RLRun.objects.select_related("training_run", "sampler_policy", "reward_model")
        .filter(pk=run_id)
        .first()
    )
    if run is None:
        raise ApplicationError(f"RL run {run_id} no longer exists.")
    return run


def rl_run_get(*, id: int) -> RLRun | None:
    return (
        RLRun.objects.select_related("training_run", "job", "sampler_policy", "reward_model")
        .filter(pk=id)
        .first()
    )


def rl_run_of_training_run(*, training_run_id: int) -> RLRun | None:
    """The RL run behind a training run (None: an ordinary SFT/DPO/GRPO run)."""
    return RLRun.objects.filter(training_run_id=training_run_id).first()


def decoupled_config(*, run: RLRun) -> Any:
    """The run's DecoupledConfig, as launched (the trainer's and the samplers' options)."""
    return config_from_dict(decoupled_config_class(), dict(run.training_run.config))


def max_queue(*, run: RLRun, config: Any) -> int:
    """Groups ready or being sampled above which samplers wait."""
    return run.max_queue or QUEUE_BATCHES * config.groups_per_step


def group_task(*, run: RLRun, index: int) -> tuple[int, int]:
    """(Task id, sampling seed) of group ``index``: the run's task list in an order shuffled
    afresh (seeded by the run seed) for every pass over it, so every task is played once per
    pass, and a seed that is a function of the run seed and the index. With the run's
    ``target_pass_rate`` above 0, the task is drawn instead with :func:`pick_near_target`'s
    weights of :func:`curriculum_counts` (seeded by the same numbers)."""
    task_ids = list(run.task_ids)
    if not task_ids:
        raise ApplicationError(f"RL run {run.pk} has no tasks.")
    seed = run.seed * 1_000_003 + index * 7919 + 17
    config = run.training_run.config or {}
    target = float(config.get("target_pass_rate") or 0.0)
    if target > 0:  # the curriculum near a target pass rate (docs/task-health.md)
        counts = curriculum_counts(run=run, task_ids=[int(t) for t in task_ids])
        pick = pick_near_target(
            [counts.get(int(t), (0, 0)) for t in task_ids],
            target=target,
            bandwidth=float(config.get("pass_rate_bandwidth") or 0.15),
            seed=seed + 12,
        )
        return int(task_ids[pick]), seed
    passes, position = divmod(index, len(task_ids))
    order = list(range(len(task_ids)))
    random.Random(run.seed * 1_000_003 + passes).shuffle(order)
    return int(task_ids[order[position]]), seed


def curriculum_counts(*, run: RLRun, task_ids: list[int]) -> dict[int, tuple[int, int]]:
    """``{task id: (successes, episodes)}`` the curriculum weighs each task by: the run's own
    played groups of the task (the policy being trained), else every stored outcome of the task
    (task health); a task with neither is absent (never played: the most weight)."""
    own: dict[int, list[int]] = {}
    played = (
        SampleGroup.objects.filter(run=run, task_id__in=task_ids, episodes__gt=0)
        .exclude(status=SampleGroup.Status.SAMPLING)
        .values_list("task_id", "episodes", "success_rate")
    )
    for task_id, episodes, rate in played:
        total = own.setdefault(task_id, [0, 0])
        total[0] += round((rate or 0.0) * episodes)
        total[1] += episodes
    counts = task_pass_counts(task_ids=[t for t in task_ids if t not in own])
    counts.update({t: (s, n) for t, (s, n) in own.items()})
    return counts


def latest_version(*, run: RLRun) -> PolicyVersion | None:
    return run.versions.order_by("-version").first()


def trainer_job(*, run: RLRun) -> Job | None:
    """The run's trainer job (None until the parent has started it)."""
    if run.job_id is None:
        return None
    return Job.objects.filter(parent_id=run.job_id, kind=Kinds.RL_TRAINER).order_by("pk").first()


def trainer_ended(*, run: RLRun) -> bool:
    job = trainer_job(run=run)
    return job is not None and job.status in TERMINAL_STATUSES


def sampling_wait_reason(*, run: RLRun, config: Any, version: int, newest: int) -> str:
    """Why a sampler whose loaded version is ``version`` (the newest published: ``newest``) must
    not start a group now; "" when it may.

    Decoupled: while the queue (groups ready or being sampled) holds :func:`max_queue` groups.
    Synchronous (the baseline): unless ``version`` is the newest and that version has fewer
    groups (in any state but dropped) than its optimizer steps need (``publish_every`` × the
    groups per step), so every group is trained on by the version that sampled it."""
    # a group released by a dead sampler (owned by none) waits to be claimed again: it is the
    # next group a sampler plays, so it neither fills the queue nor counts as made
    groups = SampleGroup.objects.filter(run=run).exclude(
        status=SampleGroup.Status.SAMPLING, sampler_job__isnull=True
    )
    if config.synchronous:
        if version != newest:
            return f"version {newest} is published; load it first"
        needed = config.publish_every * config.groups_per_step
        made = groups.filter(version=version).exclude(status=SampleGroup.Status.DROPPED).count()
        if made >= needed:
            return f"version {version} has its {needed} groups; waiting for the trainer"
        return ""
    bound = max_queue(run=run, config=config)
    queued = groups.filter(
        status__in=[SampleGroup.Status.READY, SampleGroup.Status.SAMPLING]
    ).count()
    if queued >= bound:
        return f"{queued} groups queued (the bound is {bound}); waiting for the trainer"
    return ""


# --- the run's page ---------------------------------------------------------------------------


def group_counts(*, run: RLRun) -> dict[str, int]:
    """Groups per status (every status present, 0 when none)."""
    counts = dict.fromkeys(SampleGroup.Status.values, 0)
    for row in run.groups.values("status").annotate(n=Count("pk")):
        counts[row["status"]] = row["n"]
    return counts


def staleness_histogram(*, run: RLRun) -> list[dict[str, int]]:
    """``[{"staleness", "consumed", "dropped"}]`` over the groups the trainer has taken, by
    staleness (ascending)."""
    rows = (
        run.groups.filter(staleness__isnull=False)
        .values("staleness")
        .annotate(
            consumed=Count("pk", filter=Q(status=SampleGroup.Status.CONSUMED)),
            dropped=Count("pk", filter=Q(status=SampleGroup.Status.DROPPED)),
        )
        .order_by("staleness")
    )
    return [dict(row) for row in rows]


def version_timeline(*, run: RLRun) -> list[dict[str, Any]]:
    """Each published version: number, step, path, when, and the groups it sampled."""
    sampled = dict(
        run.groups.exclude(status=SampleGroup.Status.SAMPLING)
        .values_list("version")
        .annotate(n=Count("pk"))
    )
    return [
        {
            "version": v.version,
            "step": v.step,
            "path": v.path,
            "published_at": v.published_at,
            "groups": sampled.get(v.version, 0),
        }
        for v in run.versions.order_by("version")
    ]


def samplers_overview(*, run: RLRun, now=None) -> list[dict[str, Any]]:
    """The run's sampler jobs: status, worker, groups made and episodes per minute over the last
    :data:`RATE_WINDOW`."""
    now = now or timezone.now()
    if run.job_id is None:
        return []
    jobs = Job.objects.filter(parent_id=run.job_id, kind=Kinds.RL_SAMPLER).order_by("pk")
    made = {
        row["sampler_job"]: row
        for row in run.groups.exclude(status=SampleGroup.Status.SAMPLING)
        .values("sampler_job")
        .annotate(
            groups=Count("pk"),
            recent=Sum("episodes", filter=Q(ready_at__gte=now - RATE_WINDOW)),
        )
    }
    out = []
    for job in jobs:
        row = made.get(job.pk, {})
        out.append(
            {
                "job": job,
                "online": job.status == "running" and bool(job.worker),
                "groups": row.get("groups", 0),
                "episodes_per_min": (row.get("recent") or 0) / (RATE_WINDOW.total_seconds() / 60),
            }
        )
    return out


def rl_run_overview(*, run: RLRun) -> dict[str, Any]:
    """The run's totals: group counts, queue depth, versions, samplers, the staleness histogram and its mean and max (the parent job's summary; the page reads its parts through ``rl_pages``)."""
    counts = group_counts(run=run)
    staleness = run.groups.filter(staleness__isnull=False).aggregate(
        mean=Avg("staleness"), max=Max("staleness")
    )
    return {
        "run": run,
        "counts": counts,
        "queue_depth": counts[SampleGroup.Status.READY],
        "versions": version_timeline(run=run),
        "samplers": samplers_overview(run=run),
        "staleness": staleness_histogram(run=run),
        "staleness_mean": staleness["mean"],
        "staleness_max": staleness["max"],
    }
