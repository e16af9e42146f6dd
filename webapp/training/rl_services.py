"""Decoupled RL runs (issue 19): launch one, add a sampler while it runs, stop or cancel it, and
the store its jobs share through the database.

- Samplers claim group indexes (:func:`group_claim`: an atomic increment of
  ``RLRun.next_index``, or a group a dead sampler left half played), play the group, store each
  episode as a Trajectory and the group as a ready :class:`SampleGroup` (:func:`group_store`).
- The trainer takes ready groups in arrival order and settles them (:class:`DbGroupSource`), and
  publishes each new policy version as a :class:`PolicyVersion` (:class:`DbPublisher`): the
  ``GroupSource`` / ``Publisher`` protocols of :mod:`trainer_core.training.decoupled`.

Status of a group: sampling → ready → taken → consumed | dropped. A killed sampler's groups in
``sampling`` are released (owned by no sampler) when its job resumes or ends, and the next claim
plays them again under the same index and seed; a resumed trainer puts the groups it had taken,
and those it had trained on after the checkpoint it resumes from, back to ready
(:meth:`DbGroupSource.release_after`), so no group is trained on twice.
"""

from __future__ import annotations

import dataclasses
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from trainer_core.errors import ConfigError, PolicyError
from trainer_core.recording.schema import Outcome
from trainer_core.recording.schema import Step as StepSpec
from trainer_core.rollouts.collect import INVALID_OUTPUT_TOOL
from trainer_core.training.config import config_from_dict, config_to_yaml
from webapp.common.errors import ApplicationError
from webapp.jobs.models import TERMINAL_STATUSES, Job
from webapp.jobs.names import Kinds, Queue
from webapp.jobs.services import job_cancel, job_enqueue
from webapp.rewards.models import RewardModel, StepScore, TrajectoryScore
from webapp.rollouts.models import Policy
from webapp.tasks.models import Task, TaskSet
from webapp.tasks.selectors import quarantined_task_ids_query
from webapp.training import rl_selectors
from webapp.training.models import Checkpoint, PolicyVersion, RLRun, SampleGroup, TrainingRun
from webapp.training.services import base_model_dir
from webapp.trajectories import services as store
from webapp.trajectories.content import without_nul
from webapp.trajectories.gdi import gdi_recompute
from webapp.trajectories.models import Trajectory

#: The sampler policy kind that can follow the run's versions (an inference server Steplab
#: updates); any other policy kind is refused at launch.
SERVER_POLICY_KIND = "inference_server"

#: Options the run fills in itself.
MANAGED = ("model_dir", "output_dir", "dataset", "resume_from", "env_id", "tasks", "num_tasks")

#: Seconds between two looks at the store by a trainer waiting for groups.
POLL_SECONDS = 0.2


# --- launching ----------------------------------------------------------------------------------


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "rl"


def decoupled_config_build(
    *, values: dict[str, Any], model_dir: str, output_dir: str, environment: str, num_tasks: int
) -> Any:
    """The trainer's DecoupledConfig from option values (typed, or text as a form sends them)
    over the defaults, the run's own fields filled in; ApplicationError saying what is wrong."""
    given = {k: v for k, v in (values or {}).items() if v not in (None, "")}
    managed = sorted(set(given) & set(MANAGED))
    if managed:
        raise ApplicationError(
            f"{', '.join(managed)} {'is' if len(managed) == 1 else 'are'} set by the run itself "
            "(the base model, the task set and the environment you pick); leave them out."
        )
    data = {
        **given,
        "model_dir": model_dir,
        "output_dir": output_dir,
        "env_id": environment,
        "tasks": "",
        "num_tasks": num_tasks,
    }
    try:
        config = config_from_dict(rl_selectors.decoupled_config_class(), data)
        config.validate()
    except ConfigError as exc:
        raise ApplicationError(f"Invalid decoupled RL configuration: {exc}") from None
    return config


