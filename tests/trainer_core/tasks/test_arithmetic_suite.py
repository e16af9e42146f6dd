"""The arithmetic task generator (trainer_core.tasks.suites.arithmetic): its answers agree with
the environment's calculator, and it stays below the environments' layer."""

from __future__ import annotations

import subprocess
import sys

import pytest

from trainer_core.envs.arithmetic import evaluate
from trainer_core.tasks.suites.arithmetic import (
    arithmetic_tasks,
    expression_value,
    format_number,
)


@pytest.mark.parametrize("split", ["train", "heldout", "train_wide"])
def test_every_expected_answer_is_what_the_calculator_computes(split):
    for task in arithmetic_tasks(split, n=2000):
        expression = task.metadata["expression"]
        assert task.expected_answer == evaluate(expression), (task.id, expression)
        assert task.reference_solution[-1].params["answer"] == format_number(evaluate(expression))


def test_expression_value_binds_multiplication_tighter():
    assert expression_value([2, 3, 4], ["+", "*"]) == 14
    assert expression_value([2, 3, 4], ["*", "-"]) == 2
    assert expression_value([2, 3, 4], ["-", "*"]) == -10
    assert expression_value([7, 5], ["-"]) == 2


def test_format_number_shows_integers_plainly_and_floats_to_ten_digits():
    assert format_number(42) == "42"
    assert format_number(1 / 3) == "0.3333333333"


def test_the_generator_and_the_builtin_suites_do_not_import_the_environments():
    code = (
        "import sys\n"
        "from trainer_core.tasks.suites import builtin_suites\n"
        "builtin_suites()\n"
        "loaded = sorted(m for m in sys.modules if m.startswith('trainer_core.envs'))\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
