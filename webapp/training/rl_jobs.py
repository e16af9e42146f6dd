"""The runners of a decoupled RL run's jobs (issue 19; the kinds are registered in ``jobs.py``).

- ``training.rl`` (default queue), the parent: starts the run's sampler jobs and its trainer job,
  waits for them all, and summarises the run (versions, groups consumed and dropped, staleness).
  The trainer's end (whatever ended it) sets the run stopping, so the samplers end after it.
- ``training.rl_sampler`` (rollouts queue, resumable), any number of them on any machine: between
  groups, load the newest published version (all G episodes of a group come from one version),
  claim the next group index, play the group (the run's own model loaded from the version's
  checkpoint, or the run's inference server synced to it), score its episodes with the run's
  reward-model version, store them as trajectories and the group as ready. It waits while the
  queue is full (decoupled) or while the trainer has the groups of the newest version
  (synchronous); a resumed attempt first releases the groups its dead attempt was playing.
- ``training.rl_trainer`` (gpu queue, resumable): ``train_decoupled`` on the database's
  GroupSource and Publisher, resuming from its newest checkpoint; at the end its checkpoints
  become the training run's Checkpoint rows (each registers as a policy in one click).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from trainer_core.errors import ConfigError, PolicyError
from trainer_core.progress import ProgressEvent
from trainer_core.tasks.model import Task as TaskSpec
from trainer_core.training.checkpoint import list_checkpoints
from trainer_core.training.config import config_from_dict
from webapp.common.errors import ApplicationError
from webapp.jobs.context import JobContext
from webapp.jobs.models import Job, JobStatus
from webapp.jobs.names import Kinds
from webapp.jobs.services import job_report_for_children
from webapp.training import flag_services, rl_selectors, rl_services, services
from webapp.training.models import RLRun, SampleGroup

#: Seconds a sampler sleeps while it may not start a group (the queue is full, the trainer has
#: the groups it needs, no version is published yet).
WAIT_SECONDS = 0.2


# --- the parent -------------------------------------------------------------------------------------


def rl_run(*, ctx: JobContext) -> Any:
    run = rl_selectors.rl_run_for_job(run_id=ctx.params.get("rl_run_id"))
    if ctx.stage == "":
        if not ctx.children().exists():
            ctx.check()
            _token_check(ctx, run)
            samplers, trainer = rl_services.rl_run_start_children(
                run=run, parent=Job.objects.get(pk=ctx.job_id)
            )
            ctx.log(f"started {len(samplers)} sampler(s) and the trainer (job {trainer.pk})")
        ctx.progress(0.0, "Sampling and training…", force=True)
        return ctx.wait_for_children(next_stage="summarize")

    # summarize: every child has ended
    rl_services.rl_run_stop(run_id=run.pk, reason="the run ended")
    run.refresh_from_db()
    overview = rl_selectors.rl_run_overview(run=run)
    trainer = rl_selectors.trainer_job(run=run)
    ctx.set_result(
        versions=len(overview["versions"]),
        groups=overview["counts"],
        staleness_mean=overview["staleness_mean"],
        staleness_max=overview["staleness_max"],
        staleness=overview["staleness"],
        stop_reason=run.stop_reason,
    )
    if trainer is None or trainer.status != JobStatus.SUCCEEDED:
        why = (trainer.error or trainer.message) if trainer is not None else "it never started"
        state = trainer.status if trainer is not None else "missing"
        raise ApplicationError(f"The trainer {state}: {why}")
    counts = overview["counts"]
    failed = ctx.children().filter(kind=Kinds.RL_SAMPLER, status=JobStatus.FAILED).count()
    ctx.set_result(samplers_failed=failed)
    ctx.progress(
        1.0,
        f"Trained {counts['consumed']} groups ({counts['dropped']} dropped as too stale) over "
        f"{len(overview['versions']) - 1} new versions"
        + (f"; {failed} sampler(s) failed (open them below for why)." if failed else "."),
        force=True,
    )
    return None


def _token_check(ctx: JobContext, run: RLRun) -> None:
    """The drift check a run starts with (issue 21) when its samplers tokenise with their own
    tokenizer: a probe's ids by the sampler's tokenizer must be the trainer's; recorded on the
    run's training run, and a mismatch fails the run before anything samples."""
    from trainer_core.training import drift
    from webapp.training.token_samples import rl_probe

    probe = rl_probe(run=run)
    if probe is None:
        return
    trainer_dir, sampler_dir, messages = probe
    try:
        report = drift.check_tokenizers(
            messages,
            drift.load_tokenizer(trainer_dir),
            drift.load_tokenizer(sampler_dir),
            where="the first task, tokenised by the sampler's tokenizer",
            tokenizer_name=trainer_dir,
        )
    except (ConfigError, PolicyError) as exc:
        raise ApplicationError(f"The drift check cannot load a tokenizer: {exc}") from None
    services.training_run_token_check(run=run.training_run, check=report.to_dict())
    ctx.log(report.summary())
    if report.blocks:
        raise ApplicationError(f"RL run blocked. {report.summary()}")


