"""The collect job: a parent that fans out over the ``rollouts`` queue, children that play
episodes and stream their steps into the trajectory store.

- The parent (``rollouts.collect``) starts ``concurrency`` children and waits for them; when the
  last one ends it summarises the run (episodes left pending — spend cap, cancel — are marked
  skipped).
- Each child (``rollouts.collect_episodes``) claims pending episodes one at a time (row lock,
  SKIP LOCKED on PostgreSQL) until none is left, so more workers on more machines finish sooner.
  Every step is appended under the episode's idempotency key as it happens.
- Both kinds are resumable. When a worker dies, the reaper re-queues its child; the new attempt
  first starts over the episodes that child had claimed (their partial steps are deleted, so each
  episode's steps are stored once), then claims more. Finished episodes are never re-run.
- Cancel: the children stop claiming, the running episode's environment is interrupted and
  closed at once (a sandbox is killed), and the episodes not played are marked skipped.
"""

from __future__ import annotations

from typing import Any

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from webapp.common.errors import ApplicationError
from webapp.jobs import kinds, task_names
from webapp.jobs.context import JobCancelled, JobContext
from webapp.rollouts.models import CollectRun, Episode
from webapp.rollouts.services import COLLECT_KIND, EPISODES_KIND, build


def register() -> None:
    kinds.register_kind(
        kinds.JobKind(
            name=COLLECT_KIND,
            label="Collect rollouts",
            task_name=task_names.COLLECT,
            queue="default",
            resumable=True,
            detail_template="rollouts/partials/collect_job_detail.html",
            description="Episodes of a policy on a task set, fanned out over the rollouts queue.",
        )
    )
    kinds.register_kind(
        kinds.JobKind(
            name=EPISODES_KIND,
            label="Collect episodes",
            task_name=task_names.COLLECT_EPISODES,
            queue="rollouts",
            resumable=True,
            description="Claims and plays pending episodes of a collect run until none is left.",
        )
    )


def _run(ctx: JobContext) -> CollectRun:
    run = CollectRun.objects.select_related("policy", "task_set").filter(
        pk=ctx.params.get("run_id")
    )
    found = run.first()
    if found is None:
        raise ApplicationError(f"Collect run {ctx.params.get('run_id')} no longer exists.")
    return found


def _summary_line(run: CollectRun) -> str:
    rate = f", {run.success_rate:.0%} successful" if run.success_rate is not None else ""
    cost = f", ${run.cost_usd:.4f}" if run.cost_usd else ""
    return (
        f"{run.finished_episodes} of {run.episodes_total} episodes done "
        f"({run.episodes_failed} failed{rate}{cost})."
    )


# --- the parent -------------------------------------------------------------------------------


def collect_run(*, ctx: JobContext) -> Any:
    run = _run(ctx)
    if ctx.stage == "":
        if not ctx.children().exists():
            pending = run.episodes.filter(status=Episode.Status.PENDING).count()
            # a local model's episodes run where the models are: the gpu queue
            queue = "gpu" if run.policy.kind == "local" else None
            for _ in range(max(1, min(run.concurrency, pending))):
                ctx.spawn(EPISODES_KIND, {"run_id": run.pk}, queue=queue)
            ctx.log(
                f"started {min(run.concurrency, pending)} episode workers for {pending} episodes"
            )
        ctx.progress(0.0, f"Playing {run.episodes_total} episodes…", force=True)
        return ctx.wait_for_children(next_stage="summarize")

    # summarize
    with transaction.atomic():
        reason = run.stop_reason or "not played (the run stopped)"
        run.episodes.filter(status=Episode.Status.PENDING).update(
            status=Episode.Status.SKIPPED, error=reason
        )
        lost = run.episodes.filter(status=Episode.Status.RUNNING)
        lost_count = lost.update(
            status=Episode.Status.FAILED,
            error="its worker stopped and the episode could not be resumed",
            finished_at=timezone.now(),
        )
        if lost_count:
            CollectRun.objects.filter(pk=run.pk).update(
                episodes_failed=F("episodes_failed") + lost_count
            )
    run.refresh_from_db()
    counts = {
        status: run.episodes.filter(status=status).count() for status in Episode.Status.values
    }
    ctx.set_result(
        episodes=counts,
        success_rate=run.success_rate,
        tokens_in=run.tokens_in,
        tokens_out=run.tokens_out,
        cost_usd=run.cost_usd,
        stop_reason=run.stop_reason,
    )
    failed_children = ctx.children().exclude(status="succeeded").count()
    if failed_children and not counts[Episode.Status.FINISHED]:
        raise ApplicationError(
            f"No episode finished and {failed_children} episode worker(s) failed; open them "
            "below for their errors."
        )
    ctx.progress(1.0, _summary_line(run), force=True)
    return None


