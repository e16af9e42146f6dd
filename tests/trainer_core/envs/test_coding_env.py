"""A scripted episode on a coding task through make() + wrappers + recorder."""

from __future__ import annotations

import pytest

from tests.trainer_core.sandboxes import require_isolation
from trainer_core.envs import make
from trainer_core.envs.wrappers import EpisodeStatistics, Recorder
from trainer_core.recording.schema import Trajectory

HIDDEN_TESTS = """import unittest
from mathy import clamp


class ClampTest(unittest.TestCase):
    def test_inside(self):
        self.assertEqual(clamp(5, 0, 10), 5)

    def test_below(self):
        self.assertEqual(clamp(-3, 0, 10), 0)

    def test_above(self):
        self.assertEqual(clamp(12, 0, 10), 10)

    def test_upper_edge(self):
        self.assertEqual(clamp(10, 0, 10), 10)
"""

TASK = {
    "id": "clamp-upper",
    "prompt": "clamp(x, lo, hi) in mathy.py returns the wrong value above hi. Fix it.",
    "domain": "coding",
    "files": {
        "mathy.py": "def clamp(x, lo, hi):\n    if x < lo:\n        return lo\n    if x > hi:\n        return x\n    return x\n"
    },
    "test_command": "python3 -m unittest -q",
    "metadata": {"hidden_files": {"test_clamp.py": HIDDEN_TESTS}},
    "reference_solution": [
        {"tool": "read_file", "params": {"file_path": "mathy.py"}},
        {
            "tool": "edit_file",
            "params": {
                "file_path": "mathy.py",
                "old_string": "    if x > hi:\n        return x",
                "new_string": "    if x > hi:\n        return hi",
            },
        },
        {
            "tool": "bash",
            "params": {"command": "python3 -c 'from mathy import clamp; print(clamp(12, 0, 10))'"},
        },
        {"tool": "submit", "params": {}},
    ],
}


def _episode(actions):
    require_isolation()
    env = EpisodeStatistics(Recorder(make("steplab/sandbox"), agent="scripted"))
    try:
        env.reset(task=TASK)
        ts = None
        for action in actions:
            ts = env.step(action)
            if ts.done:
                break
        recorder = env.env
        return ts, recorder.trajectory
    finally:
        env.close()


def test_the_reference_solution_passes_and_the_trajectory_says_so():
    last, traj = _episode(TASK["reference_solution"])
    assert last.terminated and last.reward == 1.0, last.observation
    Trajectory.model_validate_json(traj.to_json())
    assert [s.tool for s in traj.steps] == ["read_file", "edit_file", "bash", "submit"]
    assert traj.steps[2].observation.startswith("10\n") and traj.steps[2].exit_code == 0
    assert traj.outcome.success is True
    assert traj.outcome.tests_passed == 4 and traj.outcome.tests_failed == 0
    assert traj.environment == "steplab/sandbox"
    assert last.info["episode"]["length"] == 4


def test_an_empty_submission_and_a_wrong_patch_fail_with_partial_credit():
    last, traj = _episode([{"tool": "submit", "params": {}}])
    assert last.reward < 1.0 and traj.outcome.success is False
    assert traj.outcome.tests_failed == 1 and traj.outcome.tests_passed == 3
    wrong = {
        "tool": "edit_file",
        "params": {
            "file_path": "mathy.py",
            "old_string": "    if x > hi:\n        return x",
            "new_string": "    if x >= hi:\n        return hi - 1",
        },
    }
    last, traj = _episode([wrong, {"tool": "submit", "params": {}}])
    assert traj.outcome.success is False and last.reward < 1.0


def test_the_hidden_tests_are_not_in_the_workspace_before_submit():
    last, traj = _episode(
        [
            {"tool": "list_dir", "params": {}},
            {"tool": "Read", "params": {"file_path": "test_clamp.py"}},
        ]
    )
    assert "test_clamp.py" not in traj.steps[0].observation
    assert traj.steps[1].tool == "read_file", "aliases resolve to the canonical tool"
    assert traj.steps[1].error is not None


def test_a_bad_tool_call_is_an_observation():
    last, traj = _episode(
        [
            {"tool": "edit_file", "params": {"file_path": "mathy.py"}},
            {"tool": "bash", "params": {"command": "exit 3"}},
        ]
    )
    assert "missing 'old_string', 'new_string'" in traj.steps[0].observation
    assert traj.steps[1].exit_code == 3


@pytest.mark.parametrize("backend", ["nope"])
def test_unknown_backend_is_a_config_error(backend):
    from trainer_core.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown sandbox backend"):
        make("steplab/sandbox", backend=backend)
