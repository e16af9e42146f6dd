"""write_dataset(): records → de-duplicated, split JSONL and parquet files with a dataset card.

::

    files = write_dataset(sft_records(items), "var/datasets/17", name="arith-sft", kind="sft",
                          seed=0, card={"query": {...}, "reward_model": 3})
    files.counts      # {"train": 90, "validation": 5, "test": 5}
    files.duplicates  # rows dropped as duplicates
    files.sha256      # {"data/train.jsonl": "...", ..., "README.md": "..."}

Layout (the Hugging Face Hub's: ``load_dataset(directory)`` reads the card's ``configs``)::

    README.md               dataset card: YAML front matter (configs, features, split sizes,
                            the Steplab provenance) and a description of the columns
    data/train.jsonl        one canonical JSON object per line
    data/train.parquet      the same rows (written with the features below)
    data/validation.*  data/test.*

Rules
    * De-duplication: rows with the same :func:`~.items.content_key` (the hash of what is trained
      on, ids and provenance aside) are one row; the kept one is the smallest in canonical JSON,
      so which one survives does not depend on the input order.
    * Splits: the split *units* (each distinct content key, or each distinct value of the
      ``split_by`` column, e.g. ``"task_id"`` so that no task is in two splits) are ranked by
      ``sha256(f"{seed}\\0{unit}")`` and cut in order into splits of exactly the asked fractions
      of the units (largest remainder rounding). The assignment depends on the set of rows and the
      seed only, never on their order; adding rows can move other units between splits (the cut
      points move), so compare models on one snapshot.
    * Order: rows in a split are ordered by content key (a deterministic shuffle that does not
      depend on the input order).
    * Columns: every row has every column (a column a record lacks is null). All splits share one
      schema, inferred from all rows with ``datasets``' ``on_mixed_types="use_json"``: lists of
      messages whose keys differ (user, assistant with ``tool_calls``, tool with
      ``tool_call_id``) are ``List(Json())``, so both JSONL and parquet load back with exactly the
      keys each message had, no null-filled keys. Free-form provenance is JSON text.
    * Reproducible: the same records, seed and options give byte-identical files (canonical JSON,
      stable order, no timestamps; parquet from the same pyarrow version — its version is in the
      file footer). An empty split writes no file (its count is 0).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer_core.datasets.items import canonical_json, content_key
from trainer_core.datasets.layout import DATA_DIR, split_path
from trainer_core.errors import ConfigError, InputError

__all__ = [
    "COLUMN_DOCS",
    "FORMATS",
    "KINDS",
    "SPLIT_NAMES",
    "DatasetFiles",
    "write_dataset",
]

KINDS: tuple[str, ...] = ("sft", "dpo", "grpo", "prm", "benchmark")
FORMATS: tuple[str, ...] = ("jsonl", "parquet")
SPLIT_NAMES: tuple[str, ...] = ("train", "validation", "test")

_KIND_TEXT = {
    "sft": (
        "supervised fine-tuning: TRL's conversational language-modeling type (`messages`, "
        "`tools`) for `SFTTrainer`, one multi-turn trajectory per row",
        "text-generation",
    ),
    "dpo": (
        "preference pairs: TRL's conversational preference type (`prompt`, `chosen`, "
        "`rejected`) for `DPOTrainer`",
        "text-generation",
    ),
    "grpo": (
        "GRPO groups: a prompt with several recorded trajectories and their rewards",
        "text-generation",
    ),
    "prm": (
        "process supervision: TRL's stepwise-supervision type (`prompt`, `completions`, "
        "`labels`) for process reward models",
        "token-classification",
    ),
    "benchmark": ("benchmark tasks: prompts with their expected answers and checkers", "other"),
}

#: What each column means (the dataset card lists the columns a dataset has with these texts).
COLUMN_DOCS: dict[str, str] = {
    "messages": "the trajectory as chat messages (system, user, then assistant tool calls and "
    "tool results), in the OpenAI schema; tool-call arguments are JSON strings",
    "tools": "the tools the agent had, as JSON text of function schemas (TRL json-loads it)",
    "prompt": "the prompt: chat messages (system, user), or rendered text for `prm`",
    "chosen": "the preferred trajectory's messages after the prompt",
    "rejected": "the other trajectory's messages after the prompt",
    "completions": "`grpo`: each trajectory's messages after the prompt; `prm`: one rendered "
    "text per step (the previous observation and the step's action)",
    "rewards": "each trajectory's reward, aligned with `completions`",
    "labels": "per step: is the step good (its score or human label ≥ `threshold`)",
    "instruction": "knowlyr format: the task prompt",
    "input": "knowlyr format: task context (repo, base_commit, test_command; empty when unknown) as JSON",
    "response": "knowlyr format: the steps as `Step N:` blocks (Thought, Action, Observation)",
    "metadata": "knowlyr format: agent framework, model and number of steps",
    "trajectory_id": "database id of the trajectory",
    "trajectory_ids": "database ids of the trajectories, aligned with `completions`",
    "chosen_trajectory_id": "database id of the chosen trajectory",
    "rejected_trajectory_id": "database id of the rejected trajectory",
    "step_ids": "database ids of the steps in the row, in the order of the assistant turns",
    "chosen_step_ids": "database ids of the chosen trajectory's steps",
    "rejected_step_ids": "database ids of the rejected trajectory's steps",
    "step_rewards": "the reward model's score of each step (null: unscored)",
    "difficulty": "number of steps (for a curriculum from easy to hard)",
    "reward": "the trajectory's reward (reward-model total or outcome reward; null: unknown)",
    "chosen_reward": "the chosen trajectory's reward",
    "rejected_reward": "the rejected trajectory's reward",
    "margin": "how much better the chosen trajectory is (the pair's margin)",
    "task_id": "the task's id",
    "source": "provenance as JSON text (reward-model version, pairing method, annotator, ...)",
    "label_source": "where the labels come from: model (step scores) or human (step labels)",
    "threshold": "the score or label at or above which a step is labelled good",
    "environment": "the environment id the task runs in",
    "domain": "the task's domain profile",
    "task_set": "the task set the task belongs to",
    "expected_answer": "the expected answer as JSON text",
    "checker": "the outcome checker that compares an answer",
    "answer_schema": "how the answer is extracted from the output",
}

_SPLIT_NAME = re.compile(r"^\w+$")


@dataclass
class DatasetFiles:
    """What :func:`write_dataset` wrote."""

    directory: Path
    files: dict[str, Path]
    """Data files by path relative to ``directory`` (``"data/train.jsonl"``)."""
    counts: dict[str, int]
    """Rows per split (every split asked for, 0 for an empty one)."""
    duplicates: int
    """Rows dropped as duplicates of another row."""
    sha256: dict[str, str]
    """sha256 (hex) of every file written, the card included, by relative path."""
    card: Path
    rows: int = 0
    columns: list[str] = field(default_factory=list)


def _fractions(splits: Sequence[float] | Mapping[str, float]) -> list[tuple[str, float]]:
    if isinstance(splits, Mapping):
        pairs = [(str(k), v) for k, v in splits.items()]
    else:
        values = list(splits)
        if len(values) != len(SPLIT_NAMES):
            raise ConfigError(
                f"splits is three fractions (train, validation, test) or a dict of split name "
                f"to fraction, not {splits!r}"
            )
        pairs = list(zip(SPLIT_NAMES, values, strict=True))
    if not pairs:
        raise ConfigError("splits names at least one split")
    total = 0.0
    for name, value in pairs:
        if not _SPLIT_NAME.match(name):
            raise ConfigError(f"split name {name!r}: use letters, digits and underscores")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"split {name!r}: the fraction must be a number, not {value!r}")
        if not math.isfinite(value) or value < 0:
            raise ConfigError(f"split {name!r}: the fraction must be ≥ 0, not {value!r}")
        total += value
    if abs(total - 1.0) > 1e-6:
        raise ConfigError(f"the split fractions must sum to 1, not {total:g} ({splits!r})")
    return [(name, float(value)) for name, value in pairs]


def _allocate(n: int, fractions: list[float]) -> list[int]:
    """Largest-remainder counts: sizes that sum to ``n`` and are closest to ``n * f``."""
    exact = [n * f for f in fractions]
    counts = [math.floor(x) for x in exact]
    order = sorted(range(len(exact)), key=lambda i: (-(exact[i] - counts[i]), i))
    for i in order[: n - sum(counts)]:
        counts[i] += 1
    return counts


def _write_atomic(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _prepare_directory(out_dir: Path, overwrite: bool) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise ConfigError(f"{out_dir} is a file; write a dataset to a directory")
    if out_dir.is_dir() and any(out_dir.iterdir()):
        if not overwrite:
            raise ConfigError(
                f"{out_dir} is not empty; write each dataset snapshot to a new directory, or "
                "pass overwrite=True to replace the dataset there"
            )
        if (out_dir / DATA_DIR).is_dir():
            shutil.rmtree(out_dir / DATA_DIR)
        (out_dir / "README.md").unlink(missing_ok=True)
    (out_dir / DATA_DIR).mkdir(parents=True, exist_ok=True)


def _card_configs(files: dict[str, Path], written: list[str]) -> tuple[list[str], list[dict]]:
    """The formats written (parquet first) and the card's ``configs``: one per format, the first
    the ``default``."""
    formats = [f for f in ("parquet", "jsonl") if any(p.endswith("." + f) for p in files)]
    configs = [
        {
            "config_name": "default" if number == 0 else fmt,
            "data_files": [{"split": s, "path": f"data/{s}.{fmt}"} for s in written],
        }
        for number, fmt in enumerate(formats)
    ]
    return formats, configs


def _card_header(
    *,
    name: str,
    kind: str,
    features: Any,
    configs: list[dict[str, Any]],
    counts: dict[str, int],
    num_bytes: dict[str, int],
    settings: dict[str, Any],
    provenance: dict[str, Any],
) -> str:
    """The card's YAML front matter (without its ``---`` fences)."""
    import yaml

    written = [s for s, n in counts.items() if n]
    front: dict[str, Any] = {
        "pretty_name": name,
        "tags": ["steplab", "trl", kind, "agents", "tool-use"],
        "task_categories": [_KIND_TEXT[kind][1]],
        "configs": configs,
        "dataset_info": {
            "features": features._to_yaml_list(),
            "splits": [
                {"name": s, "num_bytes": num_bytes[s], "num_examples": counts[s]} for s in written
            ],
        },
        "steplab": {**settings, "provenance": provenance},
    }
    return yaml.safe_dump(front, sort_keys=True, allow_unicode=True, width=100).rstrip("\n")


