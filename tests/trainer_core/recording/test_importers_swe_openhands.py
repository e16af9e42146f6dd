"""The SWE-agent, mini-swe-agent and OpenHands importers: the real logs in
../shared/data/agent-logs (skipped when absent) and small fixtures of our own."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trainer_core.recording.importers import ImportFailure, Source, import_path
from trainer_core.recording.importers.mini_swe_agent import MiniSweAgentImporter
from trainer_core.recording.importers.openhands import OpenHandsImporter
from trainer_core.recording.importers.swe_agent import SweAgentImporter, parse_action
from trainer_core.recording.schema import Trajectory

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "agent-logs"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/agent-logs is absent")
MINE = [SweAgentImporter(), MiniSweAgentImporter(), OpenHandsImporter()]


def _load(path: Path, expected_format: str):
    results = import_path(path)
    assert len(results) == 1
    result = results[0]
    assert result.format == expected_format
    for trajectory in result.trajectories:
        again = Trajectory.model_validate_json(trajectory.to_json())
        assert again == trajectory
        assert trajectory.source_format == expected_format
        assert [s.index for s in trajectory.steps] == list(range(len(trajectory.steps)))
    return result


def _write(tmp_path: Path, name: str, content) -> Path:
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content))
    return path


# ----------------------------------------------------------------------------- real logs


@needs_shared
def test_swe_agent_test_repo():
    result = _load(SHARED / "swe-agent_test-repo.traj", "swe-agent")
    assert len(result.trajectories) == 1
    (t,) = result.trajectories
    assert len(t.tool_steps) == 5
    assert [s.tool for s in t.tool_steps] == ["find_file", "open", "edit", "bash", "submit"]
    assert t.tool_steps[0].params == {"file_name": "missing_colon.py"}
    assert t.tool_steps[0].thought.startswith("To start addressing this issue")
    assert (
        t.tool_steps[3].params["command"] == "python3 /SWE-agent__test-repo/tests/missing_colon.py"
    )
    assert t.tool_steps[3].observation == "8.2"
    assert "diff --git a/tests/missing_colon.py" in t.tool_steps[4].observation
    assert t.tool_steps[0].duration == pytest.approx(0.2814128329991945)
    assert t.outcome.metadata["exit_status"] == "submitted"
    assert "+def division(a: float, b: float) -> float:" in t.outcome.metadata["submission"]
    assert t.outcome.terminated is True
    assert t.outcome.success is None
    assert t.task.id == "SWE-agent__test-repo-i1"
    assert t.task.prompt.startswith("SyntaxError: invalid syntax")
    assert t.model == "gpt-4o"
    assert (t.usage.tokens_in, t.usage.tokens_out) == (7141, 243)
    assert t.usage.cost_usd == pytest.approx(0.01952)
    assert t.agent == "swe-agent"


@needs_shared
def test_swe_agent_function_calling_marshmallow():
    result = _load(SHARED / "swe-agent_function-calling_marshmallow.traj", "swe-agent")
    assert result.format_version == "traj/function-calling"
    (t,) = result.trajectories
    assert len(t.tool_steps) == 11
    assert [s.tool for s in t.tool_steps] == [
        "create", "insert", "bash", "bash", "find_file", "open",
        "edit", "edit", "bash", "bash", "submit",
    ]  # fmt: skip
    assert t.tool_steps[4].params == {"file_name": "fields.py", "dir": "src"}
    assert t.tool_steps[5].params == {"path": "src/marshmallow/fields.py", "line_number": 1474}
    assert t.tool_steps[6].params["search"].startswith("return int(value.total_seconds()")
    assert t.tool_steps[6].metadata["action"].startswith("edit 'return int(")
    assert "E999 IndentationError" in t.tool_steps[6].observation
    assert t.tool_steps[8].observation == "345"
    assert t.outcome.metadata["exit_status"] == "submitted"
    assert t.outcome.terminated is True
    assert t.task.id == "marshmallow-code__marshmallow-1867"
    assert t.task.prompt.startswith("TimeDelta serialization precision")


@needs_shared
def test_mini_swe_agent_local():
    result = _load(SHARED / "mini-swe-agent_local.traj.json", "mini-swe-agent")
    (t,) = result.trajectories
    assert len(t.tool_steps) == 2
    first, last = t.tool_steps
    assert first.tool == "bash"
    assert first.params == {"command": "echo 'hello world'"}
    assert first.thought == "Here be some dummy command:"
    assert first.observation == "hello world"
    assert first.exit_code == 0
    assert last.params["command"] == "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"
    assert t.outcome.terminated is True
    assert t.outcome.success is None
    assert t.task.prompt == "Blah blah blah"


@needs_shared
def test_openhands_basic():
    result = _load(SHARED / "openhands_basic.json", "openhands")
    (t,) = result.trajectories
    assert len(t.tool_steps) == 2
    edit, finish = t.tool_steps
    assert edit.tool == "str_replace_editor"
    assert edit.metadata["action"] == "edit"
    assert edit.params["command"] == "create"
    assert edit.params["path"] == "/workspace/game_2048.py"
    assert "class Game2048" in edit.params["file_text"]
    assert "translated_ipython_code" not in edit.params
    assert "+++ /workspace/game_2048.py" in edit.observation
    assert edit.thought.startswith("I'll help you create a simple 2048 game")
    assert (edit.tokens_in, edit.tokens_out) == (3486, 1135)
    assert finish.tool == "finish"
    assert finish.thought.startswith("I've created a simple implementation")
    assert t.outcome.terminated is True
    assert t.task.prompt.startswith("Please create a simple 2048 game")
    assert t.model == "claude-3-5-sonnet-20241022"


@needs_shared
def test_openhands_resolver_output():
    result = _load(SHARED / "openhands_resolver_output.jsonl", "openhands")
    assert len(result.trajectories) == 2
    first, second = result.trajectories
    assert len(first.tool_steps) == 3 + 1
    assert len(second.tool_steps) == 21 + 1
    assert [s.tool for s in first.tool_steps] == ["run", "run_ipython", "run", "finish"]
    assert first.tool_steps[0].params["command"] == "touch LICENSE"
    assert "is_confirmed" not in first.tool_steps[0].params
    assert first.tool_steps[0].exit_code == 0
    assert "MIT License has been added" in first.tool_steps[1].observation
    assert [s.tool for s in second.tool_steps].count("run_ipython") == 20
    for t in (first, second):
        assert t.outcome.success is True
        assert t.outcome.terminated is True
        assert t.tool_steps[-1].tool == "finish"
        assert t.task.prompt.startswith("Please fix the following issue")
    assert first.task.id == "neubig/pr-viewer#5"
    assert first.usage.cost_usd == pytest.approx(0.070713)
    assert second.usage.cost_usd == pytest.approx(1.152933)
    assert "diff --git a/LICENSE" in first.outcome.metadata["git_patch"]


@needs_shared
@pytest.mark.parametrize(
    "name",
    ["inspect_security-guide.json", "inspect_read_sample.eval", "tau-bench_airline_slice.json"],
)
def test_other_real_formats_are_not_claimed(name):
    source = Source(name, (SHARED / name).read_bytes())
    assert [imp.name for imp in MINE if imp.sniff(source)] == []


# ----------------------------------------------------------------------------- own fixtures

SWE_HISTORY_ONLY = {
    "environment": "swe_main",
    "history": [
        {"role": "system", "content": "You are an autonomous programmer."},
        {"role": "user", "content": "A demo", "is_demo": True},
        {
            "role": "user",
            "content": "ISSUE:\nadd() returns the wrong sign\n\nINSTRUCTIONS:\nFix it.",
        },
        {
            "role": "assistant",
            "content": "Let me look.",
            "thought": "Let me look.",
            "action": "ls -la",
        },
        {"role": "user", "content": "calc.py\ntests/"},
        {
            "role": "assistant",
            "content": "Open the file.",
            "thought": "Open the file.",
            "action": "str_replace_editor view /repo/calc.py",
        },
        {"role": "user", "content": "def add(a, b):\n    return a - b"},
        {
            "role": "assistant",
            "content": [{"type": "text", "text": "Fix the sign."}],
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {
                        "name": "str_replace_editor",
                        "arguments": json.dumps(
                            {
                                "command": "str_replace",
                                "path": "/repo/calc.py",
                                "old_str": "a - b",
                                "new_str": "a + b",
                            }  # fmt: skip
                        ),
                    },
                }
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "The file /repo/calc.py has been edited.",
        },
        {"role": "assistant", "content": "Done, submitting.\n\n```\nsubmit\n```"},
        {"role": "user", "content": "diff --git a/calc.py b/calc.py"},
    ],
    "info": {
        "exit_status": "submitted",
        "submission": "diff --git a/calc.py b/calc.py",
        "model_stats": {"instance_cost": 0.5, "tokens_sent": 1000, "tokens_received": 50},
    },
}


def test_swe_agent_history_only(tmp_path):
    result = _load(_write(tmp_path, "run.traj", SWE_HISTORY_ONLY), "swe-agent")
    assert result.format_version == "traj/history-only"
    (t,) = result.trajectories
    assert [s.tool for s in t.tool_steps] == [
        "bash",
        "str_replace_editor",
        "str_replace_editor",
        "submit",
    ]
    assert t.tool_steps[0].params == {"command": "ls -la"}
    assert t.tool_steps[0].observation == "calc.py\ntests/"
    assert t.tool_steps[1].params["subcommand"] == "view"
    assert t.tool_steps[1].params["path"] == "/repo/calc.py"
    assert t.tool_steps[2].params["new_str"] == "a + b"
    assert t.tool_steps[2].thought == "Fix the sign."
    assert t.tool_steps[2].observation == "The file /repo/calc.py has been edited."
    assert t.tool_steps[3].thought == "Done, submitting."
    assert t.task.prompt == "add() returns the wrong sign"
    assert t.task.id == "run"
    assert t.outcome.terminated is True
    assert t.outcome.metadata["submission"] == "diff --git a/calc.py b/calc.py"
    assert (t.usage.tokens_in, t.usage.tokens_out, t.usage.cost_usd) == (1000, 50, 0.5)


def test_swe_agent_thought_action_cost_limit(tmp_path):
    data = {
        "environment": "swe_main",
        "trajectory": [
            {
                "action": "str_replace_editor str_replace /r/a.py --old_str 'x = 1' --new_str 'x = 2'",
                "observation": "edited",
                "thought": "change x",
                "execution_time": 0.5,
            },
            {"action": "grep -rn foo .", "observation": "./a.py:1:foo", "response": "search"},
        ],
        "history": [],
        "info": {"exit_status": "exit_cost", "submission": None, "model_stats": {}},
    }
    result = _load(_write(tmp_path, "cost.traj", data), "swe-agent")
    assert result.format_version == "traj/thought-action"
    (t,) = result.trajectories
    edit, grep = t.tool_steps
    assert edit.tool == "str_replace_editor"
    assert edit.params["subcommand"] == "str_replace"
    assert (edit.params["old_str"], edit.params["new_str"]) == ("x = 1", "x = 2")
    assert edit.duration == 0.5
    assert grep.tool == "bash" and grep.params == {"command": "grep -rn foo ."}
    assert grep.thought == "search"
    assert t.outcome.truncated is True and t.outcome.terminated is False


def test_parse_action():
    assert parse_action("find_file x.py src") == (
        "find_file",
        {"command": "find_file x.py src", "args": ["x.py", "src"]},
    )
    assert parse_action("cd /repo && pytest -q")[0] == "bash"
    tool, params = parse_action("edit 1:2\n    return 'a\nend_of_edit")
    assert tool == "edit" and params["body"].endswith("end_of_edit")


MINI_OBJECT = {
    "info": {
        "exit_status": "Submitted",
        "submission": "diff --git a/x b/x",
        "model_stats": {"instance_cost": 0.02, "api_calls": 3},
        "mini_version": "1.9.0",
        "config": {"model": {"model_name": "claude-sonnet-4"}},
    },
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "<pr_description>\nMake tests pass\n</pr_description>"},
        {"role": "assistant", "content": "THOUGHT: run the tests\n\n```bash\npytest -q\n```"},
        {"role": "user", "content": "<returncode>1</returncode>\n<output>\n1 failed\n</output>"},
        {"role": "assistant", "content": "I forgot the code block."},
        {"role": "user", "content": "Please always provide EXACTLY ONE action."},
        {
            "role": "assistant",
            "content": "Finish.\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && git diff\n```",
        },
        {"role": "user", "content": "diff --git a/x b/x"},
    ],
    "trajectory_format": "mini-swe-agent-1",
}


def test_mini_swe_agent_object(tmp_path):
    result = _load(_write(tmp_path, "task.traj.json", MINI_OBJECT), "mini-swe-agent")
    assert result.format_version == "mini-swe-agent-1/1.9.0"
    (t,) = result.trajectories
    assert [s.tool for s in t.tool_steps] == ["bash", "message", "bash"]
    assert t.tool_steps[0].params == {"command": "pytest -q"}
    assert t.tool_steps[0].thought == "run the tests"
    assert (t.tool_steps[0].observation, t.tool_steps[0].exit_code) == ("1 failed", 1)
    assert t.tool_steps[1].error == "format_error"
    assert "EXACTLY ONE action" in t.tool_steps[1].observation
    assert t.outcome.metadata == {"exit_status": "Submitted", "submission": "diff --git a/x b/x"}
    assert t.outcome.terminated is True
    assert t.task.prompt == "Make tests pass"
    assert t.model == "claude-sonnet-4"
    assert t.usage.cost_usd == 0.02
    assert t.metadata["api_calls"] == 3


OPENHANDS_EVENTS = [
    {"id": 0, "source": "agent", "action": "system", "args": {"content": "You are OpenHands."}},
    {"id": 1, "source": "user", "action": "message", "args": {"content": "Fix the failing test"}},
    {
        "id": 2,
        "source": "environment",
        "observation": "agent_state_changed",
        "content": "",
        "extras": {"agent_state": "running"},
    },  # fmt: skip
    {
        "id": 3,
        "timestamp": "2025-01-01T10:00:00",
        "source": "agent",
        "message": "Running command: pytest -q",
        "action": "run",
        "args": {"command": "pytest -q", "thought": "Run the tests first.", "blocking": False},
        "tool_call_metadata": {"function_name": "execute_bash", "tool_call_id": "t1"},
    },
    {
        "id": 4,
        "timestamp": "2025-01-01T10:00:02.5",
        "source": "agent",
        "cause": 3,
        "observation": "run",
        "content": "1 failed",
        "extras": {"command": "pytest -q", "metadata": {"exit_code": 1}},
    },
    {
        "id": 5,
        "source": "agent",
        "action": "read",
        "args": {"path": "/w/missing.py", "thought": ""},
    },
    {
        "id": 6,
        "source": "agent",
        "cause": 5,
        "observation": "error",
        "content": "File not found: /w/missing.py",
        "extras": {"error_id": ""},
    },  # fmt: skip
    {"id": 7, "source": "agent", "action": "think", "args": {"thought": "The path is wrong."}},
    {
        "id": 8,
        "source": "agent",
        "cause": 7,
        "observation": "think",
        "content": "Your thought has been logged.",
    },  # fmt: skip
    {
        "id": 9,
        "source": "agent",
        "action": "message",
        "args": {"content": "I fixed it.", "wait_for_response": False},
    },  # fmt: skip
    {
        "id": 10,
        "source": "agent",
        "action": "finish",
        "args": {"outputs": {}, "thought": "", "final_thought": "All done."},
    },  # fmt: skip
    {
        "id": 11,
        "source": "environment",
        "observation": "agent_state_changed",
        "content": "",
        "extras": {"agent_state": "finished"},
    },  # fmt: skip
]


def test_openhands_events_with_error(tmp_path):
    result = _load(_write(tmp_path, "events.json", OPENHANDS_EVENTS), "openhands")
    (t,) = result.trajectories
    assert [s.tool for s in t.tool_steps] == ["execute_bash", "read", "think", "finish"]
    run, read, think, finish = t.tool_steps
    # the dialogue in its place: the system prompt, the user's request, the agent's text reply
    assert [(s.kind, s.role, s.tool) for s in t.steps] == [
        ("message", "system", ""),
        ("message", "user", ""),
        ("tool", None, "execute_bash"),
        ("tool", None, "read"),
        ("tool", None, "think"),
        ("message", "assistant", ""),
        ("tool", None, "finish"),
    ]
    system, request, message = t.message_steps
    assert (system.text, request.text, message.text) == (
        "You are OpenHands.",
        "Fix the failing test",
        "I fixed it.",
    )
    assert run.params == {"command": "pytest -q"}
    assert run.thought == "Run the tests first."
    assert (run.observation, run.exit_code, run.error) == ("1 failed", 1, "exit code 1")
    assert run.duration == 2.5
    assert read.error == "error"
    assert read.observation == "File not found: /w/missing.py"
    assert think.params == {} and think.thought == "The path is wrong."
    assert finish.thought == "All done."
    assert t.task.prompt == "Fix the failing test"
    assert t.outcome.terminated is True and t.outcome.success is None


def test_openhands_eval_output_pairs(tmp_path):
    rows = [
        {
            "instance_id": "repo__1",
            "instruction": "Fix issue 1",
            "history": [
                [{"action": "message", "args": {"content": "Fix issue 1"}, "source": "user"}, {}],
                [
                    {"action": "run", "args": {"command": "ls"}, "source": "agent", "id": 2},
                    {
                        "observation": "run",
                        "content": "a.py",
                        "cause": 2,
                        "extras": {"exit_code": 0},
                    },
                ],
                [{"action": "finish", "args": {}, "source": "agent", "id": 4}, {}],
            ],
            "metrics": {
                "accumulated_cost": 0.3,
                "accumulated_token_usage": {"prompt_tokens": 10, "completion_tokens": 2},
            },  # fmt: skip
            "metadata": {"agent_class": "CodeActAgent", "llm_config": {"model": "gpt-4o"}},
            "test_result": {"git_patch": "diff", "report": {"resolved": False}},
        }
    ]
    path = _write(tmp_path, "output.jsonl", "\n".join(json.dumps(r) for r in rows) + "\n")
    result = _load(path, "openhands")
    (t,) = result.trajectories
    assert [s.tool for s in t.tool_steps] == ["run", "finish"]
    assert t.tool_steps[0].observation == "a.py"
    assert t.outcome.success is False
    assert t.task.id == "repo__1" and t.model == "gpt-4o"
    assert (t.usage.tokens_in, t.usage.tokens_out, t.usage.cost_usd) == (10, 2, 0.3)


# ----------------------------------------------------------------------------- malformed


def test_truncated_json_names_the_file(tmp_path):
    text = json.dumps(SWE_HISTORY_ONLY)
    path = _write(tmp_path, "broken.traj", text[: len(text) // 2])
    with pytest.raises(ImportFailure) as info:
        import_path(path)
    message = str(info.value)
    assert message.startswith("broken.traj")
    assert "invalid JSON" in message
    assert "swe-agent" in message and "openhands" in message  # the formats tried


def test_swe_agent_trajectory_not_a_list(tmp_path):
    data = {"trajectory": "oops", "history": [], "info": {"exit_status": "submitted"}}
    with pytest.raises(ImportFailure) as info:
        import_path(_write(tmp_path, "bad.traj", data))
    message = str(info.value)
    assert "bad.traj, record 0, field 'trajectory'" in message
    assert "expected list, got str" in message
    assert "formats tried: swe-agent" in message


def test_swe_agent_step_action_wrong_type(tmp_path):
    data = {"trajectory": [{"action": ["ls"], "observation": ""}], "info": {}}
    with pytest.raises(ImportFailure) as info:
        import_path(_write(tmp_path, "bad2.traj", data))
    assert "record 0, field 'trajectory[0].action'" in str(info.value)
    assert "swe-agent" in str(info.value)


def test_mini_swe_agent_messages_not_a_list(tmp_path):
    data = dict(MINI_OBJECT, messages="nope")
    with pytest.raises(ImportFailure) as info:
        import_path(_write(tmp_path, "bad.traj.json", data))
    message = str(info.value)
    assert "bad.traj.json, record 0, field 'messages'" in message
    assert "formats tried: mini-swe-agent" in message


def test_openhands_history_wrong_type(tmp_path):
    good = {"instance_id": "ok", "instruction": "x", "history": OPENHANDS_EVENTS}
    bad = {"instance_id": "inst-2", "instruction": "y", "history": "not events"}
    path = _write(tmp_path, "output.jsonl", json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(ImportFailure) as info:
        import_path(path)
    message = str(info.value)
    assert "output.jsonl, record inst-2, field 'history'" in message
    assert "formats tried: openhands" in message


def test_openhands_event_args_wrong_type(tmp_path):
    events = [dict(e) for e in OPENHANDS_EVENTS]
    events[3]["args"] = ["pytest"]
    with pytest.raises(ImportFailure) as info:
        import_path(_write(tmp_path, "events.json", events))
    message = str(info.value)
    assert "events.json, record 0, field '(root)[3].args'" in message
    assert "expected dict, got list" in message
    assert "openhands" in message


# ----------------------------------------------------------------------------- detection


def _claims(data) -> list[str]:
    text = data if isinstance(data, str) else json.dumps(data)
    source = Source("x.json", text.encode())
    return [imp.name for imp in MINE if imp.sniff(source)]


def test_sniffers_do_not_claim_other_formats():
    openai_chat = [
        {"role": "system", "content": "be helpful"},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}
            ],
        },  # fmt: skip
        {"role": "tool", "tool_call_id": "1", "content": "ok"},
        {"role": "assistant", "content": "Run this:\n```bash\nls\n```"},
    ]
    plain_chat = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    python_chat = [{"role": "user", "content": "hi"},
                   {"role": "assistant", "content": "```python\nprint(1)\n```"}]  # fmt: skip
    inspect_log = {"version": 2, "status": "success", "eval": {"task": "t"}, "samples": []}
    tau = [{"task_id": 1, "reward": 1.0, "info": {}, "traj": [{"role": "user", "content": "x"}]}]
    for data in (openai_chat, plain_chat, python_chat, inspect_log, tau):
        assert _claims(data) == []
    assert _claims(SWE_HISTORY_ONLY) == ["swe-agent"]
    assert _claims(MINI_OBJECT) == ["mini-swe-agent"]
    assert _claims(MINI_OBJECT["messages"]) == ["mini-swe-agent"]
    assert _claims(OPENHANDS_EVENTS) == ["openhands"]
