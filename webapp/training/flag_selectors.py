"""Reads for the reward-hacking flags (issue 21): what a run's flags are computed over (its
metric history, the trajectories each step trained on, their scores and actions) and the stored
flags, for the pages, the CLI and the API.

The samples behind a step, by trainer:

- a decoupled RL run: the SampleGroup rows consumed at that step (their stored episodes);
- offline GRPO: the run's ``lineage.jsonl`` (the dataset rows each step trained on) and the
  ``trajectory_ids`` of those rows of the dataset's train split;
- online GRPO outside an RL run keeps no trajectories: only its metric history is read.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from django.db.models import QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404
from django.urls import reverse

from trainer_core.datasets.layout import find_split
from trainer_core.errors import ConfigError, InputError
from trainer_core.evaluation.flags import Episode
from trainer_core.training.lineage import read_lineage
from webapp.jobs.models import JobMetricPoint
from webapp.rewards.models import StepScore, TrajectoryScore
from webapp.training.models import RunFlag, SampleGroup, TrainingRun
from webapp.trajectories.models import Step, Trajectory

#: The most trajectories one computation reads (each step keeps its first share of them).
MAX_EPISODES = 4000
#: The most metric points read (a run logs one per ``log_every`` steps).
MAX_POINTS = 20000


def metric_history(*, run: TrainingRun) -> list[dict[str, Any]]:
    """The run's logged metric points, ``{"step": k, **values}``, oldest first."""
    if run.job_id is None:
        return []
    rows = JobMetricPoint.objects.filter(job_id=run.job_id).order_by("step", "pk")
    return [
        {**(values or {}), "step": int(step)}
        for step, values in rows.values_list("step", "values")[:MAX_POINTS]
    ]


def _offline_samples(run: TrainingRun) -> dict[int, list[int]]:
    """step → trajectory ids, from the lineage and the dataset's train split (offline GRPO)."""
    if not run.output_dir or run.dataset is None or not run.dataset.directory:
        return {}
    try:
        lineage = read_lineage(run.output_dir)
        path = find_split(run.dataset.directory, "train")
    except (ConfigError, InputError, OSError):
        return {}
    rows: list[list[Any]] = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            try:
                rows.append(list(json.loads(line).get("trajectory_ids") or []))
            except (ValueError, AttributeError):
                rows.append([])
    out: dict[int, list[int]] = {}
    for entry in lineage:
        ids: list[int] = []
        for row in entry.get("consumed") or []:
            if isinstance(row, int) and 0 <= row < len(rows):
                ids.extend(_ints(rows[row]))
        out[int(entry["step"])] = list(dict.fromkeys(ids))
    return out


def _ints(values: Iterable[Any]) -> list[int]:
    out = []
    for value in values:
        try:
            out.append(int(value))
        except (TypeError, ValueError):
            continue
    return out


def step_samples(*, run: TrainingRun) -> dict[int, list[int]]:
    """step → the ids of the trajectories that step trained on (see the module docstring)."""
    rl = getattr(run, "rl", None)  # RLRun.DoesNotExist is an AttributeError
    if rl is not None:
        out: dict[int, list[int]] = defaultdict(list)
        groups = SampleGroup.objects.filter(run=rl, status=SampleGroup.Status.CONSUMED)
        for step, payload in groups.order_by("step", "index").values_list("step", "payload"):
            out[int(step or 0)].extend(_ints((payload or {}).get("trajectory_ids") or []))
        return dict(out)
    if run.method == TrainingRun.Method.GRPO:
        return _offline_samples(run)
    return {}


