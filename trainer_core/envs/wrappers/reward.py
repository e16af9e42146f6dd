"""Wrappers that change the reward."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainer_core.envs.core import Action, AgentEnv, TimeStep
from trainer_core.envs.wrappers.base import Wrapper

History = list[tuple[Action | None, TimeStep]]


class StepReward(Wrapper):
    """The step reward is ``fn(history, timestep)`` where ``history`` holds every (action,
    timestep) of the episode so far, this step included. ``mode="add"`` adds it to the env's
    own reward instead of replacing it."""

    def __init__(
        self, env: AgentEnv, fn: Callable[[History, TimeStep], float], mode: str = "replace"
    ):
        super().__init__(env)
        if mode not in ("replace", "add"):
            raise ValueError("mode is 'replace' or 'add'")
        self.fn = fn
        self.mode = mode

    def step(self, action: Any) -> TimeStep:
        ts = self.env.step(action)
        value = float(self.fn(list(self.env.history), ts))
        reward = value if self.mode == "replace" else float(ts.reward or 0.0) + value
        return ts.replace(reward=reward, info=dict(ts.info, env_reward=ts.reward))
