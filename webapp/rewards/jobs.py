"""The scoring job (``rewards.score``, on the ``judge`` queue): score a fixed list of
trajectories with one reward-model version, in batches, resumable from the last batch stored.

Scores are inserted, never updated: a trajectory this version scored already is skipped, so a
re-run after a crash, or scoring an overlapping selection, writes nothing twice. Without the
judge's API key the job fails before any call, naming the variable to set.
"""

from __future__ import annotations

import json
from typing import Any

from django.db import connection, transaction
from django.db.models import F

from trainer_core.errors import ConfigError, PolicyError
from webapp.common.errors import ApplicationError
from webapp.jobs import kinds, task_names
from webapp.jobs.context import JobContext
from webapp.rewards.models import (
    JudgeCacheEntry,
    RewardModel,
    ScoringRun,
    StepScore,
    TrajectoryScore,
)
from webapp.rewards.services import SCORE_KIND

BATCH = 250


def register() -> None:
    kinds.register_kind(
        kinds.JobKind(
            name=SCORE_KIND,
            label="Score trajectories",
            task_name=task_names.SCORE,
            queue="judge",
            resumable=True,
            detail_template="rewards/partials/scoring_job_detail.html",
            description="Score trajectories with a reward-model version (rules, LLM judge).",
        )
    )


class DatabaseJudgeCache:
    """The judge's cache in the database, shared by every worker."""

    def get(self, key: str) -> dict | None:
        return JudgeCacheEntry.objects.filter(key=key).values_list("value", flat=True).first()

    def set(self, key: str, value: dict) -> None:
        JudgeCacheEntry.objects.bulk_create(
            [JudgeCacheEntry(key=key, value=value)], ignore_conflicts=True
        )


def _profile(domain: str):
    from trainer_core.envs.profiles import DomainProfile as ProfileSpec
    from trainer_core.envs.profiles import get_profile
    from webapp.domains.models import DomainProfile

    row = DomainProfile.objects.filter(name=domain, is_current=True).first()
    if row is not None:
        return ProfileSpec.model_validate(row.data)
    try:
        return get_profile(domain)
    except (ConfigError, KeyError):
        return None


def _reference_steps(trajectory_ids: list[int]) -> dict[int, int]:
    from webapp.trajectories.models import Trajectory

    out: dict[int, int] = {}
    for pk, data in Trajectory.objects.filter(
        pk__in=trajectory_ids, task__isnull=False
    ).values_list("pk", "task__data"):
        data = data or {}
        steps = data.get("reference_steps") or len(data.get("reference_solution") or [])
        if steps:
            out[pk] = int(steps)
    return out


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


