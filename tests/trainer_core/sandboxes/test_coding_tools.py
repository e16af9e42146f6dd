"""The coding tools (read/write/edit files, bash, grep, list_dir, git, submit) on LocalSandbox."""

from __future__ import annotations

import os
import threading

import pytest

from tests.trainer_core.sandboxes import require_isolation
from trainer_core.errors import SandboxError
from trainer_core.sandboxes.base import ExecResult, Sandbox, SandboxInfo, SandboxLimits
from trainer_core.sandboxes.local import LocalSandbox
from trainer_core.sandboxes.tools import CODING_TOOLS, ToolResult, run_tool
from trainer_core.tasks.model import ToolSpec

SOURCE = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"


@pytest.fixture
def sb(tmp_path):
    with LocalSandbox(
        SandboxLimits(wall_seconds=10),
        files={"calc.py": SOURCE, "notes/todo.txt": "fix add\n", "sentinel": "keep me\n"},
        workdir_parent=str(tmp_path),
    ) as sandbox:
        yield sandbox


def call(sandbox, tool, **params) -> ToolResult:
    result = run_tool(sandbox, tool, params)
    assert isinstance(result, ToolResult)
    assert result.duration >= 0
    return result


# --- the specs ------------------------------------------------------------------------------


def test_tool_specs_are_json_schema():
    names = [spec.name for spec in CODING_TOOLS]
    assert names == [
        "read_file",
        "write_file",
        "edit_file",
        "bash",
        "grep",
        "list_dir",
        "git",
        "submit",
        "finish",
    ]
    for spec in CODING_TOOLS:
        assert isinstance(spec, ToolSpec)
        params = spec.parameters
        assert params["type"] == "object"
        assert set(params["required"]) <= set(params["properties"])
        for schema in params["properties"].values():
            assert schema["type"] in {"string", "integer", "number", "boolean", "array"}
        assert spec.as_dict()["name"] == spec.name and spec.description
    git = next(spec for spec in CODING_TOOLS if spec.name == "git")
    assert git.parameters["properties"]["args"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": git.parameters["properties"]["args"]["description"],
    }


# --- read_file / write_file / edit_file -----------------------------------------------------


def test_read_file_numbers_lines(sb):
    result = call(sb, "read_file", file_path="calc.py")
    assert result.error is None and not result.done
    lines = result.observation.splitlines()
    assert lines[0] == "calc.py"
    assert lines[1] == "1\tdef add(a, b):"
    assert lines[-1] == "6\t    return a - b"


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        (2, 2, ["2\t    return a - b"]),
        (5, None, ["5\tdef sub(a, b):", "6\t    return a - b"]),
        (None, 1, ["1\tdef add(a, b):"]),
        (5, 99, ["5\tdef sub(a, b):", "6\t    return a - b"]),
    ],
)
def test_read_file_line_ranges(sb, start, end, expected):
    params = {"file_path": "calc.py"}
    if start is not None:
        params["start_line"] = start
    if end is not None:
        params["end_line"] = end
    result = run_tool(sb, "read_file", params)
    assert result.error is None
    header, *body = result.observation.splitlines()
    assert "of 6" in header
    assert body == expected


@pytest.mark.parametrize(
    ("params", "needle"),
    [
        ({"start_line": 9}, "past the end"),
        ({"start_line": 4, "end_line": 2}, "before start_line"),
        ({"start_line": 0}, "1 or more"),
        ({"start_line": "2"}, "start_line must be an integer"),
        ({"start_line": True}, "start_line must be an integer"),
    ],
)
def test_read_file_bad_ranges(sb, params, needle):
    result = run_tool(sb, "read_file", {"file_path": "calc.py", **params})
    assert result.error == "invalid_params"
    assert needle in result.observation


def test_read_file_missing_and_binary(sb):
    result = call(sb, "read_file", file_path="nope.py")
    assert result.error == "sandbox_error" and "no such file" in result.observation
    sb.write_file("blob.bin", b"\x00\x01\x02")
    result = call(sb, "read_file", file_path="blob.bin")
    assert result.error == "sandbox_error" and "binary" in result.observation
    sb.write_file("empty.txt", "")
    assert call(sb, "read_file", file_path="empty.txt").observation == "empty.txt is empty."