def _card_loading(fmt: str, written: list[str]) -> list[str]:
    """The card's "Loading" section: how to load the splits with ``datasets``."""
    return [
        "## Loading",
        "",
        "```python",
        "from datasets import load_dataset",
        "",
        f'dataset = load_dataset("{fmt}", data_files={{',
        *[f'    "{s}": "data/{s}.{fmt}",' for s in written],
        "})",
        "```",
        "",
    ]


def _card_columns(features: Any, columns: list[str]) -> list[str]:
    """The card's "Columns" section: each column's type and meaning (:data:`COLUMN_DOCS`)."""
    lines = ["## Columns", "", "| column | type | meaning |", "|---|---|---|"]
    for column in columns:
        lines.append(f"| `{column}` | `{features[column]!s}` | {COLUMN_DOCS.get(column, '')} |")
    return lines


def _card_splits(settings: dict[str, Any], counts: dict[str, int]) -> list[str]:
    """The card's "Splits" section: how rows were assigned, and each split's fraction and size."""
    split_by = settings["split_by"]
    unit = f"each distinct `{split_by}`" if split_by else "each distinct row content"
    return [
        "## Splits",
        "",
        f"Rows: {settings['rows']} ({settings['duplicates']} duplicates dropped). Split units "
        f"({unit}) are ranked by sha256 of the seed ({settings['seed']}) and the unit, then cut "
        "into the fractions below; the assignment does not depend on the order of the rows.",
        "",
        "| split | fraction | rows |",
        "|---|---|---|",
        *[f"| {s} | {f:g} | {counts[s]} |" for s, f in settings["splits"].items()],
        "",
    ]