# --- the children -------------------------------------------------------------------------------


def _claim(run: CollectRun, job_id: int) -> Episode | None:
    skip = connection.features.has_select_for_update_skip_locked
    with transaction.atomic():
        episode = (
            Episode.objects.select_for_update(skip_locked=skip)
            .filter(run=run, status=Episode.Status.PENDING)
            .order_by("task_id", "index")
            .first()
        )
        if episode is None:
            return None
        episode.status = Episode.Status.RUNNING
        episode.claimed_by = job_id
        episode.attempts += 1
        episode.started_at = timezone.now()
        episode.save(update_fields=["status", "claimed_by", "attempts", "started_at", "updated_at"])
    return episode


def _over_cap(run_id: int, cap: float | None) -> str | None:
    if cap is None:
        return None
    spent = CollectRun.objects.filter(pk=run_id).values_list("cost_usd", flat=True).first() or 0.0
    if spent >= cap:
        return f"spend cap of ${cap:.2f} reached (${spent:.4f} spent)"
    return None


def collect_episodes_run(*, ctx: JobContext) -> None:
    run = _run(ctx)
    # A resumed attempt: the episodes this child had claimed start over.
    orphans = run.episodes.filter(claimed_by=ctx.job_id, status=Episode.Status.RUNNING)
    restarted = orphans.update(status=Episode.Status.PENDING, claimed_by=None)
    if restarted:
        ctx.log(f"attempt {ctx.attempt}: starting {restarted} interrupted episode(s) over")
    played = 0
    try:
        while True:
            ctx.check()
            reason = _over_cap(run.pk, run.spend_cap_usd)
            if reason:
                CollectRun.objects.filter(pk=run.pk, stop_reason="").update(stop_reason=reason)
                ctx.log(reason)
                break
            episode = _claim(run, ctx.job_id)
            if episode is None:
                break
            _play(ctx, run, episode)
            played += 1
    except JobCancelled:
        from webapp.trajectories.services import trajectory_finish

        interrupted = run.episodes.filter(
            claimed_by=ctx.job_id, status=Episode.Status.RUNNING
        ).select_related("trajectory")
        for episode in interrupted:
            if episode.trajectory is not None:
                trajectory_finish(
                    trajectory=episode.trajectory,
                    outcome={"truncated": True, "metadata": {"stopped": "cancelled"}},
                    failed=True,
                    error="the run was cancelled during this episode",
                )
            episode.status = Episode.Status.SKIPPED
            episode.error = "cancelled while running"
            episode.finished_at = timezone.now()
            episode.save(update_fields=["status", "error", "finished_at", "updated_at"])
        run.episodes.filter(status=Episode.Status.PENDING).update(
            status=Episode.Status.SKIPPED, error="the run was cancelled"
        )
        CollectRun.objects.filter(pk=run.pk, stop_reason="").update(stop_reason="cancelled")
        raise
    run.refresh_from_db()
    ctx.set_result(played=played)
    ctx.progress(1.0, f"Played {played} episode(s). Run: {_summary_line(run)}", force=True)


