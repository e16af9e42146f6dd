"""The built-in coding suite: small Python repositories with one bug or missing piece each.

Every task is a tiny repository (a package and a module or two) described by an issue report.
Hidden ``unittest`` tests (``metadata["hidden_files"]``) are written into the workspace when the
agent submits and run with ``python3 -m unittest -q`` inside the sandbox (standard library
only), so a half-right fix earns partial credit (passed / (passed + failed)).

Each task also carries:

* ``reference_solution``: read the file, edit it, try the fix with ``bash``, submit;
* ``metadata["kind"]``: the kind of problem (``off_by_one``, ``wrong_condition``,
  ``missing_edge_case``, ``wrong_api_use``, ``missing_feature``, ``refactor_keep_behaviour``,
  ``mutable_default``);
* ``metadata["wrong_patch"]``: tool calls (as dicts) applying a plausible but wrong fix, which
  fails at least one hidden test: a negative example for checking rewards and checkers.

Everything here is fixed text: no randomness, no network, no third-party packages.
"""

from __future__ import annotations

from collections.abc import Callable

from trainer_core.tasks.model import Task
from trainer_core.tasks.suites import TaskSuite
from trainer_core.tasks.suites.coding import (
    missing_edge_case,
    missing_feature,
    mutable_default,
    off_by_one,
    refactor_keep_behaviour,
    wrong_api_use,
    wrong_condition,
)
from trainer_core.tasks.suites.coding.common import ENVIRONMENT

BUILDERS: tuple[Callable[[], Task], ...] = (
    *off_by_one.BUILDERS,
    *wrong_condition.BUILDERS,
    *missing_edge_case.BUILDERS,
    *wrong_api_use.BUILDERS,
    *missing_feature.BUILDERS,
    *refactor_keep_behaviour.BUILDERS,
    *mutable_default.BUILDERS,
)


def coding_tasks() -> list[Task]:
    """Every task of the coding suite, built fresh (same content every time)."""
    return [build() for build in BUILDERS]


def coding_suite() -> TaskSuite:
    return TaskSuite(
        "coding",
        "coding",
        ENVIRONMENT,
        "Small Python repositories with a bug, a missing feature or a refactoring to do, described "
        "as issue reports; hidden unittest tests run at submit and give partial credit.",
        coding_tasks(),
    )
