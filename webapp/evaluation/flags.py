"""Reward-hacking flags of a pipeline (issue 21): its training runs' flags with the held-out
success around each, and flags over its evaluation rounds.

- Each GRPO iteration's training run: ``process_vs_outcome`` compares the process reward the run
  trained on (rising within a window) with the held-out success of the evaluation before the
  iteration (the baseline or the previous iteration's) and after it, placed at step 0 and at the
  run's last step; the other flags as during training.
- The evaluation rounds (0: the baseline, then each iteration's evaluation) are the steps of a
  second computation, one round per window: ``failed_high_process``, ``behaviour_shift``
  (round against round) and ``layer_divergence`` over each round's episodes (scored by the
  pipeline's reward-model version, where they were), ``process_vs_outcome`` across rounds once a
  pipeline has enough of them (``min_points``, at least 3).

Computed when a pipeline finishes each evaluation, and on demand (``steplab flags``).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from typing import Any

from django.db.models import Q

from trainer_core.evaluation.flags import FlagConfig, FlagResult, compute_flags
from webapp.evaluation.models import Pipeline, PipelineStage
from webapp.rollouts.models import Episode as EpisodeRow
from webapp.training import flag_selectors, flag_services
from webapp.training.models import RunFlag, TrainingRun

log = logging.getLogger(__name__)

#: The most episodes of one evaluation round read.
MAX_ROUND_EPISODES = 2000


def _rounds(pipeline: Pipeline) -> list[tuple[int, Any]]:
    """(round, its evaluation run) in order: the baseline is round 0."""
    rows = PipelineStage.objects.filter(
        pipeline=pipeline, name__in=[PipelineStage.Name.BASELINE, PipelineStage.Name.EVALUATE]
    ).select_related("evaluation")
    return sorted(
        (s.iteration, s.evaluation)
        for s in rows
        if s.evaluation is not None and s.evaluation.metrics
    )


def pipelines_named(*, prefix: str = "", id: int | None = None, limit: int = 100) -> list[Pipeline]:  # noqa: A002
    """The pipelines whose name starts with ``prefix`` (oldest first), or the one with ``id``."""
    rows = Pipeline.objects.order_by("pk")
    rows = rows.filter(pk=id) if id is not None else rows.filter(name__startswith=prefix)
    return list(rows[:limit])


def pipeline_flag_rows(*, pipeline_id: int, limit: int = 500) -> list[RunFlag]:
    """The stored flags of a pipeline: its evaluation rounds' and its GRPO runs' (at most
    ``limit``)."""
    runs = PipelineStage.objects.filter(
        pipeline_id=pipeline_id, name=PipelineStage.Name.TRAIN, training_run__isnull=False
    ).values_list("training_run_id", flat=True)
    rows = RunFlag.objects.filter(
        Q(source=RunFlag.Source.EVALUATION, pipeline_ref=pipeline_id)
        | Q(source=RunFlag.Source.TRAINING, training_run_id__in=list(runs))
    ).select_related("reviewed_by")
    return list(rows.order_by("source", "training_run_id", "start_step", "kind", "pk")[:limit])


def _success(run: Any) -> float | None:
    value = (run.metrics or {}).get("success_rate")
    return float(value) if isinstance(value, (int, float)) else None


def pipeline_flags_compute(
    *, pipeline: Pipeline, config: FlagConfig | None = None
) -> dict[str, list[FlagResult]]:
    """Compute and store the pipeline's flags; {"training run <id>": results, "evaluation":
    results} with every evaluation, fired or not."""
    config = config or FlagConfig()
    rounds = _rounds(pipeline)
    success = {it: s for it, run in rounds if (s := _success(run)) is not None}
    out: dict[str, list[FlagResult]] = {}
    trains = PipelineStage.objects.filter(
        pipeline=pipeline,
        name=PipelineStage.Name.TRAIN,
        training_run__method=TrainingRun.Method.GRPO,
    ).select_related("training_run", "training_run__dataset", "training_run__job")
    for stage in sorted(trains, key=lambda s: s.iteration):
        run = stage.training_run
        before = max((it for it in success if it < stage.iteration), default=None)
        heldout: list[tuple[int, float]] = []
        if before is not None and stage.iteration in success:
            last = int((run.config or {}).get("max_steps") or 0) or 1
            heldout = [(0, success[before]), (last, success[stage.iteration])]
        out[f"training run {run.pk}"] = flag_services.run_flags_compute(
            run=run, config=config, heldout=heldout
        )
    by_step: dict[int, list[int]] = {}
    for it, run in rounds:
        if run.collect_run_id is None:
            continue
        ids = EpisodeRow.objects.filter(
            run_id=run.collect_run_id, trajectory__isnull=False
        ).order_by("pk")
        by_step[it] = list(ids.values_list("trajectory_id", flat=True)[:MAX_ROUND_EPISODES])
    episodes = flag_selectors.episodes_of(by_step=by_step, reward_model_id=pipeline.reward_model_id)
    per_round = dataclasses.replace(config, window=1, min_points=1)
    results = compute_flags(
        [{"step": it, "success_rate": s} for it, s in success.items()],
        episodes,
        config=per_round,
    )
    whole = dataclasses.replace(config, window=max(len(rounds), 1), min_points=1)
    results += [
        r
        for r in compute_flags(
            [{"step": it, "success_rate": s} for it, s in success.items()], episodes, config=whole
        )
        if r.kind == "process_vs_outcome"
    ]
    flag_services.flags_store(
        results=results,
        config=per_round,
        source=RunFlag.Source.EVALUATION,
        pipeline_id=pipeline.pk,
    )
    out["evaluation"] = results
    return out


def pipeline_flags_refresh(*, pipeline: Pipeline, say: Callable[[str], None] | None = None) -> None:
    """``pipeline_flags_compute`` for the pipeline job: never raises (flags must not fail it)."""
    try:
        results = pipeline_flags_compute(pipeline=pipeline)
    except Exception as exc:  # noqa: BLE001 - reported, never fatal to the pipeline
        log.exception("reward-hacking flags of pipeline %s", pipeline.pk)
        if say is not None:
            say(f"reward-hacking flags could not be computed: {exc}")
        return
    fired = sum(r.fired for rs in results.values() for r in rs)
    if say is not None and fired:
        say(f"reward-hacking flags: {fired} fired (see the training runs' pages)")
