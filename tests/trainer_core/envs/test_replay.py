"""Replay a recorded trajectory in a fresh sandbox and find the first divergent step."""

from __future__ import annotations

from tests.trainer_core.envs.test_coding_env import TASK
from tests.trainer_core.sandboxes import require_isolation
from trainer_core.envs import make
from trainer_core.envs.replay import replay
from trainer_core.envs.wrappers import Recorder


def _record(actions):
    env = Recorder(make("steplab/sandbox"))
    try:
        env.reset(task=TASK)
        for action in actions:
            if env.step(action).done:
                break
        return env.trajectory
    finally:
        env.close()


def test_a_faithful_replay_is_identical_and_a_changed_repo_diverges_at_the_right_step():
    require_isolation()
    reference = [a for a in TASK["reference_solution"] if a["tool"] != "submit"]
    traj = _record(reference)
    report = replay(traj, task=TASK)
    assert report.identical, report.divergence and report.divergence.diff
    assert report.steps_compared == 3

    changed = dict(
        TASK,
        files={"mathy.py": TASK["files"]["mathy.py"].replace("return lo", "return lo  # floor")},
    )
    report = replay(traj, task=changed)
    assert not report.identical
    assert report.divergence.index == 0 and report.divergence.tool == "read_file"
    assert "# floor" in report.divergence.diff


def test_replay_of_an_arithmetic_episode():
    env = Recorder(make("steplab/arithmetic"))
    env.reset(seed=5)
    for call in env.task.reference_solution:
        env.step(call.model_dump())
    traj = env.trajectory
    task = env.task
    assert replay(traj, task=task).identical
    traj.steps[0].observation = "something else"
    assert replay(traj, task=task).divergence.index == 0
