"""The optional calibrate block of a pipeline iteration: where it goes in the plan, that configs
without it are stored as before, and errors that name the field."""

from __future__ import annotations

import pytest

from webapp.common.errors import ApplicationError
from webapp.evaluation.pipeline_config import ITERATION_STAGES, parse_config, plan

TWO_ITERATIONS = """
baseline: false
iterations:
- collect: {policy: scripted}
  calibrate: {error_rate: 0.1, trajectories: 20, seed: 3}
  dataset: {kind: grpo}
  train: {method: grpo}
- collect: {policy: current}
"""


def test_calibrate_runs_after_score_only_where_it_is_configured():
    config = parse_config(TWO_ITERATIONS)
    first, second = config.iterations
    assert first.calibrate.annotator == "simulated" and first.calibrate.error_rate == 0.1
    assert first.calibrate.trajectories == 20 and first.calibrate.max_steps == 50
    assert second.calibrate is None
    assert plan(config) == [
        (1, "collect"),
        (1, "score"),
        (1, "calibrate"),
        (1, "dataset"),
        (1, "train"),
        (1, "register"),
        (1, "evaluate"),
        *[(2, name) for name in ITERATION_STAGES],
    ]


def test_a_config_without_calibrate_is_stored_as_before():
    dumped = parse_config(TWO_ITERATIONS).model_dump(mode="json")
    assert "calibrate" in dumped["iterations"][0]
    assert "calibrate" not in dumped["iterations"][1]  # no "calibrate: null"
    assert parse_config(dumped) == parse_config(TWO_ITERATIONS)  # stored configs load back


@pytest.mark.parametrize(
    ("block", "message"),
    [
        ("{annotator: human}", r"iterations\.0\.calibrate\.annotator: Input should be 'simulated'"),
        ("{error_rate: 1.5}", r"iterations\.0\.calibrate\.error_rate: .*less than or equal to 1"),
        ("{error_rate: -0.1}", r"iterations\.0\.calibrate\.error_rate: .*greater than or equal"),
        ("{trajectories: 0}", r"iterations\.0\.calibrate\.trajectories: .*greater than or equal"),
        ("{trajectories: 100000}", r"iterations\.0\.calibrate\.trajectories: .*less than or"),
        ("{max_steps: 0}", r"iterations\.0\.calibrate\.max_steps"),
        ("{folds: 1}", r"iterations\.0\.calibrate\.folds"),
        ("{error: 0.1}", r"iterations\.0\.calibrate\.error: Extra inputs are not permitted"),
        ("simulated", r"iterations\.0\.calibrate: "),
    ],
)
def test_calibrate_errors_name_the_field(block, message):
    with pytest.raises(ApplicationError, match=message):
        parse_config(f"iterations:\n- calibrate: {block}\n")
