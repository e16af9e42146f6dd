"""The rows an import writes, in bulk (``services.trajectories_import`` decides what to write).

PostgreSQL: the ids of the new trajectories and raw sources are taken from their sequences
first, so that every row can be written with COPY in one pass: the raw sources, the trajectories
(each with the search vector of its document, built in Python: the rows go through a temporary
table and one INSERT parses the documents) and the steps; the foreign keys are checked at
commit. An import builds each trajectory's rows before it is stored (``prepare``; its reading
thread does, while the rows of the files before are written) and writes them with
``insert_prepared``. The raw sources go in binary (their bytes as they are, not as hex text).
Long values are compressed with lz4 where the server has it. SQLite: ``bulk_create``
(it has no search documents). A JSON value is written as the text ``json.dumps`` gives; one
holding a NUL or a lone surrogate (which PostgreSQL refuses) is cleaned first (``without_nul``).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import JSONField
from django.utils import timezone

from webapp.trajectories.content import without_nul
from webapp.trajectories.models import SourceFile, Step, Trajectory
from webapp.trajectories.search import search_document

#: The step columns an import writes, in the order of the rows ``step_values`` makes.
STEP_COLUMNS = [
    "trajectory_id",
    "index",
    "kind",
    "role",
    "text",
    "thought",
    "tool",
    "params",
    "observation",
    "exit_code",
    "error",
    "started_at",
    "duration",
    "tokens_in",
    "tokens_out",
    "reward",
    "metadata",
]
_STEP_JSON = (STEP_COLUMNS.index("params"), STEP_COLUMNS.index("metadata"))
# json.dumps escapes NUL as \u0000 and surrogates as \ud800-\udfff: the values to look at again
_UNSAFE_JSON = re.compile(r"\\u(?:0000|d[89a-f])")
#: zlib level of the kept raw sources (1: a third faster than 6 on logs, 1.3x the size)
RAW_LEVEL = 1


class JsonText(str):
    """A JSON value already written as text (``json_text``): a row holding it writes it as it
    is."""

    __slots__ = ()


def json_text(value: Any) -> str:
    """``value`` as JSON text PostgreSQL accepts (NUL and lone surrogates replaced)."""
    if isinstance(value, JsonText):
        return value
    text = json.dumps(value)
    if "\\u" in text and _UNSAFE_JSON.search(text):
        text = json.dumps(without_nul(value))
    return text


def _text(value: str | None) -> str | None:
    if value and ("\x00" in value or not value.isascii()):
        return without_nul(value)
    return value


def step_values(trajectory_id: int, step) -> tuple:
    """One step row (``STEP_COLUMNS``) of a canonical step; params and metadata as objects."""
    started = step.started_at
    if started is not None and started.tzinfo is None:  # sources often write no zone: UTC
        started = started.replace(tzinfo=UTC)
    return (
        trajectory_id,
        step.index,
        step.kind,
        step.role or "",
        _text(step.text),
        _text(step.thought),
        _text(step.tool[:200]),
        step.params,
        _text(step.observation),
        step.exit_code,
        _text(step.error),
        started,
        step.duration,
        step.tokens_in,
        step.tokens_out,
        step.reward,
        step.metadata,
    )


def search_fields(step) -> tuple:
    """(index, text, thought, tool, params, observation) of a canonical step as its row holds
    them: what ``search.search_document`` reads."""
    return (
        step.index,
        _text(step.text),
        _text(step.thought),
        _text(step.tool[:200]),
        step.params,
        _text(step.observation),
    )


def compress_fast() -> None:
    """PostgreSQL: this transaction's long values (texts, JSON, search vectors) are compressed
    with lz4 where the server has it (faster than pglz, both ways); nothing else changes."""
    if connection.vendor != "postgresql":
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT set_config('default_toast_compression', 'lz4', true) FROM pg_settings "
            "WHERE name = 'default_toast_compression' AND 'lz4' = ANY(enumvals)"
        )


def insert_steps(rows: list[tuple]) -> None:
    """Write step rows (``step_values``): COPY on PostgreSQL, ``bulk_create`` elsewhere."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        objects = [Step(**dict(zip(STEP_COLUMNS, row, strict=True))) for row in rows]
        for step in objects:
            step.params, step.metadata = _object(step.params), _object(step.metadata)
        Step.objects.bulk_create(objects, batch_size=500)
        return
    _copy(Step._meta.db_table, STEP_COLUMNS, (_step_json(row) for row in rows))


def _object(value: Any) -> Any:
    return json.loads(value) if isinstance(value, JsonText) else without_nul(value)


def _step_json(row: tuple) -> tuple:
    values = list(row)
    for position in _STEP_JSON:
        values[position] = json_text(values[position])
    return tuple(values)