def _capped(by_step: dict[int, list[int]]) -> dict[int, list[int]]:
    total = sum(len(v) for v in by_step.values())
    if total <= MAX_EPISODES:
        return by_step
    share = max(1, MAX_EPISODES // max(1, len(by_step)))
    return {step: ids[:share] for step, ids in by_step.items()}


def _layer_means(rubrics: dict[str, Any]) -> tuple[float | None, float | None]:
    """(the judge layer's mean score, the rule layer's) of one step's rubric scores."""
    layers: dict[str, list[float]] = defaultdict(list)
    for score in (rubrics or {}).values():
        if isinstance(score, dict) and score.get("value") is not None:
            layers[str(score.get("layer", ""))].append(float(score["value"]))
    judge, rules = layers.get("model"), layers.get("rule")
    return (
        sum(judge) / len(judge) if judge else None,
        sum(rules) / len(rules) if rules else None,
    )


def episodes_of(*, by_step: dict[int, list[int]], reward_model_id: int | None) -> list[Episode]:
    """The flags' Episode records of ``by_step``'s trajectories: outcome, process score (the
    reward-model version's), tool calls, and each step's judge and rule layer scores."""
    by_step = _capped(by_step)
    ids = sorted({i for v in by_step.values() for i in v})
    if not ids:
        return []
    outcome = dict(Trajectory.objects.filter(pk__in=ids).values_list("pk", "success"))
    process: dict[int, float | None] = {}
    layers: dict[int, dict[int, tuple[float | None, float | None]]] = defaultdict(dict)
    if reward_model_id is not None:
        process = dict(
            TrajectoryScore.objects.filter(
                reward_model_id=reward_model_id, trajectory_id__in=ids
            ).values_list("trajectory_id", "process")
        )
        for tid, index, rubrics in StepScore.objects.filter(
            reward_model_id=reward_model_id, trajectory_id__in=ids
        ).values_list("trajectory_id", "index", "rubrics"):
            layers[tid][index] = _layer_means(rubrics)
    calls: dict[int, list[tuple[str, str]]] = defaultdict(list)
    for tid, tool, params in (
        Step.objects.filter(trajectory_id__in=ids, kind=Step.Kind.TOOL)
        .exclude(tool="")
        .order_by("trajectory_id", "index")
        .values_list("trajectory_id", "tool", "params")
    ):
        calls[tid].append((tool, f"{tool}({json.dumps(params, sort_keys=True, default=str)})"))
    out = []
    for step, members in sorted(by_step.items()):
        for tid in members:
            if tid not in outcome:
                continue  # deleted since
            scored = [layers[tid][i] for i in sorted(layers.get(tid, {}))]
            out.append(
                Episode(
                    id=tid,
                    step=step,
                    success=outcome[tid],
                    process=process.get(tid),
                    length=len(calls.get(tid, [])),
                    actions=tuple(key for _, key in calls.get(tid, [])),
                    tools=tuple(tool for tool, _ in calls.get(tid, [])),
                    judge=tuple(j for j, _ in scored),
                    rules=tuple(r for _, r in scored),
                )
            )
    return out


def reward_model_of(*, run: TrainingRun) -> int | None:
    """The reward-model version whose scores the run trained on (the RL run's, else the
    dataset's)."""
    rl = getattr(run, "rl", None)  # RLRun.DoesNotExist is an AttributeError
    if rl is not None and rl.reward_model_id:
        return rl.reward_model_id
    return run.dataset.reward_model_id if run.dataset is not None else None


# --- stored flags ---------------------------------------------------------------------------------


def run_flags(*, run: TrainingRun) -> QuerySet[RunFlag]:
    return RunFlag.objects.filter(training_run=run).select_related("queue", "reviewed_by")


def pipeline_flags(*, pipeline_id: int) -> QuerySet[RunFlag]:
    return RunFlag.objects.filter(
        pipeline_ref=pipeline_id, source=RunFlag.Source.EVALUATION
    ).select_related("queue", "reviewed_by")


def flag_get(*, id: int) -> RunFlag:  # noqa: A002
    """The flag; Http404 when there is none."""
    return get_object_or_404(
        RunFlag.objects.select_related("training_run", "queue", "reviewed_by"), pk=id
    )


def training_run_get(*, id: int) -> TrainingRun:  # noqa: A002
    run = TrainingRun.objects.select_related("dataset", "job").filter(pk=id).first()
    if run is None:
        raise Http404(f"No training run {id}.")
    return run


def flag_samples(*, flag: RunFlag, limit: int = 50) -> list[Trajectory]:
    """The trajectories behind the flag (the first ``limit``), in the flag's order."""
    ids = _ints(flag.trajectory_ids)[:limit]
    found = {t.pk: t for t in Trajectory.objects.filter(pk__in=ids)}
    return [found[i] for i in ids if i in found]


def chart_markers(*, run: TrainingRun, flags: Iterable[RunFlag]) -> dict[str, Any]:
    """What the curve's markers need (js/run_flags.js): the run's last step, the flag page's URL
    pattern, each flag's window, kind and review."""
    flags = list(flags)
    last = int((run.config or {}).get("max_steps") or 0)
    return {
        "max_step": max([last] + [f.end_step for f in flags]),
        "url": reverse("training:flag", args=[0]),
        "flags": [
            {
                "id": f.pk,
                "kind": f.kind,
                "metric": f.metric,
                "start": f.start_step,
                "end": f.end_step,
                "review": f.review,
            }
            for f in flags
        ],
    }
