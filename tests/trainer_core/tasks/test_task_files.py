"""Task files: JSONL and YAML import, complete error reports, round trips, the documented examples."""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from trainer_core.errors import ConfigError, InputError
from trainer_core.tasks import checkers
from trainer_core.tasks.checkers import Outcome, check_outcome
from trainer_core.tasks.files import TaskFile, TaskFileError, dump_tasks_jsonl, load_tasks
from trainer_core.tasks.model import Task, ToolCall

REPO = Path(__file__).resolve().parents[3]

VALID_JSONL = textwrap.dedent(
    """\
    # arithmetic
    {"id": "a1", "prompt": "What is 2 + 2?", "domain": "arithmetic", "expected_answer": 4}

    {"id": "a2", "prompt": "What is 1/2 + 1/4?", "domain": "arithmetic", "expected_answer": "3/4", "checker": "number", "answer_schema": "answer_tag"}
    {"id": "a3", "prompt": "Say hi", "domain": "arithmetic", "expected_answer": ["hi", "hello"], "checker": "any_of", "reference_solution": [{"tool": "submit", "params": {"answer": "hi"}, "thought": "easy"}]}
    """
)

VALID_YAML = textwrap.dedent(
    """\
    task_set:
      name: bugfix
      description: Fix small bugs.
      domain: coding
    tasks:
      - id: c1
        prompt: Fix add() so the tests pass.
        files:
          calc.py: |
            def add(a, b):
                return a - b
        setup:
          - pip install pytest
        test_command: python -m pytest -q
        reference_solution:
          - tool: read_file
            params: {file_path: calc.py}
          - tool: edit_file
            params: {file_path: calc.py, old_string: a - b, new_string: a + b}
            thought: The operator is wrong.
          - tool: bash
            params: {command: python -m pytest -q}
      - id: c2
        prompt: Explain the bug.
        domain: conversation
        expected_answer: subtraction
        checker: contains
    """
)


def _problems(text: str, **kwargs) -> list[tuple[int | None, str, str]]:
    with pytest.raises(TaskFileError) as info:
        load_tasks(text, **kwargs)
    return [tuple(p) for p in info.value.problems]


def _lines_fields(text: str, **kwargs) -> list[tuple[int | None, str]]:
    return [(line, field) for line, field, _ in _problems(text, **kwargs)]


# --------------------------------------------------------------------------------------------
# valid files
# --------------------------------------------------------------------------------------------


def test_valid_jsonl_text():
    task_file = load_tasks(VALID_JSONL)
    assert isinstance(task_file, TaskFile)
    assert task_file.format == "jsonl"
    assert [t.id for t in task_file.tasks] == ["a1", "a2", "a3"]
    assert task_file.domain == "arithmetic"  # the tasks' common domain
    assert task_file.tasks[0].expected_answer == 4
    assert task_file.tasks[2].reference_solution == [
        ToolCall(tool="submit", params={"answer": "hi"}, thought="easy")
    ]
    assert len(task_file) == 3 and list(task_file) == task_file.tasks


def test_valid_jsonl_file(tmp_path):
    path = tmp_path / "arith-train.jsonl"
    path.write_text(VALID_JSONL, encoding="utf-8")
    for arg in (path, str(path)):
        task_file = load_tasks(arg)
        assert task_file.name == "arith-train"
        assert task_file.source == str(path)
        assert len(task_file.tasks) == 3


def test_valid_yaml_task_set(tmp_path):
    path = tmp_path / "bugs.yml"
    path.write_text(VALID_YAML, encoding="utf-8")
    task_file = load_tasks(path)
    assert task_file.format == "yaml"
    assert (task_file.name, task_file.description, task_file.domain) == (
        "bugfix",
        "Fix small bugs.",
        "coding",
    )
    first, second = task_file.tasks
    assert first.domain == "coding"  # inherited from the task set
    assert second.domain == "conversation"  # its own wins
    assert first.files["calc.py"].startswith("def add")
    assert first.setup == ["pip install pytest"]
    assert [c.tool for c in first.reference_solution] == ["read_file", "edit_file", "bash"]
    assert first.reference_solution[1].params["new_string"] == "a + b"