def score_run(*, ctx: JobContext) -> None:
    from trainer_core.rewards.scoring import RewardConfig, score_trajectory
    from webapp.trajectories.selectors import trajectory_specs

    run = (
        ScoringRun.objects.select_related("reward_model")
        .filter(pk=ctx.params.get("run_id"))
        .first()
    )
    if run is None:
        raise ApplicationError(f"Scoring run {ctx.params.get('run_id')} no longer exists.")
    rm: RewardModel = run.reward_model
    config = RewardConfig.from_dict(rm.config)
    judge = None
    if rm.judge:
        from trainer_core.rewards.judge import Judge, JudgeConfig

        judge = Judge(JudgeConfig.from_dict(rm.judge), cache=DatabaseJudgeCache())
        try:
            judge.check_ready()
        except (PolicyError, ConfigError) as exc:
            raise ApplicationError(f"The judge cannot run: {exc}") from None
    profile = _profile(rm.domain)
    ids: list[int] = list(run.trajectory_ids)
    position = int(ctx.state.get("position", 0))
    if position:
        ctx.log(f"resuming after {position} of {len(ids)} trajectories")
    spent = {"cost": run.cost_usd}
    if judge is not None:
        judge = _MeteredJudge(judge, spent)

    def should_stop() -> str | None:
        if run.spend_cap_usd is not None and spent["cost"] >= run.spend_cap_usd:
            return f"spend cap of ${run.spend_cap_usd:.2f} reached (${spent['cost']:.4f} spent)"
        return None

    while position < len(ids):
        reason = should_stop()
        if reason:
            ScoringRun.objects.filter(pk=run.pk).update(stop_reason=reason)
            ctx.log(reason)
            break
        batch = ids[position : position + BATCH]
        done = set(
            TrajectoryScore.objects.filter(reward_model=rm, trajectory_id__in=batch).values_list(
                "trajectory_id", flat=True
            )
        )
        todo = [i for i in batch if i not in done]
        specs = trajectory_specs(todo)
        references = _reference_steps(todo)
        trajectory_rows: list[TrajectoryScore] = []
        step_rows: list[tuple[int, int, float | None, float | None, dict[str, Any]]] = []
        calls = hits = tokens_in = tokens_out = 0
        cost = 0.0
        stopped = None
        for pk in todo:
            spec = specs.get(pk)
            if spec is None:  # deleted since launch
                continue
            stopped = should_stop()
            if stopped:
                break
            result = score_trajectory(
                spec,
                config,
                profile=profile,
                judge=judge,
                reference_steps=references.get(pk),
                should_stop=should_stop,
            )
            usage = result.judge_usage
            if usage is not None:
                calls += usage.calls
                hits += usage.cache_hits
                tokens_in += usage.tokens_in
                tokens_out += usage.tokens_out
                cost += usage.cost
            if judge is not None and judge.halted:
                stopped = should_stop()
                # cut short inside this trajectory: not stored, so a re-run finishes it (the
                # steps judged so far are in the cache and cost nothing then)
                break
            trajectory_rows.append(
                TrajectoryScore(
                    reward_model=rm,
                    trajectory_id=pk,
                    total=result.total,
                    process=result.process,
                    outcome=result.outcome,
                    efficiency=result.efficiency,
                    unscored_reason=(result.unscored_reason or "")[:300],
                    judge_calls=usage.calls if usage else 0,
                    cache_hits=usage.cache_hits if usage else 0,
                    cost_usd=usage.cost if usage else 0.0,
                )
            )
            step_rows.extend(
                (
                    pk,
                    step.index,
                    step.total,
                    getattr(step, "raw_total", None) if config.calibration else None,
                    _rubrics_json(step.rubrics),
                )
                for step in result.steps
            )
        with transaction.atomic():
            TrajectoryScore.objects.bulk_create(
                trajectory_rows, ignore_conflicts=True, batch_size=1000
            )
            _insert_step_scores(rm.pk, step_rows)
            ScoringRun.objects.filter(pk=run.pk).update(
                scored=F("scored") + len(trajectory_rows),
                skipped=F("skipped") + len(done),
                judge_calls=F("judge_calls") + calls,
                cache_hits=F("cache_hits") + hits,
                tokens_in=F("tokens_in") + tokens_in,
                tokens_out=F("tokens_out") + tokens_out,
                cost_usd=F("cost_usd") + cost,
            )
        if stopped:
            ScoringRun.objects.filter(pk=run.pk).update(stop_reason=stopped)
            ctx.log(stopped)
            break
        position += len(batch)
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


def _rubrics_json(rubrics: dict[str, Any]) -> dict[str, Any]:
    """``{rubric: {"value", "layer"[, "rationale"][, "interpolated": true]}}`` — empty rationales
    and ``interpolated: false`` are left out (one row per step: size matters)."""
    out = {}
    for rubric_id, score in rubrics.items():
        entry: dict[str, Any] = {"value": score.value, "layer": score.layer}
        if score.rationale and score.value is not None:
            entry["rationale"] = score.rationale[:2000]
        if score.interpolated:
            entry["interpolated"] = True
        out[rubric_id] = entry
    return out


_STAGE = (
    "CREATE TEMP TABLE IF NOT EXISTS steplab_stepscore_stage2 (trajectory_id bigint, "
    "index integer, total double precision, raw_total double precision, rubrics jsonb) "
    "ON COMMIT DELETE ROWS"
)


def _insert_step_scores(
    reward_model_id: int,
    rows: list[tuple[int, int, float | None, float | None, dict[str, Any]]],
) -> None:
    """Insert step scores; a row that exists (scored by a concurrent run) is skipped. On
    PostgreSQL: COPY into a temporary table, then INSERT ... ON CONFLICT DO NOTHING (4× faster
    than bulk_create, whose JSON arrays are quoted on the client)."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        StepScore.objects.bulk_create(
            [
                StepScore(
                    reward_model_id=reward_model_id,
                    trajectory_id=pk,
                    index=index,
                    total=total,
                    raw_total=raw_total,
                    rubrics=rubrics,
                )
                for pk, index, total, raw_total, rubrics in rows
            ],
            ignore_conflicts=True,
            batch_size=2000,
        )
        return
    table = StepScore._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(_STAGE)
        with cursor.cursor.copy(
            "COPY steplab_stepscore_stage2 (trajectory_id, index, total, raw_total, rubrics) "
            "FROM STDIN"
        ) as copy:
            for pk, index, total, raw_total, rubrics in rows:
                copy.write_row((pk, index, total, raw_total, json.dumps(rubrics)))
        cursor.execute(
            f'INSERT INTO "{table}" (reward_model_id, trajectory_id, index, total, raw_total, '
            "rubrics) SELECT %s, trajectory_id, index, total, raw_total, rubrics "
            "FROM steplab_stepscore_stage2 ON CONFLICT DO NOTHING",
            [reward_model_id],
        )
        cursor.execute("DELETE FROM steplab_stepscore_stage2")