# --- the samplers ------------------------------------------------------------------------------------


class GroupSampler:
    """What a sampler plays with: the version it has loaded — the run's model loaded from the
    version's checkpoint, or the run's inference server synced to it."""

    def __init__(self, run: RLRun, config: Any):
        self.run = run
        self.config = config
        self.version: int | None = None
        self.model: Any = None
        self.tokenizer: Any = None
        self.generator: Any = None
        self.model_name = run.training_run.base_model

    def load(self, version: int, path: str) -> None:
        """Load ``version`` (its checkpoint at ``path``): from disk, or synced to the server."""
        from trainer_core.policies.local_hf import LocalHFPolicy
        from trainer_core.training.modelling import compute_precision

        if self.run.sampler_policy is None:
            policy = LocalHFPolicy(
                path,
                device=self.config.device,
                # the trainer's precision: equal weights give importance weights of exactly 1
                precision=compute_precision(self.config),
                temperature=self.config.temperature,
                max_new_tokens=self.config.max_new_tokens,
            )
            self.model, self.tokenizer = policy.model, policy.tokenizer
        else:
            if self.generator is None:
                self.generator = rl_services.server_sampler_build(
                    policy=self.run.sampler_policy,
                    config=self.config,
                    base_model=self.run.training_run.base_model,
                    name=f"rl-run{self.run.pk}",
                )
                self.model_name = self.run.sampler_policy.model or self.run.sampler_policy.name
            try:
                self.generator.sync(version, path, f"rl{self.run.pk}")
                self.tokenizer = self.generator.tokenizer
            except (ConfigError, PolicyError) as exc:
                raise ApplicationError(
                    f"The inference server cannot load version {version}: {exc}"
                ) from None
        self.version = version

    def play(self, row: SampleGroup) -> Any:
        """The group of ``row`` played with the loaded version (its seed; behaviour log-probs)."""
        from trainer_core.training.episodes import rollout_groups

        task = TaskSpec.model_validate(row.task.data)
        return rollout_groups(
            self.model,
            self.tokenizer,
            [task],
            self.config,
            seed=row.seed,
            record_behaviour=True,
            generator=self.generator,
        )[0]

    def close(self) -> None:
        if self.generator is not None:
            self.generator.close()


def _ended(ctx: JobContext, run: RLRun) -> bool:
    """Whether the sampler must end now (the run stops, the trainer ended); logs why. Raises
    JobCancelled when the sampler job is cancelled."""
    ctx.check()
    fresh = RLRun.objects.filter(pk=run.pk).values("stopping", "stop_reason").first()
    why = ""
    if fresh is None:
        why = "the run was deleted"
    elif fresh["stopping"]:
        why = fresh["stop_reason"] or "the run is stopping"
    elif rl_selectors.trainer_ended(run=run):
        why = "the trainer ended"
    if why:
        ctx.log(f"ending: {why}")
    return bool(why)


def _wait(ctx: JobContext, reason: str, last: list[str]) -> None:
    if reason != last[0]:
        ctx.progress(None, f"Waiting: {reason}.")
        last[0] = reason
    time.sleep(WAIT_SECONDS)
    ctx.check()


#: Groups in a row an inference server may fail (an error answer, another sampler's weights
#: on a shared SGLang server) before the sampler fails; each failed group is played again.
SERVER_FAILURES = 3


def _play_one(ctx: JobContext, run: RLRun, sampler: GroupSampler, row: SampleGroup) -> int | None:
    """Play, score and store the claimed group; returns its episodes (0: another attempt took it
    over; None: the inference server failed it, the group is released and the sampler reloads)."""
    try:
        group = sampler.play(row)
    except PolicyError as exc:
        if sampler.generator is None:
            raise
        rl_services.groups_release(run=run, job_id=ctx.job_id)
        ctx.log(f"group {row.index}: the inference server failed ({exc}); it is played again")
        sampler.version = None  # sync the server again before the next group
        return None
    ctx.check()
    ids = rl_services.episodes_store(run=run, row=row, group=group, model=sampler.model_name)
    rl_services.episodes_score(run=run, trajectory_ids=ids, group=group)
    stored = rl_services.group_store(
        run=run, row=row, job_id=ctx.job_id, group=group, trajectory_ids=ids
    )
    return len(group.completions) if stored else 0


