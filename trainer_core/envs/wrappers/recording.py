"""The recorder: turns each episode into the canonical trajectory (trainer_core.recording)."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from trainer_core.envs.core import AgentEnv, TimeStep, parse_action
from trainer_core.envs.wrappers.base import Wrapper
from trainer_core.recording.dialogue import action_steps, message_step, reported_messages
from trainer_core.recording.schema import Outcome, Step, TaskRef, Trajectory

_OUTCOME_FIELDS = ("success", "score", "tests_passed", "tests_failed", "partial_credit", "metadata")


class Recorder(Wrapper):
    """Records every step. ``trajectory`` is the episode in progress (or just finished);
    ``trajectories`` keeps finished ones; ``on_episode(trajectory)`` is called when one ends.

    An env reports details through ``TimeStep.info``: ``exit_code``, ``error``, ``tool`` (the
    canonical name after aliases), ``messages`` (dialogue turns, recorded as message steps:
    :mod:`trainer_core.recording.dialogue`), and on the last step ``outcome`` (a dict of
    Outcome fields).
    """

    def __init__(
        self,
        env: AgentEnv,
        agent: str = "",
        model: str = "",
        policy: str = "",
        on_episode: Callable[[Trajectory], None] | None = None,
        keep: int = 100,
    ):
        super().__init__(env)
        self.agent = agent
        self.model = model
        self.policy = policy
        self.on_episode = on_episode
        self.keep = keep
        self.trajectory: Trajectory | None = None
        self.trajectories: list[Trajectory] = []
        self._episode_start = 0.0

    def reset(self, *, task=None, seed=None) -> TimeStep:
        ts = self.env.reset(task=task, seed=seed)
        current = self.env.task
        spec = self.env.spec
        self.trajectory = Trajectory(
            task=TaskRef(
                id=current.id if current else "",
                domain=(current.domain if current else self.env.domain) or self.env.domain,
                prompt=current.prompt if current else ts.observation,
                task_set=str((current.metadata or {}).get("task_set", "")) if current else "",
            ),
            agent=self.agent,
            model=self.model,
            policy=self.policy,
            environment=spec.id if spec else type(self.env.unwrapped).__name__,
            metadata={"seed": seed, "initial_observation": ts.observation},
        )
        started = datetime.now(UTC)
        for i, message in enumerate(reported_messages(ts.info)):
            self.trajectory.steps.append(message_step(i, message, started_at=started))
        self._episode_start = time.monotonic()
        return ts

    def step(self, action: Any) -> TimeStep:
        if self.trajectory is None:
            raise RuntimeError("call reset() before step()")
        started = datetime.now(UTC)
        t0 = time.monotonic()
        ts = self.env.step(action)
        duration = time.monotonic() - t0
        parsed = parse_action(action)
        if isinstance(parsed, str):
            tool, params, thought = "invalid_action", {"raw": repr(action)[:2000]}, ""
        else:
            tool, params, thought = (
                str(ts.info.get("tool", parsed.tool)),
                dict(parsed.params),
                parsed.thought or "",
            )
        step = Step(
            index=len(self.trajectory.steps),
            thought=thought,
            tool=tool,
            params=params,
            observation=ts.observation,
            exit_code=ts.info.get("exit_code"),
            error=ts.info.get("error"),
            started_at=started,
            duration=round(float(ts.info.get("duration", duration)), 6),
            reward=ts.reward,
        )
        messages = reported_messages(ts.info) if not isinstance(parsed, str) else []
        self.trajectory.steps.extend(action_steps(step, messages))
        self.trajectory.usage.duration = round(time.monotonic() - self._episode_start, 6)
        if ts.done:
            self._finish(ts)
        return ts

    def _finish(self, ts: TimeStep) -> None:
        assert self.trajectory is not None
        outcome = dict(ts.info.get("outcome") or {})
        fields = {k: outcome[k] for k in _OUTCOME_FIELDS if k in outcome and outcome[k] is not None}
        extra = {k: v for k, v in outcome.items() if k not in _OUTCOME_FIELDS}
        if extra:
            fields["metadata"] = {**fields.get("metadata", {}), **extra}
        self.trajectory.outcome = Outcome(
            terminated=ts.terminated, truncated=ts.truncated, **fields
        )
        if "truncated_reason" in ts.info:
            self.trajectory.metadata["truncated_reason"] = ts.info["truncated_reason"]
        self.trajectories.append(self.trajectory)
        del self.trajectories[: -self.keep]
        if self.on_episode is not None:
            self.on_episode(self.trajectory)
