"""Wrappers that change when an episode ends and what it reports: MaxSteps, Timeout,
EpisodeStatistics."""

from __future__ import annotations

import signal
import threading
import time
from collections import deque
from typing import Any

from trainer_core.envs.core import AgentEnv, TimeStep
from trainer_core.envs.wrappers.base import Wrapper


class MaxSteps(Wrapper):
    """Truncate the episode after ``max_steps`` steps."""

    def __init__(self, env: AgentEnv, max_steps: int):
        super().__init__(env)
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.max_steps = max_steps
        self._count = 0

    def reset(self, *, task=None, seed=None) -> TimeStep:
        self._count = 0
        return self.env.reset(task=task, seed=seed)

    def step(self, action: Any) -> TimeStep:
        ts = self.env.step(action)
        self._count += 1
        if self._count >= self.max_steps and not ts.done:
            info = dict(ts.info, truncated_reason="max_steps")
            ts = ts.replace(
                truncated=True,
                info=info,
                observation=ts.observation
                + f"\n[episode truncated: reached the limit of {self.max_steps} steps]",
            )
        return ts


class StepTimeout(Exception):
    """Raised inside a step that ran past its budget (main thread, SIGALRM)."""


class Timeout(Wrapper):
    """A step that runs past ``step_seconds`` is interrupted and the episode truncated; so is
    one that starts after the episode used ``episode_seconds``.

    In the main thread the step is interrupted with SIGALRM (a ``time.sleep`` or a long Python
    loop really stops) and ``env.interrupt()`` kills whatever the env runs (sandbox processes).
    In other threads the step runs in a helper thread; at the deadline ``env.interrupt()`` is
    called and the episode is truncated without waiting for the step to return.
    """

    def __init__(
        self, env: AgentEnv, step_seconds: float | None = None, episode_seconds: float | None = None
    ):
        super().__init__(env)
        self.step_seconds = step_seconds
        self.episode_seconds = episode_seconds
        self._episode_start = time.monotonic()

    def reset(self, *, task=None, seed=None) -> TimeStep:
        self._episode_start = time.monotonic()
        return self.env.reset(task=task, seed=seed)

    def _budget(self) -> float | None:
        budgets = []
        if self.step_seconds is not None:
            budgets.append(self.step_seconds)
        if self.episode_seconds is not None:
            budgets.append(self.episode_seconds - (time.monotonic() - self._episode_start))
        return min(budgets) if budgets else None

    def _timed_out(self, budget: float, why: str) -> TimeStep:
        return TimeStep(
            observation=f"[step interrupted: {why} ({budget:.1f}s); the episode is truncated]",
            truncated=True,
            info={"timeout": True, "truncated_reason": why, "error": "timeout"},
        )

    def step(self, action: Any) -> TimeStep:
        budget = self._budget()
        if budget is None:
            return self.env.step(action)
        why = (
            "the episode's time budget ran out"
            if (self.episode_seconds is not None and budget < (self.step_seconds or float("inf")))
            else "the step ran past its time budget"
        )
        if budget <= 0:
            return self._timed_out(0.0, why)
        if threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer"):
            return self._step_with_alarm(action, budget, why)
        return self._step_in_thread(action, budget, why)

    def _step_with_alarm(self, action: Any, budget: float, why: str) -> TimeStep:
        def on_alarm(signum, frame):
            raise StepTimeout

        previous = signal.signal(signal.SIGALRM, on_alarm)
        signal.setitimer(signal.ITIMER_REAL, budget)
        try:
            return self.env.step(action)
        except StepTimeout:
            self.env.interrupt()
            return self._timed_out(budget, why)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)

    def _step_in_thread(self, action: Any, budget: float, why: str) -> TimeStep:
        box: dict[str, Any] = {}

        def run() -> None:
            try:
                box["ts"] = self.env.step(action)
            except BaseException as exc:  # re-raised in the caller's thread
                box["exc"] = exc

        worker = threading.Thread(target=run, name="env-step", daemon=True)
        worker.start()
        worker.join(budget)
        if worker.is_alive():
            self.env.interrupt()
            return self._timed_out(budget, why)
        if "exc" in box:
            raise box["exc"]
        return box["ts"]


class EpisodeStatistics(Wrapper):
    """Adds ``info["episode"] = {"return", "length", "time"}`` to the last step of an episode,
    and keeps the last ``deque_size`` episodes' figures."""

    def __init__(self, env: AgentEnv, deque_size: int = 100):
        super().__init__(env)
        self.returns: deque[float] = deque(maxlen=deque_size)
        self.lengths: deque[int] = deque(maxlen=deque_size)
        self._return = 0.0
        self._length = 0
        self._start = time.monotonic()

    def reset(self, *, task=None, seed=None) -> TimeStep:
        self._return, self._length, self._start = 0.0, 0, time.monotonic()
        return self.env.reset(task=task, seed=seed)

    def step(self, action: Any) -> TimeStep:
        ts = self.env.step(action)
        self._return += float(ts.reward or 0.0)
        self._length += 1
        if ts.done:
            stats = {
                "return": self._return,
                "length": self._length,
                "time": round(time.monotonic() - self._start, 6),
            }
            self.returns.append(self._return)
            self.lengths.append(self._length)
            ts = ts.replace(info=dict(ts.info, episode=stats))
        return ts
