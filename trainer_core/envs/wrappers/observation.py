"""Wrappers that change the observation."""

from __future__ import annotations

from typing import Any

from trainer_core.envs.core import AgentEnv, TimeStep
from trainer_core.envs.wrappers.base import Wrapper


def truncate_text(text: str, max_chars: int) -> str:
    """Keep the head and the tail, with a marker saying how much was dropped."""
    if len(text) <= max_chars:
        return text
    marker_budget = 80
    keep = max(0, max_chars - marker_budget)
    head = keep * 2 // 3
    tail = keep - head
    dropped = len(text) - head - tail
    return f"{text[:head]}\n[... {dropped} characters truncated ...]\n{text[len(text) - tail :] if tail else ''}"


class TruncateObservation(Wrapper):
    """Observations longer than ``max_chars`` keep their head and tail."""

    def __init__(self, env: AgentEnv, max_chars: int = 10_000):
        super().__init__(env)
        if max_chars < 100:
            raise ValueError("max_chars must be at least 100")
        self.max_chars = max_chars

    def _cut(self, ts: TimeStep) -> TimeStep:
        if len(ts.observation) <= self.max_chars:
            return ts
        return ts.replace(
            observation=truncate_text(ts.observation, self.max_chars),
            info=dict(ts.info, observation_chars=len(ts.observation)),
        )

    def reset(self, *, task=None, seed=None) -> TimeStep:
        return self._cut(self.env.reset(task=task, seed=seed))

    def step(self, action: Any) -> TimeStep:
        return self._cut(self.env.step(action))
