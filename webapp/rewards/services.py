"""Rubrics, reward-model versions, scoring runs and preference pairs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from django.db import connection, transaction
from django.db.models import F, Max

from trainer_core.errors import ConfigError
from trainer_core.policies.pricing import estimate_cost, known_price
from trainer_core.policies.secrets import check_env_name, check_no_secret
from trainer_core.rewards.combine import LayerWeights, TotalWeights
from trainer_core.rewards.judge import JudgeConfig
from trainer_core.rewards.preferences import Candidate, build_pairs
from trainer_core.rewards.rubrics import Rubric as RubricSpec
from trainer_core.rewards.rubrics import rubric_set
from trainer_core.rewards.scoring import RewardConfig
from webapp.common.errors import ApplicationError
from webapp.domains.models import DomainProfile
from webapp.domains.selectors import profile_current
from webapp.jobs.names import Kinds
from webapp.jobs.services import job_enqueue
from webapp.rewards.models import (
    JudgeCacheEntry,
    PreferencePair,
    RewardModel,
    Rubric,
    ScoringRun,
    StepScore,
    TrajectoryScore,
)
from webapp.trajectories.gdi import gdi_recompute
from webapp.trajectories.models import Trajectory

# What one judge call is assumed to cost, for the estimate before launch.
JUDGE_TOKENS_IN = 1500
JUDGE_TOKENS_OUT = 150


# --- rubrics --------------------------------------------------------------------------------


def rubrics_seed(*, domain: str, weights: dict[str, float] | None = None) -> int:
    """Create the Rubric rows of ``domain`` that do not exist yet (weights from the profile)."""
    existing = set(Rubric.objects.filter(domain=domain).values_list("rubric_id", flat=True))
    new = [
        Rubric(
            domain=domain,
            rubric_id=r.id,
            description=r.description,
            evaluator=r.evaluator,
            weight=r.weight,
        )
        for r in rubric_set(domain, weights)
        if r.id not in existing
    ]
    Rubric.objects.bulk_create(new)
    return len(new)


def rubrics_seed_builtin() -> str:
    created = 0
    for row in DomainProfile.objects.filter(is_current=True):
        created += rubrics_seed(
            domain=row.name, weights=(row.data or {}).get("rubric_weights") or None
        )
    made = 0
    for domain in Rubric.objects.values_list("domain", flat=True).distinct():
        if not RewardModel.objects.filter(domain=domain).exists():
            reward_model_create(domain=domain, note="built in: rules only")
            made += 1
    return f"{created} rubrics and {made} reward-model versions created"


def _profile_rubrics(profile: DomainProfile) -> dict[str, RubricSpec]:
    """The rubrics a profile version gives its domain: its ``rubric_weights``, else the built-in
    set's weights."""
    weights = (profile.data or {}).get("rubric_weights") or None
    return {r.id: r for r in rubric_set(profile.name, weights)}


def rubrics_follow_profile(*, profile: DomainProfile, previous: DomainProfile | None) -> int:
    """Carry a new profile version's rubric-weight edits into the domain's Rubric rows, so the
    next reward-model version created scores with them (registered with
    ``domains.hooks.register_profile_saved``). Only the weights the edit changed are written —
    a rubric added in the profile gets a row, one removed gets weight 0 — so a weight set on the
    rubrics page for a rubric the edit left alone stays. A profile's first version, or a domain
    with no rubric rows yet, changes nothing (seeding creates the rows from the profile).
    Existing reward-model versions keep their snapshot. Returns how many rows changed."""
    if previous is None:
        return 0
    new, old = _profile_rubrics(profile), _profile_rubrics(previous)
    rows = {r.rubric_id: r for r in Rubric.objects.filter(domain=profile.name)}
    if not rows:
        return 0
    count = 0
    for rubric_id in sorted(set(new) | set(old)):
        weight = new[rubric_id].weight if rubric_id in new else 0.0
        if weight == (old[rubric_id].weight if rubric_id in old else 0.0):
            continue
        row = rows.get(rubric_id)
        if row is None:
            if weight <= 0:
                continue
            spec = new[rubric_id]
            row = Rubric(
                domain=profile.name,
                rubric_id=rubric_id,
                description=spec.description,
                evaluator=spec.evaluator,
            )
        elif row.weight == weight:
            continue
        row.weight = weight
        row.updated_by = profile.created_by
        row.save()
        count += 1
    return count


