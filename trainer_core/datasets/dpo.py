"""DPO records: TRL's conversational preference type (explicit prompt), one row per pair::

    {"prompt": [system?, user],             # shared by both sides
     "chosen": [assistant, tool, ...],      # the chosen trajectory after the prompt
     "rejected": [assistant, tool, ...],
     "tools": "[{...}]" | None,
     "chosen_trajectory_id", "rejected_trajectory_id",
     "chosen_step_ids", "rejected_step_ids",  # in the order of each side's assistant turns
     "chosen_reward", "rejected_reward",
     "margin",                              # the pair's margin, else chosen − rejected reward
     "task_id", "source": "{...}"}          # the pair's other fields (method, annotator, ...)

``prompt + chosen`` is the chosen trajectory's whole conversation in the one chat format (and
likewise for rejected), so TRL's ``extract_prompt`` on the two conversations gives back exactly
this split. Pairs come from :func:`trainer_core.rewards.preferences.build_pairs` (rule-built)
or from human judgements; the third element of each pair is a dict (``Pair.to_dict()``, or
``{"source": "human", "annotator": ...}``).

Both sides must answer the same prompt (same system prompt and task prompt): a pair that does
not is a selection bug and raises :class:`~trainer_core.errors.InputError`. A pair whose two
sides are the same conversation teaches nothing and is left out (reason ``identical``), as is a
pair with a side without steps (``no_steps``).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from trainer_core.datasets.items import (
    ExportItem,
    ExportStats,
    item_messages,
    item_steps,
    opt_float,
    prompt_length,
    source_column,
    tools_column,
    turn_views,
)
from trainer_core.errors import InputError

__all__ = ["dpo_records"]


def dpo_records(
    pairs: Iterable[tuple[ExportItem, ExportItem, Mapping[str, Any] | None]],
    *,
    stats: ExportStats | None = None,
) -> Iterator[dict[str, Any]]:
    """Preference rows from ``(chosen, rejected, info)`` triples (see the module docstring)."""
    stats = stats if stats is not None else ExportStats()
    for number, pair in enumerate(pairs):
        try:
            chosen, rejected, info = pair
        except (TypeError, ValueError):
            raise InputError(
                f"pair #{number}: expected a (chosen, rejected, info) triple of two ExportItems "
                "and a dict"
            ) from None
        info = dict(info or {})
        chosen_steps = turn_views(item_steps(chosen))
        rejected_steps = turn_views(item_steps(rejected))
        if not chosen_steps or not rejected_steps:
            stats.skip("no_steps")
            continue
        chosen_messages, rejected_messages = item_messages(chosen), item_messages(rejected)
        n = prompt_length(chosen_messages)
        names = (
            f"chosen trajectory {chosen.trajectory_id!r} and "
            f"rejected trajectory {rejected.trajectory_id!r}"
        )
        if prompt_length(rejected_messages) != n or chosen_messages[:n] != rejected_messages[:n]:
            raise InputError(
                f"{names} have different prompts (tasks {chosen.trajectory.task.id!r} and "
                f"{rejected.trajectory.task.id!r}); a preference pair answers one prompt — pair "
                "trajectories of the same task, with the same system prompt and tools"
            )
        tools = tools_column(chosen.tools)
        if tools_column(rejected.tools) != tools:
            raise InputError(f"{names} were given different tools; pass the same tools to both")
        if chosen_messages[n:] == rejected_messages[n:]:
            stats.skip("identical")
            continue
        chosen_reward = opt_float(chosen.reward, f"trajectory {chosen.trajectory_id!r}: reward")
        rejected_reward = opt_float(
            rejected.reward, f"trajectory {rejected.trajectory_id!r}: reward"
        )
        margin = opt_float(info.pop("margin", None), f"pair #{number}: margin")
        if margin is None and chosen_reward is not None and rejected_reward is not None:
            margin = chosen_reward - rejected_reward
        stats.rows += 1
        yield {
            "prompt": chosen_messages[:n],
            "chosen": chosen_messages[n:],
            "rejected": rejected_messages[n:],
            "tools": tools,
            "chosen_trajectory_id": chosen.trajectory_id,
            "rejected_trajectory_id": rejected.trajectory_id,
            "chosen_step_ids": [v.step_id for v in chosen_steps],
            "rejected_step_ids": [v.step_id for v in rejected_steps],
            "chosen_reward": chosen_reward,
            "rejected_reward": rejected_reward,
            "margin": margin,
            "task_id": chosen.trajectory.task.id,
            "source": source_column(info),
        }
