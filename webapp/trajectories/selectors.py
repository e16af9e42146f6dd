"""Reads for the trajectory pages."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from functools import reduce
from operator import or_
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connection
from django.db.models import F, Q, QuerySet
from django.db.models.functions import MD5, Left, Length
from django.http import Http404
from django.shortcuts import get_object_or_404

from trainer_core.recording.align import (
    TEXT_DIFF_BUDGET,
    DiffWork,
    align_steps,
    param_diff,
    reward_delta,
    text_diff,
)
from trainer_core.recording.schema import Outcome, Step, TaskRef, Trajectory, Usage
from webapp.trajectories import gdi, hooks
from webapp.trajectories.cursors import SORTS, after, decode_cursor, encode_cursor
from webapp.trajectories.models import Step as StepRow
from webapp.trajectories.models import Trajectory as TrajectoryRow
from webapp.trajectories.search import search

PAGE_SIZE = 50
OBSERVATION_PREVIEW = 2000
FIRST_SCREEN_STEPS = 200
# The diff page: the rows it renders itself (its first screen), the rows each request it
# triggers adds, the characters of an observation or a message shown (the rest loads on
# demand), how long a pair's alignment is kept, and the comparisons the observation diffs of one
# request may spend in all (about 0.3 s of one core; rows beyond load their differences on
# demand).
DIFF_FIRST_ROWS = 100
DIFF_MORE_ROWS = 400
DIFF_BODY_CHARS = 500
DIFF_CACHE_SECONDS = 600
DIFF_BODY_BATCH = 16  # the whole texts of this many rows' text diffs are read in one query
DIFF_PAGE_BUDGET = 3 * TEXT_DIFF_BUDGET


@dataclass
class Filters:
    q: str = ""
    task: str = ""
    domain: str = ""
    agent: str = ""
    model: str = ""
    policy: str = ""
    source: str = ""
    format: str = ""  # the source format (an importer's name; "" for rollouts)
    status: str = ""
    outcome: str = ""  # success | failure | unknown
    min_reward: float | None = None
    max_reward: float | None = None
    min_steps: int | None = None
    max_steps: int | None = None
    tag: str = ""
    since: date | None = None  # created on or after (UTC date)
    until: date | None = None  # created on or before
    min_id: int | None = None
    max_id: int | None = None
    collect_run: int | None = None  # the episodes of one collect run (an evaluation's cells)
    task_exact: str = ""  # one task id exactly (``task`` matches a substring)
    sort: str = "newest"

    @classmethod
    def from_query(cls, data: Any) -> Filters:
        def number(name, kind):
            raw = (data.get(name) or "").strip()
            try:
                return kind(raw) if raw else None
            except ValueError:
                return None

        text = {
            name: (data.get(name) or "").strip()
            for name in (
                "q",
                "task",
                "domain",
                "agent",
                "model",
                "policy",
                "source",
                "format",
                "status",
                "outcome",
                "tag",
                "task_exact",
            )
        }

        def day(name):
            raw = (data.get(name) or "").strip()
            try:
                return date.fromisoformat(raw) if raw else None
            except ValueError:
                return None

        sort = (data.get("sort") or "newest").strip()
        return cls(
            **text,
            min_reward=number("min_reward", float),
            max_reward=number("max_reward", float),
            min_steps=number("min_steps", int),
            max_steps=number("max_steps", int),
            since=day("since"),
            until=day("until"),
            min_id=number("min_id", int),
            max_id=number("max_id", int),
            collect_run=number("collect_run", int),
            sort=sort if sort in SORTS else "newest",
        )


def trajectory_list(*, filters: Filters) -> QuerySet[TrajectoryRow]:
    qs = TrajectoryRow.objects.all()
    for name in ("domain", "agent", "model", "policy", "source", "status"):
        value = getattr(filters, name)
        if value:
            qs = qs.filter(**{name: value})
    if filters.format:
        qs = qs.filter(source_format=filters.format)
    if filters.task:
        qs = qs.filter(
            Q(task_ref__icontains=filters.task) | Q(task_set_name__icontains=filters.task)
        )
    if filters.outcome == "success":
        qs = qs.filter(success=True)
    elif filters.outcome == "failure":
        qs = qs.filter(success=False)
    elif filters.outcome == "unknown":
        qs = qs.filter(success__isnull=True)
    if filters.min_reward is not None:
        qs = qs.filter(reward__gte=filters.min_reward)
    if filters.max_reward is not None:
        qs = qs.filter(reward__lte=filters.max_reward)
    if filters.min_steps is not None:
        qs = qs.filter(step_count__gte=filters.min_steps)
    if filters.max_steps is not None:
        qs = qs.filter(step_count__lte=filters.max_steps)
    if filters.tag:
        qs = (
            qs.filter(tags__contains=[filters.tag])
            if connection.vendor == "postgresql"
            else qs.filter(tags__icontains=f'"{filters.tag}"')
        )
    if filters.since is not None:
        qs = qs.filter(created_at__gte=datetime.combine(filters.since, time.min, UTC))
    if filters.until is not None:
        end = datetime.combine(filters.until + timedelta(days=1), time.min, UTC)
        qs = qs.filter(created_at__lt=end)
    if filters.min_id is not None:
        qs = qs.filter(pk__gte=filters.min_id)
    if filters.max_id is not None:
        qs = qs.filter(pk__lte=filters.max_id)
    if filters.collect_run is not None:
        qs = qs.filter(idempotency_key__startswith=f"collect-{filters.collect_run}:")
    if filters.task_exact:
        qs = qs.filter(task_ref=filters.task_exact)
    if filters.q:
        qs = search(qs, filters.q, steps=StepRow.objects.all())
    _, column, descending = SORTS.get(filters.sort, SORTS["newest"])
    if column == "id":
        return qs.order_by("-id" if descending else "id")
    field = F(column).desc(nulls_last=True) if descending else F(column).asc(nulls_last=True)
    return qs.order_by(field, "-id" if descending else "id")


@dataclass(slots=True, frozen=True)
class ListRow:
    """A row of the trajectory list: the columns it shows (and its cursors read), without a
    model instance (``keyset_page(list_rows=True)``: a third of the cost of a page's rows)."""

    id: int
    task_ref: str
    prompt: str
    agent: str
    model: str
    source: str
    source_format: str
    status: str
    success: bool | None
    reward: float | None
    step_count: int
    tags: Any
    created_at: datetime
    gdi: float | None = None  # read only for the GDI sort

    @property
    def pk(self) -> int:
        return self.id


LIST_COLUMNS = tuple(name for name in ListRow.__dataclass_fields__ if name != "gdi")


def keyset_page(
    *,
    qs: QuerySet[TrajectoryRow],
    before: int | None = None,
    cursor: str | None = None,
    sort: str = "newest",
    list_rows: bool = False,
) -> tuple[list[TrajectoryRow] | list[ListRow], str | None]:
    """One page in ``sort`` order after ``cursor`` (what the previous page returned; for newest
    first, ``before`` — the smallest id of the previous page — works too). Returns the rows
    (models, or :class:`ListRow` values with ``list_rows``) and the cursor of the next page, or
    None on the last page."""
    _, column, descending = SORTS.get(sort, SORTS["newest"])
    if cursor is None and before is not None:
        cursor = str(before)
    decoded = decode_cursor(cursor, sort) if cursor else None
    if column == "gdi__total":
        row_type = ListRow if list_rows else None
        rows = gdi.gdi_page(qs=qs, decoded=decoded, want=PAGE_SIZE + 1, row_type=row_type)
    else:
        if decoded is not None:
            qs = after(qs, column, descending, decoded[0], decoded[1])
        if list_rows:
            rows = [ListRow(*values) for values in qs.values_list(*LIST_COLUMNS)[: PAGE_SIZE + 1]]
        else:
            rows = list(qs[: PAGE_SIZE + 1])
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    return rows, (encode_cursor(rows[-1], sort) if more and rows else None)


#: The filter menus: Filters field → the summary column whose distinct values it offers.
CHOICE_COLUMNS = {
    "domain": "domain",
    "agent": "agent",
    "model": "model",
    "source": "source",
    "format": "source_format",
}
CHOICES_TTL = 60  # seconds between full counts; new trajectories are added at once
CHOICES_KEY = "trajectories:choices"


def _choice_counts(table: str, *, after: int = 0) -> list[tuple[str, str, int]]:
    """(menu, value, trajectories) of every menu's column for the rows with an id above
    ``after``, in one query: on PostgreSQL one scan of the table with a grouping set per column
    (at 100,000 rows a third faster than a scan per column), elsewhere a GROUP BY per column. The
    columns hold no NULL, so the one a row of a grouping set is about is the one that is not
    NULL."""
    names, columns = list(CHOICE_COLUMNS), list(CHOICE_COLUMNS.values())
    where = f"WHERE id > {int(after)}" if after else ""
    if connection.vendor != "postgresql":
        sql = " UNION ALL ".join(
            f"SELECT '{name}', {column}, COUNT(*) FROM {table} {where} GROUP BY {column}"
            for name, column in CHOICE_COLUMNS.items()
        )
        with connection.cursor() as cursor:
            cursor.execute(sql)
            return cursor.fetchall()
    sets = ", ".join(f"({column})" for column in columns)
    sql = (
        f"SELECT {', '.join(columns)}, COUNT(*) FROM {table} {where} "
        f"GROUP BY GROUPING SETS ({sets})"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql)
        found = cursor.fetchall()
    out = []
    for *values, count in found:
        position = next(n for n, value in enumerate(values) if value is not None)
        out.append((names[position], values[position], count))
    return out


def _menu_counts() -> dict[str, dict[str, int]]:
    """value → trajectories of every menu, cached: counted in full at most every
    ``CHOICES_TTL`` seconds, and in between only the trajectories added since the last count (an
    index range scan on the id) as long as the trajectory that was the newest then is still there,
    so an import that adds rows all the time costs each list page a small query, not a scan of
    the table. A trajectory deleted (other than the newest) shows within ``CHOICES_TTL``."""
    table = TrajectoryRow._meta.db_table
    found = TrajectoryRow.objects.order_by("-id").values_list("id", "created_at").first()
    newest = (found[0], found[1].timestamp()) if found else (0, 0.0)
    cached = cache.get(CHOICES_KEY)
    now = datetime.now(UTC).timestamp()
    if cached and cached["newest"] == newest:
        return cached["counts"]
    after = cached["newest"][0] if cached and now - cached["full_at"] < CHOICES_TTL else 0
    if 0 < after < newest[0] and _still_there(*cached["newest"]):
        counts = {name: dict(values) for name, values in cached["counts"].items()}
        full_at = cached["full_at"]
    else:
        counts, after, full_at = {name: {} for name in CHOICE_COLUMNS}, 0, now
    for name, value, count in _choice_counts(table, after=after):
        if value:
            counts[name][value] = counts[name].get(value, 0) + count
    timeout = max(1, int(CHOICES_TTL - (now - full_at)))
    cache.set(CHOICES_KEY, {"newest": newest, "full_at": full_at, "counts": counts}, timeout)
    return counts


def _still_there(pk: int, created: float) -> bool:
    row = TrajectoryRow.objects.filter(pk=pk).values_list("created_at", flat=True).first()
    return row is not None and row.timestamp() == created


def filter_choices(*, filters: Filters | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every distinct value of each filter menu's column with its number of trajectories, by
    value (``_menu_counts``: one query for the newest id, and a grouping query when rows were
    added since the cached counts). A value ``filters`` selects that no trajectory has any more
    is kept, with a count of 0."""
    counts = _menu_counts()
    choices = {
        name: [
            {"value": value, "count": count}
            for value, count in sorted(values.items(), key=lambda item: item[0].lower())
        ]
        for name, values in counts.items()
    }
    if filters is not None:
        for name, values in choices.items():
            chosen = getattr(filters, name)
            if chosen and all(v["value"] != chosen for v in values):
                choices[name] = [*values, {"value": chosen, "count": 0}]
    return choices


def trajectory_spec(*, row: TrajectoryRow) -> Trajectory:
    """The stored trajectory in the canonical schema (for download and diff)."""
    steps = [
        Step(
            index=s.index,
            kind=s.kind,
            role=s.role or None,
            text=s.text,
            thought=s.thought,
            tool=s.tool,
            params=s.params,
            observation=s.observation,
            exit_code=s.exit_code,
            error=s.error,
            started_at=s.started_at,
            duration=s.duration,
            tokens_in=s.tokens_in,
            tokens_out=s.tokens_out,
            reward=s.reward,
            metadata=s.metadata,
        )
        for s in row.steps.order_by("index")
    ]
    return Trajectory(
        schema_version=row.schema_version,
        task=TaskRef(
            id=row.task_ref,
            task_set=row.task_set_name,
            domain=row.domain or "generic",
            prompt=row.prompt,
        ),
        agent=row.agent,
        model=row.model,
        policy=row.policy,
        environment=row.environment,
        steps=steps,
        outcome=Outcome.model_validate(row.outcome or {}),
        usage=Usage(tokens_in=row.tokens_in, tokens_out=row.tokens_out, cost_usd=row.cost_usd),
        metadata=row.metadata,
        source_format=row.source_format or "steplab",
    )


def trajectory_specs(*, ids: list[int]) -> dict[int, Trajectory]:
    """Many stored trajectories in the canonical schema with two queries (for scoring jobs).
    Values come from the database, already validated on the way in, so they are not validated
    again (``model_construct``)."""
    rows = {row.pk: row for row in TrajectoryRow.objects.filter(pk__in=ids)}
    steps: dict[int, list[Step]] = {pk: [] for pk in rows}
    fields = (
        "trajectory_id", "index", "kind", "role", "text", "thought", "tool", "params",
        "observation", "exit_code", "error", "duration", "tokens_in", "tokens_out", "reward",
        "metadata",
    )  # fmt: skip
    for values in (
        StepRow.objects.filter(trajectory_id__in=list(rows))
        .order_by("trajectory_id", "index")
        .values_list(*fields)
    ):
        data = dict(zip(fields[1:], values[1:], strict=True))
        data["role"] = data["role"] or None
        steps[values[0]].append(Step.model_construct(started_at=None, **data))
    out: dict[int, Trajectory] = {}
    for pk, row in rows.items():
        out[pk] = Trajectory.model_construct(
            schema_version=row.schema_version,
            task=TaskRef(
                id=row.task_ref,
                task_set=row.task_set_name,
                domain=row.domain or "generic",
                prompt=row.prompt,
            ),
            agent=row.agent,
            model=row.model,
            policy=row.policy,
            environment=row.environment,
            steps=steps[pk],
            outcome=Outcome.model_validate(row.outcome or {}),
            usage=Usage(tokens_in=row.tokens_in, tokens_out=row.tokens_out, cost_usd=row.cost_usd),
            metadata=row.metadata,
            source_format=row.source_format or "steplab",
        )
    return out


def diff_context(
    *,
    left: TrajectoryRow,
    right: TrajectoryRow,
    start: int = 0,
    count: int | None = DIFF_FIRST_ROWS,
    budget: int = DIFF_PAGE_BUDGET,
) -> dict:
    """Aligned rows ``start`` to ``start + count`` of two trajectories for the diff table (None:
    every row; also used by pairwise annotation), and where the next rows start (None: none
    left). When a reward-model version scored both (``hooks.step_rewards``), its step totals
    are the steps' rewards, so the diff shows the per-step reward differences.

    Bounded: the alignment is computed once per pair and kept in the cache (``_alignment``);
    only the rows' own steps are read, their observations and messages cut to
    :data:`DIFF_BODY_CHARS` (the rest loads on demand); and the word-level differences of
    observations spend at most ``budget`` comparisons in all: a row beyond that says so and
    loads its own differences on demand (``step_text_diff``)."""
    pairs, first = _alignment(left, right)
    start = min(max(0, start), len(pairs))
    end = len(pairs) if count is None else min(len(pairs), start + count)
    shown = pairs[start:end]
    left_steps, right_steps = _diff_steps(left, right, shown)
    scored_by = _use_step_rewards(left, right, left_steps.values(), right_steps.values())
    spent = DiffWork()
    bodies = _Bodies(left, right, shown)
    rows = [
        _diff_row(start + n, pair, first, (left_steps, right_steps), (budget, spent), bodies)
        for n, pair in enumerate(shown)
    ]
    return {
        "left": left,
        "right": right,
        "rows": rows,
        "first_divergence": first,
        "scored_by": scored_by,
        "start": start,
        "next_start": end if end < len(pairs) else None,
        "total_rows": len(pairs),
        "diff_work": spent.work,
    }


def _alignment(left: TrajectoryRow, right: TrajectoryRow) -> tuple[list[tuple], int | None]:
    """The aligned (left step index, right step index, kind) rows of a pair and the position
    of the first divergence, cached while neither trajectory changes."""
    key = "trajectories:diff:" + ":".join(
        f"{row.pk}.{row.created_at.timestamp()}.{row.status}.{row.step_count}.{row.message_count}"
        for row in (left, right)
    )
    found = cache.get(key)
    if found is None:
        left_steps, right_steps = _aligned_steps(left), _aligned_steps(right)
        alignment = align_steps(left_steps, right_steps)
        pairs = [
            (
                None if r.left_index is None else left_steps[r.left_index].index,
                None if r.right_index is None else right_steps[r.right_index].index,
                r.kind,
            )
            for r in alignment.rows
        ]
        found = (pairs, alignment.first_divergence)
        cache.set(key, found, DIFF_CACHE_SECONDS)
    return found


@dataclass
class _AlignedStep:
    """What the alignment reads of a step (the observation only compared: its hash)."""

    index: int
    kind: str
    role: str
    text: str
    tool: str
    params: Any
    observation: str
    reward: float | None = None


def _aligned_steps(row: TrajectoryRow) -> list[_AlignedStep]:
    fields = ("index", "kind", "role", "text", "tool", "params", "observation_hash")
    steps = (
        row.steps.order_by("index")
        .annotate(observation_hash=MD5("observation"))
        .values_list(*fields)
    )
    return [_AlignedStep(*values) for values in steps]


@dataclass(slots=True)
class DiffStep:
    """What a diff row shows of a step: its head only (``preview`` of the observation,
    ``text_preview`` of a message's text, each cut to :data:`DIFF_BODY_CHARS`; ``cut`` and
    ``text_cut`` say whether there is more, as on the trajectory page)."""

    trajectory_id: int
    index: int
    kind: str
    role: str
    tool: str
    params: Any
    reward: float | None
    preview: str
    cut: bool
    observation_length: int
    text_preview: str
    text_cut: bool


_DIFF_STEP_FIELDS = (
    "trajectory_id", "index", "kind", "role", "tool", "params", "reward", "observation_head",
    "observation_length", "text_head",
)  # fmt: skip


def _diff_steps(
    left: TrajectoryRow, right: TrajectoryRow, shown: list[tuple]
) -> tuple[dict[int, DiffStep], dict[int, DiffStep]]:
    """The steps of the rows ``shown`` on each side, by index, in one query. The rows of a
    window hold a contiguous run of each side's steps (an alignment pairs every step once, in
    order), so each side is an index range."""
    wanted = [{pair[side] for pair in shown if pair[side] is not None} for side in (0, 1)]
    where = [
        Q(trajectory_id=row.pk, index__gte=min(indexes), index__lte=max(indexes))
        for row, indexes in zip((left, right), wanted, strict=True)
        if indexes
    ]
    found: tuple[dict[int, DiffStep], dict[int, DiffStep]] = ({}, {})
    if not where:
        return found
    values = (
        StepRow.objects.filter(reduce(or_, where))
        .annotate(
            observation_head=Left("observation", DIFF_BODY_CHARS + 1),
            text_head=Left("text", DIFF_BODY_CHARS + 1),
            observation_length=Length("observation"),
        )
        .values_list(*_DIFF_STEP_FIELDS)
    )
    sides = list(enumerate((left.pk, right.pk)))
    for trajectory_id, index, kind, role, tool, params, reward, head, length, text in values:
        step = DiffStep(
            trajectory_id, index, kind, role, tool, params, reward,
            head[:DIFF_BODY_CHARS], len(head) > DIFF_BODY_CHARS, length,
            text[:DIFF_BODY_CHARS], len(text) > DIFF_BODY_CHARS,
        )  # fmt: skip
        for side, pk in sides:
            if trajectory_id == pk and index in wanted[side]:
                found[side][index] = step
    return found


_TEXT_DIFF_KINDS = ("changed_observation", "changed_text")


class _Bodies:
    """The whole texts the rows' text diffs compare (a message's text, a tool step's
    observation), read :data:`DIFF_BODY_BATCH` rows at a time as the rows ask for them: a query
    per batch, not two per row, and nothing read for the rows beyond the page's budget."""

    def __init__(self, left: TrajectoryRow, right: TrajectoryRow, shown: list[tuple]):
        self.left, self.right = left, right
        self.pairs = [(a, b) for a, b, kind in shown if kind in _TEXT_DIFF_KINDS]
        self.position = {pair: n for n, pair in enumerate(self.pairs)}
        self.texts: tuple[dict[int, str], dict[int, str]] = ({}, {})

    def of(self, left_index: int, right_index: int) -> tuple[str, str]:
        """The two texts of a row (``_TEXT_DIFF_KINDS``) to compare."""
        if left_index not in self.texts[0] or right_index not in self.texts[1]:
            self._read(self.position[(left_index, right_index)])
        return self.texts[0][left_index], self.texts[1][right_index]

    def _read(self, first: int) -> None:
        batch = self.pairs[first : first + DIFF_BODY_BATCH]
        wanted = [{pair[side] for pair in batch} for side in (0, 1)]
        where = [
            Q(trajectory_id=row.pk, index__in=sorted(indexes))
            for row, indexes in zip((self.left, self.right), wanted, strict=True)
        ]
        rows = StepRow.objects.filter(reduce(or_, where)).values_list(
            "trajectory_id", "index", "kind", "text", "observation"
        )
        for trajectory_id, index, kind, text, observation in rows:
            for side, row in enumerate((self.left, self.right)):
                if trajectory_id == row.pk and index in wanted[side]:
                    self.texts[side][index] = text if kind == StepRow.Kind.MESSAGE else observation


