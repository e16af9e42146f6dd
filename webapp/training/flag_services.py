"""Writes for the reward-hacking flags (issue 21): compute a run's flags
(``trainer_core.evaluation.flags``) and store the ones that fired, make an annotation queue of a
flag's samples in one click, and keep a human's confirm/reject answer with the flag.

Computing is idempotent: a flag is keyed by its source, owner, kind, metric and window start, so
computing again (every window during training, at the end, after a pipeline's evaluation)
updates it in place. A stored flag that no longer fires is removed unless a human has reviewed
it or a queue was made from it (then it stays, marked in ``details["fires_now"]``)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict
from typing import Any

from django.db import transaction
from django.utils import timezone

from trainer_core.errors import ConfigError
from trainer_core.evaluation.flags import (
    Episode,
    FlagConfig,
    FlagResult,
    compute_flags,
    config_from_dict,
    config_help,
)
from webapp.accounts.permissions import Need, user_can
from webapp.calibration.models import AnnotationQueue
from webapp.calibration.services import queue_create
from webapp.common.errors import ApplicationError
from webapp.training import flag_selectors
from webapp.training.models import RunFlag, TrainingRun

log = logging.getLogger(__name__)

#: The settings a request may post (FlagConfig's fields).
FLAG_FIELDS = frozenset(item["name"] for item in config_help())


def flag_config_help() -> list[dict[str, Any]]:
    """Each flag setting's name, default and help (the page's settings form)."""
    return config_help()


def flag_config(*, values: dict[str, Any] | None = None) -> FlagConfig:
    """A validated FlagConfig from ``values`` (ApplicationError naming what is wrong)."""
    try:
        return config_from_dict(values or {})
    except ConfigError as exc:
        raise ApplicationError(str(exc)) from None


def _key(source: str, owner: int, result: FlagResult) -> str:
    return f"{source}:{owner}:{result.kind}:{result.metric}:{result.start}"[:300]


def flags_store(
    *,
    results: Sequence[FlagResult],
    config: FlagConfig,
    source: str,
    training_run: TrainingRun | None = None,
    pipeline_id: int | None = None,
) -> list[RunFlag]:
    """Store the fired results as RunFlag rows (updated in place by key); remove the owner's
    earlier flags that no longer fire unless reviewed or queued. Returns the fired flags."""
    owner = training_run.pk if training_run is not None else int(pipeline_id or 0)
    scope = RunFlag.objects.filter(source=source)
    scope = (
        scope.filter(training_run=training_run)
        if training_run is not None
        else scope.filter(pipeline_ref=pipeline_id)
    )
    fired = [r for r in results if r.fired]
    keys = {_key(source, owner, r) for r in fired}
    stored = []
    with transaction.atomic():
        for r in fired:
            flag, _ = RunFlag.objects.update_or_create(
                key=_key(source, owner, r),
                defaults={
                    "source": source,
                    "training_run": training_run,
                    "pipeline_ref": pipeline_id,
                    "kind": r.kind,
                    "metric": r.metric[:200],
                    "start_step": r.start,
                    "end_step": r.end,
                    "statistic": r.statistic,
                    "value": r.value,
                    "threshold": r.threshold,
                    "window": r.window,
                    "p_value": r.p_value,
                    "message": r.message[:300],
                    "details": {**r.details, "fires_now": True},
                    "config": asdict(config),
                    "trajectory_ids": list(r.sample_ids),
                },
            )
            stored.append(flag)
        stale = scope.exclude(key__in=keys)
        stale.filter(review="", queue__isnull=True).delete()
        for flag in stale:
            flag.details = {**(flag.details or {}), "fires_now": False}
            flag.save(update_fields=["details", "updated_at"])
    return stored


def run_flags_compute(
    *,
    run: TrainingRun,
    config: FlagConfig | None = None,
    heldout: Sequence[tuple[int, float]] = (),
) -> list[FlagResult]:
    """Compute every flag of the training run over its metric history and the trajectories each
    step trained on (``heldout``: (step, success) of held-out evaluations around it), store the
    ones that fired, and return every evaluation (fired or not)."""
    config = config or FlagConfig()
    episodes: list[Episode] = flag_selectors.episodes_of(
        by_step=flag_selectors.step_samples(run=run),
        reward_model_id=flag_selectors.reward_model_of(run=run),
    )
    results = compute_flags(
        flag_selectors.metric_history(run=run), episodes, heldout=heldout, config=config
    )
    flags_store(results=results, config=config, source=RunFlag.Source.TRAINING, training_run=run)
    return results


def run_flags_refresh(*, run: TrainingRun, say: Callable[[str], None] | None = None) -> int:
    """``run_flags_compute`` with the defaults, for the training jobs: never raises (a flag that
    cannot be computed must not fail training); returns the flags that fired (-1: failed)."""
    try:
        fired = sum(r.fired for r in run_flags_compute(run=run))
    except Exception as exc:  # noqa: BLE001 - reported, never fatal to the run
        log.exception("reward-hacking flags of training run %s", run.pk)
        if say is not None:
            say(f"reward-hacking flags could not be computed: {exc}")
        return -1
    if say is not None and fired:
        say(f"reward-hacking flags: {fired} fired (see the run's page)")
    return fired


def progress_with_flags(
    on_progress: Callable[[Any], None],
    *,
    run: TrainingRun,
    say: Callable[[str], None],
    flush: Callable[[], None] | None = None,
) -> Callable[[Any], None]:
    """``on_progress`` that also recomputes the run's flags each time a window of steps ends
    (the default window), so they show while it trains (``flush``: write the pending metric
    points first)."""
    window = FlagConfig().window

    def report(event: Any) -> None:
        on_progress(event)
        step = getattr(event, "step", None)
        if step and getattr(event, "metrics", None) and step % window == 0:
            if flush is not None:
                flush()
            run_flags_refresh(run=run, say=say)

    return report


# --- the human side: a queue of the samples, confirm or reject ------------------------------------


def flag_queue_create(*, flag: RunFlag, user) -> AnnotationQueue:
    """An annotation queue (score every step) of the flag's samples, linked from the flag; the
    flag's existing queue when it has one."""
    if not user_can(user, Need.OPERATE):
        raise ApplicationError("Creating an annotation queue needs the operator role.")
    if flag.queue_id is not None:
        return flag.queue
    ids = [int(i) for i in flag.trajectory_ids if str(i).isdigit()]
    if not ids:
        raise ApplicationError("This flag has no stored samples to annotate.")
    where = (
        f"training run {flag.training_run_id}"
        if flag.training_run_id
        else f"pipeline {flag.pipeline_ref}"
    )
    name = f"flag {flag.pk}: {flag.kind}{' ' + flag.metric if flag.metric else ''}, {where}"
    guidelines = (
        f"Reward-hacking check ({flag.kind}) "
        f"over steps {flag.start_step}-{flag.end_step}: {flag.message} "
        "Score each step; then confirm or reject the flag on its page."
    )
    with transaction.atomic():
        queue = queue_create(
            name=name[:120],
            guidelines=guidelines,
            trajectory_ids=ids,
            budget=len(ids),
            user=user,
        )
        flag.queue = queue
        flag.save(update_fields=["queue", "updated_at"])
    return queue


def flag_review(*, flag: RunFlag, user, answer: str, note: str = "") -> RunFlag:
    """Keep a human's answer with the flag: confirmed (reward hacking) or rejected (a false
    alarm), with who and when; "" clears it."""
    if not user_can(user, Need.LABEL):
        raise ApplicationError("Confirming or rejecting a flag needs the annotator role.")
    if answer not in RunFlag.Review.values:
        raise ApplicationError("Answer confirmed or rejected.")
    flag.review = answer
    flag.review_note = (note or "").strip()[:500]
    flag.reviewed_by = user if answer else None
    flag.reviewed_at = timezone.now() if answer else None
    flag.save(update_fields=["review", "review_note", "reviewed_by", "reviewed_at", "updated_at"])
    return flag
