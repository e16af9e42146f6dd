"""The coding tools an agent uses on a :class:`~trainer_core.sandboxes.base.Sandbox`.

``CODING_TOOLS`` is what the agent sees; :func:`run_tool` executes one call and never raises
for anything the agent did wrong (unknown tool, missing or wrong-typed parameters, a path
outside the workspace): the returned :class:`ToolResult`'s observation says what is wrong and
what is expected. Only ``bash`` takes a shell string (the agent's own command); every other
tool is an argv (``grep``, ``git``, ``ls``) or direct file I/O, so no argument is ever
interpreted by a shell.

``ToolResult.error`` is a short code (``None`` on success): ``unknown_tool``,
``invalid_params``, ``sandbox_error``, ``not_found`` (edit_file's old_string), ``ambiguous``,
``timeout``, ``nonzero_exit``. A command's exit status is in ``exit_code``.
"""

from __future__ import annotations

import difflib
import posixpath
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from trainer_core.errors import SandboxError
from trainer_core.sandboxes.base import ExecResult, Sandbox
from trainer_core.tasks.model import ToolSpec

MAX_TIMEOUT = 600.0  # seconds: the most a bash call may ask for
MAX_READ_CHARS = 100_000  # read_file output beyond this is cut (ask for a line range)


@dataclass(frozen=True)
class ToolResult:
    observation: str
    exit_code: int | None
    error: str | None
    done: bool = False
    answer: str | None = None
    duration: float = 0.0


def _spec(
    name: str, description: str, properties: dict, required: list[str], category: str
) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        parameters={
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": False,
        },
        category=category,
    )


_PATH = {"type": "string", "description": "Path relative to the workspace root."}

CODING_TOOLS: list[ToolSpec] = [
    _spec(
        "read_file",
        "Read a text file from the workspace; lines are numbered (1-based). Give start_line and/or "
        "end_line (inclusive) to read part of a long file.",
        {
            "file_path": _PATH,
            "start_line": {"type": "integer", "minimum": 1, "description": "First line (1-based)."},
            "end_line": {"type": "integer", "minimum": 1, "description": "Last line (inclusive)."},
        },
        ["file_path"],
        "read",
    ),
    _spec(
        "write_file",
        "Create or overwrite a file in the workspace with the given content (parent directories "
        "are created).",
        {
            "file_path": _PATH,
            "content": {"type": "string", "description": "The whole new content."},
        },
        ["file_path", "content"],
        "write",
    ),
    _spec(
        "edit_file",
        "Replace one exact occurrence of old_string with new_string in a file. old_string must "
        "occur exactly once; include surrounding lines to make it unique.",
        {
            "file_path": _PATH,
            "old_string": {"type": "string", "description": "Exact text to replace (unique)."},
            "new_string": {"type": "string", "description": "Replacement text."},
        },
        ["file_path", "old_string", "new_string"],
        "write",
    ),
    _spec(
        "bash",
        "Run a shell command (bash -c) in the workspace; returns stdout, stderr and the exit code.",
        {
            "command": {"type": "string", "description": "The shell command."},
            "timeout": {
                "type": "number",
                "exclusiveMinimum": 0,
                "maximum": MAX_TIMEOUT,
                "description": "Seconds before the command is killed (default: the sandbox's).",
            },
        },
        ["command"],
        "execute",
    ),
    _spec(
        "grep",
        "Search files recursively for an extended regular expression (grep -rnE); prints "
        "file:line:text for each match.",
        {
            "pattern": {"type": "string", "description": "Extended regular expression."},
            "path": {"type": "string", "description": "File or directory (default: workspace)."},
            "ignore_case": {"type": "boolean", "description": "Case-insensitive (default false)."},
        },
        ["pattern"],
        "read",
    ),
    _spec(
        "list_dir",
        "List a directory of the workspace (ls -la).",
        {"path": {"type": "string", "description": "Directory (default: workspace root)."}},
        [],
        "read",
    ),
    _spec(
        "git",
        'Run git with the given arguments, e.g. ["status"] or ["commit", "-am", "fix"].',
        {
            "args": {
                "type": "array",
                "items": {"type": "string"},
                "description": 'Arguments after "git", one list item each (not one string).',
            }
        },
        ["args"],
        "execute",
    ),
    _spec(
        "submit",
        "Submit your work (and optionally a final answer); ends the episode.",
        {"answer": {"type": "string", "description": "Optional final answer."}},
        [],
        "finish",
    ),
    _spec(
        "finish",
        "Declare the task finished (optionally with a final answer); ends the episode.",
        {"answer": {"type": "string", "description": "Optional final answer."}},
        [],
        "finish",
    ),
]