def _diff_row(position, pair, first, steps, budget: tuple[int, DiffWork], bodies: _Bodies):
    """One row of the diff table; its observation diff only while the page's budget lasts."""
    left_index, right_index, kind = pair
    a = steps[0].get(left_index) if left_index is not None else None
    b = steps[1].get(right_index) if right_index is not None else None
    row = {
        "position": position,
        "kind": kind,
        "left": a,
        "right": b,
        "first": position == first,
        "params": param_diff(a.params, b.params) if a and b and kind == "changed_params" else [],
        "observation": [],
        "observation_level": "",
        "observation_deferred": False,
        "reward_delta": reward_delta(a, b) if a and b else None,
    }
    limit, spent = budget
    if a and b and kind in _TEXT_DIFF_KINDS:
        if limit - spent.work >= 2 * TEXT_DIFF_BUDGET:
            work = DiffWork()
            row["observation"] = text_diff(*bodies.of(left_index, right_index), work=work)
            row["observation_level"] = work.level
            spent.work += work.work
        else:
            row["observation_deferred"] = True
    return row


def step_text_diff(*, left: TrajectoryRow, right: TrajectoryRow, left_index: int, right_index: int):
    """The word-level differences of one pair of steps' observations (the diff's "show the
    differences" of a row beyond the page's budget), bounded like every text diff."""
    a = step_get(trajectory_id=left.pk, index=left_index)
    b = step_get(trajectory_id=right.pk, index=right_index)
    work = DiffWork()
    ops = text_diff(_diffed_text(a), _diffed_text(b), work=work)
    return {"observation": ops, "observation_level": work.level}