def _play(ctx: JobContext, run: CollectRun, episode: Episode) -> None:
    from trainer_core.envs import make
    from trainer_core.rollouts.collect import EpisodeSpec, run_episode
    from trainer_core.tasks.model import Task as TaskSpec
    from webapp.jobs.services import job_report_for_children
    from webapp.trajectories import services as store

    task_row = episode.task
    task = TaskSpec.model_validate(task_row.data)
    policy_row = run.policy
    trajectory = store.trajectory_begin(
        key=episode.idempotency_key,
        prompt=task.prompt,
        task=task_row,
        task_ref=task_row.external_id,
        domain=task_row.domain,
        agent="steplab",
        model=policy_row.model or policy_row.kind,
        policy=policy_row.name,
        environment=run.environment,
        metadata={"collect_run": run.pk, "episode": episode.index, "seed": episode.seed},
    )
    if trajectory.step_count or trajectory.steps.exists():
        trajectory = store.trajectory_restart(trajectory=trajectory)
    episode.trajectory = trajectory
    episode.steps = episode.tokens_in = episode.tokens_out = 0
    episode.cost_usd = 0.0
    episode.save(
        update_fields=["trajectory", "steps", "tokens_in", "tokens_out", "cost_usd", "updated_at"]
    )

    overrides: dict[str, Any] = {"max_steps": None}
    if run.step_timeout:
        overrides["step_seconds"] = run.step_timeout
    env = make(run.environment, **overrides)
    ctx.on_cancel(lambda: _stop_env(env))
    spec = EpisodeSpec(task=task, episode=episode.index, seed=episode.seed)

    def on_step(_spec, step) -> None:
        store.trajectory_append_step(trajectory=trajectory, step=step)
        cost = float(step.metadata.get("cost") or 0.0)
        tokens_in, tokens_out = step.tokens_in or 0, step.tokens_out or 0
        Episode.objects.filter(pk=episode.pk).update(
            steps=step.index + 1,
            tokens_in=F("tokens_in") + tokens_in,
            tokens_out=F("tokens_out") + tokens_out,
            cost_usd=F("cost_usd") + cost,
        )
        if cost or tokens_in or tokens_out:
            CollectRun.objects.filter(pk=run.pk).update(
                tokens_in=F("tokens_in") + tokens_in,
                tokens_out=F("tokens_out") + tokens_out,
                cost_usd=F("cost_usd") + cost,
            )
        ctx.progress(
            None, f"Episode {episode.index} of task {task_row.external_id}: step {step.index}"
        )

    try:
        policy = build(policy_row, seed=episode.seed)
        result = run_episode(
            env,
            policy,
            spec,
            max_steps=run.max_steps,
            environment=run.environment,
            policy_name=policy_row.name,
            model=policy_row.model,
            on_step=on_step,
            should_stop=lambda: _over_cap(run.pk, run.spend_cap_usd),
        )
    except ApplicationError as exc:  # the policy cannot be built: fail this episode clearly
        result = None
        error = exc.message
    finally:
        _stop_env(env)
    if result is not None:
        error = result.error or ""
        outcome = result.trajectory.outcome
    else:
        from trainer_core.recording.schema import Outcome

        outcome = Outcome(metadata={"error": error})
    failed = bool(error)
    store.trajectory_finish(
        trajectory=trajectory,
        outcome=outcome,
        failed=failed,
        error=error,
        cost_usd=result.usage.cost if result is not None else 0.0,
    )
    trajectory.refresh_from_db()
    with transaction.atomic():
        Episode.objects.filter(pk=episode.pk).update(
            status=Episode.Status.FAILED if failed else Episode.Status.FINISHED,
            success=None if failed else outcome.success,
            reward=trajectory.reward,
            steps=trajectory.step_count,
            error=error or (result.stopped if result is not None and result.stopped else ""),
            finished_at=timezone.now(),
        )
        CollectRun.objects.filter(pk=run.pk).update(
            episodes_done=F("episodes_done") + (0 if failed else 1),
            episodes_failed=F("episodes_failed") + (1 if failed else 0),
            successes=F("successes") + (1 if (not failed and outcome.success) else 0),
        )
    run.refresh_from_db()
    parent_id = ctx.params.get("parent_id") or _parent_id(ctx)
    if parent_id:
        job_report_for_children(
            job_id=parent_id,
            progress=run.finished_episodes / max(run.episodes_total, 1),
            message=_summary_line(run),
        )
    ctx.progress(
        run.finished_episodes / max(run.episodes_total, 1),
        _summary_line(run),
        metrics={
            "episodes_done": run.episodes_done,
            "episodes_failed": run.episodes_failed,
            "success_rate": run.success_rate if run.success_rate is not None else 0.0,
            "cost_usd": run.cost_usd,
        },
        force=True,
    )


def _parent_id(ctx: JobContext) -> int | None:
    from webapp.jobs.models import Job

    return Job.objects.filter(pk=ctx.job_id).values_list("parent_id", flat=True).first()


def _stop_env(env: Any) -> None:
    for call in (getattr(env, "interrupt", None), getattr(env, "close", None)):
        if call is not None:
            try:
                call()
            except Exception:  # noqa: S112 - best effort while stopping
                continue