def test_valid_yaml_plain_list():
    task_file = load_tasks("- prompt: one\n- prompt: two\n  id: t2\n")
    assert [t.prompt for t in task_file.tasks] == ["one", "two"]
    assert task_file.name == ""


def test_json_document_and_jsonl_in_a_json_file(tmp_path):
    doc = {"task_set": {"name": "n"}, "tasks": [{"prompt": "a"}, {"prompt": "b"}]}
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc, indent=2), encoding="utf-8")
    assert [t.prompt for t in load_tasks(path).tasks] == ["a", "b"]
    path.write_text('{"prompt": "a"}\n{"prompt": "b"}\n', encoding="utf-8")
    assert [t.prompt for t in load_tasks(path).tasks] == ["a", "b"]
    path.write_text('{"prompt": "only"}\n', encoding="utf-8")
    assert [t.prompt for t in load_tasks(path).tasks] == ["only"]


def test_format_from_content_and_explicit_fmt():
    assert load_tasks('{"prompt": "x"}').format == "jsonl"
    assert load_tasks('[{"prompt": "x"}]').format == "json"
    assert load_tasks("tasks:\n  - prompt: x\n").format == "yaml"
    assert load_tasks('[{"prompt": "x"}]', fmt="yml").format == "yaml"  # JSON is YAML too
    assert _problems('{"prompt": "x"}', fmt="yaml")[0][2].startswith("this looks like a single")
    with pytest.raises(ConfigError, match="did you mean 'yaml'"):
        load_tasks("- prompt: x", fmt="yamll")


def test_missing_file():
    with pytest.raises(InputError, match="not found"):
        load_tasks("no/such/tasks.jsonl")


def test_unregistered_checker_becomes_valid_once_registered():
    text = '{"prompt": "x", "expected_answer": 3, "checker": "within_one"}'
    assert _lines_fields(text) == [(1, "checker")]

    def within_one(*, answer, task, run_result=None):
        return Outcome(success=abs(float(answer) - task.expected_answer) <= 1)

    checkers.register_checker("within_one", within_one)
    try:
        (task,) = load_tasks(text).tasks
        assert check_outcome(task, answer="4").success
    finally:
        checkers.unregister_checker("within_one")


# --------------------------------------------------------------------------------------------
# malformed JSONL: each kind names the line and the field
# --------------------------------------------------------------------------------------------

GOOD = '{"id": "ok", "prompt": "fine"}'


@pytest.mark.parametrize(
    ("bad_line", "field", "message"),
    [
        ('{"id": "x", "prompt": "p",}', "-", "invalid JSON"),
        ("not json at all", "-", "invalid JSON"),
        ('["a", "list"]', "-", "expected an object (a task), got a list"),
        ('"just a string"', "-", "expected an object (a task), got a string"),
        ('{"id": "x"}', "prompt", "Field required"),
        ('{"prompt": 42}', "prompt", "valid string"),
        ('{"prompt": "p", "setup": "pip install x"}', "setup", "valid list"),
        ('{"prompt": "p", "files": {"a.py": 1}}', "files.a.py", "valid string"),
        ('{"prompt": "p", "reference_steps": "many"}', "reference_steps", "valid integer"),
        ('{"prompt": "p", "colour": "red"}', "colour", "unknown field"),
        (
            '{"prompt": "p", "expected_anwser": 3}',
            "expected_anwser",
            "did you mean 'expected_answer'",
        ),
        ('{"prompt": "p", "reference_solution": ["bash ls"]}', "reference_solution.0", "tool call"),
        (
            '{"prompt": "p", "reference_solution": [{"params": {}}]}',
            "reference_solution.0.tool",
            "Field required",
        ),
        (
            '{"prompt": "p", "reference_solution": [{"tool": "bash", "params": "ls"}]}',
            "reference_solution.0.params",
            "valid dictionary",
        ),
        (
            '{"prompt": "p", "reference_solution": [{"tool": "bash", "args": {}}]}',
            "reference_solution.0.args",
            "unknown field in a tool call",
        ),
        ('{"prompt": "p", "reference_solution": {"tool": "bash"}}', "reference_solution", "list"),
        ('{"prompt": "p", "checker": "nubmer"}', "checker", "did you mean 'number'"),
        ('{"prompt": "p", "answer_schema": "boxd"}', "answer_schema", "did you mean 'boxed'"),
        ('{"prompt": "p", "prompt": "q"}', "prompt", "duplicate key"),
        (
            '{"prompt": "p", "checker": "number", "expected_answer": "x"}',
            "expected_answer",
            "not a number",
        ),
        ('{"prompt": "p", "checker": "any_of", "expected_answer": "x"}', "expected_answer", "list"),
        ('{"prompt": "p", "checker": "exact"}', "expected_answer", "Field required"),
        ('{"prompt": "p", "checker": "test_command"}', "test_command", "Field required"),
    ],
)
def test_each_kind_of_malformed_line(bad_line, field, message):
    text = f"{GOOD}\n# a comment\n{bad_line}\n"
    problems = _problems(text)
    assert len(problems) == 1, problems
    line, got_field, got_message = problems[0]
    assert (line, got_field) == (3, field)
    assert message in got_message