def _diffed_text(step: StepRow) -> str:
    """What the text diff of a row compares: a message's text, a tool step's observation."""
    return step.text if step.kind == StepRow.Kind.MESSAGE else step.observation


def _use_step_rewards(left, right, left_steps, right_steps):
    """Replace the steps' rewards by a common reward-model version's step totals; returns that
    version (None: none scored both, and the stored rewards stay)."""
    found = hooks.step_rewards(left.pk, right.pk)
    if found is None:
        return None
    version, rewards = found
    for row, steps in ((left, left_steps), (right, right_steps)):
        by_index = rewards.get(row.pk, {})
        for step in steps:
            step.reward = by_index.get(step.index)
    return version


# --- one trajectory, for the pages ---------------------------------------------------------------


def trajectory_get(*, id: int, source_file: bool = True) -> TrajectoryRow:
    """The trajectory, with its source file's name and format unless ``source_file`` is False
    (its bytes, often a whole import file, load when ``raw_bytes()`` asks); Http404 when there
    is none."""
    rows = TrajectoryRow.objects.all()
    if source_file:
        rows = rows.select_related("source_file").defer("source_file__data")
    return get_object_or_404(rows, pk=id)


def step_get(*, trajectory_id: int, index: int) -> StepRow:
    """One step; Http404 when there is none."""
    return get_object_or_404(StepRow, trajectory_id=trajectory_id, index=index)


