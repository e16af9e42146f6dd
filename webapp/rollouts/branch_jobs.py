"""The branch job (``rollouts.branch``, docs/branching.md): restore the parent's environment at
the branch step, play the branch set's continuations one after another, close the set with its
value estimate and pairs.

- Restoring replays the steps before the branch step and stops at the first observation that
  differs from the record: the job fails with that step, the recorded and the replayed text
  (kept on the set, shown on its page). Later continuations start from a sandbox snapshot when
  the environment has one.
- Resumable: a resumed attempt puts the continuations left running back to pending (their
  partial steps are deleted when they begin again); finished continuations are never re-run.
- Cancel: the running continuation's environment is stopped at once, its trajectory ends
  truncated, the continuations not played are failed as cancelled.
"""

from __future__ import annotations

from typing import Any

from trainer_core.errors import SteplabError
from trainer_core.rollouts.branching import BranchSampler, ReplayMismatch
from trainer_core.tasks.model import Task as TaskSpec
from webapp.common.errors import ApplicationError
from webapp.jobs.context import JobCancelled, JobContext
from webapp.rollouts import branch_selectors as selectors
from webapp.rollouts import branch_services as services
from webapp.rollouts.models import BranchSet
from webapp.rollouts.services import policy_build
from webapp.trajectories.selectors import trajectory_spec


def _sampler(ctx: JobContext, branch_set: BranchSet, playing: dict[str, Any]) -> BranchSampler:
    parent = branch_set.parent
    if parent.task is None:
        raise ApplicationError("The parent trajectory's task is no longer stored.")
    task = TaskSpec.model_validate(parent.task.data)

    def on_step(spec, step) -> None:
        services.continuation_record_steps(trajectory=playing["trajectory"], steps=[step])

    return BranchSampler(
        trajectory_spec(row=parent),
        branch_set.step_index,
        make_env=lambda: services.branch_environment(branch_set=branch_set),
        task=task,
        make_policy=lambda seed: policy_build(policy=branch_set.policy, seed=seed),
        max_steps=branch_set.max_steps,
        environment=parent.environment,
        policy_name=branch_set.policy.name,
        model=branch_set.policy.model,
        on_step=on_step,
        should_stop=lambda: "cancelled" if ctx.cancelled else None,
    )


def _restore(ctx: JobContext, branch_set: BranchSet, sampler: BranchSampler) -> None:
    ctx.progress(0.0, f"Replaying the {branch_set.step_index} step(s) before the branch…")
    try:
        restored = sampler.prepare()
    except ReplayMismatch as exc:
        services.branch_mismatch(branch_set=branch_set, mismatch=exc.as_dict(), message=str(exc))
        raise ApplicationError(str(exc)) from None
    except (SteplabError, ApplicationError) as exc:
        message = exc.message if isinstance(exc, ApplicationError) else str(exc)
        raise ApplicationError(f"The environment could not be restored: {message}") from None
    services.branch_restored(
        branch_set=branch_set,
        method=restored.method,
        replayed=restored.replayed,
        tools=restored.tools,
    )
    ctx.log(f"restored step {branch_set.step_index} by replaying {restored.replayed} action(s)")


def branch_run(*, ctx: JobContext) -> None:
    branch_set = selectors.branch_set_for_job(id=ctx.params.get("branch_set_id"))
    restarted = services.continuations_release(branch_set=branch_set)
    if restarted:
        ctx.log(f"attempt {ctx.attempt}: starting {restarted} interrupted continuation(s) over")
    pending = selectors.pending_continuations(branch_set=branch_set)
    playing: dict[str, Any] = {}
    sampler = _sampler(ctx, branch_set, playing)
    ctx.on_cancel(sampler.close)
    total = branch_set.samples
    try:
        if pending:
            _restore(ctx, branch_set, sampler)
        for position, continuation in enumerate(pending):
            ctx.check()
            playing["trajectory"] = services.continuation_begin(
                branch_set=branch_set, continuation=continuation
            )
            result = sampler.run_one(continuation.number, continuation.seed, first=position == 0)
            services.continuation_finish(
                continuation=continuation,
                trajectory=playing["trajectory"],
                outcome=result.trajectory.outcome,
                error=result.error or "",
                restored_by=sampler.methods[-1],
                cost_usd=result.usage.cost,
            )
            done = total - len(pending) + position + 1
            ctx.progress(done / total, f"Played {done} of {total} continuations.", force=True)
    except JobCancelled:
        services.continuations_cancel(branch_set=branch_set)
        raise
    finally:
        sampler.close()
    branch_set = services.branch_set_close(branch_set=branch_set)
    ctx.set_result(
        value=branch_set.value,
        interval=[branch_set.value_low, branch_set.value_high],
        successes=branch_set.successes,
        known=branch_set.known,
        pairs=len(branch_set.pairs),
    )
    shown = "unknown" if branch_set.value is None else f"{branch_set.value:.2f}"
    ctx.progress(
        1.0,
        f"Value of step {branch_set.step_index}: {shown} ({branch_set.successes}/"
        f"{branch_set.known} continuations succeeded); {len(branch_set.pairs)} pair(s).",
        force=True,
    )
