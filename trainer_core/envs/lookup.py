"""Directory lookup (``steplab/lookup``): answer a multi-hop question about a small directory of
people, companies, products and cities by searching it, fetching records by id, following their
references, calculating, and submitting the answer.

The directory is the task's ``metadata["records"]``: a list of records, each with an ``id``
(``P-4821``), a ``kind`` (person, company, product, city), a ``name`` and the fields of its kind
(references to other records are plain ids). The built-in tasks, generated from a seed with
disjoint train / validation / test splits, come from ``trainer_core.tasks.suites.lookup``, which
also owns how a search matches and how a record reads; this module turns them into tools:

``search(query, kind?)``
    ids, kinds and names of the records whose name matches (near-duplicate spellings included,
    best matches first, then by id; at most 8).
``fetch(id)``
    one record's fields, one ``field: value`` per line. An unknown id is an error observation.
``calculate(expression)``
    arithmetic, as ``steplab/arithmetic``'s calculator.
``submit(answer)``
    ends the episode; the task's checker decides.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainer_core.envs.arithmetic import CalculatorError, evaluate
from trainer_core.envs.core import TimeStep
from trainer_core.envs.toolenv import ProfileEnv
from trainer_core.errors import ConfigError
from trainer_core.tasks.model import Task
from trainer_core.tasks.suites.arithmetic import format_number
from trainer_core.tasks.suites.lookup import (
    ID_PREFIX,
    KINDS,
    SPLITS,
    lookup_task,
    record_text,
    search_records,
)

_ID_HINT = ", ".join(f"{prefix}-4821 ({kind})" for kind, prefix in ID_PREFIX.items())


def index_records(raw: Any) -> dict[str, Mapping[str, Any]]:
    """The task's records by id (upper case); entries that are not records with an id are
    left out."""
    records: dict[str, Mapping[str, Any]] = {}
    for record in raw or []:
        if isinstance(record, Mapping) and str(record.get("id", "")).strip():
            records[str(record["id"]).strip().upper()] = record
    return records


class LookupEnv(ProfileEnv):
    """The directory of the task (``metadata["records"]``) behind search, fetch, calculate and
    submit. ``reset(seed=k)`` without a task plays the ``k``-th task of ``split``."""

    profile_name = "lookup"

    def __init__(self, split: str = "train"):
        super().__init__()
        if split not in SPLITS:
            raise ConfigError(f"unknown split {split!r}; use {', '.join(SPLITS)}")
        self.split = split
        self.records: dict[str, Mapping[str, Any]] = {}

    def _reset(self, *, task: Task | None, seed: int | None) -> TimeStep:
        if task is None:
            task = lookup_task(SPLITS[self.split][0] + (seed or 0), self.split)
            self.task = task
        self.records = index_records((task.metadata or {}).get("records"))
        return TimeStep(observation=task.prompt, info={"task_id": task.id})

    def tool_search(self, query: str, kind: str | None = None) -> TimeStep:
        if kind is not None and kind not in KINDS:
            return TimeStep(
                observation=f"Unknown kind {kind!r}; use one of {', '.join(KINDS)}, or leave it out.",
                info={"error": "invalid_params"},
            )
        found, total = search_records(self.records.values(), query, kind)
        if not found:
            return TimeStep(
                observation=f"No record matches {query!r}. Search by a name: a person's full "
                "name, a company, a product or a city.",
                info={"matches": 0},
            )
        shown = f" (the first {len(found)} of {total})" if total > len(found) else ""
        lines = [f"{len(found)} match{'es' if len(found) > 1 else ''} for {query!r}{shown}:"]
        lines += [f"{r['id']} | {r.get('kind', 'record')} | {r.get('name', '')}" for r in found]
        return TimeStep(observation="\n".join(lines), info={"matches": total})

    def tool_fetch(self, id: str) -> TimeStep:  # noqa: A002 - the tool's parameter is "id"
        record = self.records.get(id.strip().upper())
        if record is None:
            return TimeStep(
                observation=f"No record with id {id!r}. Ids look like {_ID_HINT}; search to "
                "find them.",
                info={"error": "not_found"},
            )
        return TimeStep(
            observation=record_text(record, self.records), info={"record_id": record["id"]}
        )

    def tool_calculate(self, expression: str) -> TimeStep:
        try:
            value = evaluate(expression)
        except CalculatorError as exc:
            return TimeStep(observation=f"Error: {exc}", info={"error": "calculator_error"})
        return TimeStep(observation=f"{expression} = {format_number(value)}")

    def tool_submit(self, answer: Any = None) -> TimeStep:
        return self.finish_with_answer(None if answer is None else str(answer))
