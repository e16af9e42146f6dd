"""What is stored of a trajectory's content: its content hash (the de-duplication key of
imports) and text cleaned of what PostgreSQL cannot hold. Pure functions."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from trainer_core.recording.schema import Trajectory as TrajectorySpec


def content_hash(trajectory: TrajectorySpec) -> str:
    """The ordered (tool, params, observation) sequence of the tool steps, with the task prompt
    and the outcome so that trajectories without steps (a model that answered directly) stay
    distinct, and — when there are any — the message steps (position, role, text), so that two
    conversations that differ only in their dialogue are two trajectories. A trajectory without
    message steps hashes as it did in schema 1.0."""
    steps = trajectory.steps
    sequence = [[s.tool, s.params, s.observation] for s in steps if s.kind != "message"]
    payload: list = [trajectory.task.prompt, sequence, trajectory.outcome.model_dump(mode="json")]
    messages = [[n, s.role, s.text] for n, s in enumerate(steps) if s.kind == "message"]
    if messages:
        payload.append(messages)
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def without_nul(value: Any) -> Any:
    """``value`` with NUL characters and lone surrogates (``"\\ud800"`` in JSON, not UTF-8)
    replaced by U+FFFD, in strings, keys and nested JSON: PostgreSQL text and JSON cannot hold
    them, and a model's or a tool's output may contain them (a sampling model emits any token).
    Nothing else changes."""
    if isinstance(value, str):
        if "\x00" in value:
            value = value.replace("\x00", "\ufffd")
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                value = value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        return value
    if isinstance(value, dict):
        return {without_nul(k): without_nul(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [without_nul(v) for v in value]
    return value
