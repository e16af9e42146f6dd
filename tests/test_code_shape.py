"""Sizes a newcomer can read: no source file over 900 lines (the built-in task suites, which are
data, and migrations aside) and no function over 100 lines, anywhere in the tree
(``scripts/code_shape.py`` prints the figures)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
ROOTS = ("webapp", "workers", "trainer_core", "tests", "bench", "scripts")
MAX_FILE_LINES = 900
MAX_FUNCTION_LINES = 100

pytestmark = pytest.mark.sqlite


def _python_files():
    for root in ROOTS:
        for path in sorted((REPO / root).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path


def long_functions(source: str, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            length = node.end_lineno - node.lineno + 1
            if length > limit:
                found.append(f"{node.name} ({length} lines, line {node.lineno})")
    return found


def test_no_source_file_is_over_900_lines():
    too_long = {
        str(path.relative_to(REPO)): n
        for path in _python_files()
        if "suites" not in path.parts and (n := len(path.read_text().splitlines())) > MAX_FILE_LINES
    }
    assert not too_long, f"split these by what they hold: {too_long}"


def test_no_function_is_over_100_lines():
    too_long = {
        str(path.relative_to(REPO)): found
        for path in _python_files()
        if (found := long_functions(path.read_text()))
    }
    assert not too_long, f"split these into small functions: {too_long}"
    body = "\n".join(f"    x{i} = {i}" for i in range(101))
    assert long_functions(f"def f():\n{body}\n") == ["f (102 lines, line 1)"]