def test_line_numbers_match_grep(sb):
    sb.write_file("odd.txt", "a\fb\nc\r\nd")  # form feed, CRLF, no final newline
    lines = call(sb, "read_file", file_path="odd.txt").observation.split("\n")[1:]
    assert [line.split("\t")[0] for line in lines] == ["1", "2", "3"]
    assert call(sb, "grep", pattern="^d", path="odd.txt").observation == "3:d"


def test_edit_file_refuses_non_utf8(sb):
    sb.write_file("latin1.txt", "café\n".encode("latin-1"))
    result = call(sb, "edit_file", file_path="latin1.txt", old_string="caf", new_string="tea")
    assert result.error == "sandbox_error" and "not UTF-8" in result.observation
    assert sb.read_file("latin1.txt") == "café\n".encode("latin-1")


def test_write_then_read(sb):
    result = call(sb, "write_file", file_path="pkg/new.py", content="A = 1\nB = 2\n")
    assert result.error is None and "12 bytes" in result.observation
    assert sb.read_file("pkg/new.py") == b"A = 1\nB = 2\n"
    result = call(sb, "read_file", file_path="pkg/new.py", start_line=2)
    assert result.observation.splitlines()[1:] == ["2\tB = 2"]


def test_write_file_outside_the_workspace_is_an_error(sb, tmp_path):
    for path in ("../escape.txt", "/tmp/escape.txt", "a/../../escape.txt"):
        result = call(sb, "write_file", file_path=path, content="x")
        assert result.error == "sandbox_error", path
        assert "workspace" in result.observation
    assert not (tmp_path / "escape.txt").exists()


def test_edit_file_replaces_a_unique_occurrence(sb):
    result = call(
        sb,
        "edit_file",
        file_path="calc.py",
        old_string="def add(a, b):\n    return a - b",
        new_string="def add(a, b):\n    return a + b",
    )
    assert result.error is None
    assert "line 1" in result.observation
    assert sb.read_file("calc.py").decode() == SOURCE.replace("a - b", "a + b", 1)


def test_edit_file_missing_string(sb):
    result = call(sb, "edit_file", file_path="calc.py", old_string="a * b", new_string="a + b")
    assert result.error == "not_found"
    assert "found 0 times" in result.observation
    assert sb.read_file("calc.py").decode() == SOURCE


def test_edit_file_ambiguous_string(sb):
    result = call(
        sb, "edit_file", file_path="calc.py", old_string="return a - b", new_string="return 0"
    )
    assert result.error == "ambiguous"
    assert "found 2 times" in result.observation
    assert sb.read_file("calc.py").decode() == SOURCE


def test_edit_file_other_errors(sb):
    assert call(sb, "edit_file", file_path="x.py", old_string="a", new_string="b").error == (
        "sandbox_error"
    )
    assert call(sb, "edit_file", file_path="calc.py", old_string="", new_string="b").error == (
        "invalid_params"
    )
    same = call(sb, "edit_file", file_path="calc.py", old_string="add", new_string="add")
    assert same.error == "invalid_params"


# --- bash -----------------------------------------------------------------------------------


def test_bash_exit_codes_and_output(sb):
    ok = call(sb, "bash", command="echo out; echo err >&2")
    assert ok.exit_code == 0 and ok.error is None
    assert ok.observation == "out\n[stderr]\nerr\n[exit code 0]"
    failed = call(sb, "bash", command="exit 3")
    assert failed.exit_code == 3 and failed.error == "nonzero_exit"
    assert "[exit code 3]" in failed.observation
    missing = call(sb, "bash", command="no-such-command-xyz")
    assert missing.exit_code == 127


def test_bash_timeout(sb):
    result = call(sb, "bash", command="sleep 5", timeout=0.5)
    assert result.error == "timeout" and result.exit_code == 124
    assert "timed out after 0.5s" in result.observation
    assert result.duration < 2
    default = run_tool(sb, "bash", {"command": "sleep 5"}, default_timeout=0.5)
    assert default.error == "timeout" and default.duration < 2


