"""The built-in coding suite: its shape, and every task played through the sandbox env with its
reference solution (passes), an empty submission (fails with partial credit) and its wrong patch
(fails)."""

from __future__ import annotations

import ast
import importlib
from collections import Counter

import pytest

from tests.trainer_core.sandboxes import require_isolation
from trainer_core.envs import make
from trainer_core.envs.wrappers import Recorder
from trainer_core.tasks.files import dump_tasks_jsonl, load_tasks
from trainer_core.tasks.model import Task, ToolCall
from trainer_core.tasks.suites import builtin_suites
from trainer_core.tasks.suites.coding import coding_suite

SUITE = coding_suite()
TASKS = SUITE.tasks
SUBMIT = {"tool": "submit", "params": {}}


def _play(task: Task, actions: list, *, record: bool = False):
    """Run ``actions`` on a fresh sandbox env; (time steps, trajectory or None)."""
    require_isolation()
    env = make("steplab/sandbox")
    if record:
        env = Recorder(env, agent="reference")
    steps = []
    try:
        env.reset(task=task)
        for action in actions:
            ts = env.step(action)
            steps.append(ts)
            if ts.done:
                break
        trajectory = env.trajectory if record else None
    finally:
        env.close()
    return steps, trajectory


def _tool_errors(steps) -> list[str]:
    return [
        f"{ts.info.get('tool')}: {ts.info.get('error')}: {ts.observation[:300]}"
        for ts in steps[:-1]
        if ts.info.get("error") is not None
    ]


# --- structure (no sandbox) -----------------------------------------------------------------


def test_the_suite_is_registered_as_a_builtin():
    suite = builtin_suites()["coding"]
    assert (suite.name, suite.domain, suite.environment) == ("coding", "coding", "steplab/sandbox")
    assert suite.description
    assert [task.id for task in suite.tasks] == [task.id for task in TASKS]


def test_enough_tasks_with_unique_ids_and_kinds():
    assert len(TASKS) >= 32
    ids = [task.id for task in TASKS]
    assert len(set(ids)) == len(ids)
    kinds = Counter(task.metadata["kind"] for task in TASKS)
    assert sum(1 for count in kinds.values() if count >= 4) >= 6, kinds
    for kind in (
        "off_by_one",
        "wrong_condition",
        "missing_edge_case",
        "wrong_api_use",
        "missing_feature",
        "refactor_keep_behaviour",
    ):
        assert kinds[kind] >= 4, kind
    for task in TASKS:
        assert task.id.startswith(f"coding-{task.metadata['kind'].replace('_', '-')}-")
        assert task.metadata["task_set"] == "coding"


def test_the_suite_is_deterministic():
    assert coding_suite().tasks == TASKS


def test_a_task_never_shares_its_files_with_the_next_build():
    # the task modules keep files and hidden tests as module constants: editing one built task
    # must not change the tasks built afterwards
    first = coding_suite().tasks[0]
    first.files.clear()
    first.metadata["hidden_files"].clear()
    assert coding_suite().tasks == TASKS


def test_every_kind_module_builds_only_tasks_of_its_kind():
    from trainer_core.tasks.suites.coding import BUILDERS
    from trainer_core.tasks.suites.coding.common import KINDS

    assert [build().id for build in BUILDERS] == [task.id for task in TASKS]
    for kind in KINDS:
        module = importlib.import_module(f"trainer_core.tasks.suites.coding.{kind}")
        assert {build().metadata["kind"] for build in module.BUILDERS} == {kind}


@pytest.mark.parametrize("task", TASKS, ids=lambda task: task.id)
def test_task_shape(task: Task):
    assert Task.model_validate(task.model_dump()) == task
    assert task.domain == "coding" and task.environment == "steplab/sandbox"
    assert task.test_command == "python3 -m unittest -q"
    assert task.prompt.strip() and 1 <= len(task.files) <= 4

    reference = task.reference_solution
    assert len(reference) >= 3 and task.reference_steps == len(reference)
    assert any(call.tool == "edit_file" for call in reference)
    assert reference[-1].tool == "submit"

    wrong = [ToolCall.model_validate(call) for call in task.metadata["wrong_patch"]]
    assert wrong[-1].tool == "submit" and any(call.tool == "edit_file" for call in wrong)

    hidden = task.metadata["hidden_files"]
    assert hidden and not set(hidden) & set(task.files)
    for path, content in hidden.items():
        tree = ast.parse(content, filename=path)
        tests = [
            node
            for node in ast.walk(tree)
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")
        ]
        assert 3 <= len(tests) <= 8, (path, len(tests))
        assert "import unittest" in content and "pytest" not in content
    for path, content in task.files.items():
        if path.endswith(".py"):
            compile(content, path, "exec")


def test_the_tasks_round_trip_through_a_task_file():
    loaded = load_tasks(dump_tasks_jsonl(TASKS))
    assert loaded.tasks == TASKS
    assert loaded.domain == "coding"


# --- episodes in the sandbox ----------------------------------------------------------------


@pytest.mark.parametrize("task", TASKS, ids=lambda task: task.id)
def test_the_reference_solution_passes(task: Task):
    steps, trajectory = _play(task, task.reference_solution, record=True)
    assert not _tool_errors(steps), _tool_errors(steps)
    last = steps[-1]
    assert last.terminated and last.reward == 1.0, last.observation
    outcome = last.info["outcome"]
    assert outcome["success"] is True and outcome["tests_failed"] == 0
    assert outcome["tests_passed"] >= 3
    assert trajectory.outcome.success is True
    assert [step.tool for step in trajectory.steps] == [
        call.tool for call in task.reference_solution
    ]
    assert trajectory.task.task_set == "coding"


@pytest.mark.parametrize("task", TASKS, ids=lambda task: task.id)
def test_an_empty_submission_fails_with_partial_credit(task: Task):
    steps, _ = _play(task, [SUBMIT])
    last = steps[-1]
    outcome = last.info["outcome"]
    assert outcome["success"] is False
    assert 0 <= last.reward < 1
    # every task in the suite is built so that the untouched code passes some hidden tests
    assert 0 < last.reward < 1, last.observation
    assert outcome["tests_passed"] > 0 and outcome["tests_failed"] > 0


@pytest.mark.parametrize("task", TASKS, ids=lambda task: task.id)
def test_the_wrong_patch_fails(task: Task):
    steps, _ = _play(task, task.metadata["wrong_patch"])
    assert not _tool_errors(steps), _tool_errors(steps)
    last = steps[-1]
    assert last.terminated and last.info["outcome"]["success"] is False
    assert last.reward < 1, last.observation
