"""Regressions of the rule layer found on real agent logs: ids reused from earlier observations
count as information use (tau-bench's ``book_reservation`` reusing flight HAT136), and a failed
tool call scores below the same call succeeding — whatever the log's shape says about the
failure, and on every combination of rubrics a step total can be made of."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from trainer_core.recording.importers import import_path
from trainer_core.recording.schema import Step, TaskRef, Trajectory
from trainer_core.rewards.rubrics import Rubric, rubric_set
from trainer_core.rewards.scoring import RewardConfig, score_trajectory

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "agent-logs"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "agent_logs"
TAU_REAL = SHARED / "tau-bench_airline_slice.json"
TAU_FIXTURE = FIXTURES / "tau_bench_hat136.json"


def _tau_log() -> Path:
    """The real tau-bench slice when the shared data is on this machine, else the fixture that
    copies its HAT136 episode."""
    return TAU_REAL if TAU_REAL.exists() else TAU_FIXTURE


def _bookings(path: Path) -> list[tuple[Trajectory, int]]:
    (result,) = list(import_path(path))
    trajectory = result.trajectories[0]
    return [(trajectory, s.index) for s in trajectory.steps if s.tool == "book_reservation"]


# --- HAT136 --------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", [_tau_log(), TAU_FIXTURE], ids=["shared-or-fixture", "fixture"])
def test_hat136_reuse_counts_as_information_use(path):
    bookings = _bookings(path)
    assert len(bookings) == 2
    trajectory = bookings[0][0]
    first = trajectory.steps[bookings[0][1]]
    assert first.params["flights"][0]["flight_number"] == "HAT136"  # nested in a list of dicts
    config = RewardConfig.for_profile("conversation")
    scored = {s.index: s for s in score_trajectory(trajectory, config).steps}
    for _, index in bookings:
        info = scored[index].rubrics["info_utilization"]
        assert "uses no path or identifier" not in info.rationale
    # the second booking succeeds: it used what it saw, nothing lowers it
    second = scored[bookings[1][1]]
    assert second.rubrics["info_utilization"].value == 1.0
    assert second.total == pytest.approx(1.0)


def test_hat136_counts_from_the_observation_alone():
    """Without the user's turns or the prompt: the flight number of the search result, nested in
    the booking's ``flights`` list, is what the booking uses."""
    search = Step(
        index=0,
        tool="search_onestop_flight",
        params={"origin": "JFK", "destination": "SEA"},
        observation='[[{"flight_number": "HAT136", "origin": "JFK", "destination": "ATL"}]]',
    )
    booking = Step(
        index=1,
        tool="book_reservation",
        params={"cabin": "economy", "flights": [{"flight_number": "HAT136", "date": "x"}]},
        observation='{"reservation_id": "HATHAT"}',
    )
    trajectory = Trajectory(steps=[search, booking])
    scored = score_trajectory(trajectory, RewardConfig.for_profile("conversation"))
    assert scored.steps[1].rubrics["info_utilization"].value == 1.0
    other = booking.model_copy(update={"params": {"flights": [{"flight_number": "XYZ999"}]}})
    scored = score_trajectory(
        Trajectory(steps=[search, other]), RewardConfig.for_profile("conversation")
    )
    assert scored.steps[1].rubrics["info_utilization"].value == 0.7


def test_failing_bookings_of_the_real_log_score_below_the_one_that_worked():
    trajectory, _ = _bookings(_tau_log())[0]
    scored = score_trajectory(trajectory, RewardConfig.for_profile("conversation"))
    totals = {s.index: s.total for s in scored.steps}
    failed, worked = (index for _, index in _bookings(_tau_log()))
    assert trajectory.steps[failed].observation.startswith("Error: payment amount")
    assert totals[failed] < totals[worked]
    assert totals[failed] <= 0.5
    rationale = {s.index: s for s in scored.steps}[failed].rubrics["non_redundancy"].rationale
    assert "reports an error" in rationale


# --- a failed call scores below the same call succeeding ----------------------------------------

RULE_RUBRICS = ("info_utilization", "non_redundancy", "tool_success")


def _combinations():
    """Every non-empty set of the rule rubrics (weights 1 and 0.3), and every built-in rubric
    set (the model rubrics unscored without a judge)."""
    for size in range(1, len(RULE_RUBRICS) + 1):
        for chosen in itertools.combinations(RULE_RUBRICS, size):
            for weight in (1.0, 0.3):
                yield (
                    "+".join(chosen) + f"@{weight}",
                    [Rubric(r, "", "rule", weight) for r in chosen],
                )
    for name in ("coding", "conversation", "engineering", "advisory", "discussion"):
        yield name, rubric_set(name)


COMBINATIONS = list(_combinations())