@pytest.mark.parametrize("timeout", [0, -1, 10_000, "5", True])
def test_bash_bad_timeout(sb, timeout):
    assert call(sb, "bash", command="true", timeout=timeout).error == "invalid_params"


def test_bash_empty_command(sb):
    assert call(sb, "bash", command="  ").error == "invalid_params"


# --- grep -----------------------------------------------------------------------------------


def test_grep_finds_matches(sb):
    result = call(sb, "grep", pattern="return a [-+] b")
    assert result.error is None and result.exit_code == 0
    assert result.observation.splitlines() == [
        "calc.py:2:    return a - b",
        "calc.py:6:    return a - b",
    ]
    scoped = call(sb, "grep", pattern="FIX", path="notes", ignore_case=True)
    assert scoped.observation == "notes/todo.txt:1:fix add"
    assert call(sb, "grep", pattern="FIX", path="notes").observation == "No matches."


@pytest.mark.parametrize(
    "pattern",
    [
        "'; rm -rf / #",
        "$(touch pwned)",
        "`touch pwned`",
        "x; touch pwned",
        "x && touch pwned",
        "| touch pwned",
        "$(rm sentinel)",
        '"; rm sentinel; echo "',
    ],
)
def test_grep_never_runs_the_pattern_through_a_shell(sb, pattern):
    sb.write_file("haystack.txt", f"literal {pattern} here\n")
    result = call(sb, "grep", pattern=pattern)
    assert result.error in (None, "nonzero_exit")  # a match, no match, or a regex error
    assert not os.path.exists(os.path.join(sb.workspace, "pwned"))
    assert sb.read_file("sentinel") == b"keep me\n"
    assert call(sb, "bash", command="ls pwned").exit_code != 0


def test_grep_pattern_that_looks_like_an_option(sb):
    sb.write_file("flags.txt", "use --version to see it\n")
    result = call(sb, "grep", pattern="--version")
    assert result.observation == "flags.txt:1:use --version to see it"


def test_grep_path_must_stay_in_the_workspace(sb):
    for path in ("../", "/etc", "notes/../../x"):
        result = call(sb, "grep", pattern="root", path=path)
        assert result.error == "sandbox_error", path


# --- list_dir -------------------------------------------------------------------------------


def test_list_dir(sb):
    root = call(sb, "list_dir")
    assert root.error is None
    for name in ("calc.py", "notes", "sentinel"):
        assert name in root.observation
    sub = call(sb, "list_dir", path="notes")
    assert "todo.txt" in sub.observation and "calc.py" not in sub.observation
    missing = call(sb, "list_dir", path="nope")
    assert missing.error == "nonzero_exit" and missing.exit_code != 0
    assert call(sb, "list_dir", path="../..").error == "sandbox_error"
    assert call(sb, "list_dir", path="/").error == "sandbox_error"


# --- git ------------------------------------------------------------------------------------


def test_git_init_add_commit_log(sb):
    assert call(sb, "git", args=["init", "-q"]).exit_code == 0
    assert call(sb, "git", args=["add", "-A"]).exit_code == 0
    commit = call(sb, "git", args=["commit", "-q", "-m", "initial; $(touch pwned)"])
    assert commit.exit_code == 0, commit.observation
    call(
        sb,
        "edit_file",
        file_path="calc.py",
        old_string="add(a, b):\n    return a - b",
        new_string="add(a, b):\n    return a + b",
    )
    status = call(sb, "git", args=["status", "--short"])
    assert status.observation.splitlines()[0] == " M calc.py"
    assert call(sb, "git", args=["commit", "-qam", "fix add"]).exit_code == 0
    log = call(sb, "git", args=["log", "--format=%s"])
    assert log.observation.splitlines()[:2] == ["fix add", "initial; $(touch pwned)"]
    assert not os.path.exists(os.path.join(sb.workspace, "pwned"))