#: image files a step may point at (``metadata.screenshot``) and the most of one served
SCREENSHOT_TYPES = {".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".png": "image/png",
                    ".webp": "image/webp"}  # fmt: skip
SCREENSHOT_MAX_BYTES = 5 * 1024 * 1024


def step_screenshot(*, trajectory_id: int, index: int) -> tuple[Path, str]:
    """The screenshot file of one step and its content type: ``metadata.screenshot`` (a path
    written by an environment, e.g. steplab/browser) only when it resolves — symlinks and
    ``..`` followed — inside the data directory's ``screenshots`` folder and is an image file
    of at most :data:`SCREENSHOT_MAX_BYTES`; Http404 otherwise (an imported log can name any
    path: it is never read)."""
    step = step_get(trajectory_id=trajectory_id, index=index)
    named = step.metadata.get("screenshot") if isinstance(step.metadata, dict) else None
    if not isinstance(named, str) or not named or "\x00" in named:
        raise Http404("This step has no screenshot.")
    root = (Path(settings.STEPLAB_DATA_DIR) / "screenshots").resolve()
    path = (Path(settings.STEPLAB_DATA_DIR) / named).resolve()  # an absolute path stays itself
    kind = SCREENSHOT_TYPES.get(path.suffix.lower())
    if not path.is_relative_to(root) or kind is None or not path.is_file():
        raise Http404("This step's screenshot is not there.")
    if path.stat().st_size > SCREENSHOT_MAX_BYTES:
        raise Http404("This step's screenshot is too large to show.")
    return path, kind