def _card_text(
    *,
    name: str,
    kind: str,
    features: Any,
    columns: list[str],
    counts: dict[str, int],
    num_bytes: dict[str, int],
    files: dict[str, Path],
    sha256: dict[str, str],
    settings: dict[str, Any],
    provenance: dict[str, Any],
) -> str:
    """The dataset card (``README.md``): front matter, then Loading, Columns, Splits, Provenance
    and Files sections."""
    import yaml

    written = [s for s, n in counts.items() if n]
    formats, configs = _card_configs(files, written)
    header = _card_header(
        name=name,
        kind=kind,
        features=features,
        configs=configs,
        counts=counts,
        num_bytes=num_bytes,
        settings=settings,
        provenance=provenance,
    )
    description = _KIND_TEXT[kind][0]
    provenance_yaml = (
        yaml.safe_dump(provenance, sort_keys=True, allow_unicode=True, width=100).rstrip("\n")
        if provenance
        else "{}"
    )
    lines = [
        "---",
        header,
        "---",
        "",
        f"# {name}",
        "",
        f"A Steplab `{kind}` dataset — {description}. Every row carries the ids of its "
        "trajectory and steps.",
        "",
        *_card_loading(formats[0], written),
        *_card_columns(features, columns),
        "",
        *_card_splits(settings, counts),
        "## Provenance",
        "",
        "```yaml",
        provenance_yaml,
        "```",
        "",
        "## Files",
        "",
        *[f"- `{path}` sha256 `{sha256[path]}`" for path in sorted(files)],
        "",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- write_dataset phases

#: One row as the writer carries it: (content key, canonical JSON text, the row with every column).
_Entry = tuple[str, str, dict[str, Any]]


def _check_options(
    kind: str, name: str, seed: int, splits: Any, formats: Sequence[str]
) -> tuple[list[tuple[str, float]], list[str]]:
    """Refuse a bad kind, name, seed, splits or formats; returns the split fractions and the
    formats (de-duplicated, in order)."""
    if kind not in KINDS:
        raise ConfigError(f"unknown dataset kind {kind!r}; use one of {', '.join(KINDS)}")
    if not isinstance(name, str) or not name.strip():
        raise ConfigError("a dataset needs a non-empty name")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"seed must be an integer, not {seed!r}")
    fractions = _fractions(splits)
    formats = list(dict.fromkeys(formats))
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise ConfigError(f"formats are one or more of {', '.join(FORMATS)}, not {formats!r}")
    return fractions, formats


