"""GDI ranking (docs/gdi.md): each trajectory's four components and their weighted total, stored
in ``TrajectoryGdi`` and recomputed where an input is written — no scheduler.

Who calls :func:`gdi_recompute` (explicit service calls, never signals):

- an import (``services._ImportBatch.store``) and a finished rollout (``trajectory_finish``);
- the rewards app, when a scoring batch stores trajectory totals (reward component);
- the calibration app, when a label, a first-error mark or a submission is written (feedback;
  :func:`gdi_recompute_on_commit`, once the write commits);
- the datasets app, when an export has written a build (:func:`reuse_record`: reuse component);
- ``steplab gdi recompute``: the whole database in batches (after changing the weights, or to
  bring recency up to date).

The apps above this one provide their inputs through the registries here (this app imports
none of them): ``register_reward_source`` (rewards: the newest reward-model total) and
``register_feedback_source`` (calibration: settled human labels, scores and pairwise choices).
Recency is computed at the moment of the recompute (``computed_at``) from the trajectory's time
(``recency_from``), both stored: the stored total, and so the GDI sort, is as of ``computed_at``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from trainer_core.evaluation.gdi import COMPONENTS, NEUTRAL_FEEDBACK, gdi, parse_weights
from webapp.common.errors import ApplicationError
from webapp.trajectories.models import Trajectory, TrajectoryGdi, TrajectoryReuse

BATCH = 1000

#: (*, ids) → {trajectory id: (reward, where it came from)} for the ids it has a reward for
RewardSource = Callable[..., dict[int, tuple[float, str]]]
#: (*, ids) → {trajectory id: [signal 0..1, ...]} (settled human feedback only)
FeedbackSource = Callable[..., dict[int, list[float]]]

_REWARD_SOURCES: list[RewardSource] = []
_FEEDBACK_SOURCES: list[FeedbackSource] = []


def ids_filter(*, field: str, ids: list[int]) -> Q:
    """``field`` among ``ids``: a range when they are dense (a whole-table recompute's batches:
    far cheaper than a long IN list), else an IN list. A range may match ids between them that
    were not asked for: a provider keys its answer by id, so they are ignored."""
    if len(ids) > 50 and (high := max(ids)) - (low := min(ids)) < 2 * len(ids):
        return Q(**{f"{field}__gte": low, f"{field}__lte": high})
    return Q(**{f"{field}__in": ids})


def register_reward_source(provider: RewardSource) -> None:
    if provider not in _REWARD_SOURCES:
        _REWARD_SOURCES.append(provider)


def register_feedback_source(provider: FeedbackSource) -> None:
    if provider not in _FEEDBACK_SOURCES:
        _FEEDBACK_SOURCES.append(provider)


def gdi_weights(*, text: str | None = None) -> dict[str, float]:
    """The weights in use: ``text`` ("reward=0.5,reuse=0.2,…"), else the setting
    ``STEPLAB_GDI_WEIGHTS``, else knowlyr's defaults; normalised to sum 1. ApplicationError
    naming a bad weight."""
    raw = text if text is not None else getattr(settings, "STEPLAB_GDI_WEIGHTS", "")
    try:
        return parse_weights(raw)
    except ValueError as exc:
        raise ApplicationError(str(exc)) from None


def _rewards(rows: list[tuple], ids: list[int]) -> dict[int, tuple[float | None, str]]:
    """Each trajectory's reward: the first source that has one (the newest reward-model total),
    else its own reward (outcome score or imported reward), else 1/0 from its outcome."""
    found: dict[int, tuple[float | None, str]] = {}
    for provider in _REWARD_SOURCES if ids else ():
        for pk, value in provider(ids=ids).items():
            found.setdefault(pk, value)
    for pk, reward, success, *_ in rows:
        if pk in found:
            continue
        if reward is not None:
            found[pk] = (reward, "trajectory reward")
        elif success is not None:
            found[pk] = (1.0 if success else 0.0, "outcome")
        else:
            found[pk] = (None, "none")
    return found


def _feedback(ids: list[int]) -> dict[int, list[float]]:
    signals: dict[int, list[float]] = {}
    for provider in _FEEDBACK_SOURCES:
        for pk, values in provider(ids=ids).items():
            signals.setdefault(pk, []).extend(values)
    return signals


def _builds(ids: list[int]) -> dict[int, int]:
    return dict(
        TrajectoryReuse.objects.filter(ids_filter(field="trajectory_id", ids=ids))
        .values("trajectory_id")
        .annotate(n=Count("pk"))
        .values_list("trajectory_id", "n")
    )


def _batch(ids: list[int], now: datetime, weights: dict[str, float], fresh: bool = False) -> int:
    """Compute and store the GDI of ``ids``; ``fresh``: rows just created in this transaction,
    which nothing has scored, labelled or exported yet (their own reward and recency only: an
    import adds one read and one insert per batch, no query of the apps above)."""
    if fresh:
        return _insert_fresh(ids, now, weights)
    wanted = set(ids)
    rows = [
        row
        for row in Trajectory.objects.filter(ids_filter(field="pk", ids=ids)).values_list(
            "pk", "reward", "success", "finished_at", "created_at"
        )
        if row[0] in wanted
    ]
    if not rows:
        return 0
    present = [row[0] for row in rows]
    rewards, builds, feedback = _rewards(rows, present), _builds(present), _feedback(present)
    out = []
    for pk, _, _, finished_at, created_at in rows:
        when = finished_at or created_at
        reward, source = rewards[pk]
        signals = feedback.get(pk, [])
        parts = gdi(
            reward=reward,
            builds=builds.get(pk, 0),
            feedback=signals,
            age_days=(now - when).total_seconds() / 86400,
            weights=weights,
        )
        out.append(
            TrajectoryGdi(
                trajectory_id=pk,
                reward=parts.reward,
                reward_source=source[:120],
                builds=builds.get(pk, 0),
                reuse=parts.reuse,
                feedback=parts.feedback,
                feedback_mean=(sum(signals) / len(signals)) if signals else None,
                feedback_signals=len(signals),
                recency=parts.recency,
                recency_from=when,
                total=parts.total,
                computed_at=now,
            )
        )
    TrajectoryGdi.objects.bulk_create(
        out,
        update_conflicts=True,
        unique_fields=["trajectory"],
        update_fields=[f.name for f in TrajectoryGdi._meta.concrete_fields if not f.primary_key],
    )
    return len(out)


_REWARD_SQL = (  # the reward component of a trajectory's own columns, as _rewards reads them
    "CASE WHEN reward IS NOT NULL THEN (CASE WHEN reward > 1 THEN 1.0 WHEN reward < 0 THEN 0.0 "
    "ELSE reward END) WHEN success IS NULL THEN 0.0 WHEN success THEN 1.0 ELSE 0.0 END"
)


def _insert_fresh(ids: list[int], now: datetime, weights: dict[str, float]) -> int:
    """The GDI of trajectories an import has just written (created and finished ``now``: recency
    1, no reuse, neutral feedback; the reward from their own columns), in one INSERT … SELECT —
    what keeps an import's cost to one statement per batch. The total is linear in the reward:
    ``base + weight × reward`` with both from ``trainer_core.evaluation.gdi``."""
    base = gdi(reward=0.0, builds=0, feedback=[], age_days=0, weights=weights).total
    table, source = TrajectoryGdi._meta.db_table, Trajectory._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f'INSERT INTO "{table}" (trajectory_id, reward, reward_source, builds, reuse, '
            "feedback, feedback_mean, feedback_signals, recency, recency_from, total, "
            f"computed_at) SELECT id, {_REWARD_SQL}, CASE WHEN reward IS NOT NULL THEN "
            "'trajectory reward' WHEN success IS NOT NULL THEN 'outcome' ELSE 'none' END, 0, "
            f"0.0, %s, NULL, 0, 1.0, COALESCE(finished_at, created_at), %s + %s * ({_REWARD_SQL}), "
            f'%s FROM "{source}" WHERE id IN ({", ".join(["%s"] * len(ids))}) '
            "ON CONFLICT DO NOTHING",
            [NEUTRAL_FEEDBACK, base, weights["reward"], now, *ids],
        )
        return cursor.rowcount


def gdi_recompute(
    *,
    ids: Iterable[int | None],
    weights: dict[str, float] | None = None,
    now: datetime | None = None,
    fresh: bool = False,
) -> int:
    """Recompute and store the GDI of trajectories ``ids`` (in batches); how many were stored
    (an id with no trajectory is skipped). ``fresh``: trajectories created in this transaction
    (an import), with no score, label or export yet."""
    unique = sorted({int(i) for i in ids if i is not None})
    weights = weights or gdi_weights()
    now = now or timezone.now()
    done = 0
    for start in range(0, len(unique), BATCH):
        done += _batch(unique[start : start + BATCH], now, weights, fresh)
    return done


_pending = threading.local()


def _flush_pending() -> None:
    ids = getattr(_pending, "ids", set())
    _pending.ids = set()
    if ids:
        gdi_recompute(ids=ids)


def gdi_recompute_on_commit(*, ids: Iterable[int | None]) -> None:
    """:func:`gdi_recompute` once the current transaction commits (at once outside one), once
    for all the ids asked for in it: for a service that checks before it writes (an
    annotation's feedback changes when it commits). Ids left by a rolled-back transaction are
    recomputed with the next commit's (harmless: a recompute reads the inputs as they are)."""
    if not hasattr(_pending, "ids"):
        _pending.ids = set()
    _pending.ids.update(i for i in ids if i is not None)
    transaction.on_commit(_flush_pending)


def gdi_recompute_all(
    *,
    weights: dict[str, float] | None = None,
    batch: int = BATCH,
    on_batch: Callable[[int], Any] | None = None,
) -> int:
    """Recompute every trajectory's GDI, ``batch`` at a time in id order, with one ``now`` (so
    recency is comparable across the whole table); ``on_batch(done)`` after each batch."""
    weights = weights or gdi_weights()
    now = timezone.now()
    after, done = 0, 0
    while True:
        ids = list(
            Trajectory.objects.filter(pk__gt=after)
            .order_by("pk")
            .values_list("pk", flat=True)[: max(1, batch)]
        )
        if not ids:
            return done
        done += _batch(ids, now, weights)
        after = ids[-1]
        if on_batch is not None:
            on_batch(done)


def reuse_record(*, dataset_id: int, ids: Iterable[int]) -> int:
    """Record that dataset build ``dataset_id`` included trajectories ``ids`` (a build counted
    once however often its export runs) and recompute their GDI; how many trajectories."""
    unique = sorted({int(i) for i in ids})
    TrajectoryReuse.objects.bulk_create(
        [TrajectoryReuse(trajectory_id=pk, dataset_id=dataset_id) for pk in unique],
        ignore_conflicts=True,
        batch_size=BATCH,
    )
    return gdi_recompute(ids=unique)


def gdi_show(*, trajectory_id: int) -> dict[str, Any] | None:
    """The stored GDI of a trajectory: the components, what they came from, the total, and the
    weights in use now; None before it was computed."""
    row = TrajectoryGdi.objects.filter(trajectory_id=trajectory_id).first()
    if row is None:
        return None
    weights = gdi_weights()
    return {
        "trajectory_id": trajectory_id,
        "total": row.total,
        "components": {name: getattr(row, name) for name in COMPONENTS},
        "weights": weights,
        "reward_source": row.reward_source,
        "builds": row.builds,
        "feedback_mean": row.feedback_mean,
        "feedback_signals": row.feedback_signals,
        "recency_from": row.recency_from,
        "computed_at": row.computed_at,
    }


def gdi_of(*, row) -> float | None:
    """The GDI of a trajectory list row (a ListRow's ``gdi``, or a model's stored GDI)."""
    found = getattr(row, "gdi", None)
    return found if found is None or isinstance(found, float) else found.total


def _fetch(qs: QuerySet, count: int, row_type) -> list:
    if row_type is None:  # models, with their stored GDI
        return list(qs.select_related("gdi")[:count])
    columns = ["gdi__total" if n == "gdi" else n for n in row_type.__dataclass_fields__]
    return [row_type(*values) for values in qs.values_list(*columns)[:count]]


def gdi_page(*, qs: QuerySet, decoded: tuple | None, want: int, row_type=None) -> list:
    """The first ``want`` rows of the GDI sort of ``qs`` after the cursor ``decoded`` ((GDI, id);
    (None, id) inside the unranked block): the ranked trajectories by (GDI desc, id desc) — an
    index walk on ``traj_gdi_total`` joined to the trajectory filters — then the trajectories
    whose GDI was never computed, newest first. Models, or ``row_type`` values (a dataclass
    whose fields are columns; its ``gdi`` field gets the total)."""
    rows: list = []
    if decoded is None or decoded[0] is not None:
        ranked = qs.filter(gdi__isnull=False).order_by("-gdi__total", "-id")
        if decoded is not None:
            value, last = decoded
            ranked = ranked.filter(Q(gdi__total__lt=value) | Q(gdi__total=value, pk__lt=last))
        rows = _fetch(ranked, want, row_type)
    if len(rows) < want:
        unranked = qs.filter(gdi__isnull=True).order_by("-id")
        if decoded is not None and decoded[0] is None:
            unranked = unranked.filter(pk__lt=decoded[1])
        rows += _fetch(unranked, want - len(rows), row_type)
    return rows
