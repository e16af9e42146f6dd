"""Schema 1.1 for stored trajectories: the message steps of every imported trajectory are rebuilt
and every reference to a step by (trajectory, index) moves with its step. The work of migration
``trajectories 0004_message_steps`` (it passes its historical models as ``apps``).

Where the message steps come from, for each imported trajectory still at schema 1.0:

1. its kept raw source (``SourceFile``, zlib-compressed; a zip member's own bytes), parsed again
   with the format it was imported as. The parsed trajectory that is this one has the stored
   content hash (the 1.0 hash: its tool steps, prompt and outcome), or else the same task, prompt
   and tool calls. Its steps in order give the new order: each stored step keeps its row (and
   id) at its new index; the message steps are inserted. A stored step that the 1.1 importer reads
   as a message (an OpenHands agent ``message`` action, stored as a tool step named "message")
   becomes that message step, in place.
2. else its metadata: ``metadata["dialogue"]`` and ``metadata["system_prompt"]``, which the 1.0
   importers kept (:func:`trainer_core.recording.schema.upgrade_document`).
3. else nothing changes but the version.

Moved with each step, to its new index: ``rewards.StepScore`` (reward model, trajectory, index),
``calibration.StepLabel`` (item, annotator, index), ``calibration.LabelEdit.index``,
``calibration.Submission.first_error`` and the step indexes in ``SimulatedAnnotation.labels``.
Indexes are rewritten in two passes (to ``-1 - new``, then to ``new``) so that no unique
constraint sees two rows at one index. The content hash is recomputed (a 1.1 hash covers the
dialogue), as are ``message_count`` and, on PostgreSQL, the search document. Rollouts keep their
steps (they record no dialogue) and get the new version. Pairs point at trajectories, not steps.

The reverse removes message steps (their turns go back to ``metadata["dialogue"]``, as 1.0 kept
them), the scores and labels that were on them, and renumbers the tool steps and every reference
back.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.db import connection, transaction
from django.db.models import Case, F, IntegerField, Value, When

from trainer_core.recording.importers import ImportFailure, ImportLimits, Source, import_source
from trainer_core.recording.schema import SCHEMA_VERSION, Outcome, TaskRef, upgrade_document
from trainer_core.recording.schema import Step as StepSpec
from trainer_core.recording.schema import Trajectory as TrajectorySpec
from webapp.trajectories.content import content_hash, without_nul

BATCH = 200
LIFTED_KEYS = ("dialogue", "system_prompt")


@dataclass
class Plan:
    """A trajectory's 1.1 steps: ``order`` lists, in the new order, a stored step (its old index)
    or the fields of a new message step; ``convert`` turns stored steps into message steps."""

    order: list[int | dict[str, Any]]
    convert: dict[int, dict[str, Any]] = field(default_factory=dict)
    source: str = ""  # "raw source", "metadata"
    metadata: dict[str, Any] | None = None  # the trajectory's metadata after (None: as it was)

    def mapping(self) -> dict[int, int]:
        return {e: n for n, e in enumerate(self.order) if isinstance(e, int)}


@dataclass
class Stats:
    from_source: int = 0
    from_metadata: int = 0
    unchanged: int = 0
    messages: int = 0
    moved_scores: int = 0
    moved_labels: int = 0


# --- what the new steps are -----------------------------------------------------------------------


def _canon(value: Any) -> str:
    return json.dumps(without_nul(value), sort_keys=True, ensure_ascii=False, default=str)


def _stored_key(row: Any) -> tuple[str, str]:
    return row.tool, _canon(row.params)


def _legacy_key(step: StepSpec) -> tuple[str, str] | None:
    """What a parsed step was stored as by the 1.0 importers: a tool step as itself, an OpenHands
    agent message as the tool "message" with its content; other messages were not steps."""
    if step.kind == "tool":
        return step.tool[:200], _canon(step.params)
    if step.role == "assistant" and step.metadata.get("action") == "message":
        return "message", _canon({"content": step.text})
    return None


def _legacy_hash(parsed: TrajectorySpec) -> str:
    """The 1.0 content hash of a parsed trajectory (what the stored row's hash was)."""
    steps = []
    for step in parsed.steps:
        if step.kind == "tool":
            steps.append(step)
        elif _legacy_key(step) is not None:
            steps.append(StepSpec(index=0, tool="message", params={"content": step.text}))
    legacy = TrajectorySpec.model_construct(task=parsed.task, steps=steps, outcome=parsed.outcome)
    return content_hash(legacy)


def _step_map(stored: list[Any], parsed: list[StepSpec]) -> list[int] | None:
    """For each stored step (in order) the position of the parsed step it is; None when the
    parse does not hold exactly the stored tool calls, in order."""
    out: list[int] = []
    position = 0
    for row in stored:
        key = _stored_key(row)
        while position < len(parsed) and _legacy_key(parsed[position]) != key:
            if parsed[position].kind == "tool":
                return None  # a tool call the stored trajectory lacks
            position += 1
        if position == len(parsed):
            return None
        out.append(position)
        position += 1
    if any(p.kind == "tool" for p in parsed[position:]):
        return None
    return out


def _message_fields(step: StepSpec) -> dict[str, Any]:
    return {
        "kind": "message",
        "role": step.role or "",
        "text": without_nul(step.text),
        "thought": without_nul(step.thought),
        "started_at": step.started_at,
        "tokens_in": step.tokens_in,
        "tokens_out": step.tokens_out,
        "metadata": without_nul(step.metadata),
    }


def _plan_from_parse(stored: list[Any], parsed: TrajectorySpec) -> Plan | None:
    positions = _step_map(stored, parsed.steps)
    if positions is None:
        return None
    at = {p: k for k, p in enumerate(positions)}
    order: list[int | dict[str, Any]] = []
    convert: dict[int, dict[str, Any]] = {}
    for n, step in enumerate(parsed.steps):
        if n in at:
            old = stored[at[n]].index
            order.append(old)
            if step.kind == "message":
                convert[old] = {**_message_fields(step), "tool": "", "params": {}}
        else:
            order.append(_message_fields(step))
    return Plan(order, convert, "raw source")


def _plan_from_metadata(row: Any, stored: list[Any]) -> Plan | None:
    """The 1.0 importers' dialogue and system prompt (kept in the metadata) as message steps."""
    metadata = row.metadata or {}
    if not any(k in metadata for k in LIFTED_KEYS):
        return None
    doc = {
        "schema_version": "1.0",
        "steps": [{"index": n, "_old": s.index} for n, s in enumerate(stored)],
        "metadata": metadata,
    }
    upgraded = upgrade_document(doc)
    steps = upgraded["steps"]
    order: list[int | dict[str, Any]] = []
    for step in steps:
        if "_old" in step:
            order.append(step["_old"])
        else:
            fields = {"kind": "message", "role": step["role"], "text": without_nul(step["text"])}
            order.append({**fields, "metadata": without_nul(step.get("metadata") or {})})
    if len(order) == len(stored):
        return None
    return Plan(order, {}, "metadata", upgraded["metadata"])


class _Sources:
    """Parsed raw sources, one file at a time (trajectories are visited by source file)."""

    def __init__(self, source_files: Any) -> None:
        self.source_files = source_files
        self.limits = ImportLimits.from_env()
        self.key: int | None = None
        self.parsed: list[TrajectorySpec] = []

    def trajectories(self, source_file_id: int) -> list[TrajectorySpec]:
        if source_file_id != self.key:
            self.key, self.parsed = source_file_id, []
            sf = self.source_files.objects.filter(pk=source_file_id).first()
            if sf is not None:
                try:
                    data = zlib.decompress(bytes(sf.data))
                    source = Source(sf.name, data, limits=self.limits)
                    self.parsed = import_source(source, format=sf.format or None).trajectories
                except (ImportFailure, zlib.error, ValueError):
                    self.parsed = []  # unreadable now: the metadata is used instead
        return self.parsed


def _plan(row: Any, stored: list[Any], sources: _Sources) -> Plan | None:
    """The plan from the raw source when one parsed trajectory is this one, else from the
    metadata; None: nothing to add."""
    if row.source_file_id is not None:
        parsed = sources.trajectories(row.source_file_id)
        same = [p for p in parsed if _legacy_hash(p) == row.content_hash]
        if not same:
            same = [
                p for p in parsed if (p.task.id[:300], p.task.prompt) == (row.task_ref, row.prompt)
            ]
        for candidate in same:
            plan = _plan_from_parse(stored, candidate)
            if plan is not None:
                return plan
    return _plan_from_metadata(row, stored)


# --- moving rows and references -------------------------------------------------------------------


def _renumber(qs: Any, mapping: Callable[[int], int], indexes: list[int], column: str = "index"):
    """Rewrite ``column`` of ``qs`` from each old index to its new one, in two passes."""
    changed = [i for i in indexes if mapping(i) != i]
    if not changed:
        return 0
    whens = [When(**{column: i}, then=Value(-1 - mapping(i))) for i in changed]
    count = qs.filter(**{f"{column}__in": changed}).update(
        **{column: Case(*whens, default=F(column), output_field=IntegerField())}
    )
    qs.filter(**{f"{column}__lt": 0}).update(**{column: -1 - F(column)})
    return count


def _index_mapping(plan: Plan, stored: list[Any]) -> Callable[[int], int]:
    known = plan.mapping()
    inserted = len(plan.order) - len(stored)
    last = stored[-1].index if stored else -1

    def new(index: int) -> int:
        if index in known:
            return known[index]
        return index + inserted if index > last else index

    return new


def _move_references(apps: Any, trajectory_id: int, new: Callable[[int], int], stats: Stats):
    """Every score, label, label edit and first-error mark of the trajectory, to its new index."""
    step_score = apps.get_model("rewards", "StepScore")
    step_label = apps.get_model("calibration", "StepLabel")
    label_edit = apps.get_model("calibration", "LabelEdit")
    submission = apps.get_model("calibration", "Submission")
    for model, qs in (
        (step_score, step_score.objects.filter(trajectory_id=trajectory_id)),
        (step_label, step_label.objects.filter(trajectory_id=trajectory_id)),
        (label_edit, label_edit.objects.filter(item__trajectory_id=trajectory_id)),
    ):
        indexes = sorted(set(qs.exclude(index__isnull=True).values_list("index", flat=True)))
        moved = _renumber(qs, new, indexes)
        if model is step_score:
            stats.moved_scores += moved
        elif model is step_label:
            stats.moved_labels += moved
    marks = submission.objects.filter(item__trajectory_id=trajectory_id, first_error__isnull=False)
    for mark in marks:
        if new(mark.first_error) != mark.first_error:
            submission.objects.filter(pk=mark.pk).update(first_error=new(mark.first_error))


def _spec_for_hash(row: Any, steps: list[Any]) -> TrajectorySpec:
    specs = [
        StepSpec.model_construct(
            index=s.index,
            kind=s.kind,
            role=s.role or None,
            text=s.text,
            tool=s.tool,
            params=s.params,
            observation=s.observation,
        )  # fmt: skip
        for s in steps
    ]
    outcome = Outcome.model_validate(row.outcome or {})
    return TrajectorySpec.model_construct(
        task=TaskRef.model_construct(prompt=row.prompt), steps=specs, outcome=outcome
    )


def _apply(apps: Any, row: Any, stored: list[Any], plan: Plan, stats: Stats) -> None:
    step_model = apps.get_model("trajectories", "Step")
    trajectory_model = apps.get_model("trajectories", "Trajectory")
    new = _index_mapping(plan, stored)
    rows = step_model.objects.filter(trajectory_id=row.pk)
    _renumber(rows, new, [s.index for s in stored])
    for old, fields in plan.convert.items():
        rows.filter(index=new(old)).update(**fields)
    inserted = [
        step_model(trajectory_id=row.pk, index=n, **{k: v for k, v in e.items()})
        for n, e in enumerate(plan.order)
        if isinstance(e, dict)
    ]
    step_model.objects.bulk_create(inserted)
    _move_references(apps, row.pk, new, stats)
    metadata = plan.metadata
    if metadata is None:  # from the raw source: the 1.0 copies of the dialogue are steps now
        metadata = {k: v for k, v in (row.metadata or {}).items() if k not in LIFTED_KEYS}
    steps = list(rows.order_by("index"))
    digest = content_hash(_spec_for_hash(row, steps))
    taken = trajectory_model.objects.filter(source="import", content_hash=digest).exclude(pk=row.pk)
    trajectory_model.objects.filter(pk=row.pk).update(
        metadata=metadata,
        message_count=sum(1 for s in steps if s.kind == "message"),
        step_count=sum(1 for s in steps if s.kind != "message"),
        schema_version=SCHEMA_VERSION,
        content_hash=row.content_hash if taken.exists() else digest,
    )
    stats.messages += len(inserted) + len(plan.convert)
    if plan.source == "raw source":
        stats.from_source += 1
    else:
        stats.from_metadata += 1


# --- the migration's two directions ---------------------------------------------------------------


def upgrade_stored(apps: Any, schema_editor: Any = None, *, batch: int = BATCH) -> Stats:
    """Forward: every imported 1.0 trajectory gets its message steps (see the module docstring);
    every other trajectory its new version."""
    trajectory_model = apps.get_model("trajectories", "Trajectory")
    step_model = apps.get_model("trajectories", "Step")
    sources = _Sources(apps.get_model("trajectories", "SourceFile"))
    stats = Stats()
    todo = trajectory_model.objects.filter(source="import").exclude(schema_version=SCHEMA_VERSION)
    ids = list(todo.order_by("source_file_id", "pk").values_list("pk", flat=True))
    for start in range(0, len(ids), batch):
        chunk = ids[start : start + batch]
        changed: dict[int, Callable[[int], int]] = {}
        with transaction.atomic():
            for row in trajectory_model.objects.filter(pk__in=chunk).order_by(
                "source_file_id", "pk"
            ):
                stored = list(step_model.objects.filter(trajectory_id=row.pk).order_by("index"))
                plan = _plan(row, stored, sources)
                if plan is None:
                    stats.unchanged += 1
                    continue
                _apply(apps, row, stored, plan, stats)
                changed[row.pk] = _index_mapping(plan, stored)
            _move_simulated_labels(apps, changed)
            _reindex(list(changed))
    trajectory_model.objects.exclude(schema_version=SCHEMA_VERSION).update(
        schema_version=SCHEMA_VERSION
    )
    return stats


def _move_simulated_labels(apps: Any, changed: dict[int, Callable[[int], int]]) -> None:
    """The step indexes a simulated annotation kept per trajectory, moved with their steps."""
    if not changed:
        return
    model = apps.get_model("calibration", "SimulatedAnnotation")
    for annotation in model.objects.exclude(labels={}):
        labels = dict(annotation.labels or {})
        touched = False
        for key, entry in labels.items():
            new = changed.get(int(key)) if str(key).isdigit() else None
            if new is not None and isinstance(entry, dict) and isinstance(entry.get("index"), list):
                labels[key] = {**entry, "index": [new(i) for i in entry["index"]]}
                touched = True
        if touched:
            model.objects.filter(pk=annotation.pk).update(labels=labels)


def _reindex(ids: list[int]) -> None:
    """PostgreSQL: the search document of these trajectories, now with their message text."""
    if connection.vendor != "postgresql" or not ids:
        return
    with connection.cursor() as cursor:
        cursor.execute(SEARCH_DOCUMENT_1_1, [ids])


# The search document as of this upgrade (webapp/trajectories/search.py at the time).
SEARCH_DOCUMENT_1_1 = """
UPDATE trajectories_trajectory t SET search_vector = to_tsvector('simple'::regconfig, left(
  coalesce(t.prompt, '') || ' ' || coalesce((
    SELECT string_agg(concat_ws(' ', s.text, s.thought, s.tool, p.text,
                                translate(p.text, '/', ' '),
                                left(coalesce(s.observation, ''), 1000)), ' ' ORDER BY s.index)
    FROM trajectories_step s
    LEFT JOIN LATERAL (
      SELECT string_agg(v #>> '{}', ' ') AS text
      FROM jsonb_path_query(s.params, 'strict $.**') AS v
      WHERE jsonb_typeof(v) IN ('string', 'number')
    ) p ON true
    WHERE s.trajectory_id = t.id), ''), 300000))
WHERE t.id = ANY(%s)
"""


def downgrade_stored(apps: Any, schema_editor: Any = None) -> None:
    """Reverse: message steps go (and the scores and labels that were on them); tool steps and
    every reference are renumbered back; the version is 1.0 again."""
    trajectory_model = apps.get_model("trajectories", "Trajectory")
    step_model = apps.get_model("trajectories", "Step")
    with_messages = step_model.objects.filter(kind="message").values_list(
        "trajectory_id", flat=True
    )
    for pk in sorted(set(with_messages)):
        with transaction.atomic():
            _downgrade_one(apps, pk)
    trajectory_model.objects.update(schema_version="1.0", message_count=0)
    if connection.vendor == "postgresql":  # the columns go next: no deferred check may wait
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def _was_tool(step: Any) -> bool:
    """A message step that 1.0 stored as a tool step (an OpenHands agent "message" action)."""
    return step.role == "assistant" and (step.metadata or {}).get("action") == "message"


def _downgrade_one(apps: Any, pk: int) -> None:
    step_model = apps.get_model("trajectories", "Step")
    steps = list(step_model.objects.filter(trajectory_id=pk).order_by("index"))
    kept = [s for s in steps if s.kind != "message" or _was_tool(s)]
    tools = [s.index for s in kept]
    messages = [s.index for s in steps if s.index not in set(tools)]
    known = {old: n for n, old in enumerate(tools)}

    def back(index: int) -> int:
        return known.get(index, index)

    dialogue, before = [], 0
    for step in steps:
        if step.index in known:
            before += 1
        else:
            dialogue.append({"role": step.role, "content": step.text, "before_step": before})
    for step in kept:
        if step.kind == "message":  # back to the tool step 1.0 stored
            step_model.objects.filter(pk=step.pk).update(
                kind="tool", role="", text="", tool="message", params={"content": step.text}
            )
    step_score = apps.get_model("rewards", "StepScore")
    step_label = apps.get_model("calibration", "StepLabel")
    label_edit = apps.get_model("calibration", "LabelEdit")
    step_score.objects.filter(trajectory_id=pk, index__in=messages).delete()
    step_label.objects.filter(trajectory_id=pk, index__in=messages).delete()
    label_edit.objects.filter(item__trajectory_id=pk, index__in=messages).delete()
    step_model.objects.filter(trajectory_id=pk, index__in=messages).delete()
    for qs in (
        step_model.objects.filter(trajectory_id=pk),
        step_score.objects.filter(trajectory_id=pk),
        step_label.objects.filter(trajectory_id=pk),
        label_edit.objects.filter(item__trajectory_id=pk),
    ):
        _renumber(qs, back, tools)
    submission = apps.get_model("calibration", "Submission")
    for mark in submission.objects.filter(item__trajectory_id=pk, first_error__isnull=False):
        submission.objects.filter(pk=mark.pk).update(first_error=back(mark.first_error))
    _move_simulated_labels(apps, {pk: back})
    _restore_1_0_row(apps, pk, dialogue)


def _restore_1_0_row(apps: Any, pk: int, dialogue: list[dict[str, Any]]) -> None:
    """The trajectory's 1.0 metadata (its dialogue) and 1.0 content hash."""
    trajectory_model = apps.get_model("trajectories", "Trajectory")
    row = trajectory_model.objects.get(pk=pk)
    steps = list(apps.get_model("trajectories", "Step").objects.filter(trajectory_id=pk))
    metadata = dict(row.metadata or {})
    if dialogue:
        metadata["dialogue"] = dialogue
    fields: dict[str, Any] = {"metadata": metadata, "step_count": len(steps)}
    if row.source == "import":
        digest = content_hash(_spec_for_hash(row, sorted(steps, key=lambda s: s.index)))
        taken = trajectory_model.objects.filter(source="import", content_hash=digest)
        if not taken.exclude(pk=pk).exists():
            fields["content_hash"] = digest
    trajectory_model.objects.filter(pk=pk).update(**fields)