def _total(step: Step, rubrics: list[Rubric], before: list[Step] | None = None) -> float:
    steps = [*(before or []), step.model_copy(update={"index": len(before or [])})]
    trajectory = Trajectory(task=TaskRef(prompt="Fix notes.txt."), steps=steps)
    config = RewardConfig(rubrics=rubrics, profile="coding")
    return score_trajectory(trajectory, config).steps[-1].total


CAT_OK = Step(index=0, tool="bash", params={"command": "cat notes.txt"}, observation="hello")


@pytest.mark.parametrize(("name", "rubrics"), COMBINATIONS, ids=[c[0] for c in COMBINATIONS])
def test_cat_with_exit_1_scores_below_the_same_cat_with_exit_0(name, rubrics):
    ok = CAT_OK.model_copy(update={"exit_code": 0})
    failed = CAT_OK.model_copy(update={"exit_code": 1})
    assert _total(failed, rubrics) < _total(ok, rubrics)
    # later in a trajectory too, after a read that showed the file's name
    before = [Step(index=0, tool="list_dir", params={"path": "."}, observation="notes.txt")]
    assert _total(failed, rubrics, before) < _total(ok, rubrics, before)


#: a failed call as each importer's logs show it, and the same call succeeding
FAILURE_SHAPES = [
    pytest.param({"exit_code": 1}, {"exit_code": 0}, id="exit-code"),
    pytest.param({"exit_code": 127}, {}, id="exit-code-127"),
    pytest.param({"error": "tool_error"}, {}, id="error-field-anthropic-openai"),
    pytest.param({"error": "nonzero_exit", "exit_code": 2}, {"exit_code": 0}, id="steplab-env"),
    pytest.param(
        {"observation": "Error: payment amount does not add up, total price is 305, but paid 255"},
        {"observation": '{"reservation_id": "HATHAT"}'},
        id="tau-bench-error-text",
    ),
    pytest.param(
        {"observation": "cat: notes.txt: No such file or directory"},
        {"observation": "hello"},
        id="no-such-file",
    ),
    pytest.param(
        {"observation": "bash: catt: command not found"}, {"observation": "hello"}, id="not-found"
    ),
    pytest.param(
        {"observation": 'Traceback (most recent call last):\n  File "x.py"\nKeyError: 1'},
        {"observation": "done"},
        id="traceback",
    ),
    pytest.param(
        {"observation": "reading...\nValueError: bad notes"},
        {"observation": "reading...\ndone"},
        id="exception-last-line",
    ),
    pytest.param(
        {"observation": "Your proposed edit has introduced new syntax error(s). Please read"},
        {"observation": "Text replaced. Please review the changes."},
        id="swe-agent-syntax-error",
    ),
    pytest.param(
        {"observation": "[No exact match found in /workspace/src/App.tsx for\n```"},
        {"observation": "[File: /workspace/src/App.tsx (113 lines total after edit)]"},
        id="openhands-no-match",
    ),
    pytest.param(
        {"observation": "some output\n[Command finished with exit code 1]"},
        {"observation": "some output\n[Command finished with exit code 0]"},
        id="printed-exit-code",
    ),
    pytest.param(
        {"observation": "FAILED test_notes.py::test_x\n=== 1 failed, 2 passed in 0.1s ==="},
        {"observation": "=== 3 passed in 0.1s ==="},
        id="tests-failed",
    ),
]


@pytest.mark.parametrize(("failed", "worked"), FAILURE_SHAPES)
def test_every_shape_of_failure_scores_below_success(failed, worked):
    rubrics = rubric_set("coding")
    assert _total(CAT_OK.model_copy(update=failed), rubrics) < _total(
        CAT_OK.model_copy(update=worked), rubrics
    )


def test_an_explicit_exit_code_0_wins_over_error_words_and_grep_without_matches_did_not_fail():
    rubrics = rubric_set("coding")
    log = CAT_OK.model_copy(update={"observation": "Error: disk full at 03:00", "exit_code": 0})
    assert _total(log, rubrics) == pytest.approx(1.0)
    grep = Step(index=0, tool="grep", params={"pattern": "x"}, observation="", exit_code=1)
    assert _total(grep, rubrics) == pytest.approx(1.0)
    assert _total(grep.model_copy(update={"exit_code": 2}), rubrics) == pytest.approx(0.5)


def test_a_submit_whose_hidden_tests_fail_is_not_a_failed_call():
    """A coding submit carries the hidden tests' exit code: that is the outcome's business."""
    submit = Step(
        index=0, tool="submit", params={}, observation="Submitted. tests: 1 passed, 2 failed."
    )
    assert _total(submit.model_copy(update={"exit_code": 1}), rubric_set("coding")) == 1.0