def _copy(
    table: str, columns: list[str], rows: Iterable[tuple], types: list[str] | None = None
) -> None:
    """COPY ``rows`` into ``table``: as text, or in binary with ``types`` (the PostgreSQL type
    of each column: no value is written as text and parsed again)."""
    names = ", ".join(f'"{c}"' for c in columns)
    binary = " (FORMAT BINARY)" if types else ""
    with connection.wrap_database_errors, connection.cursor() as cursor:
        with cursor.cursor.copy(f'COPY "{table}" ({names}) FROM STDIN{binary}') as copy:
            if types:
                copy.set_types(types)
            for row in rows:
                copy.write_row(row)


def ids_by(model, column: str, values: Iterable[str], **where: str) -> dict[str, int]:
    """``value → id`` of the rows of ``model`` whose ``column`` is one of ``values`` (and whose
    other columns equal ``where``): one query; on PostgreSQL with one array parameter (a list
    of placeholders costs the driver more than the query)."""
    values = list(values)
    if not values:
        return {}
    if connection.vendor != "postgresql":
        rows = model.objects.filter(**{f"{column}__in": values}, **where)
        return dict(rows.values_list(column, "pk"))
    conditions = "".join(f' AND "{name}" = %s' for name in where)
    with connection.cursor() as cursor:
        cursor.execute(
            f'SELECT "{column}", id FROM "{model._meta.db_table}" '
            f'WHERE "{column}" = ANY(%s){conditions}',
            [values, *where.values()],
        )
        return dict(cursor.fetchall())


def allocate_ids(model, count: int) -> list[int]:
    """``count`` new ids of ``model``'s table from its sequence (PostgreSQL)."""
    if not count:
        return []
    table = model._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
            [table, count],
        )
        return [row[0] for row in cursor.fetchall()]


# --- trajectories --------------------------------------------------------------------------------


def _trajectory_columns() -> list[tuple[str, bool]]:
    """(column, is JSON) of every concrete Trajectory field."""
    return [(f.column, isinstance(f, JSONField)) for f in Trajectory._meta.concrete_fields]


def _defaults() -> dict[str, Any]:
    """The default of every Trajectory column (a row that does not name a column gets it, as
    ``bulk_create`` would give it)."""
    return {f.column: f.get_default() for f in Trajectory._meta.concrete_fields}


def insert_trajectories(
    values: list[dict[str, Any]], documents: list[str] | None = None
) -> list[int]:
    """Write trajectory rows (a dict per row: a value for every column but ``id``, or the
    column's default); their ids, in order. PostgreSQL: with ``documents`` (the search document
    of each row, ``search.search_document``) each row is written with its search vector."""
    if not values:
        return []
    if connection.vendor != "postgresql":
        objects = [Trajectory(**row) for row in values]
        return [row.pk for row in Trajectory.objects.bulk_create(objects, batch_size=500)]
    ids = allocate_ids(Trajectory, len(values))
    columns = _trajectory_columns()
    names = [name for name, _ in columns]
    rows = _trajectory_rows(ids, values, columns)
    if documents is None:
        _copy(Trajectory._meta.db_table, names, rows)
    else:
        _copy_searchable(names, rows, documents)
    return ids


def _copy_searchable(names: list[str], rows: Iterator[tuple], documents: list[str]) -> None:
    """COPY trajectory rows with their search documents into a temporary table, then into the
    table with ``to_tsvector`` of each document: every row is written once, with its vector."""
    table = Trajectory._meta.db_table
    listed = ", ".join(f'"{c}"' for c in names)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f'CREATE TEMP TABLE steplab_import_rows (LIKE "{table}", search_document text) '
            "ON COMMIT DROP; ALTER TABLE steplab_import_rows ALTER COLUMN search_document "
            "SET STORAGE EXTERNAL"  # read once: not worth compressing
        )
        _copy(
            "steplab_import_rows",
            [*names, "search_document"],
            ((*row, doc) for row, doc in zip(rows, documents, strict=True)),
        )
        cursor.execute(
            f'INSERT INTO "{table}" ({listed}, search_vector) SELECT {listed}, '
            f"to_tsvector('simple'::regconfig, search_document) FROM steplab_import_rows"
        )
        cursor.execute("DROP TABLE steplab_import_rows")


def _trajectory_rows(
    ids: list[int], values: list[dict[str, Any]], columns: list[tuple[str, bool]]
) -> Iterator[tuple]:
    defaults = _defaults()
    for pk, row in zip(ids, values, strict=True):
        row = dict(defaults, **row, id=pk)
        yield tuple(json_text(row[name]) if is_json else row[name] for name, is_json in columns)


# --- trajectories prepared before they are stored ---------------------------------------------


