"""Replay: run a trajectory's actions again in a fresh environment and report the first step
whose observation diverges from the recorded one."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from trainer_core.envs.core import AgentEnv
from trainer_core.recording.schema import Trajectory
from trainer_core.tasks.model import Task


@dataclass
class Divergence:
    index: int
    tool: str
    expected: str
    actual: str

    @property
    def diff(self) -> str:
        return "\n".join(
            difflib.unified_diff(
                self.expected.splitlines(),
                self.actual.splitlines(),
                "recorded",
                "replayed",
                lineterm="",
            )
        )


@dataclass
class ReplayReport:
    steps_compared: int
    divergence: Divergence | None = None
    observations: list[str] = field(default_factory=list)

    @property
    def identical(self) -> bool:
        return self.divergence is None


def _normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def replay(
    trajectory: Trajectory, *, task: Task | dict | str | None = None, env: AgentEnv | None = None
) -> ReplayReport:
    """Replay ``trajectory`` in ``env`` (default: a fresh ``make(trajectory.environment)``),
    reset with ``task`` (default: the trajectory's prompt). Stops at the first divergence."""
    own_env = env is None
    if env is None:
        from trainer_core.envs.registry import make

        env = make(trajectory.environment, wrappers=False)
    try:
        env.reset(
            task=task if task is not None else trajectory.task.prompt,
            seed=trajectory.metadata.get("seed"),
        )
        report = ReplayReport(steps_compared=0)
        for step in trajectory.steps:
            if step.kind == "message":  # a dialogue turn: no action to replay
                continue
            action = {"tool": step.tool, "params": step.params}
            ts = env.step(action)
            report.observations.append(ts.observation)
            report.steps_compared += 1
            if _normalise(ts.observation) != _normalise(step.observation):
                report.divergence = Divergence(
                    step.index, step.tool, step.observation, ts.observation
                )
                break
            if ts.done:
                break
        return report
    finally:
        if own_env:
            env.close()