def screenshot_files(*, trajectory_id: int) -> list[Path]:
    """The screenshot files the steps of a trajectory point at that lie inside the data
    directory's ``screenshots`` folder (anything else an imported log names is not ours)."""
    root = (Path(settings.STEPLAB_DATA_DIR) / "screenshots").resolve()
    named = (
        StepRow.objects.filter(trajectory_id=trajectory_id, metadata__has_key="screenshot")
        .values_list("metadata__screenshot", flat=True)
        .iterator()
    )
    found = []
    for name in named:
        if not isinstance(name, str) or not name or "\x00" in name:
            continue
        path = (Path(settings.STEPLAB_DATA_DIR) / name).resolve()
        if path.is_relative_to(root) and path.suffix.lower() in SCREENSHOT_TYPES:
            found.append(path)
    return found


@dataclass(slots=True)
class PageStep:
    """A step as the trajectory page shows it (``trajectory_steps_chunk``): everything but its
    observation, of which only the head is read — ``preview``, cut to
    :data:`OBSERVATION_PREVIEW` when ``cut`` (the rest loads on demand) and otherwise the whole
    ``observation``."""

    trajectory_id: int
    index: int
    kind: str
    role: str
    text: str
    thought: str
    tool: str
    params: Any
    exit_code: int | None
    error: str | None
    duration: float | None
    tokens_in: int | None
    tokens_out: int | None
    metadata: Any
    preview: str
    observation_length: int
    cut: bool = False
    observation: str = ""