def test_error_message_lists_line_and_field():
    with pytest.raises(TaskFileError) as info:
        load_tasks(f'{GOOD}\n\n{{"id": "x"}}\n')
    assert "line 3, field 'prompt': Field required" in str(info.value)
    assert isinstance(info.value, InputError)


def test_all_problems_of_a_file_are_reported_together(tmp_path):
    text = "\n".join(
        [
            '{"id": "a", "prompt": "ok"}',  # 1
            '{"id": "b"}',  # 2: missing prompt
            "{broken",  # 3: invalid JSON
            '{"id": "c", "prompt": 1, "colour": 2}',  # 4: two problems
            "[]",  # 5: not an object
            '{"id": "a", "prompt": "again"}',  # 6: duplicate id
            '{"id": "d", "prompt": "ok"}',  # 7: fine
        ]
    )
    path = tmp_path / "mixed.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TaskFileError) as info:
        load_tasks(path)
    error = info.value
    assert [(p.line, p.field) for p in error.problems] == [
        (2, "prompt"),
        (3, "-"),
        (4, "prompt"),
        (4, "colour"),
        (5, "-"),
        (6, "id"),
    ]
    assert error.problems[-1].message == "duplicate id 'a' (first used on line 1)"
    message = str(error)
    assert message.startswith(f"{path}: 6 problems in the task file:")
    assert len(message.splitlines()) == 7


def test_error_pickles():
    import pickle

    with pytest.raises(TaskFileError) as info:
        load_tasks('{"id": "x"}\n', fmt="jsonl")
    copy = pickle.loads(pickle.dumps(info.value))
    assert copy.problems == info.value.problems
    assert str(copy) == str(info.value)


def test_duplicate_ids_jsonl_and_empty_ids_allowed():
    text = '{"id": "x", "prompt": "a"}\n{"id": "y", "prompt": "b"}\n{"id": "x", "prompt": "c"}\n'
    assert _problems(text) == [(3, "id", "duplicate id 'x' (first used on line 1)")]
    assert len(load_tasks('{"prompt": "a"}\n{"prompt": "b"}\n').tasks) == 2


def test_empty_file_is_an_error():
    assert _lines_fields("# only a comment\n\n", fmt="jsonl") == [(None, "-")]
    with pytest.raises(TaskFileError, match="file, field '-': the file holds no tasks"):
        load_tasks("", fmt="jsonl")


def test_not_utf8(tmp_path):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes('{"prompt": "caf\xe9"}\n'.encode("latin-1"))
    with pytest.raises(TaskFileError, match="UTF-8"):
        load_tasks(path)


# --------------------------------------------------------------------------------------------
# malformed YAML: the line of the item
# --------------------------------------------------------------------------------------------


def test_yaml_problems_carry_the_item_line():
    text = textwrap.dedent(
        """\
        task_set:
          name: s
          colour: blue
        tasks:
          - id: a
            prompt: fine
          - id: b
            prompt: 5
            colour: red
          - id: a
            prompt: again
            prompt: twice
          - just a string
          - id: e
            prompt: x
            reference_solution:
              - bash ls
            checker: exactt
        """
    )
    assert _lines_fields(text) == [
        (3, "task_set.colour"),
        (7, "prompt"),
        (7, "colour"),
        (10, "prompt"),  # duplicate key
        (10, "id"),  # duplicate id
        (13, "-"),
        (14, "checker"),
        (14, "reference_solution.0"),
    ]


