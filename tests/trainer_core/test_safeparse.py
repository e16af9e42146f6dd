"""YAML read safely (issue 17, point 3): alias bombs, self-referencing aliases, deep nesting,
non-JSON types and over-long integers are refused with a message and a line, in bounded memory;
ordinary YAML (merge keys, a few aliases) still reads; nothing in the source tree parses YAML
another way."""

from __future__ import annotations

import re
import tracemalloc
from pathlib import Path

import pytest
import yaml

from trainer_core import safeparse

pytestmark = pytest.mark.sqlite

REPO = Path(__file__).resolve().parents[2]


def alias_bomb(levels: int = 9, width: int = 9) -> str:
    """The "billion laughs": each level lists the previous one ``width`` times (9**9 values)."""
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        refs = ",".join([f"*a{level - 1}"] * width)
        lines.append(f"a{level}: &a{level} [{refs}]")
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_in_bounded_memory():
    bomb = alias_bomb()
    assert len(bomb) < 600  # the bomb was 544 bytes
    tracemalloc.start()
    try:
        with pytest.raises(yaml.YAMLError) as caught:
            safeparse.load_yaml(bomb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 5 * 1024 * 1024, f"{peak:,} bytes to refuse a {len(bomb)}-byte document"
    message = str(caught.value)
    assert "aliases (*name) would expand it" in message and "alias bomb" in message
    assert "line 2" in message and "fewer aliases" in message
    assert isinstance(caught.value, safeparse.UnsafeYAMLError)


def test_a_bomb_hidden_in_merge_keys_is_refused_too():
    lines = ["m0: &m0 {x: 1, y: 2, z: 3}"]
    for level in range(1, 12):
        refs = ", ".join(f"k{i}: *m{level - 1}" for i in range(8))
        lines.append(f"m{level}: &m{level} {{<<: *m{level - 1}, {refs}}}")
    with pytest.raises(safeparse.UnsafeYAMLError, match="alias bomb"):
        safeparse.load_yaml("\n".join(lines))


def test_an_alias_inside_its_own_anchor_is_refused():
    with pytest.raises(safeparse.UnsafeYAMLError, match="refers to the node that contains it"):
        safeparse.load_yaml("loop: &a [1, *a]\n")


def test_nesting_is_bounded_with_or_without_aliases():
    deep = "[" * 500 + "]" * 500
    with pytest.raises(safeparse.UnsafeYAMLError, match="nested more than 100 levels"):
        safeparse.load_yaml(deep)
    # 60 levels, then the same 60 levels again under an alias: 120 once expanded
    chain = "a: &a " + "[" * 60 + "]" * 60 + "\nb: " + "[" * 60 + "*a" + "]" * 60
    with pytest.raises(safeparse.UnsafeYAMLError, match="nested 12[01] levels deep"):
        safeparse.load_yaml(chain)


def test_ordinary_yaml_with_a_few_aliases_and_merge_keys_reads():
    text = (
        "defaults: &defaults {checker: number, domain: arithmetic}\n"
        "tasks:\n"
        "  - <<: *defaults\n    prompt: What is 2+2?\n"
        "  - <<: *defaults\n    prompt: What is 3+3?\n"
        "shared: [*defaults, *defaults]\n"
    )
    data = safeparse.load_yaml(text)
    assert data["tasks"][1] == {
        "checker": "number",
        "domain": "arithmetic",
        "prompt": "What is 3+3?",
    }
    assert data["shared"][0] == data["defaults"]
    assert safeparse.load_yaml("") is None
    assert safeparse.load_yaml("a: 1\nb: 2.5\nc: true\nd: null\ne: [x]\n") == {
        "a": 1,
        "b": 2.5,
        "c": True,
        "d": None,
        "e": ["x"],
    }


def test_dates_and_timestamps_stay_text():
    data = safeparse.load_yaml(
        "when: 9999-12-31T23:59:59-14:00\nday: 2001-01-01\ntagged: !!timestamp 2001-12-14\n"
    )
    assert data == {
        "when": "9999-12-31T23:59:59-14:00",
        "day": "2001-01-01",
        "tagged": "2001-12-14",
    }


@pytest.mark.parametrize(
    "text, shown",
    [
        ("a: !!binary aGVsbG8=\n", "!!binary"),
        ("a: !!set {x, y}\n", "!!set"),
        ("a: !!omap [{x: 1}]\n", "!!omap"),
        ("a: !!pairs [{x: 1}]\n", "!!pairs"),
    ],
)
def test_types_json_has_not_are_refused(text, shown):
    with pytest.raises(yaml.YAMLError, match=f"the tag {re.escape(shown)} is not supported"):
        safeparse.load_yaml(text)


def test_an_integer_too_long_to_convert_is_refused_not_a_crash():
    with pytest.raises(yaml.YAMLError, match="5000 characters is too long to read; quote it"):
        safeparse.load_yaml("n: " + "9" * 5000 + "\n")
    assert safeparse.load_yaml("n: '" + "9" * 5000 + "'\n")["n"] == "9" * 5000


def test_python_tags_stay_refused():
    with pytest.raises(yaml.YAMLError):
        safeparse.load_yaml("x: !!python/object/apply:os.system ['echo hi']\n")


def test_load_with_node_gives_lines_from_one_parse():
    data, node = safeparse.load_yaml_with_node("a: 1\nb:\n  - x\n")
    assert data == {"a": 1, "b": ["x"]}
    assert node.value[1][1].start_mark.line == 2


def test_no_module_parses_yaml_without_the_safe_loader():
    """Every YAML parse in the source goes through trainer_core.safeparse."""
    unsafe = re.compile(
        r"\byaml\.(safe_load|load|full_load|unsafe_load|load_all|safe_load_all|compose|"
        r"compose_all|parse)\(|\bLoader\s*="
    )
    found = [
        f"{path.relative_to(REPO)}:{number}"
        for package in ("trainer_core", "webapp", "workers")
        for path in sorted((REPO / package).rglob("*.py"))
        if path.name != "safeparse.py"
        for number, line in enumerate(path.read_text().splitlines(), start=1)
        if unsafe.search(line)
    ]
    assert not found, f"parse YAML with trainer_core.safeparse.load instead: {found}"


# --- the readers of user YAML ------------------------------------------------------------------


def _bomb_task_file() -> str:
    """A task set whose prompt list is an alias bomb (the shape that reached 2.6 GB)."""
    return alias_bomb() + "tasks:\n  - prompt: hi\n    metadata: {blow: *a8}\n"


def test_a_task_file_with_an_alias_bomb_names_the_line_and_imports_nothing(tmp_path):
    from trainer_core.tasks.files import TaskFileError, load_tasks

    path = tmp_path / "bomb.yaml"
    path.write_text(_bomb_task_file())
    with pytest.raises(TaskFileError) as caught:
        load_tasks(path)
    (problem,) = caught.value.problems
    assert problem.line == 2 and "invalid YAML" in problem.message
    assert "alias bomb" in problem.message and "fewer aliases" in problem.message


def test_a_task_file_keeps_its_dates_as_text():
    from trainer_core.tasks.files import load_tasks

    loaded = load_tasks(
        "- prompt: When?\n  expected_answer: 2001-01-01\n  metadata: {at: 9999-12-31T23:59:59-14:00}\n",
        fmt="yaml",
    )
    (task,) = loaded.tasks
    assert task.expected_answer == "2001-01-01"
    assert task.metadata == {"at": "9999-12-31T23:59:59-14:00"}


def test_a_training_config_and_a_domain_profile_refuse_the_bomb():
    from trainer_core.envs.profiles import load_profile
    from trainer_core.errors import ConfigError, InputError
    from trainer_core.training.config import config_from_yaml
    from trainer_core.training.sft import SFTConfig

    with pytest.raises(ConfigError, match="alias bomb"):
        config_from_yaml(SFTConfig, alias_bomb())
    with pytest.raises(InputError, match="alias bomb"):
        load_profile("name: x\n" + alias_bomb())


# --- JSON ----------------------------------------------------------------------------------------

DEEP_JSON = '{"prompt": "x", "metadata": {"a": ' + "[" * 100_000 + "]" * 100_000 + "}}"


def test_json_too_deep_or_with_an_over_long_integer_is_a_decode_error():
    import json

    with pytest.raises(json.JSONDecodeError, match="nested too deeply to read"):
        safeparse.load_json(DEEP_JSON)
    with pytest.raises(json.JSONDecodeError, match="a number too long to read .* quote it"):
        safeparse.load_json('{"n": ' + "9" * 5000 + "}")
    assert safeparse.load_json('{"a": [1, 2.5, "x"]}', object_pairs_hook=dict) == {
        "a": [1, 2.5, "x"]
    }


@pytest.mark.parametrize("fmt", ["jsonl", "json"])
def test_a_task_file_nested_too_deeply_is_a_problem_not_a_crash(fmt):
    from trainer_core.tasks.files import TaskFileError, load_tasks

    text = DEEP_JSON + "\n" if fmt == "jsonl" else '{"tasks": [' + DEEP_JSON + "]}"
    with pytest.raises(TaskFileError) as caught:
        load_tasks(text, fmt=fmt)
    assert any("nested too deeply" in p.message for p in caught.value.problems)