_PAGE_STEP_FIELDS = (
    "trajectory_id", "index", "kind", "role", "text", "thought", "tool", "params", "exit_code",
    "error", "duration", "tokens_in", "tokens_out", "metadata", "observation_head",
    "observation_length",
)  # fmt: skip


def trajectory_steps_chunk(*, trajectory: TrajectoryRow, after: int | None) -> dict[str, Any]:
    """One chunk of steps after index ``after`` (None: from the start), and what follows it: a
    "show more" button when more steps are stored, a poller while the trajectory runs. The steps
    are :class:`PageStep` values, read in one query."""
    qs = (
        trajectory.steps.order_by("index")
        .annotate(
            observation_head=Left("observation", OBSERVATION_PREVIEW + 1),
            observation_length=Length("observation"),
        )
        .values_list(*_PAGE_STEP_FIELDS)
    )
    if after is not None:
        qs = qs.filter(index__gt=after)
    steps = [PageStep(*values) for values in qs[: FIRST_SCREEN_STEPS + 1]]
    more = len(steps) > FIRST_SCREEN_STEPS
    steps = steps[:FIRST_SCREEN_STEPS]
    for step in steps:
        head = step.preview
        step.preview = head[:OBSERVATION_PREVIEW]
        step.cut = len(head) > OBSERVATION_PREVIEW
        step.observation = "" if step.cut else head
    last_index = steps[-1].index if steps else (after if after is not None else -1)
    remaining = 0
    if more:
        remaining = trajectory.steps.filter(index__gt=last_index).count()
    return {
        "row": trajectory,
        "steps": steps,
        "after": after,
        "last_index": last_index,
        "more_steps": remaining,
        "chunk": min(FIRST_SCREEN_STEPS, remaining),
        "live": trajectory.status == TrajectoryRow.Status.RUNNING,
    }