def _collect_rows(records: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The records as dicts; InputError for a record that is not a mapping, or for none at all."""
    rows = []
    for number, record in enumerate(records):
        if not isinstance(record, Mapping):
            raise InputError(f"record #{number} is {type(record).__name__}, not a dict")
        rows.append(dict(record))
    if not rows:
        raise InputError(
            "there are no records to write: the selection matched no trajectory (or every one "
            "was left out); widen the filters"
        )
    return rows


def _canonical_entries(
    rows: list[dict[str, Any]], columns: list[str], dedupe: bool
) -> tuple[list[_Entry], int]:
    """Canonical rows (every column in every row) sorted by content key, duplicates dropped when
    ``dedupe`` (the smallest canonical JSON of each key is kept). Returns them and how many were
    dropped."""
    entries: list[_Entry] = []
    for number, row in enumerate(rows):
        full = {k: row.get(k) for k in columns}
        try:
            text = canonical_json(full)
        except InputError as exc:
            raise InputError(f"record #{number}: {exc}") from None
        entries.append((content_key(full), text, full))
    entries.sort(key=lambda e: (e[0], e[1]))
    kept: list[_Entry] = []
    for entry in entries:
        if dedupe and kept and kept[-1][0] == entry[0]:
            continue
        kept.append(entry)
    return kept, len(entries) - len(kept)


def _assign_splits(
    kept: list[_Entry], fractions: list[tuple[str, float]], seed: int, split_by: str | None
) -> dict[str, list[_Entry]]:
    """The seeded split assignment over units (see the module docstring): split name → its
    entries, in content-key order."""

    def unit_of(entry: _Entry) -> str:
        return canonical_json(entry[2][split_by]) if split_by is not None else entry[0]

    units = sorted(
        {unit_of(e) for e in kept},
        key=lambda u: (hashlib.sha256(f"{seed}\0{u}".encode()).hexdigest(), u),
    )
    sizes = _allocate(len(units), [f for _, f in fractions])
    split_of: dict[str, str] = {}
    start = 0
    for (split, _), size in zip(fractions, sizes, strict=True):
        for unit in units[start : start + size]:
            split_of[unit] = split
        start += size
    by_split: dict[str, list[_Entry]] = {s: [] for s, _ in fractions}
    for entry in kept:
        by_split[split_of[unit_of(entry)]].append(entry)
    return by_split


def _tables(by_split: dict[str, list[_Entry]]) -> tuple[Any, dict[str, Any]]:
    """One schema for every split, inferred from all rows (see the module docstring), and the
    pyarrow table of each non-empty split."""
    from datasets import Dataset

    parsed = {s: [json.loads(text) for _, text, _ in es] for s, es in by_split.items()}
    try:
        features = Dataset.from_list(
            [row for rows in parsed.values() for row in rows], on_mixed_types="use_json"
        ).features
        tables = {
            s: Dataset.from_list(rows, features=features).data.table
            for s, rows in parsed.items()
            if rows
        }
    except Exception as exc:  # pyarrow raises several types for data it cannot type
        raise InputError(f"the records cannot be stored as one table: {exc}") from None
    return features, tables


def _write_splits(
    out: Path, by_split: dict[str, list[_Entry]], tables: dict[str, Any], formats: list[str]
) -> dict[str, Path]:
    """Write each non-empty split in each format at :func:`~.layout.split_path`; returns the
    files by path relative to ``out``."""
    import pyarrow.parquet as pq

    files: dict[str, Path] = {}
    for split, entries in by_split.items():
        if not entries:
            continue
        if "jsonl" in formats:
            path = split_path(out, split)
            _write_atomic(path, "".join(text + "\n" for _, text, _ in entries).encode("utf-8"))
            files[path.relative_to(out).as_posix()] = path
        if "parquet" in formats:
            path = split_path(out, split, fmt="parquet")
            tmp = path.with_name(path.name + ".tmp")
            pq.write_table(tables[split], tmp)
            os.replace(tmp, path)
            files[path.relative_to(out).as_posix()] = path
    return files


def _write_card(out: Path, files: dict[str, Path], **card: Any) -> tuple[Path, dict[str, str]]:
    """Write ``README.md`` (:func:`_card_text` of ``card``, listing the sha256 of every data
    file). Returns its path and the sha256 of every file written, the card included."""
    sha256 = {rel: _sha256(path) for rel, path in sorted(files.items())}
    card_path = out / "README.md"
    _write_atomic(card_path, _card_text(files=files, sha256=sha256, **card).encode("utf-8"))
    sha256["README.md"] = _sha256(card_path)
    return card_path, sha256


def write_dataset(
    records: Iterable[Mapping[str, Any]],
    out_dir: str | os.PathLike[str],
    *,
    name: str,
    kind: str,
    seed: int = 0,
    splits: Sequence[float] | Mapping[str, float] = (0.9, 0.05, 0.05),
    formats: Sequence[str] = FORMATS,
    dedupe: bool = True,
    card: Mapping[str, Any] | None = None,
    split_by: str | None = None,
    overwrite: bool = False,
) -> DatasetFiles:
    """Write ``records`` as a dataset in ``out_dir`` (see the module docstring).

    ``kind`` is one of :data:`KINDS`; ``splits`` three fractions (train, validation, test) or a
    dict of split name to fraction (e.g. ``{"test": 1.0}`` for a benchmark); ``formats`` any of
    :data:`FORMATS`; ``card`` the provenance written into the dataset card (the query, the
    reward-model version, the label source...: JSON data); ``split_by`` a column whose equal
    values stay in one split. ``out_dir`` must be new or empty unless ``overwrite`` (which replaces
    its ``README.md`` and ``data/`` and leaves anything else there alone). Nothing is written
    when the records are refused.
    """
    # 1. options and records
    fractions, formats = _check_options(kind, name, seed, splits, formats)
    provenance = json.loads(canonical_json(dict(card or {})))
    rows = _collect_rows(records)
    columns = sorted({k for row in rows for k in row})
    if split_by is not None and split_by not in columns:
        raise ConfigError(f"split_by={split_by!r} is not a column; the columns are {columns}")

    # 2. canonical rows, de-duplication, seeded splits, one schema
    kept, duplicates = _canonical_entries(rows, columns, dedupe)
    by_split = _assign_splits(kept, fractions, seed, split_by)
    counts = {s: len(entries) for s, entries in by_split.items()}
    features, tables = _tables(by_split)

    # 3. the files, then the card that lists their hashes
    out = Path(out_dir)
    _prepare_directory(out, overwrite)
    files = _write_splits(out, by_split, tables, formats)
    settings = {
        "kind": kind,
        "name": name,
        "seed": seed,
        "splits": dict(fractions),
        "split_by": split_by,
        "dedupe": dedupe,
        "formats": formats,
        "rows": len(kept),
        "duplicates": duplicates,
        "counts": counts,
    }
    card_path, sha256 = _write_card(
        out,
        files,
        name=name,
        kind=kind,
        features=features,
        columns=columns,
        counts=counts,
        num_bytes={split: table.nbytes for split, table in tables.items()},
        settings=settings,
        provenance=provenance,
    )
    return DatasetFiles(
        directory=out,
        files=files,
        counts=counts,
        duplicates=duplicates,
        sha256=sha256,
        card=card_path,
        rows=len(kept),
        columns=columns,
    )
