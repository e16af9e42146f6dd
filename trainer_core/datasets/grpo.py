"""GRPO groups: a prompt with several trajectories that answer it and their rewards, one row
per group (offline GRPO on recorded trajectories)::

    {"prompt": [system?, user],                  # TRL's conversational prompt
     "completions": [[assistant, tool, ...], ...], # each trajectory after the prompt
     "rewards": [1.0, 0.0, ...],                 # each trajectory's reward (model total)
     "outcome_rewards": [1.0, 0.0, ...] | None,  # each one's outcome (None: one is unknown)
     "trajectory_ids": [...], "step_ids": [[...], ...],
     "step_rewards": [[0.9, None], ...],         # per assistant turn (None: unscored)
     "task_id", "tools": "[{...}]" | None}

Trajectories are grouped by task and prompt (a task played with two different system prompts
gives two groups). A trajectory without a reward, or without steps, cannot be compared and is
left out (reasons ``missing_reward``, ``no_steps``). A task with more than ``max_group``
trajectories is cut into the fewest groups of at most ``max_group`` with sizes as equal as
possible (members ordered by trajectory id, then cut into consecutive runs); a group with
fewer than ``min_group`` trajectories is left out (reason ``small_group``, counted per group;
``small_group_trajectories`` counts the trajectories in them). Groups come out ordered by task
id, then prompt; the result does not depend on the order of ``items``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from trainer_core.datasets.items import (
    ExportItem,
    ExportStats,
    StepView,
    canonical_json,
    id_sort_key,
    item_messages,
    items_with_steps,
    opt_float,
    prompt_length,
    tools_column,
)
from trainer_core.errors import ConfigError

__all__ = ["grpo_groups", "outcome_reward"]


def _check_sizes(min_group: int, max_group: int) -> None:
    for name, value in (("min_group", min_group), ("max_group", max_group)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{name} must be an integer, not {value!r}")
    if min_group < 2:
        raise ConfigError(
            f"min_group must be at least 2 (a group compares trajectories), not {min_group}"
        )
    if max_group < min_group:
        raise ConfigError(f"max_group ({max_group}) must be at least min_group ({min_group})")


def _chunks(members: list[Any], max_group: int) -> list[list[Any]]:
    n = len(members)
    count = -(-n // max_group)  # ceil
    base, extra = divmod(n, count)
    out, start = [], 0
    for i in range(count):
        size = base + (1 if i < extra else 0)
        out.append(members[start : start + size])
        start += size
    return out


def outcome_reward(trajectory) -> float | None:
    """The trajectory's outcome reward (what GRPO's ``outcome`` estimator compares): partial
    credit, else the score, else 1 / 0 for success / failure; 0 for an episode cut off at its
    step limit before it answered (it solved nothing: leaving it unknown would drop the group's
    outcome rewards and train on the rule totals instead); None when the outcome is unknown."""
    outcome = trajectory.outcome
    for value in (outcome.partial_credit, outcome.score):
        if value is not None:
            return float(value)
    if outcome.success is not None:
        return 1.0 if outcome.success else 0.0
    if outcome.truncated:
        return 0.0
    return None


def grpo_groups(
    items: Iterable[ExportItem],
    *,
    min_group: int = 2,
    max_group: int = 8,
    stats: ExportStats | None = None,
) -> Iterator[dict[str, Any]]:
    """GRPO group rows from trajectories (see the module docstring)."""
    _check_sizes(min_group, max_group)
    stats = stats if stats is not None else ExportStats()
    groups: dict[tuple[str, str, str], list[tuple[ExportItem, list[StepView], list, float]]] = {}
    prompts: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for item, steps in items_with_steps(items, stats):
        reward = opt_float(item.reward, f"trajectory {item.trajectory_id!r}: reward")
        if reward is None:
            stats.skip("missing_reward")
            continue
        messages = item_messages(item)
        n = prompt_length(messages)
        tools = tools_column(item.tools) or ""
        key = (item.trajectory.task.id, canonical_json(messages[:n]), tools)
        prompts.setdefault(key, messages[:n])
        groups.setdefault(key, []).append((item, steps, messages[n:], reward))
    for key in sorted(groups):
        members = sorted(groups[key], key=lambda m: id_sort_key(m[0].trajectory_id))
        for chunk in _chunks(members, max_group):
            if len(chunk) < min_group:
                stats.skip("small_group")
                stats.skip("small_group_trajectories", len(chunk))
                continue
            stats.rows += 1
            outcomes = [outcome_reward(item.trajectory) for item, *_ in chunk]
            yield {
                "prompt": prompts[key],
                "completions": [completion for _, _, completion, _ in chunk],
                "rewards": [reward for *_, reward in chunk],
                "outcome_rewards": None if None in outcomes else outcomes,
                "trajectory_ids": [item.trajectory_id for item, *_ in chunk],
                "step_ids": [[v.step_id for v in steps] for _, steps, *_ in chunk],
                "step_rewards": [[v.reward for v in steps] for _, steps, *_ in chunk],
                "task_id": key[0],
                "tools": key[2] or None,
            }