def rubric_update(
    *, rubric: Rubric, weight: float, description: str, evaluator: str, user=None
) -> Rubric:
    if weight < 0:
        raise ApplicationError("A rubric weight cannot be negative.")
    if evaluator not in Rubric.Evaluator.values:
        raise ApplicationError(f"Evaluator must be one of {', '.join(Rubric.Evaluator.values)}.")
    others = Rubric.objects.filter(domain=rubric.domain).exclude(pk=rubric.pk)
    if weight == 0 and not any(r.weight > 0 for r in others):
        raise ApplicationError("At least one rubric of a domain must have a weight above 0.")
    rubric.weight = weight
    rubric.description = description.strip() or rubric.description
    rubric.evaluator = evaluator
    rubric.updated_by = user if getattr(user, "is_authenticated", False) else None
    rubric.save()
    return rubric


# --- reward-model versions --------------------------------------------------------------------

#: ``reward_model_create(profile=...)``'s default: the domain's current profile version
CURRENT_PROFILE = "current"


def reward_model_create(
    *,
    domain: str,
    layers: dict[str, float] | None = None,
    totals: dict[str, float] | None = None,
    judge: dict[str, Any] | None = None,
    note: str = "",
    user=None,
    parent: RewardModel | None = None,
    rubrics: list[dict[str, Any]] | None = None,
    calibration: dict[str, Any] | None = None,
    profile: DomainProfile | None | str = CURRENT_PROFILE,
) -> RewardModel:
    """Snapshot the domain's rubric rows (or the given ``rubrics`` snapshot, e.g. the parent's),
    the layer and total weights, the judge config and an optional calibration into a new
    version, and freeze the domain profile it scores with: ``profile``, by default the domain's
    current profile version (None: the built-in profile, see ``RewardModel.profile``; a
    calibrated version passes its parent's). Scoring reads only the version, so later rubric
    and profile edits change nothing here."""
    if isinstance(profile, str) and profile == CURRENT_PROFILE:
        profile = profile_current(name=domain)
    elif profile is not None and not isinstance(profile, DomainProfile):
        raise ApplicationError(f"profile is a domain profile version, not {profile!r}.")
    if rubrics is not None:
        specs = [
            RubricSpec(r["id"], r["description"], r["evaluator"], r["weight"]) for r in rubrics
        ]
    else:
        specs = [
            RubricSpec(r.rubric_id, r.description, r.evaluator, r.weight)
            for r in Rubric.objects.filter(domain=domain)
        ]
    if not specs:
        raise ApplicationError(f"Domain {domain!r} has no rubrics; seed or create them first.")
    try:
        extra = {"calibration": calibration} if calibration else {}
        config = RewardConfig(
            rubrics=specs,
            layers=LayerWeights(**(layers or {})),
            totals=TotalWeights(**(totals or {})),
            profile=domain,
            **extra,
        )
        judge_data: dict[str, Any] = {}
        if judge:
            judge_data = JudgeConfig.from_dict(judge).to_dict()
            check_no_secret(judge_data, "judge", allowed=frozenset({"api_key_env"}))
            if judge_data.get("api_key_env"):
                check_env_name(judge_data["api_key_env"], "judge.api_key_env")
    except (ConfigError, TypeError, ValueError) as exc:
        raise ApplicationError(f"Invalid reward-model settings: {exc}") from None
    with transaction.atomic():
        latest = (
            RewardModel.objects.select_for_update()
            .filter(domain=domain)
            .aggregate(v=Max("version"))["v"]
        )
        return RewardModel.objects.create(
            domain=domain,
            version=(latest or 0) + 1,
            config=config.to_dict(),
            judge=judge_data,
            calibration=calibration or {},
            parent=parent,
            note=note[:300],
            created_by=user if getattr(user, "is_authenticated", False) else None,
            profile=profile,
        )