def test_git_errors(sb):
    as_string = call(sb, "git", args="commit -m x")
    assert as_string.error == "invalid_params"
    assert "list of strings" in as_string.observation
    assert call(sb, "git", args=[]).error == "invalid_params"
    assert call(sb, "git", args=["status", 3]).error == "invalid_params"
    not_a_repo = call(sb, "git", args=["log"])
    assert not_a_repo.error == "nonzero_exit" and not_a_repo.exit_code != 0


# --- submit / finish ------------------------------------------------------------------------


def test_submit_and_finish_end_the_episode(sb):
    submitted = call(sb, "submit", answer="42")
    assert submitted.done and submitted.answer == "42" and submitted.error is None
    finished = call(sb, "finish")
    assert finished.done and finished.answer is None
    assert call(sb, "submit", answer=42).error == "invalid_params"


# --- bad calls ------------------------------------------------------------------------------


def test_unknown_tool(sb):
    result = call(sb, "raed_file", file_path="x")
    assert result.error == "unknown_tool"
    assert "read_file" in result.observation  # suggests the near miss and lists the tools
    assert run_tool(sb, None, {}).error == "unknown_tool"  # type: ignore[arg-type]


def test_missing_wrong_and_unknown_parameters(sb):
    missing = run_tool(sb, "write_file", {"file_path": "a.txt"})
    assert missing.error == "invalid_params"
    assert "missing required parameter(s) content" in missing.observation
    assert "write_file(file_path: a string, content: a string)" in missing.observation
    wrong = run_tool(sb, "grep", {"pattern": "x", "ignore_case": "yes"})
    assert (
        wrong.error == "invalid_params" and "ignore_case must be true or false" in wrong.observation
    )
    unknown = run_tool(sb, "bash", {"command": "true", "cwd": "/"})
    assert unknown.error == "invalid_params" and "unknown parameter(s) cwd" in unknown.observation
    assert run_tool(sb, "bash", None).error == "invalid_params"
    assert run_tool(sb, "bash", ["ls"]).error == "invalid_params"  # type: ignore[arg-type]
    assert run_tool(sb, "list_dir", None).error is None


class _BrokenSandbox(Sandbox):
    """Every operation fails with SandboxError: run_tool must turn that into an observation."""

    limits = SandboxLimits()

    def start(self): ...

    def exec(self, cmd, *, timeout=None, stdin=None) -> ExecResult:
        raise SandboxError("the sandbox is gone")

    def read_file(self, path):
        raise SandboxError("the sandbox is gone")

    def write_file(self, path, content):
        raise SandboxError("the sandbox is gone")

    def snapshot(self):
        return ""

    def restore(self, snapshot_id): ...

    def reset(self): ...

    def close(self): ...

    @property
    def info(self):
        return SandboxInfo(backend="broken", isolated=False)


@pytest.mark.parametrize(
    ("tool", "params"),
    [
        ("read_file", {"file_path": "a"}),
        ("write_file", {"file_path": "a", "content": ""}),
        ("edit_file", {"file_path": "a", "old_string": "x", "new_string": "y"}),
        ("bash", {"command": "ls"}),
        ("grep", {"pattern": "x"}),
        ("list_dir", {}),
        ("git", {"args": ["status"]}),
    ],
)
def test_sandbox_errors_become_observations(tool, params):
    result = run_tool(_BrokenSandbox(), tool, params)
    assert result.error == "sandbox_error"
    assert "the sandbox is gone" in result.observation


def test_tools_work_isolated(sb):
    """The same tools under bubblewrap: the agent's bash sees /work, not the host."""
    require_isolation()
    result = call(sb, "bash", command="pwd; ls /")
    assert result.observation.splitlines()[0] == "/work"
    assert "root" not in result.observation.splitlines()


def test_interrupting_a_tool_call(sb):
    timer = threading.Timer(0.3, sb.interrupt)
    timer.start()
    try:
        result = call(sb, "bash", command="sleep 30")
    finally:
        timer.cancel()
    assert result.exit_code != 0 and result.duration < 3