def _check_launch(
    *,
    task_set: TaskSet,
    environment: str,
    samplers: int,
    sampler_policy: Policy | None,
    reward_model: RewardModel | None,
    values: dict[str, Any],
) -> list[int]:
    """The task ids the run will play; ApplicationError for anything that cannot work."""
    if samplers < 1:
        raise ApplicationError(f"A run needs at least 1 sampler (got {samplers}).")
    if not environment:
        raise ApplicationError(
            f"Task set {task_set.name!r} names no environment: pick the environment to play in."
        )
    if sampler_policy is not None and sampler_policy.kind != SERVER_POLICY_KIND:
        raise ApplicationError(
            f"Policy {sampler_policy.name!r} is a {sampler_policy.get_kind_display()} policy: "
            "samplers can only use an inference-server policy (one Steplab updates to each new "
            "version), or none to sample with the run's own model."
        )
    advantage = str((values or {}).get("advantage") or "outcome")
    if advantage != "outcome" and reward_model is None:
        raise ApplicationError(
            f"advantage {advantage!r} needs a reward model's step scores: pick a reward-model "
            "version (samplers score every episode with it) or use advantage outcome."
        )
    task_ids = list(
        Task.objects.filter(task_set=task_set)
        .exclude(pk__in=quarantined_task_ids_query())  # docs/task-health.md
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    if not task_ids:
        raise ApplicationError(f"Task set {task_set.name!r} has no tasks (none out of quarantine).")
    return task_ids


def server_sampler_build(*, policy: Policy, config: Any, base_model: str, name: str) -> Any:
    """An inference-server policy's sampler for a run: the policy's server settings with the
    run's sampling (temperature, max_new_tokens), its tokenizer the policy's ``tokenizer_dir`` or
    the run's base model's, and enough of the run's adapters kept loaded on a vLLM server for
    samplers sharing it that lag the newest version by up to ``max_staleness + 1``."""
    from trainer_core.policies.inference_server import sampler_from_parameters

    parameters = {
        **(policy.parameters or {}),
        "temperature": config.temperature,
        "max_new_tokens": config.max_new_tokens,
    }
    parameters.setdefault("tokenizer_dir", base_model)
    parameters.setdefault("keep_adapters", config.max_staleness + 2)
    try:
        return sampler_from_parameters(policy.model, parameters, name=name)
    except (ConfigError, PolicyError) as exc:
        raise ApplicationError(f"Policy {policy.name!r} cannot sample: {exc}") from None


def _check_server(*, policy: Policy, config: Any, base_model: str) -> None:
    """At launch: the server is one Steplab can update for this run (vLLM for a LoRA run, SGLang
    for full weights) and returns the sampled ids with temperature-applied log-probs (one probe
    token); else ApplicationError with the reason."""
    from trainer_core.policies import chat_format

    sampler = server_sampler_build(
        policy=policy, config=config, base_model=base_model, name="check"
    )
    try:
        probe = [{"role": "user", "content": "What is 1 + 1?"}]
        ids = chat_format.tokenize(probe, sampler.tokenizer, add_generation_prompt=True).input_ids
        sampler.check(probe_prompt=ids, lora_run=config.lora_r > 0)
    except (ConfigError, PolicyError) as exc:
        raise ApplicationError(f"Policy {policy.name!r} cannot sample this run: {exc}") from None
    finally:
        sampler.close()


def rl_run_create(
    *,
    task_set: TaskSet,
    environment: str = "",
    base_model: str = "",
    checkpoint: Checkpoint | None = None,
    values: dict[str, Any] | None = None,
    samplers: int = 2,
    sampler_policy: Policy | None = None,
    reward_model: RewardModel | None = None,
    max_queue: int = 0,
    name: str = "",
    user=None,
) -> RLRun:
    """Launch a decoupled GRPO run: a TrainingRun (method grpo; its config the DecoupledConfig),
    its RLRun, version 0 (the start model, so samplers start at once) and the parent job
    (``training.rl``), which starts ``samplers`` sampler jobs and the trainer job. An
    inference-server ``sampler_policy`` is checked now (one probe request, see
    :func:`_check_server`)."""
    values = dict(values or {})
    environment = environment or task_set.environment
    task_ids = _check_launch(
        task_set=task_set,
        environment=environment,
        samplers=samplers,
        sampler_policy=sampler_policy,
        reward_model=reward_model,
        values=values,
    )
    model_dir = base_model_dir(base_model=base_model, checkpoint=checkpoint)
    if sampler_policy is not None:
        checked = decoupled_config_build(
            values=values, model_dir=model_dir, output_dir="-", environment=environment,
            num_tasks=len(task_ids),
        )  # fmt: skip
        _check_server(policy=sampler_policy, config=checked, base_model=model_dir)
    creator = user if getattr(user, "is_authenticated", False) else None
    with transaction.atomic():
        training = TrainingRun.objects.create(
            name=name,
            method=TrainingRun.Method.GRPO,
            base_model=model_dir,
            base_checkpoint=checkpoint,
            created_by=creator,
        )
        output = (
            Path(settings.STEPLAB_DATA_DIR) / "training" / f"{training.pk}-{_slug(name or 'rl')}"
        )
        config = decoupled_config_build(
            values=values,
            model_dir=model_dir,
            output_dir=str(output),
            environment=environment,
            num_tasks=len(task_ids),
        )
        training.config = dataclasses.asdict(config)
        training.config_yaml = config_to_yaml(config)
        training.output_dir = str(output)
        training.save(update_fields=["config", "config_yaml", "output_dir"])
        run = RLRun.objects.create(
            training_run=training,
            task_set=task_set,
            task_ids=task_ids,
            environment=environment,
            samplers=samplers,
            sampler_policy=sampler_policy,
            reward_model=reward_model,
            seed=config.seed,
            max_queue=max_queue,
            created_by=creator,
        )
        PolicyVersion.objects.create(run=run, version=0, path=model_dir, step=0)
        run.job = job_enqueue(
            kind=Kinds.RL, params={"rl_run_id": run.pk}, user=user,
            message="Waiting for a worker to start the samplers and the trainer.",
        )  # fmt: skip
        run.save(update_fields=["job"])
    return run


def rl_run_start_children(*, run: RLRun, parent: Job) -> tuple[list[Job], Job]:
    """The parent's first stage: ``run.samplers`` sampler jobs (rollouts queue) and the trainer
    job (gpu queue), which becomes the training run's job (its metrics are the run's curve)."""
    samplers = [
        job_enqueue(
            kind=Kinds.RL_SAMPLER,
            params={"rl_run_id": run.pk},
            parent=parent,
            message="Waiting for a rollouts-queue worker.",
        )  # fmt: skip
        for _ in range(run.samplers)
    ]
    trainer = job_enqueue(
        kind=Kinds.RL_TRAINER, params={"rl_run_id": run.pk}, parent=parent,
        message="Waiting for a gpu-queue worker.",
    )  # fmt: skip
    TrainingRun.objects.filter(pk=run.training_run_id).update(job=trainer)
    return samplers, trainer


def rl_run_add_sampler(*, run: RLRun, user=None) -> Job:
    """One more sampler job for a run that is going on (the run's page's Add sampler)."""
    with transaction.atomic():
        parent = Job.objects.select_for_update().filter(pk=run.job_id).first()
        fresh = RLRun.objects.filter(pk=run.pk).values("stopping").first()
        if parent is None or parent.status in TERMINAL_STATUSES or (fresh or {}).get("stopping"):
            raise ApplicationError(f"RL run {run.pk} has ended or is stopping: no sampler to add.")
        if not parent.awaiting_children:
            raise ApplicationError(
                f"RL run {run.pk} has not started its samplers yet; add one once it runs."
            )
        return job_enqueue(
            kind=Kinds.RL_SAMPLER, params={"rl_run_id": run.pk}, parent=parent, user=user,
            queue=Queue.ROLLOUTS, message="Waiting for a rollouts-queue worker.",
        )  # fmt: skip


def rl_run_stop(*, run_id: int, reason: str) -> bool:
    """Ask the samplers to end (after the group each is playing): the trainer has ended, or the
    run is cancelled. The first reason is kept. True when this call stopped it."""
    first = RLRun.objects.filter(pk=run_id, stopping=False).update(
        stopping=True, stop_reason=reason[:200]
    )
    return bool(first)


def rl_run_cancel(*, run: RLRun, user=None) -> None:
    """Cancel the run: the parent job and every child (samplers stop at once, the trainer at its
    next report); the groups and versions made so far are kept."""
    who = getattr(user, "username", "") or "system"
    rl_run_stop(run_id=run.pk, reason=f"cancelled by {who}")
    parent = Job.objects.filter(pk=run.job_id).first()
    if parent is not None and parent.status not in TERMINAL_STATUSES:
        job_cancel(job=parent, user=user)


def trainer_ended(params: dict[str, Any]) -> None:
    """The trainer job's end hook (whatever ended it: success, failure, cancel, the reaper):
    the samplers end."""
    run_id = params.get("rl_run_id")
    if run_id is not None:
        rl_run_stop(run_id=int(run_id), reason="the trainer ended")


# --- the samplers' side ---------------------------------------------------------------------------


def groups_release(*, run: RLRun, job_id: int) -> int:
    """A resumed sampler's first act: the groups its earlier attempt was playing are owned by no
    sampler (the next claim plays them again). Returns how many."""
    return SampleGroup.objects.filter(
        run=run, sampler_job_id=job_id, status=SampleGroup.Status.SAMPLING
    ).update(sampler_job=None)


def groups_release_abandoned(*, run: RLRun) -> int:
    """Groups left in ``sampling`` by a sampler job that has ended (failed for good, cancelled)
    are owned by no sampler. Returns how many."""
    return (
        SampleGroup.objects.filter(run=run, status=SampleGroup.Status.SAMPLING)
        .filter(sampler_job__status__in=list(TERMINAL_STATUSES))
        .update(sampler_job=None)
    )


def group_claim(*, run: RLRun, job_id: int, version: int, config: Any = None) -> SampleGroup | None:
    """The next group for sampler ``job_id`` to play with ``version``: one left half played by a
    sampler that died (lowest index first), else a new index (the run's counter, incremented)
    with its task and seed (:func:`rl_selectors.group_task`). With the run's ``config``, None
    when :func:`rl_selectors.sampling_wait_reason` says to wait: the check and the claim hold
    the run's row, so two samplers never both take the last place (the queue bound, the groups
    of a synchronous step)."""
    skip = connection.features.has_select_for_update_skip_locked
    with transaction.atomic():
        locked = RLRun.objects.select_for_update().get(pk=run.pk)
        if config is not None:
            newest = rl_selectors.latest_version(run=locked)
            newest_version = newest.version if newest is not None else version
            if rl_selectors.sampling_wait_reason(
                run=locked, config=config, version=version, newest=newest_version
            ):
                return None
        left = (
            SampleGroup.objects.select_for_update(skip_locked=skip)
            .filter(run=run, status=SampleGroup.Status.SAMPLING, sampler_job__isnull=True)
            .order_by("index")
            .first()
        )
        if left is not None:
            left.sampler_job_id = job_id
            left.version = version
            left.save(update_fields=["sampler_job", "version"])
            return left
        index = locked.next_index
        RLRun.objects.filter(pk=run.pk).update(next_index=F("next_index") + 1)
        task_id, seed = rl_selectors.group_task(run=locked, index=index)
        return SampleGroup.objects.create(
            run=run, index=index, task_id=task_id, seed=seed, version=version, sampler_job_id=job_id
        )


def _step(index: int, turn: dict[str, Any]) -> StepSpec:
    """A recorded step from one of a completion's turns (as the collect runs record them)."""
    action = turn.get("action") if isinstance(turn.get("action"), dict) else None
    text = str(turn.get("text") or "")
    error = turn.get("error")
    reward = turn.get("reward")
    if action is None:
        tool, params, thought = INVALID_OUTPUT_TOOL, {"raw": text[:4000]}, ""
    else:
        tool = str(action.get("tool", ""))
        params = dict(action.get("params") or {})
        thought = str(action.get("thought") or "")
    metadata = {"malformed": str(error)} if error and action is None else {}
    if action is None:
        metadata["raw"] = text[:4000]
    return StepSpec(
        index=index,
        thought=thought,
        tool=tool,
        params=params,
        observation=str(turn.get("observation") or ""),
        error=str(error) if error else None,
        reward=float(reward) if reward else None,
        metadata=metadata,
    )


def episodes_store(*, run: RLRun, row: SampleGroup, group: Any, model: str) -> list[int]:
    """Each completion of a played group as a finished rollout Trajectory (steps from its turns),
    under a key of the run, the group index and the episode, so a group played again (its
    sampler died) replaces its episodes instead of adding to them. Returns their ids, in order."""
    task = row.task
    ids = []
    for number, completion in enumerate(group.completions):
        trajectory = store.trajectory_begin(
            key=f"rl-{run.pk}:{row.index}:{number}:{row.seed}",
            prompt=task.prompt if task else "",
            task=task,
            domain=task.domain if task else "",
            agent="steplab",
            model=model,
            policy=f"rl-run{run.pk}-v{row.version}",
            environment=run.environment,
            metadata={
                "rl_run": run.pk,
                "group": row.index,
                "version": row.version,
                "episode": number,
                "seed": row.seed,
            },
        )
        if trajectory.step_count or trajectory.steps.exists():
            trajectory = store.trajectory_restart(trajectory=trajectory)
        Trajectory.objects.filter(pk=trajectory.pk).update(
            metadata={**trajectory.metadata, "version": row.version}
        )
        turns = completion.turns or []
        store.trajectory_append_steps(
            trajectory=trajectory, steps=[_step(i, t) for i, t in enumerate(turns)]
        )
        outcome = Outcome(
            success=completion.success,
            terminated=completion.success is not None,
            metadata={"reward": completion.reward},
        )
        store.trajectory_finish(trajectory=trajectory, outcome=outcome)
        ids.append(trajectory.pk)
    return ids


def _scorer(reward_model: RewardModel) -> tuple[Any, Any, Any]:
    """The version's reward config, its frozen domain profile and its judge (with the shared
    cache; None for a rules-only version), checked ready."""
    from trainer_core.rewards.judge import Judge, JudgeConfig
    from trainer_core.rewards.scoring import RewardConfig
    from webapp.domains.selectors import profile_spec
    from webapp.rewards.services import DatabaseJudgeCache

    config = RewardConfig.from_dict(reward_model.config)
    profile = profile_spec(row=reward_model.profile) if reward_model.profile_id else None
    judge = None
    if reward_model.judge:
        judge = Judge(JudgeConfig.from_dict(reward_model.judge), cache=DatabaseJudgeCache())
        try:
            judge.check_ready()
        except (PolicyError, ConfigError) as exc:
            raise ApplicationError(f"The reward model's judge cannot run: {exc}") from None
    return config, profile, judge


def episodes_score(*, run: RLRun, trajectory_ids: list[int], group: Any) -> None:
    """Score the group's stored episodes with the run's reward-model version, as a scoring job
    would (rules, its frozen domain profile, its judge); store the scores, and put each step's
    total in its completion's ``step_rewards`` (what the process and mixed estimators read)."""
    from trainer_core.rewards.scoring import score_trajectory
    from webapp.rewards import services as rewards
    from webapp.trajectories.selectors import reference_steps, trajectory_specs

    rm = run.reward_model
    if rm is None:
        return
    config, profile, judge = _scorer(rm)
    specs = trajectory_specs(ids=trajectory_ids)
    references = reference_steps(ids=trajectory_ids)
    rows, step_rows = [], []
    for pk, completion in zip(trajectory_ids, group.completions, strict=True):
        result = score_trajectory(
            specs[pk], config, profile=profile, judge=judge, reference_steps=references.get(pk)
        )
        rows.append(rewards.trajectory_score_row(reward_model=rm, trajectory_id=pk, result=result))
        step_rows.extend(
            rewards.step_score_rows(
                trajectory_id=pk, result=result, calibrated=bool(config.calibration)
            )
        )
        totals = {step.index: step.total for step in result.steps}
        completion.step_rewards = [totals.get(i) for i in range(len(completion.step_rewards))]
    with transaction.atomic():  # a group played again replaces its episodes' scores
        TrajectoryScore.objects.filter(reward_model=rm, trajectory_id__in=trajectory_ids).delete()
        StepScore.objects.filter(reward_model=rm, trajectory_id__in=trajectory_ids).delete()
        TrajectoryScore.objects.bulk_create(rows, ignore_conflicts=True)
        rewards.step_scores_insert(reward_model_id=rm.pk, rows=step_rows)
        gdi_recompute(ids=trajectory_ids)  # the reward component (docs/gdi.md)


def group_store(
    *, run: RLRun, row: SampleGroup, job_id: int, group: Any, trajectory_ids: list[int]
) -> bool:
    """The played group is ready for the trainer: its payload (``Group.to_dict()`` with the
    stored episodes' ids), its figures and its arrival time. False (nothing written) when the
    group is no longer this sampler's (another attempt took it over)."""
    group.version, group.id, group.seed = row.version, row.pk, row.seed
    # the readable turns may hold NUL (a model's raw output), which PostgreSQL's JSON refuses
    payload = without_nul({**group.to_dict(), "trajectory_ids": trajectory_ids})
    completions = group.completions
    successes = [c.success for c in completions if c.success is not None]
    return bool(
        SampleGroup.objects.filter(
            pk=row.pk, sampler_job_id=job_id, status=SampleGroup.Status.SAMPLING
        ).update(
            status=SampleGroup.Status.READY,
            payload=payload,
            episodes=len(completions),
            reward_mean=sum(c.reward for c in completions) / max(1, len(completions)),
            success_rate=sum(successes) / len(successes) if successes else None,
            ready_at=timezone.now(),
        )
    )


# --- the trainer's side ---------------------------------------------------------------------------


def _group_of(row: SampleGroup) -> Any:
    from trainer_core.training.episodes import Group

    group = Group.from_dict(row.payload)
    group.id, group.version, group.seed = row.pk, row.version, row.seed
    return group


class DbGroupSource:
    """The decoupled trainer's ``GroupSource`` on SampleGroup rows of one run.

    ``config`` (the run's DecoupledConfig) gives the weight a consumed group was trained with
    (below the staleness bound 1; above it, when down-weighting, ``stale_weight ** (staleness −
    max_staleness)``); ``check`` is called while waiting (the job's ``ctx.check``: a cancel stops
    the wait)."""

    def __init__(self, run: RLRun, *, config: Any = None, check: Callable[[], None] | None = None):
        self.run = run
        self.config = config
        self.check = check or (lambda: None)

    def _claim(self, n: int) -> list[Any]:
        skip = connection.features.has_select_for_update_skip_locked
        with transaction.atomic():
            rows = list(
                SampleGroup.objects.select_for_update(skip_locked=skip)
                .filter(run=self.run, status=SampleGroup.Status.READY)
                .order_by("ready_at", "pk")[:n]
            )
            SampleGroup.objects.filter(pk__in=[r.pk for r in rows]).update(
                status=SampleGroup.Status.TAKEN
            )
        return [_group_of(r) for r in rows]

    def take(self, n: int, *, timeout: float) -> list[Any]:
        """Up to ``n`` ready groups, oldest arrival first, marked taken; waits up to ``timeout``
        seconds for them (fewer, maybe none, when it runs out)."""
        deadline = time.monotonic() + max(0.0, timeout)
        got: list[Any] = []
        while True:
            got += self._claim(n - len(got))
            if len(got) >= n or time.monotonic() >= deadline:
                return got
            self.check()
            time.sleep(POLL_SECONDS)

    def _weight(self, staleness: int) -> float | None:
        config = self.config
        if config is None:
            return None
        if staleness <= config.max_staleness or config.stale_groups != "downweight":
            return 1.0
        return config.stale_weight ** (staleness - config.max_staleness)

    def settle(self, step: int, version: int, consumed: list[Any], dropped: list[Any]) -> None:
        """Record what step ``step`` (trained by ``version``) did with the groups it took:
        trained on (with its weight) or dropped as too stale; the staleness of each."""
        with transaction.atomic():
            for status, groups in (
                (SampleGroup.Status.CONSUMED, consumed),
                (SampleGroup.Status.DROPPED, dropped),
            ):
                for group in groups:
                    staleness = max(0, version - int(group.version or 0))
                    SampleGroup.objects.filter(pk=group.id, run=self.run).update(
                        status=status,
                        step=step,
                        staleness=staleness,
                        weight=self._weight(staleness) if status == "consumed" else None,
                    )

    def release_after(self, step: int) -> int:
        """A resumed trainer (from the checkpoint of ``step``): groups taken and not settled, and
        groups settled at a later step, are ready again (in their arrival order). Returns how
        many."""
        cleared = {
            "status": SampleGroup.Status.READY,
            "step": None,
            "staleness": None,
            "weight": None,
        }
        with transaction.atomic():
            taken = SampleGroup.objects.filter(run=self.run, status=SampleGroup.Status.TAKEN)
            later = SampleGroup.objects.filter(
                run=self.run,
                status__in=[SampleGroup.Status.CONSUMED, SampleGroup.Status.DROPPED],
                step__gt=step,
            )
            return taken.update(**cleared) + later.update(**cleared)


class DbPublisher:
    """The decoupled trainer's ``Publisher``: PolicyVersion rows of one run."""

    def __init__(self, run: RLRun):
        self.run = run

    def publish(self, version: int, path: str, step: int) -> None:
        """Version ``version`` (the checkpoint at ``path``, after ``step`` updates) is live;
        publishing a version again (a resumed trainer) updates its row."""
        PolicyVersion.objects.update_or_create(
            run=self.run, version=version, defaults={"path": str(path), "step": step}
        )

    def latest(self) -> tuple[int, str] | None:
        newest = rl_selectors.latest_version(run=self.run)
        return (newest.version, newest.path) if newest is not None else None
