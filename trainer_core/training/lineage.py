"""Per-step lineage: which rows or groups each optimizer step of a run trained on.

``<output_dir>/lineage.jsonl`` holds one JSON line per optimizer step, in step order::

    {"step": 3, "consumed": [...], "dropped": [...]}

``consumed`` lists the ids of what the step trained on, over every process, in training order
(micro-batch by micro-batch, within one by process), an id once per time it was trained (a row
that two positions of the step drew appears twice); ``dropped`` what the step took and left out
(the decoupled trainer's stale groups; empty for the others). The ids, by trainer:

- SFT: ``"<row>#<chunk>"`` — the dataset row index and the chunk of it (``"12#0"``; a row that
  is not chunked is chunk 0);
- DPO: the pair's dataset row index (an int);
- GRPO offline: the group's dataset row index (an int); online: ``"<task id>@<seed>"`` — the
  task and the sampling seed of its group (``"arith-train-3@1000003"``);
- the decoupled trainer: the group store's ids.

The main process writes the lines (:meth:`~trainer_core.training.loop.Run.end_step` calls
:func:`append_step` before the step's checkpoint, so every checkpoint's steps are in the file).
A run starting at step ``k`` (a resume, or 0 for a new run) first keeps only the lines up to
``k`` (:func:`start_lineage`), taken from the resumed checkpoint's own run when it was written to
another output directory, so a resumed run lists every step once, as it trained.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from trainer_core.errors import InputError

__all__ = ["LINEAGE_FILE", "append_step", "lineage_path", "read_lineage", "start_lineage"]

#: The lineage of a run is ``<output_dir>/LINEAGE_FILE``.
LINEAGE_FILE = "lineage.jsonl"

LineageId = str | int


def lineage_path(output_dir: str | Path) -> Path:
    """``<output_dir>/lineage.jsonl``."""
    return Path(output_dir) / LINEAGE_FILE


def _parse(path: Path) -> list[dict[str, Any]]:
    """The lines of ``path`` (none when it does not exist). A last line cut short (no newline,
    not JSON: a process killed while writing it) is left out; any other bad line is an
    InputError."""
    if not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    out = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            if number == len(lines):  # the unterminated last line of an interrupted write
                continue
            raise InputError(
                f"{path} line {number} is not JSON; the lineage file was edited or corrupted: "
                "remove the line (or the file) and resume the run from a checkpoint"
            ) from None
        if not isinstance(entry, dict) or not isinstance(entry.get("step"), int):
            raise InputError(
                f"{path} line {number} is not a lineage entry (an object with an int 'step')"
            )
        out.append(entry)
    return out


def read_lineage(output_dir: str | Path) -> list[dict[str, Any]]:
    """The lineage of the run in ``output_dir``: one ``{"step", "consumed", "dropped"}`` dict per
    optimizer step, in step order; empty when the run has none (not started, or trained before
    lineage was recorded)."""
    return _parse(lineage_path(output_dir))


def _check_ids(ids: Iterable[Any], what: str) -> list[LineageId]:
    out = list(ids)
    for value in out:
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            raise TypeError(f"lineage {what} ids must be str or int, not {value!r}")
    return out


def append_step(
    output_dir: str | Path,
    step: int,
    consumed: Sequence[LineageId],
    dropped: Sequence[LineageId] = (),
) -> None:
    """Append step ``step``'s line to the lineage of ``output_dir`` (made if needed) and flush it
    to the operating system. Call from the main process only."""
    line = {
        "step": int(step),
        "consumed": _check_ids(consumed, "consumed"),
        "dropped": _check_ids(dropped, "dropped"),
    }
    path = lineage_path(output_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(line, separators=(",", ":")) + "\n")
        fh.flush()


def start_lineage(output_dir: str | Path, step: int, *, source: str | Path | None = None) -> None:
    """Make the lineage of ``output_dir`` that of a run starting at ``step``: its lines up to
    ``step`` and none after (a new run, ``step`` 0, starts empty). ``source``: the output
    directory of the checkpoint resumed from; when it is another directory its lines up to
    ``step`` are the ones kept. Rewritten atomically. Call from the main process only."""
    path = lineage_path(output_dir)
    origin = path
    if source is not None and Path(source).resolve() != Path(output_dir).resolve():
        origin = lineage_path(source)
    kept = [entry for entry in _parse(origin) if entry["step"] <= step]
    if not kept:
        path.unlink(missing_ok=True)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{LINEAGE_FILE}.{os.getpid()}.tmp")
    tmp.write_text(
        "".join(json.dumps(entry, separators=(",", ":")) + "\n" for entry in kept),
        encoding="utf-8",
    )
    tmp.replace(path)
