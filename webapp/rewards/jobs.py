"""The rewards app's job kind: scoring (``rewards.score``, on the ``judge`` queue).

A scoring job scores a fixed list of trajectories with one reward-model version, in batches,
resumable from the last batch stored. Scores are inserted, never updated: a trajectory this
version scored already is skipped, so a re-run after a crash, or scoring an overlapping
selection, writes nothing twice. Without the judge's API key the job fails before any call,
naming the variable to set.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from trainer_core.errors import ConfigError, PolicyError
from trainer_core.rewards.judge import Judge, JudgeConfig
from trainer_core.rewards.scoring import RewardConfig, score_trajectory
from webapp.common.errors import ApplicationError
from webapp.domains.selectors import profile_spec
from webapp.jobs import kinds
from webapp.jobs.context import JobContext
from webapp.jobs.names import Kinds, Queue, Tasks
from webapp.rewards import selectors, services
from webapp.rewards.models import RewardModel, ScoringRun, TrajectoryScore
from webapp.trajectories.selectors import reference_steps, trajectory_specs

BATCH = 250


def register() -> None:
    kinds.register_kind(
        kinds.JobKind(
            name=Kinds.SCORE,
            label="Score trajectories",
            task_name=Tasks.SCORE,
            queue=Queue.JUDGE,
            resumable=True,
            detail_template="rewards/partials/scoring_job_detail.html",
            description="Score trajectories with a reward-model version (rules, LLM judge).",
        )
    )


class _MeteredJudge:
    """Forwards to the judge, adding each call's cost to the run's running total, so the spend
    cap is checked against what was really spent before every call."""

    def __init__(self, judge, spent: dict[str, float]):
        self.judge = judge
        self.spent = spent
        self.halted = False  # the last trajectory was cut short by should_stop

    def _count(self, usage) -> None:
        self.spent["cost"] += usage.cost

    def judge_trajectory(self, trajectory, rubrics, **kwargs):
        self.halted = False
        outer = kwargs.pop("should_stop", None)

        def should_stop():
            reason = outer() if outer is not None else None
            if reason:
                self.halted = True
            return reason

        return self.judge.judge_trajectory(
            trajectory, rubrics, on_call=self._count, should_stop=should_stop, **kwargs
        )


def _judge(rm: RewardModel) -> Judge | None:
    """The version's judge with the shared database cache, checked ready (its key is set)."""
    if not rm.judge:
        return None
    judge = Judge(JudgeConfig.from_dict(rm.judge), cache=services.DatabaseJudgeCache())
    try:
        judge.check_ready()
    except (PolicyError, ConfigError) as exc:
        raise ApplicationError(f"The judge cannot run: {exc}") from None
    return judge


@dataclass
class _Batch:
    """What scoring one batch produced, stored in one transaction."""

    trajectory_rows: list[TrajectoryScore] = field(default_factory=list)
    step_rows: list[tuple[int, int, float | None, float | None, dict[str, Any]]] = field(
        default_factory=list
    )
    usage: services.JudgeUsageTotals = field(default_factory=services.JudgeUsageTotals)
    stopped: str | None = None


