"""Datasets: trajectories → training data in TRL's dataset vocabulary, written reproducibly.

Exporters (generators of plain dict rows; each takes ``stats=ExportStats()`` to count what it
left out and why):

- :func:`~.sft.sft_records` — SFT, conversational ``messages`` with tool calls (or knowlyr's
  ``instruction``/``input``/``response``);
- :func:`~.dpo.dpo_records` — DPO, ``prompt``/``chosen``/``rejected`` from pairs;
- :func:`~.grpo.grpo_groups` — GRPO groups, a prompt with 2..G trajectories and rewards;
- :func:`~.prm.prm_records` — PRM stepwise supervision, ``prompt``/``completions``/``labels``;
- :func:`~.bench.benchmark_records` — benchmark tasks.

:func:`~.writer.write_dataset` de-duplicates, splits (seeded, order-independent) and writes JSONL
and parquet with a dataset card. Every row carries the ids of its trajectory and steps.
:mod:`.layout` owns the file layout: :func:`~.layout.split_path` (where a split is written),
:func:`~.layout.find_split` (the file a reader takes for a path) and :func:`~.layout.read_jsonl`.
Importing this package imports neither ``datasets`` nor ``pyarrow`` (the writer does, lazily).
"""

from trainer_core.datasets.bench import benchmark_records
from trainer_core.datasets.dpo import dpo_records
from trainer_core.datasets.grpo import grpo_groups
from trainer_core.datasets.items import ExportItem, ExportStats, canonical_json, content_key
from trainer_core.datasets.layout import find_split, read_jsonl, split_path
from trainer_core.datasets.prm import prm_records
from trainer_core.datasets.sft import sft_records
from trainer_core.datasets.writer import DatasetFiles, write_dataset

__all__ = [
    "DatasetFiles",
    "ExportItem",
    "ExportStats",
    "benchmark_records",
    "canonical_json",
    "content_key",
    "dpo_records",
    "find_split",
    "grpo_groups",
    "prm_records",
    "read_jsonl",
    "sft_records",
    "split_path",
    "write_dataset",
]
