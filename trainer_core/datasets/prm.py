"""PRM records: TRL's stepwise-supervision type (standard, i.e. text), one row per trajectory::

    {"prompt": "<|im_start|>system\\n...<|im_end|>\\n<|im_start|>user\\n...<|im_end|>\\n",
     "completions": ["<|im_start|>assistant\\n...<tool_call>...</tool_call><|im_end|>",
                     "<|im_start|>tool\\n5<|im_end|>\\n<|im_start|>assistant\\n...<|im_end|>"],
     "labels": [True, False],
     "trajectory_id", "step_ids", "task_id", "label_source", "threshold", "source"}

Texts are rendered with the one chat format (:func:`~trainer_core.policies.chat_format.render`),
so a reward model reads exactly what the policy wrote and saw. ``prompt`` is the system and user
messages. Completion ``i`` is what came back after the agent's turn ``i-1`` (the observation: a
``tool`` turn, or a ``user`` turn for an output that was not an action; in a dialogue also the
user's and system's messages; nothing before the first turn but the dialogue's own) followed by
the agent's turn ``i`` (an ``assistant`` message: a tool call, or a reply of a dialogue), without
the final newline: the label at the end of completion
``i`` judges action ``i`` given everything before it, and never sees the action's own result.
Joined with TRL's default ``step_separator`` ("\\n"), ``prompt + "".join(c + "\\n" for c in
completions)`` is the rendered conversation up to the last labelled action.

Labels: ``label_source="model"`` reads the reward model's step scores (``step_rewards``),
``"human"`` the human step labels (``step_labels``, 0..1); a step is good (True) when its value is
at least ``threshold``. Stepwise supervision has no holes, so a trajectory is cut before its first
step without a value (the rows keep the labelled prefix; ``step_ids`` names the kept steps); a
trajectory whose first step has no value is left out (reason ``unlabelled``; ``cut_steps`` counts
the steps cut from the others).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from typing import Any

from trainer_core.datasets.items import (
    ExportItem,
    ExportStats,
    assistant_positions,
    item_messages,
    items_with_steps,
    prompt_length,
    source_column,
)
from trainer_core.errors import ConfigError

__all__ = ["LABEL_SOURCES", "prm_records"]

LABEL_SOURCES: tuple[str, ...] = ("model", "human")


def prm_records(
    items: Iterable[ExportItem],
    *,
    label_source: str = "model",
    threshold: float = 0.5,
    stats: ExportStats | None = None,
) -> Iterator[dict[str, Any]]:
    """Stepwise-supervision rows (see the module docstring)."""
    from trainer_core.policies.chat_format import render

    if label_source not in LABEL_SOURCES:
        raise ConfigError(
            f"unknown label source {label_source!r}; use one of {', '.join(LABEL_SOURCES)}"
        )
    if isinstance(threshold, bool) or not isinstance(threshold, int | float):
        raise ConfigError(f"threshold must be a number, not {threshold!r}")
    if not math.isfinite(threshold):
        raise ConfigError(f"threshold must be finite, not {threshold!r}")
    stats = stats if stats is not None else ExportStats()
    for item, steps in items_with_steps(items, stats):
        values = [v.reward if label_source == "model" else v.label for v in steps]
        kept = next((i for i, value in enumerate(values) if value is None), len(values))
        if kept == 0:
            stats.skip("unlabelled")
            continue
        if kept < len(steps):
            stats.skip("cut_steps", len(steps) - kept)
        messages = item_messages(item)
        n = prompt_length(messages)
        actions = assistant_positions(messages)  # turn i is messages[actions[i]]
        completions = []
        for i in range(kept):
            start = actions[i - 1] + 1 if i else n  # what came back since the previous action
            turns = messages[start : actions[i] + 1]
            completions.append(render(turns).removesuffix("\n"))
        stats.rows += 1
        yield {
            "prompt": render(messages[:n]),
            "completions": completions,
            "labels": [value >= threshold for value in values[:kept]],
            "trajectory_id": item.trajectory_id,
            "step_ids": [v.step_id for v in steps[:kept]],
            "task_id": item.trajectory.task.id,
            "label_source": label_source,
            "threshold": float(threshold),
            "source": source_column(item.source),
        }
