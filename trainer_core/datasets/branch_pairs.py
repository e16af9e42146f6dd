"""Step-level preference data from branch sets (branch-and-resample, docs/branching.md): the
pairs of continuations sampled from one step (a successful against a failed one, from the first
step where they act differently) as DPO rows and PRM labels, each with its lineage.

Both go through the one writer of each kind (:func:`~trainer_core.datasets.dpo.dpo_records`,
:func:`~trainer_core.datasets.prm.prm_records`) and then move what the two sides share into the
prompt, so a row is about the divergent step:

- DPO: ``prompt`` is the conversation before the divergent step (system, task, the shared
  turns), ``chosen`` / ``rejected`` the two continuations from that step on;
- PRM: ``prompt`` is the rendered conversation before the divergent step, the single
  completion that step's action, labelled True on the successful side and False on the failed
  one (``label_source`` ``monte_carlo``).

Every row has a ``lineage`` column (parent trajectory, branch step, branch set, continuations,
divergent step, the step's value estimate) and the same in its ``source``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

__all__ = ["pair_dpo_records", "pair_prm_records"]


def _shared_head(a: list[dict], b: list[dict]) -> int:
    """How many leading messages ``a`` and ``b`` share, cut back so that what follows starts
    with the assistant's turn."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    while n > 0 and (n >= len(a) or a[n].get("role") != "assistant"):
        n -= 1
    return n


def pair_dpo_records(
    pairs: Iterable[tuple[Any, Any, Mapping[str, Any]]], *, stats: Any = None
) -> Iterator[dict[str, Any]]:
    """Step-level DPO rows: ``(chosen, rejected, lineage)`` triples of
    :class:`~trainer_core.datasets.items.ExportItem` go through
    :func:`~trainer_core.datasets.dpo.dpo_records`, then the turns both sides share move into
    the prompt, so ``chosen`` and ``rejected`` start at the first divergent step. The lineage
    (parent trajectory, branch step, branch set, continuations, divergent step) is the row's
    ``lineage`` column and is in its ``source``."""
    from trainer_core.datasets.dpo import dpo_records

    for chosen, rejected, lineage in pairs:
        for row in dpo_records([(chosen, rejected, dict(lineage))], stats=stats):
            n = _shared_head(row["chosen"], row["rejected"])
            shared = sum(1 for m in row["chosen"][:n] if m.get("role") == "assistant")
            row["prompt"] = row["prompt"] + row["chosen"][:n]
            row["chosen"], row["rejected"] = row["chosen"][n:], row["rejected"][n:]
            row["chosen_step_ids"] = row["chosen_step_ids"][shared:]
            row["rejected_step_ids"] = row["rejected_step_ids"][shared:]
            row["lineage"] = dict(lineage)
            yield row


def pair_prm_records(
    sides: Iterable[tuple[Any, int, bool, Mapping[str, Any]]], *, stats: Any = None
) -> Iterator[dict[str, Any]]:
    """Step-level PRM labels: for each ``(item, divergent_step, good, lineage)`` — one side of a
    pair — one stepwise row whose prompt is the conversation before the divergent step and whose
    single completion is that step's action, labelled ``good`` (the continuation succeeded) or
    not. Rows come from :func:`~trainer_core.datasets.prm.prm_records` (label source
    ``monte_carlo``); the same side of several pairs gives one row."""
    from trainer_core.datasets.prm import prm_records

    seen: set[tuple[Any, int]] = set()
    for item, divergent, good, lineage in sides:
        if (item.trajectory_id, divergent) in seen:
            continue
        seen.add((item.trajectory_id, divergent))
        values = [
            1.0 if s.index < divergent else (float(good) if s.index == divergent else None)
            for s in item.trajectory.steps
        ]
        labelled = copy.copy(item)
        labelled.step_rewards, labelled.source = values, dict(lineage)
        for row in prm_records([labelled], label_source="model", threshold=0.5, stats=stats):
            head = row["completions"][:-1]
            row["prompt"] = row["prompt"] + "".join(c + "\n" for c in head)
            row["completions"], row["labels"] = row["completions"][-1:], row["labels"][-1:]
            row["step_ids"] = row["step_ids"][-1:]
            row["label_source"] = "monte_carlo"
            row["lineage"] = dict(lineage)
            yield row
