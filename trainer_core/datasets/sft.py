"""SFT records: one row per trajectory.

``fmt="messages"`` (TRL's conversational language-modeling type, for ``SFTTrainer``)::

    {"messages": [...],            # chat_format.trajectory_to_messages(trajectory, system=...)
     "tools": "[{...}]" | None,    # function schemas as JSON text (TRL json.loads it)
     "trajectory_id": 7, "step_ids": [31, 32],   # step ids in the order of the assistant turns
     "step_rewards": [0.9, None],  # per assistant turn (reward model; None: unscored)
     "difficulty": 2,              # number of assistant turns (for a curriculum)
     "reward": 1.0, "task_id": "...", "source": "{...}"}

The messages are exactly those of the one chat format: a ``system`` message (see
:mod:`.items`), the task's ``user`` message, then per step an ``assistant`` message whose
``tool_calls`` hold the action (``arguments`` as a JSON string, the OpenAI schema) and a ``tool``
message with the observation; a step whose output was not an action is an ``assistant`` message
with the raw text and a ``user`` message with the error. A trajectory with message steps (schema
1.1) is its dialogue as it happened: user, assistant and system messages in their place. The
``i``-th assistant turn (a tool step or an assistant message, by index) is the ``i``-th assistant
message, so ``step_ids[i]`` and ``step_rewards[i]`` belong to it; user and system messages have
no entry.

``fmt="knowlyr"`` (the records knowlyr-hub's ``export_sft`` writes and knowlyr-trainer reads)::

    {"instruction": task prompt,
     "input": JSON text of {repo, base_commit, test_command} from trajectory.metadata ("" each
              where absent, as knowlyr-hub writes it),
     "response": "Step 1:\\nThought: ...\\nAction: calculator({\\"expression\\": \\"2+3\\"})"
                 "\\nObservation: 5\\n\\nStep 2: ...",
     "task_id", "reward", "metadata": {"agent_framework", "agent_model", "total_steps"},
     "trajectory_id", "step_ids", "step_rewards", "source"}

knowlyr renders an action as ``tool(<params as JSON>)`` (the bare tool name when there are no
params) and leaves out empty Thought/Observation lines; a step that was not an action shows its
raw output as the action; an assistant message is the action ``respond({"content": ...})``
(tau-bench's name for a reply to the user). Its trainer parses this text back into steps (``Step N:`` blocks).

A trajectory without steps has nothing to train on: it is left out (reason ``no_steps``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any

from trainer_core.datasets.items import (
    ExportItem,
    ExportStats,
    StepView,
    item_messages,
    items_with_steps,
    opt_float,
    source_column,
    tools_column,
)
from trainer_core.errors import ConfigError

__all__ = ["SFT_FORMATS", "knowlyr_response", "sft_records"]

SFT_FORMATS: tuple[str, ...] = ("messages", "knowlyr")

_KNOWLYR_INPUT_KEYS = ("repo", "base_commit", "test_command")


def sft_records(
    items: Iterable[ExportItem],
    *,
    fmt: str = "messages",
    include_step_rewards: bool = True,
    stats: ExportStats | None = None,
) -> Iterator[dict[str, Any]]:
    """SFT rows, one per trajectory with at least one step (see the module docstring).
    ``include_step_rewards=False`` leaves out the ``step_rewards`` column."""
    if fmt not in SFT_FORMATS:
        raise ConfigError(f"unknown SFT format {fmt!r}; use one of {', '.join(SFT_FORMATS)}")
    stats = stats if stats is not None else ExportStats()
    for item, steps in items_with_steps(items, stats):
        if fmt == "messages":
            record = _messages_record(item, steps)
        else:
            record = _knowlyr_record(item, steps)
        if include_step_rewards:
            record["step_rewards"] = [v.reward for v in steps]
        stats.rows += 1
        yield record


def _common(item: ExportItem, steps: list[StepView]) -> dict[str, Any]:
    return {
        "trajectory_id": item.trajectory_id,
        "step_ids": [v.step_id for v in steps],
        "task_id": item.trajectory.task.id,
        "reward": opt_float(item.reward, f"trajectory {item.trajectory_id!r}: the reward"),
        "source": source_column(item.source),
    }


def _messages_record(item: ExportItem, steps: list[StepView]) -> dict[str, Any]:
    return {
        "messages": item_messages(item),
        "tools": tools_column(item.tools),
        "difficulty": len(steps),
        **_common(item, steps),
    }


def _knowlyr_action(view: StepView) -> str:
    from trainer_core.policies.chat_format import step_to_turn

    if view.step.kind == "message":
        return f"respond({json.dumps({'content': view.step.text}, ensure_ascii=False)})"
    turn = step_to_turn(view.step)
    if turn.action is None:
        return (turn.raw or "").strip()
    tool, params = turn.action["tool"], turn.action.get("params") or {}
    return f"{tool}({json.dumps(params, ensure_ascii=False)})" if params else tool


def knowlyr_response(steps: list[StepView]) -> str:
    """The steps as knowlyr's response text (``Step N:`` blocks, see the module docstring)."""
    parts = []
    for number, view in enumerate(steps, 1):
        text = f"Step {number}:"
        action = _knowlyr_action(view)
        thought = view.step.thought if action != (view.step.thought or "").strip() else ""
        if thought:
            text += f"\nThought: {thought}"
        if action:
            text += f"\nAction: {action}"
        if view.step.observation:
            text += f"\nObservation: {view.step.observation}"
        parts.append(text)
    return "\n\n".join(parts)


def _knowlyr_record(item: ExportItem, steps: list[StepView]) -> dict[str, Any]:
    trajectory = item.trajectory
    context = {k: trajectory.metadata.get(k) or "" for k in _KNOWLYR_INPUT_KEYS}
    return {
        "instruction": trajectory.task.prompt,
        "input": json.dumps(context, ensure_ascii=False),
        "response": knowlyr_response(steps),
        "metadata": {
            "agent_framework": trajectory.agent,
            "agent_model": trajectory.model,
            "total_steps": len(steps),
        },
        **_common(item, steps),
    }
