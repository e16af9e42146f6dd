"""Dialogue turns an environment reports, as message steps.

A conversation environment (``steplab/customer-service``) reports the turns of a timestep in
``info["messages"]``: a list of ``{"role": "user" | "assistant" | "system", "text": ...}``. The
reset's come before the first action (``steplab/customer-service``: one user message, the first
observation); an action reported with the assistant's message first (a ``respond`` to a
simulated user) *is* that message, and the turns after it (the user's reply) follow it. Both
recorders — the episode runner (``trainer_core.rollouts``) and the ``Recorder`` wrapper — record
them so: assistant and user message steps, the shape an imported tau-bench log has.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainer_core.recording.schema import MESSAGE_ROLES, Step


def reported_messages(info: Any) -> list[dict[str, str]]:
    """The dialogue turns a timestep reports in ``info["messages"]`` (entries of another shape
    are left out)."""
    raw = info.get("messages") if isinstance(info, Mapping) else None
    if not isinstance(raw, list):
        return []
    return [
        {"role": m["role"], "text": m["text"]}
        for m in raw
        if isinstance(m, Mapping)
        and m.get("role") in MESSAGE_ROLES
        and isinstance(m.get("text"), str)
    ]


def message_step(index: int, message: Mapping[str, str], **fields: Any) -> Step:
    """A message step of a reported turn (``fields``: started_at, duration, thought...)."""
    return Step(index=index, kind="message", role=message["role"], text=message["text"], **fields)


def action_steps(tool_step: Step, messages: list[dict[str, str]]) -> list[Step]:
    """The steps of one action: ``tool_step`` as it would be recorded, and the turns it
    reported. When the assistant's message comes first the action was that message: an
    assistant message step takes the tool step's place (its thought, tokens, reward and
    metadata; the tool and its parameters in ``metadata["tool"]`` and ``metadata["params"]``,
    so that the chat format renders it as the call the policy made) and the other turns follow, the first taking the
    tool step's duration (the user's time to reply); otherwise the tool step comes first, then
    the turns."""
    index = tool_step.index
    if not messages or messages[0]["role"] != "assistant":
        return [
            tool_step,
            *(
                message_step(index + 1 + i, m, started_at=tool_step.started_at)
                for i, m in enumerate(messages)
            ),
        ]
    assistant = message_step(
        index,
        messages[0],
        started_at=tool_step.started_at,
        thought=tool_step.thought,
        tokens_in=tool_step.tokens_in,
        tokens_out=tool_step.tokens_out,
        reward=tool_step.reward,
        metadata={**tool_step.metadata, "tool": tool_step.tool, "params": dict(tool_step.params)},
    )
    rest = [
        message_step(
            index + 1 + i,
            m,
            started_at=tool_step.started_at,
            duration=tool_step.duration if i == 0 else None,
        )
        for i, m in enumerate(messages[1:])
    ]
    return [assistant, *rest]
