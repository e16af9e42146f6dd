"""Task files: JSONL (one task per line) or YAML (a list of tasks, or a task set).

A task is a :class:`~trainer_core.tasks.model.Task`; only ``prompt`` is required. Its fields:
``id`` (unique in the file), ``prompt``, ``domain``, ``environment``, ``expected_answer``,
``checker`` (see :mod:`trainer_core.tasks.checkers`), ``answer_schema`` (answer_tag, boxed,
last_line, raw, auto), ``files`` (path -> content), ``repo``, ``base_commit``, ``setup`` (shell
commands), ``test_command``, ``reference_solution`` (tool calls ``{tool, params, thought?}``),
``reference_steps`` and ``metadata``. Any other key is an error. The full reference, with every
field's type and default, is ``docs/task-format.md``.

JSONL: one JSON object per line. Blank lines and lines starting with ``#`` are skipped::

    # arithmetic, train split
    {"id": "arith-001", "prompt": "What is 17 * 23?", "domain": "arithmetic", "expected_answer": 391}
    {"id": "arith-002", "prompt": "What is 3/4 + 1/8? Answer in <answer></answer>.", "domain": "arithmetic", "expected_answer": "7/8", "checker": "number", "answer_schema": "answer_tag"}

YAML: a list of task mappings, or a mapping with ``tasks:`` and an optional
``task_set: {name, description, domain}`` (``domain`` is the default of tasks that set none)::

    task_set:
      name: fix-slugify
      domain: coding
    tasks:
      - id: slugify-001
        prompt: Make the tests in tests/test_slug.py pass without changing them.
        files:
          slug.py: |
            def slugify(text):
                return text.lower().replace(" ", "_")
          tests/test_slug.py: |
            from slug import slugify

            def test_spaces():
                assert slugify("Hello World") == "hello-world"
        setup:
          - python -m pip install --quiet pytest
        test_command: python -m pytest -q tests
        reference_solution:
          - tool: read_file
            params: {file_path: slug.py}
          - tool: edit_file
            params: {file_path: slug.py, old_string: 'replace(" ", "_")', new_string: 'replace(" ", "-")'}
          - tool: bash
            params: {command: python -m pytest -q tests}

A ``.json`` file may hold JSONL or one JSON document shaped like the YAML forms.

:func:`load_tasks` validates the whole file before returning anything. Every problem found is
collected into one :class:`TaskFileError` (an :class:`~trainer_core.errors.InputError`) whose
``problems`` is a list of ``(line, field, message)`` and whose message lists them::

    tasks.jsonl: 2 problems in the task file:
      line 3, field 'prompt': Field required
      line 5, field '-': invalid JSON: Expecting ',' delimiter (column 31)

Checked: JSON / YAML syntax, items that are not objects, missing ``prompt``, wrong types, unknown
fields, duplicate ids and duplicate keys, ``reference_solution`` entries that are not tool calls
(``{tool, params, thought?}``), ``checker`` names that are not registered (register custom
checkers before loading), unknown ``answer_schema`` names, and, for the built-in checkers, a
missing or unsuitable ``expected_answer`` / ``test_command``. YAML problems carry the line where
the task's mapping starts. The field is ``'-'`` when a problem concerns a whole line or item.

:func:`dump_tasks_jsonl` writes tasks back as JSONL (fields in model order, defaults left out), so
``load_tasks(dump_tasks_jsonl(tasks), fmt="jsonl").tasks == tasks``.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from pydantic import ValidationError

from trainer_core import safeparse
from trainer_core.errors import ConfigError, InputError
from trainer_core.tasks import checkers
from trainer_core.tasks.model import Task
from trainer_core.tasks.repos import allow_repo_root, resolve_repo

__all__ = [
    "FORMATS",
    "Problem",
    "TaskFile",
    "TaskFileError",
    "dump_tasks_jsonl",
    "load_tasks",
]

FORMATS: tuple[str, ...] = ("jsonl", "json", "yaml")
_FORMAT_ALIASES = {
    "jsonl": "jsonl",
    "ndjson": "jsonl",
    "json": "json",
    "yaml": "yaml",
    "yml": "yaml",
}
_SUFFIXES = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".yaml": "yaml",
    ".yml": "yaml",
}
_TASK_SET_KEYS = ("name", "description", "domain")
_TOP_LEVEL_KEYS = ("task_set", "tasks")
_MAX_LISTED = 50
_TOOL_CALL_HINT = "a reference_solution entry is a tool call {tool, params, thought?}"


class Problem(NamedTuple):
    """One problem in a task file. ``line`` is 1-based (None: the whole file); field '-': none."""

    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = f"line {self.line}" if self.line is not None else "file"
        return f"{where}, field {self.field!r}: {self.message}"


class TaskFileError(InputError):
    """A task file has problems; ``problems`` lists every one as ``(line, field, message)``."""

    def __init__(self, problems: Iterable[Problem | tuple], source: str = "") -> None:
        self.problems: list[Problem] = sorted(
            (Problem(*p) for p in problems), key=lambda p: p.line or 0
        )
        self.source = source
        count = len(self.problems)
        head = f"{source or '<text>'}: {count} problem{'s' if count != 1 else ''} in the task file:"
        listed = [f"  {p}" for p in self.problems[:_MAX_LISTED]]
        if count > _MAX_LISTED:
            listed.append(f"  ... and {count - _MAX_LISTED} more")
        super().__init__("\n".join([head, *listed]))

    def __reduce__(self):  # picklable, e.g. across a worker boundary
        return (type(self), (self.problems, self.source))


@dataclass
class TaskFile:
    """The tasks of one file, with the task set's name, description and domain.

    ``name`` defaults to the file's stem; ``domain`` to the tasks' common domain ('' if mixed).
    ``source`` is the path ('' for text) and ``format`` the format it was read as.
    """

    name: str = ""
    description: str = ""
    domain: str = ""
    tasks: list[Task] = field(default_factory=list)
    source: str = ""
    format: str = ""

    def __len__(self) -> int:
        return len(self.tasks)

    def __iter__(self) -> Iterator[Task]:
        return iter(self.tasks)


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


def load_tasks(
    path_or_text: str | os.PathLike[str],
    *,
    fmt: str | None = None,
    repo_base: str | os.PathLike[str] | None = None,
) -> TaskFile:
    """Load and validate a task file (a path, or the file's text).

    ``fmt`` is 'jsonl', 'json' or 'yaml' ('yml', 'ndjson' accepted); by default it comes from the
    file's extension, else from the content. A string is a path when it is one line naming an
    existing file (or one ending in a task-file extension, which then must exist). Raises
    :class:`TaskFileError` listing every problem, or InputError when the file cannot be read.

    A task's ``repo`` must lie inside ``repo_base`` (default: the task file's directory when
    it is read from disk; e.g. the archives uploaded with it) or an allowed root
    (:mod:`trainer_core.tasks.repos`); it comes back as its resolved absolute path.
    """
    text, path = _read(path_or_text)
    if repo_base is None and path is not None:
        repo_base = path.resolve().parent
    source = str(path) if path is not None else ""
    fmt = _resolve_format(fmt, path, text)
    problems: list[Problem] = []
    header: dict[str, str] = {}
    items: list[tuple[int | None, Any, yaml.Node | None]] = []

    if fmt == "json":
        try:
            data = safeparse.load_json(text, object_pairs_hook=_pairs_hook)
        except json.JSONDecodeError as exc:
            if _looks_like_jsonl(text):
                fmt = "jsonl"
            else:
                problems.append(
                    Problem(exc.lineno, "-", f"invalid JSON: {exc.msg} (column {exc.colno})")
                )
                data = None
        if fmt == "json" and isinstance(data, dict) and "tasks" not in data:
            if len(_content_lines(text)) == 1:
                fmt = "jsonl"  # one task on one line: JSONL with a single task
        if fmt == "json" and not problems:
            node = _compose_quietly(text)
            header, items = _structured(data, node, problems)
    if fmt == "jsonl":
        items = _parse_jsonl(text, problems)
    elif fmt == "yaml":
        header, items = _parse_yaml(text, problems)

    tasks = _validate_items(items, header.get("domain", ""), problems)
    tasks = _resolve_repos(tasks, items, repo_base, problems)
    if not problems and not tasks:
        problems.append(Problem(None, "-", "the file holds no tasks" + _path_hint(path, text)))
    if problems:
        raise TaskFileError(problems, source=source)

    domains = {task.domain for task in tasks}
    return TaskFile(
        name=header.get("name") or (path.stem if path is not None else ""),
        description=header.get("description", ""),
        domain=header.get("domain") or (domains.pop() if len(domains) == 1 else ""),
        tasks=tasks,
        source=source,
        format=fmt,
    )


def _read(path_or_text: str | os.PathLike[str]) -> tuple[str, Path | None]:
    path: Path | None = None
    if isinstance(path_or_text, os.PathLike):
        path = Path(path_or_text)
    elif isinstance(path_or_text, str):
        candidate = path_or_text.strip()
        if candidate and "\n" not in candidate and len(candidate) < 4096:
            p = Path(candidate).expanduser()
            try:
                is_file = p.is_file()
            except OSError:
                is_file = False
            if is_file or (p.suffix.lower() in _SUFFIXES and candidate[0] not in "{[-#"):
                path = p
    else:
        raise InputError(
            f"load_tasks takes a path or the text of a task file, not {type(path_or_text).__name__}"
        )
    if path is None:
        return str(path_or_text), None
    if not path.is_file():
        raise InputError(f"task file not found: {path}")
    try:
        return path.read_bytes().decode("utf-8-sig"), path
    except UnicodeDecodeError as exc:
        raise TaskFileError(
            [Problem(None, "-", f"not UTF-8 text (byte {exc.start}): save the file as UTF-8")],
            source=str(path),
        ) from None
    except OSError as exc:
        raise InputError(f"cannot read task file {path}: {exc}") from None


def _resolve_format(fmt: str | None, path: Path | None, text: str) -> str:
    if fmt:
        resolved = _FORMAT_ALIASES.get(fmt.strip().lower().lstrip("."))
        if resolved is None:
            close = difflib.get_close_matches(fmt, list(_FORMAT_ALIASES), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(
                f"unknown task file format {fmt!r}{hint} (known: {', '.join(FORMATS)})"
            )
        return resolved
    if path is not None and path.suffix.lower() in _SUFFIXES:
        return _SUFFIXES[path.suffix.lower()]
    return _sniff(text)


def _content_lines(text: str) -> list[str]:
    return [s for s in (line.strip() for line in text.split("\n")) if s and not s.startswith("#")]


def _sniff(text: str) -> str:
    lines = _content_lines(text)
    if not lines:
        return "yaml"
    first = lines[0]
    if first.startswith("{"):
        try:
            safeparse.load_json(first)
            return "jsonl"
        except json.JSONDecodeError:
            pass
        try:
            safeparse.load_json(text)
            return "json"
        except json.JSONDecodeError:
            return "jsonl"
    if first.startswith("["):
        try:
            safeparse.load_json(text)
            return "json"
        except json.JSONDecodeError:
            return "yaml"
    return "yaml"


def _looks_like_jsonl(text: str) -> bool:
    lines = _content_lines(text)
    return len(lines) > 1 and all(line.startswith("{") for line in lines)


def _path_hint(path: Path | None, text: str) -> str:
    stripped = text.strip()
    if path is None and stripped and "\n" not in stripped and " " not in stripped:
        return f" (if {stripped!r} is meant as a path, no such file exists)"
    return ""


class _DuplicateKeys(dict):
    """A dict that remembers the keys a JSON object repeated."""

    duplicates: list[str]


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = _DuplicateKeys()
    result.duplicates = []
    for key, value in pairs:
        if key in result:
            result.duplicates.append(key)
        result[key] = value
    return result


def _parse_jsonl(text: str, problems: list[Problem]) -> list[tuple[int | None, Any, None]]:
    items: list[tuple[int | None, Any, None]] = []
    for lineno, line in enumerate(text.split("\n"), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        try:
            value = safeparse.load_json(stripped, object_pairs_hook=_pairs_hook)
        except json.JSONDecodeError as exc:
            problems.append(
                Problem(
                    lineno,
                    "-",
                    f"invalid JSON: {exc.msg} (column {exc.colno + len(line) - len(line.lstrip())})",
                )
            )
            continue
        items.append((lineno, value, None))
    return items


def _compose_quietly(text: str) -> yaml.Node | None:
    """The YAML node tree of ``text`` (used for JSON documents' line numbers), or None."""
    try:
        return safeparse.compose_yaml(text)
    except yaml.YAMLError:
        return None


def _parse_yaml(text: str, problems: list[Problem]):
    try:
        data, node = safeparse.load_yaml_with_node(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        reason = " ".join(
            str(part)
            for part in (getattr(exc, "context", None), getattr(exc, "problem", None))
            if part
        ) or str(exc)
        problems.append(Problem(mark.line + 1 if mark else None, "-", f"invalid YAML: {reason}"))
        return {}, []
    return _structured(data, node, problems)


def _line(node: yaml.Node | None) -> int | None:
    return node.start_mark.line + 1 if node is not None else None


def _mapping_value(node: yaml.Node | None, key: str) -> tuple[yaml.Node | None, yaml.Node | None]:
    """(key node, value node) of ``key`` in a YAML mapping node (the last one if repeated)."""
    found: tuple[yaml.Node | None, yaml.Node | None] = (None, None)
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
                found = (key_node, value_node)
    return found


def _structured(data: Any, node: yaml.Node | None, problems: list[Problem]):
    """Header and (line, item, node) triples of a parsed YAML / JSON document."""
    header: dict[str, str] = {}
    if data is None:
        return header, []
    if isinstance(data, dict):
        if "tasks" not in data and "prompt" in data:
            problems.append(
                Problem(
                    _line(node),
                    "-",
                    "this looks like a single task: put it in a list (- prompt: ...)",
                )
            )
            return header, []
        for key in data:
            if key not in _TOP_LEVEL_KEYS:
                key_node, _ = _mapping_value(node, str(key))
                problems.append(
                    Problem(
                        _line(key_node) or _line(node),
                        str(key),
                        f"unknown top-level key{_did_you_mean(str(key), _TOP_LEVEL_KEYS)}; a task file "
                        "is a list of tasks or a mapping with 'tasks' and an optional 'task_set'",
                    )
                )
        task_set = data.get("task_set")
        _, set_node = _mapping_value(node, "task_set")
        if task_set is not None:
            if not isinstance(task_set, dict):
                problems.append(
                    Problem(
                        _line(set_node), "task_set", "must be a mapping {name, description, domain}"
                    )
                )
            else:
                for key, value in task_set.items():
                    key_line = _line(_mapping_value(set_node, str(key))[0]) or _line(set_node)
                    if key not in _TASK_SET_KEYS:
                        problems.append(
                            Problem(
                                key_line,
                                f"task_set.{key}",
                                f"unknown key{_did_you_mean(str(key), _TASK_SET_KEYS)}; "
                                "a task_set has name, description and domain",
                            )
                        )
                    elif value is not None and not isinstance(value, str):
                        problems.append(
                            Problem(key_line, f"task_set.{key}", "Input should be a valid string")
                        )
                    elif value:
                        header[key] = value
        tasks = data.get("tasks")
        _, tasks_node = _mapping_value(node, "tasks")
        if tasks is None:
            if "tasks" not in data:
                problems.append(Problem(_line(node), "tasks", "Field required (the list of tasks)"))
            return header, []
        if not isinstance(tasks, list):
            problems.append(Problem(_line(tasks_node), "tasks", "must be a list of tasks"))
            return header, []
        return header, _with_nodes(tasks, tasks_node)
    if isinstance(data, list):
        return header, _with_nodes(data, node)
    problems.append(
        Problem(
            _line(node),
            "-",
            f"a task file is a list of tasks or a mapping with 'tasks', not {_type_name(data)}",
        )
    )
    return header, []


def _with_nodes(items: list[Any], node: yaml.Node | None):
    nodes = node.value if isinstance(node, yaml.SequenceNode) else []
    if len(nodes) != len(items):
        nodes = [None] * len(items)
    return [(_line(n), item, n) for item, n in zip(items, nodes, strict=True)]


def _type_name(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if value is None:
        return "null"
    return f"a {type(value).__name__}"


def _did_you_mean(name: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


# --------------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------------


def _validate_items(items, default_domain: str, problems: list[Problem]) -> list[Task]:
    tasks: list[Task] = []
    first_seen: dict[str, int | None] = {}
    known_checkers = checkers.list_checkers()
    task_fields = list(Task.model_fields)
    for line, item, node in items:
        where = line
        if not isinstance(item, dict):
            problems.append(
                Problem(where, "-", f"expected an object (a task), got {_type_name(item)}")
            )
            continue
        for key in _duplicate_keys(item, node):
            problems.append(
                Problem(where, key, "duplicate key (the last value would silently win)")
            )

        task_id = item.get("id")
        if isinstance(task_id, str) and task_id:
            if task_id in first_seen:
                first = first_seen[task_id]
                at = f"line {first}" if first is not None else "an earlier task"
                problems.append(
                    Problem(where, "id", f"duplicate id {task_id!r} (first used on {at})")
                )
            else:
                first_seen[task_id] = line

        checker = item.get("checker")
        if isinstance(checker, str) and checker.strip() and checker.strip() not in known_checkers:
            problems.append(
                Problem(
                    where,
                    "checker",
                    f"unknown checker {checker!r}{_did_you_mean(checker, known_checkers)}; "
                    f"registered: {', '.join(known_checkers)}",
                )
            )
        schema = item.get("answer_schema")
        if (
            isinstance(schema, str)
            and schema.strip()
            and schema.strip() not in checkers.ANSWER_SCHEMAS
        ):
            problems.append(
                Problem(
                    where,
                    "answer_schema",
                    f"unknown answer schema {schema!r}{_did_you_mean(schema, checkers.ANSWER_SCHEMAS)}; "
                    f"known: {', '.join(checkers.ANSWER_SCHEMAS)}",
                )
            )

        data = dict(item)
        if default_domain and "domain" not in data:
            data["domain"] = default_domain
        try:
            task = Task.model_validate(data)
        except ValidationError as exc:
            for error in exc.errors():
                problems.append(_problem_from_error(where, error, task_fields))
            continue
        problems.extend(Problem(where, f, m) for f, m in _checker_consistency(task))
        tasks.append(task)
    return tasks


def _resolve_repos(tasks: list[Task], items, base, problems: list[Problem]) -> list[Task]:
    """Each task's ``repo`` as its resolved path, or a problem when it may not be used. The
    base directory is allowed for this process when a repository was found in it."""
    lines = {
        item.get("id"): line for line, item, _ in items if isinstance(item, dict) and item.get("id")
    }
    out = []
    for task in tasks:
        if task.repo:
            try:
                resolved = resolve_repo(task.repo, base_dir=base)
            except ConfigError as exc:
                problems.append(Problem(lines.get(task.id), "repo", str(exc)))
                continue
            if base is not None and Path(os.path.realpath(base)) in (resolved, *resolved.parents):
                allow_repo_root(base)
            task = task.model_copy(update={"repo": str(resolved)})
        out.append(task)
    return out


def _duplicate_keys(item: dict, node: yaml.Node | None) -> list[str]:
    duplicates = list(getattr(item, "duplicates", []))
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.value != "<<":
                if key_node.value in seen and key_node.value not in duplicates:
                    duplicates.append(key_node.value)
                seen.add(key_node.value)
    return duplicates


def _problem_from_error(line: int | None, error: dict[str, Any], task_fields: list[str]) -> Problem:
    loc = [str(part) for part in error.get("loc", ())]
    name = ".".join(loc) or "-"
    message = error.get("msg", "invalid")
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        if loc and loc[0] == "reference_solution":
            message = f"unknown field in a tool call; {_TOOL_CALL_HINT}"
        else:
            message = f"unknown field{_did_you_mean(loc[-1] if loc else '', task_fields)}; " + (
                f"a task's fields are: {', '.join(task_fields)}"
            )
    elif loc and loc[0] == "reference_solution" and len(loc) <= 3:
        message = f"{message} ({_TOOL_CALL_HINT})"
    return Problem(line, name, message)


def _checker_consistency(task: Task) -> list[tuple[str, str]]:
    """Problems of a task that names a built-in checker its fields cannot satisfy."""
    name = task.checker.strip()
    expected = task.expected_answer
    if name == "number":
        if expected is None:
            return [("expected_answer", "Field required by checker 'number'")]
        if not checkers.is_numeric(expected):
            return [("expected_answer", f"{expected!r} is not a number (checker 'number')")]
    elif name in ("exact", "contains"):
        if expected is None or expected == "" or expected == []:
            return [("expected_answer", f"Field required by checker {name!r}")]
    elif name == "any_of":
        if not isinstance(expected, list) or not expected:
            return [
                (
                    "expected_answer",
                    "must be a non-empty list of accepted answers (checker 'any_of')",
                )
            ]
    elif name == "test_command" and not task.test_command.strip():
        return [("test_command", "Field required by checker 'test_command'")]
    elif name == "final_state":
        meta = task.metadata or {}
        if meta.get("expected_database") is None and meta.get("expected_changes") is None:
            if not meta.get("required_outputs"):
                return [
                    (
                        "metadata.expected_database",
                        "Field required by checker 'final_state' (or metadata.expected_changes, "
                        "or metadata.required_outputs)",
                    )
                ]
    return []


# --------------------------------------------------------------------------------------------
# Dumping
# --------------------------------------------------------------------------------------------


def dump_tasks_jsonl(tasks: Iterable[Task | dict[str, Any]] | TaskFile) -> str:
    """Tasks as JSONL: one object per line, fields in the model's order, defaults left out."""
    lines = []
    for index, task in enumerate(tasks):
        if isinstance(task, dict):
            try:
                task = Task.model_validate(task)
            except ValidationError as exc:
                raise InputError(f"task {index + 1} is not a valid task: {exc}") from None
        if not isinstance(task, Task):
            raise InputError(f"task {index + 1} is a {type(task).__name__}, not a Task")
        try:
            data = task.model_dump(mode="json", exclude_defaults=True)
        except Exception as exc:  # pydantic's serialisation error: a value JSON cannot hold
            raise InputError(
                f"task {index + 1} ({task.id or task.prompt[:40]!r}) cannot be written as JSON: {exc}"
            ) from None
        lines.append(json.dumps(data, ensure_ascii=False) + "\n")
    return "".join(lines)
