"""Branch sets (docs/branching.md): launch one from a step of a stored trajectory, and the writes
of its running job (claim a continuation, stream its steps, finish it, close the set with its
value estimate and preference pairs)."""

from __future__ import annotations

import inspect
from typing import Any

from django.db import transaction

from trainer_core.envs import spec as env_spec
from trainer_core.rollouts.branching import preference_pairs, value_estimate
from trainer_core.rollouts.collect import episode_seed
from webapp.common.errors import ApplicationError
from webapp.jobs.names import Kinds, Queue
from webapp.jobs.services import job_enqueue
from webapp.rollouts import branch_selectors
from webapp.rollouts.models import BranchContinuation, BranchSet, Policy
from webapp.rollouts.services import environment_make, policy_build
from webapp.trajectories import services as store
from webapp.trajectories.models import Trajectory

#: at most this many continuations per branch set (each is a whole episode)
MAX_SAMPLES = 32
MAX_STEPS = 200


def branch_launch(
    *,
    trajectory: Trajectory,
    step: int,
    policy: Policy,
    samples: int,
    seed: int = 0,
    max_steps: int = 20,
    user=None,
) -> BranchSet:
    """Create the branch set, its continuations (seeds derived from ``seed``) and the job that
    plays them. Refused with the reason: an imported log (no environment here), a step that is
    not an agent's turn, too many samples, a policy that cannot be built."""
    refusal = branch_selectors.branch_refusal(trajectory=trajectory, step=step)
    if refusal:
        raise ApplicationError(refusal)
    if not 1 <= samples <= MAX_SAMPLES:
        raise ApplicationError(f"Sample between 1 and {MAX_SAMPLES} continuations.")
    if not 1 <= max_steps <= MAX_STEPS:
        raise ApplicationError(f"Max steps must be between 1 and {MAX_STEPS}.")
    policy_build(policy=policy)  # fail now, in the form, when the policy cannot be built
    with transaction.atomic():
        branch_set = BranchSet.objects.create(
            parent=trajectory,
            step_index=step,
            policy=policy,
            samples=samples,
            seed=seed,
            max_steps=max_steps,
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        key = f"branch:{step}"  # the same seed and step: the same continuation seeds
        BranchContinuation.objects.bulk_create(
            [
                BranchContinuation(branch_set=branch_set, number=n, seed=episode_seed(seed, key, n))
                for n in range(samples)
            ]
        )
        branch_set.job = job_enqueue(
            kind=Kinds.BRANCH,
            params={"branch_set_id": branch_set.pk},
            user=user,
            queue=Queue.GPU if policy.kind == Policy.Kind.LOCAL else None,
            message=f"Waiting for a worker to restore step {step} and sample {samples} "
            "continuations.",
        )
        branch_set.save(update_fields=["job"])
    return branch_set


def branch_environment(*, branch_set: BranchSet) -> Any:
    """A fresh environment of the parent's kind, without a step limit (the branch set's
    ``max_steps`` bounds each continuation). A coding parent recorded on the docker backend
    (``metadata.sandbox_backend``) is replayed on it."""
    env_id = branch_set.parent.environment
    overrides: dict[str, Any] = {"max_steps": None}
    backend = (branch_set.parent.metadata or {}).get("sandbox_backend")
    takes = inspect.signature(env_spec(env_id).load()).parameters
    if backend in ("local", "docker") and "backend" in takes:
        overrides["backend"] = backend
    return environment_make(env_id=env_id, **overrides)


def branch_restored(
    *, branch_set: BranchSet, method: str, replayed: int, tools: list[dict]
) -> None:
    """Record how the state was restored (the first replay) and the environment's tools."""
    BranchSet.objects.filter(pk=branch_set.pk).update(
        restore={"method": method, "replayed": replayed}, tools=tools
    )


def branch_mismatch(*, branch_set: BranchSet, mismatch: dict[str, Any], message: str) -> None:
    """The replay diverged: kept on the set (the page shows where), every continuation fails."""
    BranchSet.objects.filter(pk=branch_set.pk).update(
        restore={"method": "replay", "mismatch": mismatch, "message": message}
    )
    branch_set.continuations.exclude(status=BranchContinuation.Status.FINISHED).update(
        status=BranchContinuation.Status.FAILED, error="the replay diverged"
    )


def continuations_release(*, branch_set: BranchSet) -> int:
    """A resumed job: continuations left running (their worker died) go back to pending."""
    running = branch_set.continuations.filter(status=BranchContinuation.Status.RUNNING)
    return running.update(status=BranchContinuation.Status.PENDING)


def continuation_begin(*, branch_set: BranchSet, continuation: BranchContinuation) -> Trajectory:
    """The continuation's trajectory, begun under its idempotency key (a re-played one starts
    over, so each step is stored once), linked to the parent step in its metadata."""
    parent = branch_set.parent
    policy = branch_set.policy
    trajectory = store.trajectory_begin(
        key=continuation.idempotency_key,
        prompt=parent.prompt,
        task=parent.task,
        task_ref=parent.task_ref,
        domain=parent.domain,
        agent="steplab",
        model=policy.model or policy.kind,
        policy=policy.name,
        environment=parent.environment,
        metadata=continuation_metadata(branch_set=branch_set, continuation=continuation),
    )
    if trajectory.step_count or trajectory.steps.exists():
        trajectory = store.trajectory_restart(trajectory=trajectory)
    continuation.trajectory = trajectory
    continuation.status = BranchContinuation.Status.RUNNING
    continuation.save(update_fields=["trajectory", "status"])
    return trajectory


def continuation_metadata(*, branch_set: BranchSet, continuation: BranchContinuation) -> dict:
    return {
        "branch_set": branch_set.pk,
        "branched_from": {"trajectory": branch_set.parent_id, "step": branch_set.step_index},
        "prefix_steps": branch_set.step_index,
        "continuation": continuation.number,
        "seed": continuation.seed,
    }


def continuation_record_steps(*, trajectory: Trajectory, steps: list[Any]) -> None:
    store.trajectory_append_steps(trajectory=trajectory, steps=steps)


def continuation_finish(
    *,
    continuation: BranchContinuation,
    trajectory: Trajectory,
    outcome: Any,
    error: str,
    restored_by: str,
    cost_usd: float = 0.0,
) -> None:
    failed = bool(error)
    trajectory = store.trajectory_finish(
        trajectory=trajectory, outcome=outcome, failed=failed, error=error, cost_usd=cost_usd
    )
    continuation.status = (
        BranchContinuation.Status.FAILED if failed else BranchContinuation.Status.FINISHED
    )
    continuation.success = None if failed else trajectory.success
    continuation.error = error
    continuation.restored_by = restored_by
    continuation.save(update_fields=["status", "success", "error", "restored_by"])


def continuations_cancel(*, branch_set: BranchSet) -> None:
    """The job was cancelled: the running continuation ends failed (truncated), pending ones
    are failed as not played."""
    for continuation in branch_set.continuations.filter(
        status=BranchContinuation.Status.RUNNING
    ).select_related("trajectory"):
        if continuation.trajectory is not None:
            store.trajectory_finish(
                trajectory=continuation.trajectory,
                outcome={"truncated": True, "metadata": {"stopped": "cancelled"}},
                failed=True,
                error="the branch set was cancelled during this continuation",
            )
    branch_set.continuations.exclude(status=BranchContinuation.Status.FINISHED).update(
        status=BranchContinuation.Status.FAILED, error="cancelled"
    )


def branch_set_close(*, branch_set: BranchSet) -> BranchSet:
    """The value estimate of the step (success rate of the finished continuations, Wilson
    interval) and the preference pairs where a successful and a failed continuation differ."""
    finished = list(
        branch_set.continuations.filter(status=BranchContinuation.Status.FINISHED)
        .exclude(trajectory=None)
        .order_by("number")
    )
    estimate = value_estimate([c.success for c in finished], branch_set.confidence)
    specs = branch_selectors.continuation_specs(continuations=finished)
    ids = [c.trajectory_id for c in finished]
    pairs = preference_pairs(specs, start=branch_set.step_index)
    branch_set.successes, branch_set.known = estimate.successes, estimate.n
    branch_set.value, branch_set.value_low = estimate.value, estimate.low
    branch_set.value_high = estimate.high
    branch_set.pairs = [
        {"chosen": ids[p.chosen], "rejected": ids[p.rejected], "divergent_step": p.divergent_step}
        for p in pairs
    ]
    branch_set.save(
        update_fields=["successes", "known", "value", "value_low", "value_high", "pairs"]
    )
    return branch_set
