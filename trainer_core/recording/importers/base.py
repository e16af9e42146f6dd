"""The importer framework: sources, detection by content, errors that name the file, the record
and the field, and the formats that were tried. Each format is one module with one Importer."""

from __future__ import annotations

import importlib
import io
import json
import zipfile
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Protocol

from trainer_core.errors import InputError
from trainer_core.recording.schema import Trajectory


class ImportFailure(InputError):
    """A file could not be imported. Nothing from it is kept (all or nothing)."""

    def __init__(
        self,
        message: str,
        *,
        file: str = "",
        record: str | int | None = None,
        field: str | None = None,
        tried: list[str] | None = None,
    ):
        self.file = file
        self.record = record
        self.field = field
        self.tried = list(tried or [])
        self.message = message
        super().__init__(str(self))

    def __str__(self) -> str:
        where = [self.file or "(input)"]
        if self.record is not None:
            where.append(f"record {self.record}")
        if self.field:
            where.append(f"field {self.field!r}")
        text = f"{', '.join(where)}: {self.message}"
        if self.tried:
            text += f" (formats tried: {', '.join(self.tried)})"
        return text


class RecordError(Exception):
    """Raised by a parser for one record; the framework adds the file name."""

    def __init__(self, message: str, *, record: str | int | None = None, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.record = record
        self.field = field


@dataclass
class Source:
    """One file's content, with lazy views: text, whole-file JSON, JSON lines, zip."""

    name: str
    data: bytes
    _errors: dict[str, str] = field(default_factory=dict, repr=False)

    @cached_property
    def text(self) -> str | None:
        try:
            return self.data.decode("utf-8-sig")
        except UnicodeDecodeError:
            return None

    @cached_property
    def json(self) -> Any:
        """The whole file parsed as JSON, or None (the error is kept in ``json_error``)."""
        if self.text is None:
            return None
        try:
            return json.loads(self.text)
        except json.JSONDecodeError as exc:
            self._errors["json"] = (
                f"invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
            )
            return None

    @property
    def json_error(self) -> str | None:
        _ = self.json
        return self._errors.get("json")

    @cached_property
    def jsonl(self) -> list[Any] | None:
        """Every non-blank line parsed as JSON, or None if any line is not JSON (or there is only
        one line holding a whole document)."""
        if self.text is None:
            return None
        records = []
        for number, line in enumerate(self.text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError as exc:
                self._errors["jsonl"] = f"line {number} is not JSON: {exc.msg}"
                return None
        return records or None

    @cached_property
    def zip(self) -> zipfile.ZipFile | None:
        if not self.data.startswith(b"PK"):
            return None
        try:
            return zipfile.ZipFile(io.BytesIO(self.data))
        except zipfile.BadZipFile:
            return None


class Importer(Protocol):
    name: str  # e.g. "swe-agent"
    description: str

    def sniff(self, source: Source) -> bool:
        """True when the content looks like this format (cheap; no full validation)."""

    def parse(self, source: Source) -> tuple[list[Trajectory], str]:
        """Every trajectory in the file, and the format version found ('' when unknown).
        Raise RecordError for a broken record."""


@dataclass
class ImportResult:
    file: str
    format: str
    format_version: str
    trajectories: list[Trajectory]

    @property
    def steps(self) -> int:
        """How many steps its trajectories hold together."""
        return sum(len(t.steps) for t in self.trajectories)


_IMPORTERS: list[Importer] = []

# Detection order: the first importer whose sniff() accepts the content parses it.
BUILTIN_MODULES = [
    "steplab_jsonl",
    "swe_agent",
    "mini_swe_agent",
    "openhands",
    "inspect_ai",
    "tau_bench",
    "claude_code",
    "agentgym",
    "anthropic_messages",
    "openai_chat",
]

_loaded = False


def _load_builtin() -> None:
    """Import each built-in format module once (each registers its importer on import)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for name in BUILTIN_MODULES:
        try:
            importlib.import_module(f"trainer_core.recording.importers.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"trainer_core.recording.importers.{name}":
                raise


def register_importer(importer: Importer) -> Importer:
    if any(existing.name == importer.name for existing in _IMPORTERS):
        raise ValueError(f"an importer named {importer.name!r} is already registered")
    _IMPORTERS.append(importer)
    return importer


def importers() -> list[Importer]:
    _load_builtin()
    return list(_IMPORTERS)


def format_names() -> list[str]:
    return [imp.name for imp in importers()]


def import_source(source: Source, *, format: str | None = None) -> ImportResult:
    """Import one file's content. Detects the format by content unless ``format`` is given."""
    available = importers()
    if not source.data.strip():
        raise ImportFailure("the file is empty", file=source.name)
    if format is not None:
        chosen = [imp for imp in available if imp.name == format]
        if not chosen:
            raise ImportFailure(
                f"unknown format {format!r}; known: {', '.join(i.name for i in available)}",
                file=source.name,
            )
    else:
        chosen = [imp for imp in available if _sniff(imp, source)]
        if not chosen:
            why = source.json_error or (
                "not UTF-8 text" if source.text is None else "no format recognised the content"
            )
            raise ImportFailure(why, file=source.name, tried=[i.name for i in available])
    importer = chosen[0]
    try:
        trajectories, version = importer.parse(source)
    except RecordError as exc:
        raise ImportFailure(
            exc.message, file=source.name, record=exc.record, field=exc.field, tried=[importer.name]
        ) from None
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as exc:
        raise ImportFailure(
            f"unexpected structure ({type(exc).__name__}: {exc})",
            file=source.name,
            tried=[importer.name],
        ) from None
    for trajectory in trajectories:
        trajectory.source_format = importer.name
        trajectory.metadata.setdefault("format_version", version)
        trajectory.metadata.setdefault("source_file", source.name)
    return ImportResult(source.name, importer.name, version, trajectories)


def _sniff(importer: Importer, source: Source) -> bool:
    try:
        return bool(importer.sniff(source))
    except Exception:
        return False


def import_path(path: str | Path, *, format: str | None = None) -> list[ImportResult]:
    """Import a file; a zip archive (not an Inspect .eval) imports each member, all or nothing."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ImportFailure(f"cannot read: {exc.strerror}", file=str(path)) from None
    source = Source(path.name, data)
    if source.zip is not None and format is None and not _is_claimed_zip(source):
        results = []
        for member in source.zip.infolist():
            if member.is_dir() or member.filename.startswith("__MACOSX/"):
                continue
            results.append(
                import_source(Source(f"{path.name}:{member.filename}", source.zip.read(member)))
            )
        if not results:
            raise ImportFailure("the zip archive has no files", file=path.name)
        return results
    return [import_source(source, format=format)]


def _is_claimed_zip(source: Source) -> bool:
    """A zip that is itself one log format (an Inspect .eval archive)."""
    return any(_sniff(imp, source) for imp in importers())
