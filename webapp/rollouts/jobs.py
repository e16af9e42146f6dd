"""The rollouts app's job kinds: a collect run's parent that fans out over the ``rollouts``
queue, and the children that play episodes and stream their steps into the trajectory store.

- The parent (``rollouts.collect``) starts ``concurrency`` children and waits for them; when the
  last one ends it summarises the run (episodes left pending — spend cap, cancel — are marked
  skipped).
- Each child (``rollouts.collect_episodes``) claims pending episodes (row lock, SKIP LOCKED on
  PostgreSQL) until none is left, so more workers on more machines finish sooner: one at a time,
  or for a local model up to :data:`LOCAL_MODEL_BATCH` played together turn by turn, one batched
  decode per turn, a new episode claimed as soon as one ends.
  Every step is appended under the episode's idempotency key as it happens.
- Both kinds are resumable. When a worker dies, the reaper re-queues its child; the new attempt
  first starts over the episodes that child had claimed (their partial steps are deleted, so each
  episode's steps are stored once), then claims more. Finished episodes are never re-run.
- Cancel: the children stop claiming, the running episode's environment is interrupted and
  closed at once (a sandbox is killed), and the episodes not played are marked skipped.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from trainer_core.errors import SteplabError
from trainer_core.recording.schema import Outcome, TaskRef, Trajectory
from trainer_core.rollouts.collect import EpisodeResult, EpisodeSpec, Lockstep, stop_env
from trainer_core.tasks.model import Task as TaskSpec
from webapp.common.errors import ApplicationError
from webapp.jobs import kinds
from webapp.jobs.context import JobCancelled, JobContext
from webapp.jobs.names import Kinds, Queue, Tasks
from webapp.jobs.selectors import job_parent_id
from webapp.jobs.services import job_report_for_children
from webapp.rollouts import selectors, services
from webapp.rollouts.models import CollectRun, Episode, Policy


def register() -> None:
    kinds.register_kind(
        kinds.JobKind(
            name=Kinds.COLLECT,
            label="Collect rollouts",
            task_name=Tasks.COLLECT,
            queue=Queue.DEFAULT,
            resumable=True,
            detail_template="rollouts/partials/collect_job_detail.html",
            description="Episodes of a policy on a task set, fanned out over the rollouts queue.",
        )
    )
    kinds.register_kind(
        kinds.JobKind(
            name=Kinds.COLLECT_EPISODES,
            label="Collect episodes",
            task_name=Tasks.COLLECT_EPISODES,
            queue=Queue.ROLLOUTS,
            resumable=True,
            description="Claims and plays pending episodes of a collect run until none is left.",
        )
    )
    kinds.register_kind(
        kinds.JobKind(
            name=Kinds.TRY_POLICY,
            label="Try a policy",
            task_name=Tasks.TRY_POLICY,
            queue=Queue.ROLLOUTS,
            description="One step of a policy on a sample task (the policy page's Try it).",
        )
    )
    kinds.register_kind(  # the runner: webapp/rollouts/branch_jobs.py (docs/branching.md)
        kinds.JobKind(
            name=Kinds.BRANCH,
            label="Branch and resample",
            task_name=Tasks.BRANCH,
            queue=Queue.ROLLOUTS,
            resumable=True,
            description="Restores a trajectory's environment at a step and samples "
            "continuations of a policy from there.",
        )
    )


def try_run(*, ctx: JobContext) -> None:
    """One step of the policy on the task; the result (action, usage, the environment's answer)
    is the job's result, which the policy page shows."""
    policy = selectors.policy_get_for_job(id=ctx.params.get("policy_id"))
    task = selectors.sample_task_get(id=str(ctx.params.get("task_id", "")))
    if task is None:
        raise ApplicationError(f"Task {ctx.params.get('task_id')} no longer exists.")
    ctx.progress(0.1, f"Trying {policy.name} on {task}…", force=True)
    result = services.policy_try(policy=policy, task=task)
    ctx.set_result(**dataclasses.asdict(result))
    ctx.progress(1.0, f"Tried {policy.name} on {task}.", force=True)


# --- the parent -------------------------------------------------------------------------------


def collect_run(*, ctx: JobContext) -> Any:
    run = selectors.collect_run_for_job(run_id=ctx.params.get("run_id"))
    if ctx.stage == "":
        if not ctx.children().exists():
            pending = selectors.pending_episodes(run=run)
            # a local model's episodes run where the models are: the gpu queue
            queue = Queue.GPU if run.policy.kind == Policy.Kind.LOCAL else None
            for _ in range(max(1, min(run.concurrency, pending))):
                ctx.spawn(Kinds.COLLECT_EPISODES, {"run_id": run.pk}, queue=queue)
            ctx.log(
                f"started {min(run.concurrency, pending)} episode workers for {pending} episodes"
            )
        ctx.progress(0.0, f"Playing {run.episodes_total} episodes…", force=True)
        return ctx.wait_for_children(next_stage="summarize")

    # summarize
    counts = services.collect_run_close(run=run)
    ctx.set_result(
        episodes=counts,
        success_rate=run.success_rate,
        tokens_in=run.tokens_in,
        tokens_out=run.tokens_out,
        cost_usd=run.cost_usd,
        stop_reason=run.stop_reason,
    )
    failed_children = ctx.children().exclude(status="succeeded").count()
    problem = _close_problem(run, counts, failed_children)
    if problem:
        raise ApplicationError(problem)
    ctx.progress(1.0, selectors.summary_line(run=run), force=True)
    return None


def _close_problem(run: CollectRun, counts: dict[str, int], failed_children: int) -> str:
    """Why a closed run must fail rather than succeed ("" when it may succeed): no episode
    finished, or episodes were never played although nothing (spend cap, cancel) stopped it.
    The finished episodes are kept either way."""
    finished, failed = counts[Episode.Status.FINISHED], counts[Episode.Status.FAILED]
    if not finished and failed_children:
        return (
            f"No episode finished and {failed_children} episode worker(s) failed; open them "
            "below for their errors."
        )
    if not finished and failed:
        first = run.episodes.filter(status=Episode.Status.FAILED).exclude(error="").first()
        why = f" The first error: {first.error}" if first is not None else ""
        return f"No episode finished: all {failed} that were played failed.{why}"
    unplayed = counts[Episode.Status.SKIPPED]
    if unplayed and not run.stop_reason:
        return (
            f"{unplayed} of {run.episodes_total} episodes were never played: the run's episode "
            f"workers ended before them ({failed_children} failed; open them below for why). "
            f"The {finished} finished episodes are kept; start a new run for the rest."
        )
    return ""


# --- the children -------------------------------------------------------------------------------


#: how many episodes of a local model one episode worker plays together, turn by turn, with one
#: batched decode per turn (each episode keeps its own seeded stream); other policies play one
#: episode at a time
LOCAL_MODEL_BATCH = 16


#: seconds between a child's reports of the run's totals (each episode's end is stored at once;
#: only the progress line and the parent's summary wait)
REPORT_EVERY = 1.0


@dataclasses.dataclass
class _Playing:
    """A claimed episode being played: its row, its trajectory, its environment, and the steps
    not stored yet (an instant policy's steps are stored together when its episode ends)."""

    episode: Episode
    trajectory: Any
    env: Any
    unstored: list[Any] = dataclasses.field(default_factory=list)


def _instant(policy: Policy) -> bool:
    """A policy whose steps take no time (the scripted policy without a delay): nobody can
    watch its episodes step by step, so their steps are stored in one go at the end."""
    delay = (policy.parameters or {}).get("delay") or 0
    return policy.kind == Policy.Kind.SCRIPTED and not delay


def collect_episodes_run(*, ctx: JobContext) -> None:
    run = selectors.collect_run_for_job(run_id=ctx.params.get("run_id"))
    # A resumed attempt: the episodes this child had claimed start over.
    restarted = services.episodes_release(run=run, job_id=ctx.job_id)
    if restarted:
        ctx.log(f"attempt {ctx.attempt}: starting {restarted} interrupted episode(s) over")
    batch = LOCAL_MODEL_BATCH if run.policy.kind == Policy.Kind.LOCAL else 1
    instant = _instant(run.policy)
    playing: dict[int, _Playing] = {}  # id(spec) -> the episode

    def on_step(spec, step) -> None:
        now = playing[id(spec)]
        if instant:
            now.unstored.append(step)
            return
        services.episode_record_step(
            run=run, episode=now.episode, trajectory=now.trajectory, step=step
        )
        ctx.progress(
            None,
            f"Episode {now.episode.index} of task {now.episode.task.external_id}: "
            f"step {step.index}",
        )

    lockstep = Lockstep(
        max_steps=run.max_steps,
        environment=run.environment,
        policy_name=run.policy.name,
        model=run.policy.model,
        on_step=on_step,
        should_stop=lambda: selectors.spend_cap_reason(run_id=run.pk, cap=run.spend_cap_usd),
    )
    played, reported = 0, 0.0
    try:
        claiming = True
        while True:
            ctx.check()
            while claiming and lockstep.live < batch:
                episode = _claim(ctx, run)
                if episode is None:
                    claiming = False
                    break
                ended = _start(ctx, run, lockstep, playing, episode)
                if ended is not None:
                    _end(ctx, run, playing, ended)
                    played += 1
            if not lockstep.live:
                break
            for result in lockstep.turn():
                _end(ctx, run, playing, result)
                played += 1
            if time.monotonic() - reported >= REPORT_EVERY:
                _report(ctx, run)
                reported = time.monotonic()
    except JobCancelled:
        services.episodes_cancel(run=run, job_id=ctx.job_id)
        raise
    finally:
        for now in playing.values():
            if now.env is not None:
                stop_env(now.env)
    _report(ctx, run)
    ctx.set_result(played=played)
    ctx.progress(
        1.0, f"Played {played} episode(s). Run: {selectors.summary_line(run=run)}", force=True
    )


def _claim(ctx: JobContext, run: CollectRun) -> Episode | None:
    """The next pending episode for this child; None when none is left or the spend cap is
    reached (the run is then stopped with the reason)."""
    reason = selectors.spend_cap_reason(run_id=run.pk, cap=run.spend_cap_usd)
    if reason:
        services.collect_run_stop(run=run, reason=reason)
        ctx.log(reason)
        return None
    return services.episode_claim(run=run, job_id=ctx.job_id)


def _start(
    ctx: JobContext,
    run: CollectRun,
    lockstep: Lockstep,
    playing: dict[int, _Playing],
    episode: Episode,
) -> EpisodeResult | None:
    """Begin a claimed episode's trajectory and add it to the lockstep; its result when it
    ended at once (its policy could not be built, its reset failed)."""
    task = TaskSpec.model_validate(episode.task.data)
    trajectory = services.episode_begin(run=run, episode=episode, task=task)
    spec = EpisodeSpec(task=task, episode=episode.index, seed=episode.seed)
    playing[id(spec)] = _Playing(episode, trajectory, None)
    try:
        overrides: dict[str, Any] = {"max_steps": None}
        if run.step_timeout:
            overrides["step_seconds"] = run.step_timeout
        if run.user_policy_id:
            overrides["user"] = services.simulated_user(policy=run.user_policy, seed=episode.seed)
        env = playing[id(spec)].env = services.environment_make(env_id=run.environment, **overrides)
        ctx.on_cancel(lambda: stop_env(env))
        policy = services.policy_build(policy=run.policy, seed=episode.seed)
    except (ApplicationError, SteplabError) as exc:
        # the environment or the policy cannot be made: fail this episode clearly
        error = exc.message if isinstance(exc, ApplicationError) else f"{type(exc).__name__}: {exc}"
        trajectory_stub = Trajectory(task=TaskRef(id=task.id or ""))
        trajectory_stub.outcome = Outcome(metadata={"error": error})
        return EpisodeResult(spec, trajectory_stub, error=error)
    return lockstep.add(env, policy, spec)


def _end(
    ctx: JobContext, run: CollectRun, playing: dict[int, _Playing], result: EpisodeResult
) -> None:
    """An episode ended: close its environment, store its end, report the run's totals."""
    now = playing.pop(id(result.spec))
    if now.env is not None:
        stop_env(now.env)
    services.episode_record_steps(
        run=run, episode=now.episode, trajectory=now.trajectory, steps=now.unstored
    )
    services.episode_finish(
        run=run,
        episode=now.episode,
        trajectory=now.trajectory,
        outcome=result.trajectory.outcome,
        error=result.error or "",
        stopped=result.stopped or "",
        cost_usd=result.usage.cost,
    )


def _report(ctx: JobContext, run: CollectRun) -> None:
    """The run's totals after an episode, on this child and on the waiting parent."""
    run.refresh_from_db()
    done = run.finished_episodes / max(run.episodes_total, 1)
    parent_id = ctx.params.get("parent_id") or job_parent_id(job_id=ctx.job_id)
    if parent_id:
        job_report_for_children(
            job_id=parent_id, progress=done, message=selectors.summary_line(run=run)
        )
    ctx.progress(
        done,
        selectors.summary_line(run=run),
        metrics={
            "episodes_done": run.episodes_done,
            "episodes_failed": run.episodes_failed,
            "success_rate": run.success_rate if run.success_rate is not None else 0.0,
            "cost_usd": run.cost_usd,
        },
        force=True,
    )