def trajectories_jsonl(*, ids: list[int]) -> str:
    """The trajectories with these ids as canonical JSONL (steplab-jsonl), by id."""
    rows = TrajectoryRow.objects.filter(pk__in=ids).order_by("pk")
    return "".join(trajectory_spec(row=row).to_json() + "\n" for row in rows)


def selection_ids(*, data, limit: int = 100_000, not_filters: tuple[str, ...] = ()) -> list[int]:
    """Trajectory ids from a list selection (``selected``) or, with ``all_matching``, of every
    trajectory the list's filters match (at most ``limit``). ``not_filters`` names form fields
    that travel with the query but are not filters."""
    selected = [int(i) for i in data.getlist("selected") if str(i).isdigit()]
    if selected:
        return selected[:limit]
    if data.get("all_matching"):
        query = data.copy()
        for name in not_filters:
            query.pop(name, None)
        qs = trajectory_list(filters=Filters.from_query(query))
        return list(qs.values_list("pk", flat=True)[:limit])
    return []


def domains_of(*, ids: list[int]) -> set[str]:
    """The domains of these trajectories."""
    return set(TrajectoryRow.objects.filter(pk__in=ids).values_list("domain", flat=True))


def step_counts(*, ids: list[int]) -> list[int]:
    """The step count of each of these trajectories."""
    return list(TrajectoryRow.objects.filter(pk__in=ids).values_list("step_count", flat=True))


def reference_steps(*, ids: list[int]) -> dict[int, int]:
    """The length of the reference solution of each trajectory's task, where it has one (the
    efficiency rubric compares against it)."""
    out: dict[int, int] = {}
    rows = TrajectoryRow.objects.filter(pk__in=ids, task__isnull=False).values_list(
        "pk", "task__data"
    )
    for pk, data in rows:
        data = data or {}
        steps = data.get("reference_steps") or len(data.get("reference_solution") or [])
        if steps:
            out[pk] = int(steps)
    return out


def collected_ids(*, collect_run_id: int) -> list[int]:
    """The finished trajectories a collect run streamed (their idempotency keys name the run)."""
    return list(
        TrajectoryRow.objects.filter(
            idempotency_key__startswith=f"collect-{collect_run_id}:", status="finished"
        ).values_list("pk", flat=True)
    )


def steps_after(*, trajectory: TrajectoryRow, after: int, limit: int) -> tuple[list[StepRow], bool]:
    """Up to ``limit`` steps of ``trajectory`` after index ``after`` (the API's pages), and
    whether more follow."""
    steps = list(trajectory.steps.filter(index__gt=after).order_by("index")[: limit + 1])
    return steps[:limit], len(steps) > limit
