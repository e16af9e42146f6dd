"""What an import refuses, and how much it reads: size limits applied while reading (a zip member
is decompressed in chunks and abandoned as soon as it passes its limit, so memory stays bounded
whatever the archive claims), JSON read with its failures turned into messages, and the checks
every imported trajectory passes before anything is written (nesting depth of its JSON values,
integers that fit the store's columns, finite numbers, timestamps between 1900 and 2999, one step
per index).

Every message says what is wrong and what to do; the limits are settings (``STEPLAB_IMPORT_*``
environment variables, see :meth:`ImportLimits.from_env`)."""

from __future__ import annotations

import functools
import io
import json
import math
import os
import typing
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel

from trainer_core.recording.schema import Trajectory

MB = 1024 * 1024
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)
_CHUNK = MB
# Timestamps the store keeps: any later one (9999-12-31T23:59:59-14:00 is year 10000 in UTC)
# cannot be read back into Python, any earlier one is no recorded step.
EARLIEST = datetime(1900, 1, 1, tzinfo=UTC)
LATEST = datetime(3000, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class ImportLimits:
    """How much one import may read. Sizes in bytes; ``max_depth`` counts nested objects and
    lists inside a stored JSON value (``{"a": [1]}`` is 2 deep)."""

    max_file_bytes: int = 256 * MB  # one file on disk (a zip archive: its compressed size)
    max_member_bytes: int = 256 * MB  # one zip member, decompressed
    max_archive_bytes: int = 1024 * MB  # all members of one archive together, decompressed
    max_members: int = 10_000  # files in one archive
    max_depth: int = 64  # nesting of a stored JSON value (params, metadata)

    SETTINGS = {
        "max_file_bytes": "STEPLAB_IMPORT_MAX_FILE_BYTES",
        "max_member_bytes": "STEPLAB_IMPORT_MAX_MEMBER_BYTES",
        "max_archive_bytes": "STEPLAB_IMPORT_MAX_ARCHIVE_BYTES",
        "max_members": "STEPLAB_IMPORT_MAX_MEMBERS",
        "max_depth": "STEPLAB_IMPORT_MAX_DEPTH",
    }

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> ImportLimits:
        """The limits the ``STEPLAB_IMPORT_*`` variables set (the defaults for those unset)."""
        environ = os.environ if environ is None else environ
        values: dict[str, int] = {}
        for name, variable in cls.SETTINGS.items():
            raw = (environ.get(variable) or "").strip()
            if raw:
                try:
                    values[name] = int(float(raw))
                except ValueError:
                    raise ValueError(f"{variable}={raw!r} is not a number") from None
        return cls(**values)


class LimitError(Exception):
    """An input the import refuses: ``message`` says what is wrong and what to do; ``record``
    and ``field`` say where (the framework adds the file)."""

    def __init__(self, message: str, *, record: Any = None, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.record = record
        self.field = field


def size_text(size: int) -> str:
    return f"{size / MB:.1f} MB" if size >= MB / 10 else f"{size:,} bytes"


def over_limit(what: str, size: int | None, limit: int, setting: str, fix: str) -> str:
    """``"<what> is 300.0 MB, over the limit of 256.0 MB (SETTING); <fix> or raise SETTING"``."""
    found = f"is {size_text(size)}" if size is not None else "is larger"
    return (
        f"{what} {found}, over the limit of {size_text(limit)} ({setting}); "
        f"{fix}, or raise {setting}"
    )


# ----------------------------------------------------------------------------- reading JSON


def json_loads(text: str | bytes) -> Any:
    """``json.loads``, with nesting too deep for the reader and integers too long to convert
    raised as LimitError (a message) instead of a crash. Invalid JSON raises JSONDecodeError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise LimitError(
            "the JSON is nested too deeply to read (hundreds of levels of objects or lists); "
            "such input is refused: flatten it"
        ) from None
    except json.JSONDecodeError:
        raise
    except ValueError as exc:  # int(...) of more digits than Python converts
        raise LimitError(
            f"the JSON holds a number too long to read ({exc}); a number that long is not a "
            "count, a score or an id the store can keep: write it as a string or remove it"
        ) from None


# ----------------------------------------------------------------------------- zip members


class BoundedZipFile(zipfile.ZipFile):
    """A zip archive whose ``read()`` decompresses in chunks and stops past the member limit
    (and past the archive's total), whatever sizes the archive declares."""

    limits: ImportLimits = ImportLimits()
    total_read: int = 0

    def read(self, name: str | zipfile.ZipInfo, pwd: bytes | None = None) -> bytes:
        info = name if isinstance(name, zipfile.ZipInfo) else self.getinfo(name)
        data = read_member(self, info, self.limits, already=self.total_read)
        self.total_read += len(data)
        return data


def open_zip(data: bytes, limits: ImportLimits) -> BoundedZipFile | None:
    """The zip archive ``data`` holds, or None when it is not one."""
    if not data.startswith(b"PK"):
        return None
    try:
        archive = BoundedZipFile(io.BytesIO(data))
    except (zipfile.BadZipFile, OSError, ValueError, EOFError):
        return None
    archive.limits = limits
    return archive


def read_member(
    archive: zipfile.ZipFile, info: zipfile.ZipInfo, limits: ImportLimits, *, already: int = 0
) -> bytes:
    """One member's bytes, decompressed in 1 MB chunks: refused (LimitError) as soon as it
    passes ``limits.max_member_bytes`` or takes the archive past ``limits.max_archive_bytes``
    (``already``: what the archive's earlier members took), so a decompression bomb costs at most
    the limit in memory. A member that cannot be decompressed is refused too."""
    left = max(limits.max_archive_bytes - already, 0)
    member_bound = limits.max_member_bytes <= left
    cap = limits.max_member_bytes if member_bound else left

    def refuse(size: int | None) -> LimitError:
        if member_bound:
            return LimitError(
                over_limit(
                    "the archive member, decompressed,",
                    size,
                    limits.max_member_bytes,
                    "STEPLAB_IMPORT_MAX_MEMBER_BYTES",
                    "split it into smaller files",
                )
            )
        return LimitError(
            over_limit(
                "the archive, decompressed,",
                None,
                limits.max_archive_bytes,
                "STEPLAB_IMPORT_MAX_ARCHIVE_BYTES",
                "split it into several archives",
            )
        )

    if info.file_size > cap:
        raise refuse(info.file_size)
    buffer = io.BytesIO()
    size = 0
    try:
        with archive.open(info) as handle:
            while chunk := handle.read(_CHUNK):
                size += len(chunk)
                if size > cap:
                    raise refuse(None)
                buffer.write(chunk)
    except LimitError:
        raise
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, RuntimeError, NotImplementedError) as exc:  # fmt: skip
        raise LimitError(
            f"the archive member cannot be decompressed ({exc}); zip it again "
            "(deflate, no password)"
        ) from None
    return buffer.getvalue()


# ----------------------------------------------------------------------------- stored values


def check_trajectories(trajectories: list[Trajectory], limits: ImportLimits) -> None:
    """Raise LimitError for the first value the store cannot keep as it is, naming the
    trajectory (its position in the file) and the field."""
    for number, trajectory in enumerate(trajectories):
        try:
            _check_trajectory(trajectory, limits)
        except LimitError as exc:
            exc.record = number
            raise


def _check_trajectory(trajectory: Trajectory, limits: ImportLimits) -> None:
    seen: dict[int, int] = {}
    for position, step in enumerate(trajectory.steps):
        where = f"steps[{position}]"
        if step.index in seen:
            raise LimitError(
                f"steps {seen[step.index]} and {position} both have index {step.index}; "
                "give every step its own index (0, 1, 2, … in order)",
                field=f"{where}.index",
            )
        seen[step.index] = position
        for name in ("index", "exit_code", "tokens_in", "tokens_out"):
            _integer(getattr(step, name), INT32, f"{where}.{name}")
        for name in ("duration", "reward"):
            _finite(getattr(step, name), f"{where}.{name}")
        _json(step.params, limits, f"{where}.params")
        _json(step.metadata, limits, f"{where}.metadata")
    outcome, usage = trajectory.outcome, trajectory.usage
    for name in ("score", "partial_credit"):
        _finite(getattr(outcome, name), f"outcome.{name}")
    for name in ("tests_passed", "tests_failed"):
        _integer(getattr(outcome, name), INT64, f"outcome.{name}")
    for name in ("tokens_in", "tokens_out"):
        _integer(getattr(usage, name), INT64, f"usage.{name}")
    for name in ("cost_usd", "duration"):
        _finite(getattr(usage, name), f"usage.{name}")
    _json(outcome.metadata, limits, "outcome.metadata")
    _json(trajectory.metadata, limits, "metadata")
    for field, moment in _timestamps(trajectory, ""):
        _timestamp(moment, field)


def _integer(value: int | None, bounds: tuple[int, int], field: str) -> None:
    if value is not None and not bounds[0] <= value <= bounds[1]:
        shown = str(value) if len(str(value)) <= 30 else f"a number of {len(str(value))} digits"
        bits = 32 if bounds == INT32 else 64
        raise LimitError(
            f"{shown} is out of range: the store keeps {bits}-bit integers here "
            f"({bounds[0]:,} to {bounds[1]:,}); fix the value in the file or remove it",
            field=field,
        )


def _timestamps(value: Any, path: str) -> Iterator[tuple[str, datetime]]:
    """Every datetime in the trajectory's fields (steps and whatever else the schema holds),
    with its path (``steps[3].started_at``); JSON values (params, metadata) hold none. Only the
    fields whose type can hold a datetime are walked (:func:`_time_fields`)."""
    if isinstance(value, datetime):
        yield path, value
    elif isinstance(value, BaseModel):
        for name in _time_fields(type(value)):
            item = getattr(value, name)
            if item is not None:
                yield from _timestamps(item, f"{path}.{name}" if path else name)
    elif isinstance(value, list):
        for number, item in enumerate(value):
            yield from _timestamps(item, f"{path}[{number}]")


@functools.cache
def _time_fields(model: type[BaseModel]) -> tuple[str, ...]:
    """The fields of ``model`` whose declared type can hold a datetime (directly, in a model or
    in a list)."""
    return tuple(
        name for name, info in model.model_fields.items() if _may_hold_time(info.annotation)
    )


def _may_hold_time(annotation: Any) -> bool:
    if annotation is datetime:
        return True
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return bool(_time_fields(annotation))
    return any(_may_hold_time(arg) for arg in typing.get_args(annotation))


def _timestamp(value: datetime, field: str) -> None:
    """Refuse a timestamp outside [EARLIEST, LATEST) in UTC (a naive one is taken as UTC)."""
    try:
        moment = value.astimezone(UTC) if value.tzinfo is not None else value.replace(tzinfo=UTC)
    except (OverflowError, ValueError):  # past year 9999 or before year 1 once in UTC
        moment = None
    if moment is None or not EARLIEST <= moment < LATEST:
        raise LimitError(
            f"{value.isoformat()} is out of range: the store keeps timestamps from "
            f"{EARLIEST:%Y-%m-%d} to {LATEST.year - 1}-12-31 (UTC); fix the time in the file "
            "or remove it",
            field=field,
        )


def _finite(value: float | None, field: str) -> None:
    if is_not_finite(value):
        raise LimitError(not_finite(value), field=field)


def is_not_finite(value: Any) -> bool:
    """NaN or ±Infinity (JSON readers accept them; the store's JSON cannot hold them)."""
    return isinstance(value, float) and not math.isfinite(value)


def not_finite(value: float) -> str:
    return (
        f"{value} is not a number the store can keep (NaN and Infinity are refused); "
        "write null or a finite number instead"
    )


def _json(value: Any, limits: ImportLimits, field: str) -> None:
    """A stored JSON value: at most ``limits.max_depth`` deep, every float finite. A fast pass
    first; the path to the offending value is found only when there is one."""
    if not _json_problem(value, limits.max_depth):
        return
    path, message = _locate(value, limits.max_depth, field)
    raise LimitError(message, field=path)


def _json_problem(value: Any, max_depth: int) -> bool:
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            items = item.values()
        elif isinstance(item, list | tuple):
            items = item
        else:
            if is_not_finite(item):
                return True
            continue
        if depth >= max_depth:
            return True
        for child in items:
            if isinstance(child, dict | list | tuple):
                stack.append((child, depth + 1))
            elif isinstance(child, float) and not math.isfinite(child):
                return True
    return False


def _locate(value: Any, max_depth: int, field: str) -> tuple[str, str]:
    """(path, message) of the first value ``_json_problem`` objects to, depth first."""
    stack: list[tuple[Any, int, str]] = [(value, 0, field)]
    while stack:
        item, depth, path = stack.pop()
        if isinstance(item, dict | list | tuple) and depth >= max_depth:
            return path, (
                f"nested more than {max_depth} levels deep (STEPLAB_IMPORT_MAX_DEPTH); "
                "flatten the value, or raise STEPLAB_IMPORT_MAX_DEPTH"
            )
        if isinstance(item, dict):
            stack.extend((v, depth + 1, f"{path}.{k}") for k, v in reversed(item.items()))
        elif isinstance(item, list | tuple):
            stack.extend((v, depth + 1, f"{path}[{i}]") for i, v in reversed(list(enumerate(item))))
        elif is_not_finite(item):
            return path, not_finite(item)
    return field, "the value cannot be stored"
