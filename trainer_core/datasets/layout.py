"""The dataset file layout, in one place: where :func:`~.writer.write_dataset` puts a split
(:func:`split_path`), how a reader finds it again (:func:`find_split`), and the one reader of
JSONL rows (:func:`read_jsonl`). The writer, the trainers and the web app all ask this module for
paths instead of guessing.

A snapshot directory holds ``data/<split>.jsonl`` (the Hugging Face Hub's layout, what the writer
writes). Readers also accept a directory holding ``<split>.jsonl`` directly (hand-made datasets
and older runs) and a path to a ``.jsonl`` file itself.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from trainer_core.errors import ConfigError, InputError

__all__ = ["DATA_DIR", "find_split", "read_jsonl", "split_path"]

#: The folder of a snapshot directory that holds the split files.
DATA_DIR = "data"


def split_path(directory: str | os.PathLike[str], split: str, *, fmt: str = "jsonl") -> Path:
    """The file the writer writes for ``split`` of the snapshot in ``directory``:
    ``<directory>/data/<split>.<fmt>``."""
    return Path(directory) / DATA_DIR / f"{split}.{fmt}"


def find_split(path: str | os.PathLike[str], split: str = "train") -> Path:
    """The JSONL file of ``split`` that ``path`` names: ``path`` itself when it is a file, else
    (a directory) the writer's ``data/<split>.jsonl`` first, then ``<split>.jsonl``. ConfigError
    naming the places looked at when there is none."""
    p = Path(path).expanduser()
    if p.is_file():
        return p
    candidates = [split_path(p, split), p / f"{split}.jsonl"]
    if p.is_dir():
        for candidate in candidates:
            if candidate.is_file():
                return candidate
    raise ConfigError(
        f"dataset {str(path)!r} not found: give an exported JSONL file, or a dataset directory "
        f"holding {DATA_DIR}/{split}.jsonl (as the dataset writer writes it) or {split}.jsonl "
        f"(looked for {candidates[0]} and {candidates[1]})"
    )


def read_jsonl(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of a JSONL file (blank lines skipped); InputError naming the file and line of a
    line that is not a JSON object. Used by trainers that do not want ``datasets``' cache."""
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{number}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise InputError(f"{path}:{number}: a row must be a JSON object")
            rows.append(row)
    return rows