def test_yaml_syntax_error_has_a_line():
    ((line, field, message),) = _problems("tasks:\n  - prompt: ok\n  - prompt: [unclosed\n")
    assert field == "-" and message.startswith("invalid YAML")
    assert line in (3, 4)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("prompt: a single task\n", [(1, "-")]),
        ("tasks: not a list\n", [(1, "tasks")]),
        ("task_set: {name: x}\n", [(1, "tasks")]),
        ("task_set: {name: x}\ntasks: [{prompt: a}]\nextra: 1\n", [(3, "extra")]),
        ("just a string\n", [(1, "-")]),
    ],
)
def test_yaml_document_shape(text, expected):
    assert _lines_fields(text, fmt="yaml") == expected


def test_yaml_unknown_top_level_key_suggests():
    problems = _problems("task_set: {name: x}\ntask: [{prompt: a}]\n", fmt="yaml")
    assert [(line, field) for line, field, _ in problems] == [(1, "tasks"), (2, "task")]
    assert "did you mean 'tasks'" in problems[1][2]


# --------------------------------------------------------------------------------------------
# round trip
# --------------------------------------------------------------------------------------------


def test_round_trip_jsonl_and_yaml():
    for source in (VALID_JSONL, VALID_YAML):
        tasks = load_tasks(source).tasks
        dumped = dump_tasks_jsonl(tasks)
        assert load_tasks(dumped, fmt="jsonl").tasks == tasks
        assert dump_tasks_jsonl(load_tasks(dumped).tasks) == dumped  # stable


def test_dump_is_compact_and_ordered():
    task = Task(
        prompt="p", id="t1", metadata={"b": 1, "a": 2}, expected_answer=0, domain="arithmetic"
    )
    line = dump_tasks_jsonl([task])
    assert line == (
        '{"id": "t1", "prompt": "p", "domain": "arithmetic", "expected_answer": 0, '
        '"metadata": {"b": 1, "a": 2}}\n'
    )
    assert dump_tasks_jsonl([{"prompt": "é"}]) == '{"prompt": "é"}\n'
    with pytest.raises(InputError):
        dump_tasks_jsonl([{"nope": 1}])


# --------------------------------------------------------------------------------------------
# the documented examples load
# --------------------------------------------------------------------------------------------


def _doc_blocks(language: str) -> list[str]:
    doc = (REPO / "docs" / "task-format.md").read_text(encoding="utf-8")
    return re.findall(rf"```{language}\n(.*?)```", doc, flags=re.DOTALL)


def test_documented_jsonl_example():
    (block,) = _doc_blocks("jsonl")
    task_file = load_tasks(block, fmt="jsonl")
    assert [t.domain for t in task_file.tasks] == ["arithmetic"] * 3
    first, second, third = task_file.tasks
    assert check_outcome(first, final_text="17 * 23 = 391\n391").success
    assert check_outcome(second, final_text="<answer>0.875</answer>").success
    assert check_outcome(third, final_text="Eleven").success


def test_documented_yaml_example():
    (block,) = _doc_blocks("yaml")
    (task,) = load_tasks(block, fmt="yaml").tasks
    assert task.domain == "coding"
    assert task.test_command and task.setup and "slug.py" in task.files
    assert [c.tool for c in task.reference_solution] == ["read_file", "edit_file", "bash"]
    edit = task.reference_solution[1].params
    assert edit["old_string"] in task.files["slug.py"]


def test_module_docstring_examples_load():
    import trainer_core.tasks.files as files

    blocks = re.findall(r"::\n\n((?:    .*\n|\n)+)", files.__doc__)
    jsonl, yaml_text = (textwrap.dedent(b) for b in blocks[:2])
    assert len(load_tasks(jsonl, fmt="jsonl").tasks) == 2
    assert len(load_tasks(yaml_text, fmt="yaml").tasks[0].reference_solution) == 3
