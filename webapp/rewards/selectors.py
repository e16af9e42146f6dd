"""Reads for the reward pages and for the trajectory pages' score panels."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from django.db.models import Count, QuerySet
from django.shortcuts import get_object_or_404

from webapp.common.errors import ApplicationError
from webapp.domains.selectors import profile_current
from webapp.rewards.models import (
    PreferencePair,
    RewardModel,
    Rubric,
    ScoringRun,
    StepScore,
    TrajectoryScore,
)
from webapp.trajectories import selectors as trajectory_selectors
from webapp.trajectories.gdi import ids_filter
from webapp.trajectories.models import Trajectory as TrajectoryRow

BINS = 10


def versions_for(*, trajectory_id: int) -> list[RewardModel]:
    """The versions that scored this trajectory, newest first."""
    ids = TrajectoryScore.objects.filter(trajectory_id=trajectory_id).values_list(
        "reward_model_id", flat=True
    )
    return list(RewardModel.objects.filter(pk__in=list(ids)).order_by("-created_at"))


def step_scores(*, reward_model_id: int, trajectory_id: int) -> dict[int, StepScore]:
    """The step scores one version gave one trajectory, by step index."""
    return {
        s.index: s
        for s in StepScore.objects.filter(
            reward_model_id=reward_model_id, trajectory_id=trajectory_id
        )
    }


def common_version(*, left_id: int, right_id: int) -> RewardModel | None:
    """The newest version that scored both trajectories."""
    scored: dict[int, set[int]] = {left_id: set(), right_id: set()}
    for trajectory_id, version_id in TrajectoryScore.objects.filter(
        trajectory_id__in=[left_id, right_id]
    ).values_list("trajectory_id", "reward_model_id"):
        scored[trajectory_id].add(version_id)
    both = scored[left_id] & scored[right_id]
    return RewardModel.objects.filter(pk__in=both).order_by("-created_at").first() if both else None


def _histogram(values: list[float]) -> list[dict[str, Any]]:
    """Counts of totals in BINS equal bins over 0..1, with the bar width in percent."""
    counts = [0] * BINS
    for v in values:
        counts[min(BINS - 1, max(0, int(v * BINS)))] += 1
    peak = max(counts) or 1
    return [
        {
            "low": i / BINS,
            "high": (i + 1) / BINS,
            "count": c,
            "width": round(100 * c / peak),
        }
        for i, c in enumerate(counts)
    ]


def distributions(*, reward_model: RewardModel, by: str) -> list[dict[str, Any]]:
    """Score distributions of one version grouped by ``policy`` (policy or agent/model) or
    ``task``: count, mean, unscored count and a histogram per group (largest groups first)."""
    field = "trajectory__task_ref" if by == "task" else "trajectory__policy"
    groups: dict[str, list[float]] = defaultdict(list)
    unscored: dict[str, int] = defaultdict(int)
    rows = TrajectoryScore.objects.filter(reward_model=reward_model).values_list(
        field, "trajectory__agent", "trajectory__model", "total"
    )
    for key, agent, model, total in rows:
        name = key or (f"{agent} · {model}" if by != "task" else "") or "—"
        if total is None:
            unscored[name] += 1
        else:
            groups[name].append(total)
    out = []
    for name in sorted(set(groups) | set(unscored), key=lambda n: -len(groups.get(n, []))):
        values = groups.get(name, [])
        out.append(
            {
                "name": name,
                "count": len(values),
                "unscored": unscored.get(name, 0),
                "mean": sum(values) / len(values) if values else None,
                "bins": _histogram(values),
            }
        )
    return out[:50]


def versions_overview() -> list[RewardModel]:
    return list(
        RewardModel.objects.select_related("profile")
        .annotate(scored=Count("scores", distinct=True), run_count=Count("runs", distinct=True))
        .order_by("domain", "-version")
    )


def step_rewards_for_diff(*, left_id: int, right_id: int):
    """The diff's step rewards (registered as ``trajectories.hooks.register_step_rewards``): the
    newest version that scored both trajectories and its step totals, or None."""
    version = common_version(left_id=left_id, right_id=right_id)
    if version is None:
        return None
    rewards = {
        pk: {
            index: score.total
            for index, score in step_scores(reward_model_id=version.pk, trajectory_id=pk).items()
        }
        for pk in (left_id, right_id)
    }
    return version, rewards


# --- versions and rubrics --------------------------------------------------------------------


def version_list(*, domain: str = "") -> QuerySet[RewardModel]:
    """Every version (of ``domain``), by domain and newest version first."""
    qs = RewardModel.objects.order_by("domain", "-version")
    return qs.filter(domain=domain) if domain else qs


def version_get(*, id: int | str | None) -> RewardModel:
    """The version (with its frozen profile); Http404 when there is none."""
    return get_object_or_404(RewardModel.objects.select_related("profile"), pk=id)


def version_find(*, id: int | None) -> RewardModel | None:
    """The version, or None (the CLI says so and where to look)."""
    return RewardModel.objects.filter(pk=id).first() if id is not None else None


def latest_version(*, domain: str) -> RewardModel | None:
    return RewardModel.objects.filter(domain=domain).order_by("-version").first()


def profile_for_new_version(*, domain: str):
    """The domain profile version a version created now would freeze (None: the built-in)."""
    return profile_current(name=domain)


def latest_uncalibrated_version(*, domain: str) -> RewardModel | None:
    """The newest version of ``domain`` that no calibration made: the rule layer as it is (what
    the demo and the ablation's outcome and process arms score with, whatever an earlier
    calibrate stage added since)."""
    return RewardModel.objects.filter(domain=domain, calibration={}).order_by("-version").first()


def version_detail(*, version: RewardModel, by: str) -> dict[str, Any]:
    """What a version's page shows beside its settings: score distributions, counts, runs, and
    the domain's current profile version (to say when the frozen one has been edited since)."""
    return {
        "current_profile": profile_current(name=version.domain),
        "groups": distributions(reward_model=version, by=by),
        **version_runs(version=version),
    }