@dataclass
class _Scoring:
    """One scoring run's fixed parts: the version, its config, judge and domain profile (the
    profile version the reward-model version froze, never the current one: editing a profile
    does not change what an existing version computes)."""

    run: ScoringRun
    config: RewardConfig
    judge: _MeteredJudge | None
    profile: Any
    spent: dict[str, float]

    def should_stop(self) -> str | None:
        cap = self.run.spend_cap_usd
        if cap is not None and self.spent["cost"] >= cap:
            return f"spend cap of ${cap:.2f} reached (${self.spent['cost']:.4f} spent)"
        return None

    def score_batch(self, todo: list[int]) -> _Batch:
        """Score the trajectories ``todo`` (not scored by this version yet)."""
        batch = _Batch()
        specs = trajectory_specs(ids=todo)
        references = reference_steps(ids=todo)
        rm = self.run.reward_model
        for pk in todo:
            spec = specs.get(pk)
            if spec is None:  # deleted since launch
                continue
            batch.stopped = self.should_stop()
            if batch.stopped:
                break
            result = score_trajectory(
                spec,
                self.config,
                profile=self.profile,
                judge=self.judge,
                reference_steps=references.get(pk),
                should_stop=self.should_stop,
            )
            batch.usage.add(result.judge_usage)
            if self.judge is not None and self.judge.halted:
                batch.stopped = self.should_stop()
                # cut short inside this trajectory: not stored, so a re-run finishes it (the
                # steps judged so far are in the cache and cost nothing then)
                break
            batch.trajectory_rows.append(
                services.trajectory_score_row(reward_model=rm, trajectory_id=pk, result=result)
            )
            batch.step_rows.extend(
                services.step_score_rows(
                    trajectory_id=pk, result=result, calibrated=bool(self.config.calibration)
                )
            )
        return batch


def _start(ctx: JobContext) -> _Scoring:
    run = selectors.scoring_run_for_job(run_id=ctx.params.get("run_id"))
    rm: RewardModel = run.reward_model
    config = RewardConfig.from_dict(rm.config)
    judge = _judge(rm)
    spent = {"cost": run.cost_usd}
    metered = _MeteredJudge(judge, spent) if judge is not None else None
    # None (no profile in the database when the version was made): trainer_core scores with the
    # built-in profile named by the config, which changes only with the code
    profile = profile_spec(row=rm.profile) if rm.profile_id else None
    return _Scoring(run, config, metered, profile, spent)


def score_run(*, ctx: JobContext) -> None:
    scoring = _start(ctx)
    run = scoring.run
    ids: list[int] = list(run.trajectory_ids)
    position = int(ctx.state.get("position", 0))
    if position:
        ctx.log(f"resuming after {position} of {len(ids)} trajectories")
    while position < len(ids):
        reason = scoring.should_stop()
        if reason:
            services.scoring_run_stop(run=run, reason=reason)
            ctx.log(reason)
            break
        chunk = ids[position : position + BATCH]
        done = selectors.scored_ids(reward_model=run.reward_model, trajectory_ids=chunk)
        batch = scoring.score_batch([i for i in chunk if i not in done])
        services.scoring_batch_store(
            run=run,
            trajectory_rows=batch.trajectory_rows,
            step_rows=batch.step_rows,
            skipped=len(done),
            usage=batch.usage,
        )
        if batch.stopped:
            services.scoring_run_stop(run=run, reason=batch.stopped)
            ctx.log(batch.stopped)
            break
        position += len(chunk)
        run.refresh_from_db()
        ctx.progress(
            position / len(ids),
            f"Scored {run.scored} of {run.total} trajectories ({run.skipped} already scored); "
            f"{run.judge_calls} judge calls, {run.cache_hits} cache hits, ${run.cost_usd:.4f}.",
            metrics={
                "scored": run.scored,
                "judge_calls": run.judge_calls,
                "cache_hits": run.cache_hits,
                "cost_usd": run.cost_usd,
            },
            state={"position": position},
        )
    _finish(ctx, run)


def _finish(ctx: JobContext, run: ScoringRun) -> None:
    run.refresh_from_db()
    ctx.set_result(
        scored=run.scored,
        skipped=run.skipped,
        judge_calls=run.judge_calls,
        cache_hits=run.cache_hits,
        tokens_in=run.tokens_in,
        tokens_out=run.tokens_out,
        cost_usd=run.cost_usd,
        stop_reason=run.stop_reason,
    )
    ctx.progress(
        1.0,
        f"Scored {run.scored} trajectories ({run.skipped} already scored)"
        + (f"; stopped: {run.stop_reason}" if run.stop_reason else "")
        + ".",
        force=True,
    )