# --- scoring runs -----------------------------------------------------------------------------


def scoring_estimate(*, reward_model: RewardModel, trajectory_ids: list[int]) -> dict[str, Any]:
    """Judge calls and cost before launch (an upper bound: cache hits cost nothing)."""
    counts = list(
        Trajectory.objects.filter(pk__in=trajectory_ids).values_list("step_count", flat=True)
    )
    already = TrajectoryScore.objects.filter(
        reward_model=reward_model, trajectory_id__in=trajectory_ids
    ).count()
    estimate: dict[str, Any] = {
        "trajectories": len(counts),
        "steps": sum(counts),
        "already_scored": already,
        "judge": bool(reward_model.judge),
        "calls": 0,
        "cost": 0.0,
        "priced": True,
    }
    if reward_model.judge:
        cap = reward_model.judge.get("max_judged_steps")
        calls = sum(min(c, cap) if cap else c for c in counts)
        model = reward_model.judge.get("model", "")
        prices = {
            "price_in": reward_model.judge.get("price_in"),
            "price_out": reward_model.judge.get("price_out"),
        }
        estimate["calls"] = calls
        estimate["priced"] = known_price(model) or all(v is not None for v in prices.values())
        estimate["cost"] = (
            estimate_cost(model, calls, JUDGE_TOKENS_IN, JUDGE_TOKENS_OUT, **prices)
            if estimate["priced"]
            else None
        )
    return estimate