def version_runs(*, version: RewardModel) -> dict[str, Any]:
    """A version's scoring runs (newest first), how many trajectories it has scored, and the job
    of a run still in flight (the page follows it live; None: none is)."""
    runs = list(version.runs.select_related("job")[:20])
    live = next((r.job for r in runs if r.job is not None and not r.job.is_terminal), None)
    return {"runs": runs, "scored": version.scores.count(), "live_job": live}


def rubric_domains() -> list[str]:
    return sorted(set(Rubric.objects.values_list("domain", flat=True)))


def rubric_list(*, domain: str) -> list[Rubric]:
    return list(Rubric.objects.filter(domain=domain))


def scoring_runs_recent(*, limit: int = 20) -> QuerySet[ScoringRun]:
    return ScoringRun.objects.select_related("reward_model", "job")[:limit]


def scoring_run_keyset(*, before_id: int | None, limit: int) -> list[ScoringRun]:
    """Up to ``limit`` scoring runs, newest (highest id) first, before ``before_id``."""
    runs = ScoringRun.objects.select_related("reward_model", "job").order_by("-pk")
    if before_id is not None:
        runs = runs.filter(pk__lt=before_id)
    return list(runs[:limit])


def scoring_run_get(*, id: int) -> ScoringRun:
    """The run with its version and job; Http404 when there is none."""
    return get_object_or_404(ScoringRun.objects.select_related("reward_model", "job"), pk=id)


def trajectories_missing(*, ids: list[int]) -> list[int]:
    """Which of these trajectory ids name no trajectory (sorted)."""
    found = set(TrajectoryRow.objects.filter(pk__in=ids).values_list("pk", flat=True))
    return sorted(set(ids) - found)


def scoring_run_for_job(*, run_id: int | None) -> ScoringRun:
    """The run a scoring job works on (ApplicationError: deleted since launch)."""
    run = (
        ScoringRun.objects.select_related("reward_model", "reward_model__profile")
        .filter(pk=run_id)
        .first()
    )
    if run is None:
        raise ApplicationError(f"Scoring run {run_id} no longer exists.")
    return run


def scored_ids(*, reward_model: RewardModel, trajectory_ids: list[int]) -> set[int]:
    """Which of these trajectories this version has scored already."""
    return set(
        TrajectoryScore.objects.filter(
            reward_model=reward_model, trajectory_id__in=trajectory_ids
        ).values_list("trajectory_id", flat=True)
    )