_SPECS: dict[str, ToolSpec] = {spec.name: spec for spec in CODING_TOOLS}


# --- parameter checking ---------------------------------------------------------------------


def _type_ok(value: Any, schema: Mapping[str, Any]) -> bool:
    kind = schema.get("type")
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        item_kind = schema.get("items", {}).get("type")
        return isinstance(value, list) and all(
            _type_ok(item, {"type": item_kind}) for item in value
        )
    return True


def _describe(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type", "any")
    if kind == "array":
        return f"a list of {schema.get('items', {}).get('type', 'any')}s"
    return {"integer": "an integer", "number": "a number", "boolean": "true or false"}.get(
        kind, f"a {kind}"
    )


def _signature(spec: ToolSpec) -> str:
    props = spec.parameters.get("properties", {})
    required = set(spec.parameters.get("required", []))
    parts = [
        f"{name}{'' if name in required else '?'}: {_describe(schema)}"
        for name, schema in props.items()
    ]
    return f"{spec.name}({', '.join(parts)})"


def _check_params(spec: ToolSpec, params: Any) -> str | None:
    """A message saying what is wrong with ``params``, or None."""
    expected = f"Expected {_signature(spec)}."
    if not isinstance(params, Mapping):
        return f"Invalid parameters for {spec.name}: expected an object, got {type(params).__name__}. {expected}"
    props = spec.parameters.get("properties", {})
    problems = []
    missing = [name for name in spec.parameters.get("required", []) if name not in params]
    if missing:
        problems.append(f"missing required parameter(s) {', '.join(missing)}")
    unknown = sorted(set(params) - set(props))
    if unknown:
        problems.append(f"unknown parameter(s) {', '.join(unknown)}")
    for name, schema in props.items():
        if name in params and params[name] is not None and not _type_ok(params[name], schema):
            value = params[name]
            problems.append(f"{name} must be {_describe(schema)}, got {type(value).__name__}")
    if problems:
        return f"Invalid parameters for {spec.name}: {'; '.join(problems)}. {expected}"
    return None


def _error(message: str, code: str, exit_code: int | None = None) -> ToolResult:
    return ToolResult(observation=message, exit_code=exit_code, error=code)


def _rel_path(value: str | None, *, default: str = ".") -> str:
    """A workspace-relative path for an argv (grep, ls); SandboxError if it leaves it."""
    if value is None or value.strip() == "":
        return default
    if "\x00" in value:
        raise SandboxError("path must not contain NUL bytes")
    if posixpath.isabs(value):
        raise SandboxError(
            f"{value!r} is an absolute path; give a path relative to the workspace root"
        )
    norm = posixpath.normpath(value)
    if norm == ".." or norm.startswith("../"):
        raise SandboxError(f"{value!r} leaves the workspace; that is not allowed")
    return norm if not norm.startswith("-") else f"./{norm}"


def _format_exec(result: ExecResult, timeout: float | None) -> str:
    parts = []
    if result.stdout:
        parts.append(result.stdout.rstrip("\n"))
    if result.stderr:
        parts.append("[stderr]\n" + result.stderr.rstrip("\n"))
    if result.timed_out:
        limit = f" after {timeout:g}s" if timeout else ""
        parts.append(f"[timed out{limit}; the command was killed]")
    else:
        parts.append(f"[exit code {result.exit_code}]")
    return "\n".join(parts)


def _exec_result(result: ExecResult, timeout: float | None) -> ToolResult:
    if result.timed_out:
        code: str | None = "timeout"
    elif result.exit_code != 0:
        code = "nonzero_exit"
    else:
        code = None
    return ToolResult(_format_exec(result, timeout), result.exit_code, code)


# --- the tools ------------------------------------------------------------------------------


def _read_text(sandbox: Sandbox, path: str, *, strict: bool = False) -> str:
    data = sandbox.read_file(path)
    if b"\x00" in data[:8192]:
        raise SandboxError(f"{path!r} looks like a binary file ({len(data)} bytes); not shown")
    try:
        return data.decode("utf-8", errors="strict" if strict else "replace")
    except UnicodeDecodeError:
        raise SandboxError(
            f"{path!r} is not UTF-8 text; edit it with bash instead (e.g. sed or python)"
        ) from None


def _tool_read_file(sandbox: Sandbox, p: Mapping[str, Any], timeout: float | None) -> ToolResult:
    path = p["file_path"]
    start, end = p.get("start_line"), p.get("end_line")
    if start is not None and start < 1:
        return _error(f"start_line must be 1 or more, got {start}.", "invalid_params")
    if end is not None and end < 1:
        return _error(f"end_line must be 1 or more, got {end}.", "invalid_params")
    if start is not None and end is not None and end < start:
        return _error(f"end_line ({end}) is before start_line ({start}).", "invalid_params")
    text = _read_text(sandbox, path)
    lines = text.split("\n")  # like sed and grep -n: only \n ends a line
    if lines[-1] == "":
        lines.pop()
    total = len(lines)
    if total == 0:
        return ToolResult(f"{path} is empty.", None, None)
    first = start or 1
    last = min(end or total, total)
    if first > total:
        return _error(
            f"start_line {first} is past the end of {path} ({total} lines).", "invalid_params"
        )
    width = len(str(last))
    body = "\n".join(f"{n:>{width}}\t{lines[n - 1]}" for n in range(first, last + 1))
    if len(body) > MAX_READ_CHARS:
        body = body[:MAX_READ_CHARS].rsplit("\n", 1)[0]
        shown = body.count("\n") + first
        body += f"\n[... cut at line {shown} of {total}; read on with start_line={shown + 1} ...]"
    header = f"{path} (lines {first}-{last} of {total})" if (start or end) else path
    return ToolResult(f"{header}\n{body}", None, None)


def _tool_write_file(sandbox: Sandbox, p: Mapping[str, Any], timeout: float | None) -> ToolResult:
    content = p["content"]
    sandbox.write_file(p["file_path"], content)
    size = len(content.encode("utf-8"))
    return ToolResult(f"Wrote {size} bytes to {p['file_path']}.", None, None)


def _tool_edit_file(sandbox: Sandbox, p: Mapping[str, Any], timeout: float | None) -> ToolResult:
    path, old, new = p["file_path"], p["old_string"], p["new_string"]
    if old == "":
        return _error("old_string is empty; give the exact text to replace.", "invalid_params")
    if old == new:
        return _error(
            "old_string and new_string are identical; nothing to change.", "invalid_params"
        )
    text = _read_text(sandbox, path, strict=True)
    count = text.count(old)
    if count == 0:
        return _error(
            f"old_string was not found in {path} (found 0 times); it must match the file "
            "exactly, including whitespace and indentation. Read the file first.",
            "not_found",
        )
    if count > 1:
        return _error(
            f"old_string was found {count} times in {path}; it must occur exactly once. "
            "Include more surrounding lines to make it unique.",
            "ambiguous",
        )
    sandbox.write_file(path, text.replace(old, new, 1))
    line = text[: text.index(old)].count("\n") + 1
    return ToolResult(f"Edited {path}: replaced 1 occurrence at line {line}.", None, None)


def _tool_bash(sandbox: Sandbox, p: Mapping[str, Any], timeout: float | None) -> ToolResult:
    command = p["command"]
    if not command.strip():
        return _error("command is empty; give a shell command to run.", "invalid_params")
    wanted = p.get("timeout")
    if wanted is not None:
        if not 0 < wanted <= MAX_TIMEOUT:
            return _error(
                f"timeout must be more than 0 and at most {MAX_TIMEOUT:g} seconds, got {wanted}.",
                "invalid_params",
            )
        timeout = float(wanted)
    result = sandbox.exec(command, timeout=timeout)
    return _exec_result(result, timeout or sandbox.limits.wall_seconds)


def _tool_grep(sandbox: Sandbox, p: Mapping[str, Any], timeout: float | None) -> ToolResult:
    pattern = p["pattern"]
    if pattern == "":
        return _error(
            "pattern is empty; give a regular expression to search for.", "invalid_params"
        )
    argv = ["grep", "-rnIE", "--exclude-dir=.git", "--color=never"]
    if p.get("ignore_case"):
        argv.append("-i")
    argv += ["--", pattern]
    path = _rel_path(p.get("path"), default="")
    if path:
        argv.append(path)  # without a path, grep -r searches "." and prints names bare
    result = sandbox.exec(argv, timeout=timeout)
    if result.exit_code == 1 and not result.timed_out and not result.stderr:
        return ToolResult("No matches.", 1, None)
    if result.exit_code == 0 and not result.timed_out:
        return ToolResult(result.stdout.rstrip("\n"), 0, None)
    return _exec_result(result, timeout or sandbox.limits.wall_seconds)


def _tool_list_dir(sandbox: Sandbox, p: Mapping[str, Any], timeout: float | None) -> ToolResult:
    result = sandbox.exec(["ls", "-la", "--", _rel_path(p.get("path"))], timeout=timeout)
    if result.ok:
        return ToolResult(result.stdout.rstrip("\n"), 0, None)
    return _exec_result(result, timeout or sandbox.limits.wall_seconds)


def _tool_git(sandbox: Sandbox, p: Mapping[str, Any], timeout: float | None) -> ToolResult:
    args = p["args"]
    if not args:
        return _error('args is empty; give git arguments, e.g. ["status"].', "invalid_params")
    result = sandbox.exec(["git", *args], timeout=timeout)
    return _exec_result(result, timeout or sandbox.limits.wall_seconds)


def _tool_submit(sandbox: Sandbox, p: Mapping[str, Any], timeout: float | None) -> ToolResult:
    answer = p.get("answer")
    message = "Submitted." if answer is None else f"Submitted with answer: {answer}"
    return ToolResult(message, None, None, done=True, answer=answer)


def _tool_finish(sandbox: Sandbox, p: Mapping[str, Any], timeout: float | None) -> ToolResult:
    answer = p.get("answer")
    message = "Finished." if answer is None else f"Finished with answer: {answer}"
    return ToolResult(message, None, None, done=True, answer=answer)


_TOOLS: dict[str, Callable[[Sandbox, Mapping[str, Any], float | None], ToolResult]] = {
    "read_file": _tool_read_file,
    "write_file": _tool_write_file,
    "edit_file": _tool_edit_file,
    "bash": _tool_bash,
    "grep": _tool_grep,
    "list_dir": _tool_list_dir,
    "git": _tool_git,
    "submit": _tool_submit,
    "finish": _tool_finish,
}


def run_tool(
    sandbox: Sandbox,
    tool: str,
    params: Mapping[str, Any] | None,
    *,
    default_timeout: float | None = None,
) -> ToolResult:
    """Run one coding tool on ``sandbox``. Never raises for the agent's mistakes."""
    started = time.monotonic()
    result = _dispatch(sandbox, tool, {} if params is None else params, default_timeout)
    return ToolResult(
        observation=result.observation,
        exit_code=result.exit_code,
        error=result.error,
        done=result.done,
        answer=result.answer,
        duration=time.monotonic() - started,
    )


def _dispatch(
    sandbox: Sandbox, tool: Any, params: Any, default_timeout: float | None
) -> ToolResult:
    spec = _SPECS.get(tool) if isinstance(tool, str) else None
    if spec is None:
        close = difflib.get_close_matches(str(tool), list(_SPECS), n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        return _error(
            f"Unknown tool {tool!r}.{hint} Available tools: {', '.join(_SPECS)}.", "unknown_tool"
        )
    if spec.name == "git" and isinstance(params, Mapping) and isinstance(params.get("args"), str):
        return _error(
            'git args must be a list of strings, one argument each, e.g. ["commit", "-m", '
            f'"fix the bug"], not one string (got {params["args"]!r}).',
            "invalid_params",
        )
    problem = _check_params(spec, params)
    if problem:
        return _error(problem, "invalid_params")
    clean = {k: v for k, v in params.items() if v is not None}
    try:
        return _TOOLS[spec.name](sandbox, clean, default_timeout)
    except SandboxError as exc:
        return _error(f"{spec.name} failed: {exc}", "sandbox_error")