def _claim(ctx: JobContext, run: RLRun, config: Any, sampler: GroupSampler, last):
    """Load the newest version if it is newer than the sampler's, then claim the next group to
    play; None when none may start now (the sampler has waited a moment)."""
    rl_services.groups_release_abandoned(run=run)
    newest = rl_selectors.latest_version(run=run)
    if newest is None:
        _wait(ctx, "no version published yet", last)
        return None
    if sampler.version is None or newest.version > sampler.version:
        sampler.load(newest.version, newest.path)
        ctx.log(f"loaded version {newest.version} ({newest.path})")
    reason = rl_selectors.sampling_wait_reason(
        run=run, config=config, version=sampler.version, newest=newest.version
    )
    if reason:
        _wait(ctx, reason, last)
        return None
    row = rl_services.group_claim(
        run=run, job_id=ctx.job_id, version=sampler.version, config=config
    )
    if row is None:  # another sampler took the last place meanwhile
        _wait(ctx, "another sampler took the last place", last)
    return row


def rl_sampler_run(*, ctx: JobContext) -> None:
    run = rl_selectors.rl_run_for_job(run_id=ctx.params.get("rl_run_id"))
    config = rl_selectors.decoupled_config(run=run)
    released = rl_services.groups_release(run=run, job_id=ctx.job_id)
    if released:
        ctx.log(f"attempt {ctx.attempt}: {released} group(s) it was playing will be played again")
    sampler = GroupSampler(run, config)
    groups = episodes = failures = 0
    last = [""]
    started = time.monotonic()
    try:
        while not _ended(ctx, run):
            row = _claim(ctx, run, config, sampler, last)
            if row is None:
                continue
            played = _play_one(ctx, run, sampler, row)
            failures = failures + 1 if played is None else 0
            if failures >= SERVER_FAILURES:
                raise ApplicationError(
                    f"The inference server failed {failures} groups in a row; the last error "
                    "is in the log below."
                )
            groups, episodes, last[0] = groups + bool(played), episodes + (played or 0), ""
            minutes = max(1e-9, (time.monotonic() - started) / 60)
            ctx.progress(
                None,
                f"{groups} groups ({episodes} episodes) sampled; version {sampler.version}.",
                metrics={
                    "groups": groups,
                    "episodes": episodes,
                    "episodes_per_min": episodes / minutes,
                },
            )
    finally:
        sampler.close()
    ctx.set_result(groups=groups, episodes=episodes, last_version=sampler.version)
    ctx.progress(1.0, f"Sampled {groups} groups ({episodes} episodes).", force=True)


# --- the trainer ---------------------------------------------------------------------------------------


def _parent_reporter(ctx: JobContext, parent_id: int | None):
    """``ctx.on_progress``, also showing the trainer's progress on the waiting parent."""

    def on_progress(event: ProgressEvent) -> None:
        ctx.on_progress(event)
        if parent_id and event.fraction is not None:
            job_report_for_children(
                job_id=parent_id, progress=event.fraction, message=event.message or ""
            )

    return on_progress


def rl_trainer_run(*, ctx: JobContext) -> None:
    from trainer_core.training.decoupled import GroupsTimeout, train_decoupled

    run = rl_selectors.rl_run_for_job(run_id=ctx.params.get("rl_run_id"))
    training = run.training_run
    config = config_from_dict(rl_selectors.decoupled_config_class(), dict(training.config))
    if ctx.resumed:  # train_decoupled resumes from the newest checkpoint of output_dir itself
        existing = list_checkpoints(training.output_dir)
        ctx.log(
            f"attempt {ctx.attempt}: resuming from {existing[-1][1]}"
            if existing
            else f"attempt {ctx.attempt}: no checkpoint yet; starting over"
        )
    ctx.progress(0.0, f"Training from {training.base_model} on the samplers' groups…", force=True)
    try:
        result = train_decoupled(
            config,
            rl_services.DbGroupSource(run, config=config, check=ctx.check),
            rl_services.DbPublisher(run),
            on_progress=flag_services.progress_with_flags(
                _parent_reporter(ctx, run.job_id), run=training, say=ctx.log, flush=ctx.flush
            ),
        )
    except (ConfigError, GroupsTimeout) as exc:
        raise ApplicationError(f"Training cannot go on: {exc}") from None
    summary = {
        key: value
        for key, value in dataclasses.asdict(result).items()
        if isinstance(value, (int, float, str)) or value is None
    }
    checkpoints = services.training_run_record(run=training, summary=summary)
    flag_services.run_flags_refresh(run=training, say=ctx.log)
    ctx.set_result(checkpoints=[c.step for c in checkpoints], **summary)
    ctx.progress(1.0, f"Done: {len(checkpoints)} checkpoint(s).", force=True)