def scoring_launch(
    *,
    reward_model: RewardModel,
    trajectory_ids: list[int],
    spend_cap_usd: float | None = None,
    user=None,
    parent_job=None,
) -> ScoringRun:
    ids = sorted(set(int(i) for i in trajectory_ids))
    if not ids:
        raise ApplicationError("Select the trajectories to score first.")
    if spend_cap_usd is not None and spend_cap_usd <= 0:
        raise ApplicationError("The spend cap must be above 0 (leave it empty for no cap).")
    with transaction.atomic():
        run = ScoringRun.objects.create(
            reward_model=reward_model,
            trajectory_ids=ids,
            total=len(ids),
            spend_cap_usd=spend_cap_usd,
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        run.job = job_enqueue(
            kind=Kinds.SCORE,
            params={"run_id": run.pk},
            user=user,
            parent=parent_job,
            message=f"Waiting for a judge-queue worker to score {len(ids)} trajectories.",
        )
        run.save(update_fields=["job"])
    return run


# --- preference pairs ---------------------------------------------------------------------------


def preferences_build(
    *,
    reward_model: RewardModel,
    method: str = "outside_in",
    min_margin: float = 0.1,
    trajectory_ids: list[int] | None = None,
    user=None,
) -> dict[str, int]:
    """Pairs from the trajectory totals this version gave, per task. ``uncertain`` makes
    candidates for human judgement. Re-running adds only pairs that do not exist yet."""
    scores = TrajectoryScore.objects.filter(reward_model=reward_model, total__isnull=False)
    if trajectory_ids:
        scores = scores.filter(trajectory_id__in=trajectory_ids)
    candidates = [
        Candidate(id=tid, task_id=task or f"trajectory-{tid}", score=total)
        for tid, task, total in scores.values_list("trajectory_id", "trajectory__task_ref", "total")
    ]
    try:
        pairs = build_pairs(candidates, method=method, min_margin=min_margin)
    except (ConfigError, ValueError) as exc:
        raise ApplicationError(f"Cannot build pairs: {exc}") from None
    status = (
        PreferencePair.Status.CANDIDATE if method == "uncertain" else PreferencePair.Status.PAIR
    )
    rows = [
        PreferencePair(
            task_ref=pair.task_id[:300],
            chosen_id=pair.chosen_id,
            rejected_id=pair.rejected_id,
            source=PreferencePair.Source.RULES,
            status=status,
            method=method,
            margin=pair.margin,
            reward_model=reward_model,
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        for pair in pairs
    ]
    before = PreferencePair.objects.filter(reward_model=reward_model, method=method).count()
    PreferencePair.objects.bulk_create(rows, ignore_conflicts=True)
    after = PreferencePair.objects.filter(reward_model=reward_model, method=method).count()
    return {"candidates": len(candidates), "pairs": len(pairs), "created": after - before}


# --- the scoring job's writes ----------------------------------------------------------------------


class DatabaseJudgeCache:
    """The judge's cache in the database, shared by every worker."""

    def get(self, key: str) -> dict | None:
        return JudgeCacheEntry.objects.filter(key=key).values_list("value", flat=True).first()

    def set(self, key: str, value: dict) -> None:
        JudgeCacheEntry.objects.bulk_create(
            [JudgeCacheEntry(key=key, value=value)], ignore_conflicts=True
        )


@dataclass
class JudgeUsageTotals:
    """Judge calls, cache hits, tokens and cost summed over a batch of trajectories."""

    calls: int = 0
    hits: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0

    def add(self, usage) -> None:
        if usage is None:
            return
        self.calls += usage.calls
        self.hits += usage.cache_hits
        self.tokens_in += usage.tokens_in
        self.tokens_out += usage.tokens_out
        self.cost += usage.cost


def trajectory_score_row(
    *, reward_model: RewardModel, trajectory_id: int, result
) -> TrajectoryScore:
    """The (unsaved) total row of one scored trajectory, recording the profile version it was
    scored with (the version's frozen one)."""
    usage = result.judge_usage
    return TrajectoryScore(
        reward_model=reward_model,
        profile_id=reward_model.profile_id,
        trajectory_id=trajectory_id,
        total=result.total,
        process=result.process,
        outcome=result.outcome,
        efficiency=result.efficiency,
        unscored_reason=(result.unscored_reason or "")[:300],
        judge_calls=usage.calls if usage else 0,
        cache_hits=usage.cache_hits if usage else 0,
        cost_usd=usage.cost if usage else 0.0,
    )


def step_score_rows(*, trajectory_id: int, result, calibrated: bool):
    """``(trajectory, index, total, raw total, rubrics JSON)`` per step of a scored trajectory;
    the raw (uncalibrated) total only when the version has a calibration."""
    return [
        (
            trajectory_id,
            step.index,
            step.total,
            getattr(step, "raw_total", None) if calibrated else None,
            rubrics_json(rubrics=step.rubrics),
        )
        for step in result.steps
    ]


def rubrics_json(*, rubrics: dict[str, Any]) -> dict[str, Any]:
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


def step_scores_insert(
    *,
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


def scoring_batch_store(
    *,
    run: ScoringRun,
    trajectory_rows: list[TrajectoryScore],
    step_rows: list[tuple[int, int, float | None, float | None, dict[str, Any]]],
    skipped: int,
    usage: JudgeUsageTotals,
) -> None:
    """Store one batch's scores and add its counts to the run, in one transaction."""
    with transaction.atomic():
        TrajectoryScore.objects.bulk_create(trajectory_rows, ignore_conflicts=True, batch_size=1000)
        step_scores_insert(reward_model_id=run.reward_model_id, rows=step_rows)
        ScoringRun.objects.filter(pk=run.pk).update(
            scored=F("scored") + len(trajectory_rows),
            skipped=F("skipped") + skipped,
            judge_calls=F("judge_calls") + usage.calls,
            cache_hits=F("cache_hits") + usage.hits,
            tokens_in=F("tokens_in") + usage.tokens_in,
            tokens_out=F("tokens_out") + usage.tokens_out,
            cost_usd=F("cost_usd") + usage.cost,
        )
        gdi_recompute(ids=[row.trajectory_id for row in trajectory_rows])  # the reward component


def scoring_run_stop(*, run: ScoringRun, reason: str) -> None:
    """Record why the run stopped early (spend cap)."""
    ScoringRun.objects.filter(pk=run.pk).update(stop_reason=reason)