@dataclass
class Prepared:
    """A new imported trajectory's rows, built before it is stored (the reading thread of an
    import builds them while the files before are written): its content hash, its trajectory
    row (``trajectory_row``), its search document and its steps' rows (``encoded_step``)."""

    digest: str
    row: list
    document: str
    steps: list[tuple]


def prepare(spec, digest: str, values: dict[str, Any]) -> Prepared:
    """The rows of a canonical trajectory (``values``: its row's columns but ``id``, as for
    ``insert_trajectories``; its source file and times are set by ``insert_prepared``)."""
    document = search_document(values["prompt"], [search_fields(step) for step in spec.steps])
    steps = [encoded_step(step) for step in spec.steps]
    return Prepared(digest, trajectory_row(values), document, steps)


def encoded_step(step) -> tuple:
    """The row of a canonical step (``STEP_COLUMNS``), its JSON columns written (``JsonText``);
    the trajectory id (first) is set by ``insert_prepared``."""
    row = list(step_values(0, step))
    for position in _STEP_JSON:
        row[position] = JsonText(json_text(row[position]))
    return tuple(row)


def trajectory_row(values: dict[str, Any]) -> list:
    """A trajectory's COPY row: every column (``_trajectory_columns``) from ``values`` or its
    default, JSON as text; ``id`` is None."""
    return list(next(_trajectory_rows([None], [values], _trajectory_columns())))


@functools.cache
def _positions() -> dict[str, int]:
    return {name: number for number, (name, _) in enumerate(_trajectory_columns())}


def insert_prepared(
    prepared: list[Prepared], *, sources: list[int | None], now: datetime
) -> tuple[list[int], list[tuple]]:
    """PostgreSQL: write the trajectory rows of ``prepared`` (each with its source file, created
    and finished ``now``, and its search vector); their ids, in order, and the rows of their
    steps, each holding its trajectory's id (for ``insert_steps``)."""
    ids = allocate_ids(Trajectory, len(prepared))
    at = _positions()
    steps = []
    for pk, item, source in zip(ids, prepared, sources, strict=True):
        row = item.row
        row[at["id"]], row[at["source_file_id"]] = pk, source
        row[at["created_at"]] = row[at["finished_at"]] = now
        steps += [(pk, *step[1:]) for step in item.steps]
    names = [name for name, _ in _trajectory_columns()]
    _copy_searchable(names, (item.row for item in prepared), [p.document for p in prepared])
    return ids, steps


# --- raw sources ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Packed:
    """A file's bytes as the store keeps them: their SHA-256, size and compressed bytes."""

    sha256: str
    size: int
    data: bytes


def pack(data: bytes) -> Packed:
    """Hash and compress ``data`` (both let other threads run meanwhile: the import's reading
    thread packs each file while the rows of the files before are written)."""
    return Packed(hashlib.sha256(data).hexdigest(), len(data), zlib.compress(data, RAW_LEVEL))


def source_files(*, files: list[tuple[str, str, str, Packed | None]], user) -> list[int | None]:
    """The SourceFile id of each (name, format, version, packed bytes), one row per distinct
    content, created as needed (None where there are no bytes)."""
    digests = [packed.sha256 if packed else None for *_, packed in files]
    known = ids_by(SourceFile, "sha256", {d for d in digests if d})
    new: dict[str, tuple[str, str, str, Packed]] = {}
    for digest, item in zip(digests, files, strict=True):
        if digest and digest not in known:
            new.setdefault(digest, item)
    imported_by = user.pk if getattr(user, "is_authenticated", False) else None
    if connection.vendor != "postgresql":
        for digest, item in new.items():
            known[digest] = SourceFile.objects.create(**_source_values(*item, imported_by)).pk
    elif new:
        ids = allocate_ids(SourceFile, len(new))
        rows = [
            dict(_source_values(*item, imported_by), id=pk)
            for pk, item in zip(ids, new.values(), strict=True)
        ]
        columns = list(rows[0])
        types = [_SOURCE_TYPES[column] for column in columns]  # binary: the bytes as they are
        _copy(SourceFile._meta.db_table, columns, (tuple(r.values()) for r in rows), types)
        known.update(zip(new, ids, strict=True))
    return [known[d] if d else None for d in digests]


_SOURCE_TYPES = {
    "id": "int8",
    "name": "text",
    "format": "text",
    "format_version": "text",
    "sha256": "text",
    "size": "int8",
    "data": "bytea",
    "imported_by_id": "int8",
    "created_at": "timestamptz",
}


def _source_values(name, fmt, version, packed: Packed, imported_by) -> dict[str, Any]:
    return {
        "name": name[:500],
        "format": fmt[:64],
        "format_version": version[:64],
        "sha256": packed.sha256,
        "size": packed.size,
        "data": packed.data,
        "imported_by_id": imported_by,
        "created_at": timezone.now(),
    }