def version_for_selection(*, versions: list[RewardModel], ids: list[int], raw: str | None):
    """The version to score a selection with: the one asked for (``raw``, an id), else the
    newest of the selection's domain, else the newest of all."""
    if raw and raw.isdigit():
        chosen = next((v for v in versions if v.pk == int(raw)), None)
        if chosen is not None:
            return chosen
    if not ids:
        return None
    domains = trajectory_selectors.domains_of(ids=ids[:1000])
    return next((v for v in versions if v.domain in domains), None) or (
        versions[0] if versions else None
    )


def trajectory_score_panel(*, trajectory_id: int, version_id: str | None) -> dict[str, Any]:
    """The score panel of a trajectory page: the totals of every version that scored it, and
    the chosen version's (``version_id``, else the newest) per-step scores."""
    versions = versions_for(trajectory_id=trajectory_id)
    chosen = None
    if version_id and version_id.isdigit():
        chosen = next((v for v in versions if v.pk == int(version_id)), None)
    chosen = chosen or (versions[0] if versions else None)
    total = (
        chosen.scores.select_related("profile").filter(trajectory_id=trajectory_id).first()
        if chosen
        else None
    )
    steps = step_scores(reward_model_id=chosen.pk, trajectory_id=trajectory_id) if chosen else {}
    return {
        "trajectory_id": trajectory_id,
        "versions": versions,
        "chosen": chosen,
        "total": total,
        "steps": sorted(steps.values(), key=lambda s: s.index),
    }


def pair_list(*, limit: int = 500) -> QuerySet[PreferencePair]:
    return PreferencePair.objects.select_related("reward_model")[:limit]


# --- the API's reads --------------------------------------------------------------------------


def version_summary(*, id: int) -> RewardModel:
    """One version with how many trajectories it scored and its scoring runs (``scored``,
    ``run_count``, as the overview counts them); Http404 when there is none."""
    return get_object_or_404(
        RewardModel.objects.select_related("profile").annotate(
            scored=Count("scores", distinct=True), run_count=Count("runs", distinct=True)
        ),
        pk=id,
    )


def version_trajectory_scores(
    *, reward_model: RewardModel, trajectory_id: int
) -> tuple[TrajectoryScore | None, list[StepScore]]:
    """What one version gave one trajectory: its total row (None: the version has not scored
    it) and its step scores in step order (the trajectory page's score panel, for one version)."""
    total = reward_model.scores.filter(trajectory_id=trajectory_id).first()
    steps = step_scores(reward_model_id=reward_model.pk, trajectory_id=trajectory_id)
    return total, sorted(steps.values(), key=lambda s: s.index)


def pair_keyset(
    *,
    before_id: int | None,
    limit: int,
    source: str = "",
    status: str = "",
    reward_model_id: int | None = None,
    task: str = "",
) -> list[PreferencePair]:
    """Preference pairs newest first (the pairs page's order), ``limit`` of them with an id
    below ``before_id`` (None: from the newest), filtered by source, status, version and task."""
    qs = PreferencePair.objects.select_related("reward_model").order_by("-id")
    if before_id is not None:
        qs = qs.filter(pk__lt=before_id)
    if source:
        qs = qs.filter(source=source)
    if status:
        qs = qs.filter(status=status)
    if reward_model_id is not None:
        qs = qs.filter(reward_model_id=reward_model_id)
    if task:
        qs = qs.filter(task_ref=task)
    return list(qs[:limit])


def pair_get(*, id: int) -> PreferencePair:
    """One preference pair; Http404 when there is none."""
    return get_object_or_404(PreferencePair.objects.select_related("reward_model"), pk=id)


def gdi_rewards(*, ids: list[int]) -> dict[int, tuple[float, str]]:
    """The GDI reward of trajectories ``ids`` (``webapp.trajectories.gdi``): the total of the
    newest reward-model version that scored each (unscored totals are left out)."""
    found: dict[int, tuple[float, str]] = {}
    rows = (
        TrajectoryScore.objects.filter(ids_filter(field="trajectory_id", ids=ids))
        .filter(total__isnull=False)
        .order_by("trajectory_id", "-reward_model_id")
        .values_list("trajectory_id", "total", "reward_model__domain", "reward_model__version")
    )
    for pk, total, domain, version in rows:
        found.setdefault(pk, (total, f"reward model {domain} v{version}"))
    return found
