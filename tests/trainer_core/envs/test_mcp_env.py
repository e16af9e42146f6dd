"""steplab/mcp against real MCP servers: mcp-server-time (PyPI, stdio) and
@modelcontextprotocol/server-filesystem (npm, run with node), both installed by
scripts/mcp-servers.sh, and the in-repo test server (the mcp SDK's server side) over stdio and
streamable HTTP. Without the real servers the tests that need them skip, except under
``CI=true``, where they fail."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from trainer_core.envs import make
from trainer_core.envs.mcp import McpEnv
from trainer_core.envs.wrappers import Timeout
from trainer_core.errors import ConfigError, EnvironmentUnavailable
from trainer_core.policies.scripted import ScriptedPolicy, run_episode
from trainer_core.tasks.model import Task, ToolCall

ROOT = Path(__file__).resolve().parents[3]
TEST_SERVER = Path(__file__).with_name("mcp_test_server.py")
DEFAULT_DIR = Path(os.environ.get("STEPLAB_MCP_DIR") or ROOT / "var" / "mcp-servers")
DEFAULTS = {
    "STEPLAB_MCP_TIME": DEFAULT_DIR / "time-venv" / "bin" / "mcp-server-time",
    "STEPLAB_MCP_FILESYSTEM": DEFAULT_DIR
    / "npm"
    / "node_modules"
    / ".bin"
    / "mcp-server-filesystem",
}


def real_server(var: str) -> str:
    """The command path of a real MCP server: ``$var``, else its default install path."""
    path = os.environ.get(var) or str(DEFAULTS[var])
    if os.path.isfile(path) and os.access(path, os.X_OK):
        return path
    reason = (
        f"the MCP server for {var} is not installed ({path} is missing); run "
        '`eval "$(bash scripts/mcp-servers.sh)"` to install it'
    )
    if os.environ.get("CI") == "true":
        pytest.fail(f"{reason} (CI=true: the MCP tests must run, not skip)", pytrace=False)
    pytest.skip(reason)


def children() -> set[int]:
    """Pids of this process's live child processes (from /proc)."""
    me, found = os.getpid(), set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2 :].split()
        if int(fields[1]) == me and fields[0] != "Z":
            found.add(int(entry))
    return found


def settle(check, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def tokyo_task() -> Task:
    return Task(
        id="time-1",
        prompt="How many hours is Tokyo ahead of UTC? Use the time tools, then finish.",
        expected_answer="+9.0h",
        checker="exact",
        answer_schema="raw",
        reference_solution=[
            ToolCall(
                tool="convert_time",
                params={"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
            ),
            ToolCall(tool="finish", params={"answer": "+9.0h"}),
        ],
    )


# --- mcp-server-time over stdio ---------------------------------------------------------------


@pytest.fixture(scope="module")
def time_env():
    env = McpEnv([real_server("STEPLAB_MCP_TIME")], call_timeout=20)
    yield env
    env.close()


def test_time_server_tools_are_the_action_space(time_env):
    time_env.reset(task="What time is it?")
    tools = {t.name: t for t in time_env.available_tools}
    assert set(tools) == {"get_current_time", "convert_time", "finish"}
    schema = tools["get_current_time"].parameters
    assert schema["properties"]["timezone"]["type"] == "string"
    assert schema["required"] == ["timezone"]
    assert set(tools["convert_time"].parameters["required"]) == {
        "source_timezone",
        "time",
        "target_timezone",
    }
    assert tools["finish"].parameters["properties"]["answer"]["type"] == "string"
    assert time_env.server_name == "mcp-time"


def test_first_observation_is_the_prompt(time_env):
    ts = time_env.reset(task={"prompt": "What time is it in UTC?"})
    assert ts.observation == "What time is it in UTC?"
    assert not ts.done


def test_get_current_time(time_env):
    time_env.reset(task="What time is it in UTC?")
    ts = time_env.step({"tool": "get_current_time", "params": {"timezone": "UTC"}})
    assert re.search(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\+00:00", ts.observation), ts.observation
    assert "error" not in ts.info
    assert ts.info["tool"] == "get_current_time"
    assert not ts.done and ts.reward == 0.0


def test_bad_timezone_is_a_tool_error_and_the_episode_goes_on(time_env):
    time_env.reset(task="What time is it on Mars?")
    ts = time_env.step({"tool": "get_current_time", "params": {"timezone": "Mars/Olympus"}})
    assert ts.info["error"] == "tool_error"
    assert ts.observation.startswith("Error from get_current_time:")
    assert "Mars/Olympus" in ts.observation
    assert not ts.done
    ts = time_env.step({"tool": "get_current_time", "params": {"timezone": "Europe/Paris"}})
    assert "Europe/Paris" in ts.observation and "error" not in ts.info


def test_unknown_tool_and_bad_action(time_env):
    time_env.reset(task="x")
    ts = time_env.step({"tool": "get_curent_time", "params": {"timezone": "UTC"}})
    assert ts.info["error"] == "unknown_tool"
    assert "get_current_time" in ts.observation
    ts = time_env.step({"tool": "finish", "params": {"answer": "1", "extra": 2}})
    assert ts.info["error"] == "invalid_params" and not ts.done


def test_finish_checks_the_answer_with_the_task_checker(time_env):
    task = tokyo_task()
    time_env.reset(task=task)
    ts = time_env.step({"tool": "finish", "params": {"answer": "+9.0h"}})
    assert ts.terminated and ts.reward == 1.0
    assert ts.info["outcome"]["success"] is True
    assert ts.info["answer"] == "+9.0h"

    time_env.reset(task=task)
    ts = time_env.step({"tool": "finish", "params": {"answer": "+8.0h"}})
    assert ts.terminated and ts.reward == 0.0
    assert ts.info["outcome"]["success"] is False
    assert "not correct" in ts.observation


def test_scripted_policy_full_episode():
    env = make("steplab/mcp", server=[real_server("STEPLAB_MCP_TIME")], max_steps=5)
    try:
        steps, last = run_episode(env, ScriptedPolicy(), tokyo_task())
    finally:
        env.close()
    assert [a["tool"] for a, _ in steps] == ["convert_time", "finish"]
    assert '"time_difference": "+9.0h"' in steps[0][1].observation
    assert last.terminated and last.reward == 1.0
    assert last.info["outcome"]["success"] is True


def test_close_leaves_no_process_and_no_thread():
    threads_before = set(threading.enumerate())
    before = children()
    env = McpEnv([real_server("STEPLAB_MCP_TIME")])
    env.reset(task="x")
    started = children() - before
    assert len(started) == 1, "the server runs as one child process"
    assert any(t.name == "steplab-mcp-loop" for t in threading.enumerate())
    env.close()
    assert settle(lambda: not (children() & started)), "the server process outlived close()"
    assert settle(lambda: set(threading.enumerate()) <= threads_before), threading.enumerate()
    env.close()  # twice is fine


def test_timeout_wrapper_interrupts_a_call_and_the_server_stays_usable():
    env = Timeout(
        McpEnv([sys.executable, str(TEST_SERVER), "stdio"], call_timeout=20), step_seconds=0.5
    )
    try:
        env.reset(task="x")
        started = time.monotonic()
        ts = env.step({"tool": "slow", "params": {"seconds": 10}})
        assert time.monotonic() - started < 3
        assert ts.truncated and ts.info["error"] == "timeout"
        env.reset(task="again")
        assert env.step({"tool": "echo", "params": {"text": "hi"}}).observation == "hi"
    finally:
        env.close()


# --- the in-repo server over stdio: death, collisions, configuration -------------------------


def test_server_death_raises_with_stderr_and_reset_restarts_it():
    env = McpEnv([sys.executable, str(TEST_SERVER), "stdio"], call_timeout=10)
    try:
        env.reset(task="x")
        with pytest.raises(EnvironmentUnavailable) as caught:
            env.step({"tool": "crash", "params": {}})
        assert "went away" in str(caught.value)
        assert "crashing on purpose" in str(caught.value)
        env.reset(task="x")
        assert env.step({"tool": "add", "params": {"a": 2, "b": 3}}).observation == "5"
    finally:
        env.close()


def test_finish_name_collision_and_tool_filters():
    command = [sys.executable, str(TEST_SERVER), "stdio"]
    env = McpEnv(command)
    try:
        env.reset(task=Task(prompt="x", expected_answer="7"))
        names = env.tool_names()
        assert names.count("finish") == 1 and "server_finish" in names
        ts = env.step({"tool": "server_finish", "params": {"note": "hi"}})
        assert ts.observation == "server finish: hi"
        assert ts.info["mcp_tool"] == "finish" and not ts.done
        ts = env.step({"tool": "finish", "params": {"answer": "7"}})
        assert ts.terminated and ts.info["outcome"]["success"] is True
    finally:
        env.close()

    env = McpEnv(command, include_tools=["echo", "finish"], finish_tool=False)
    try:
        env.reset(task="x")
        assert env.tool_names() == ["echo", "finish"]  # the server's finish, by its own name
        ts = env.step({"tool": "finish", "params": {"note": "n"}})
        assert ts.observation == "server finish: n" and not ts.done
        assert env.step({"tool": "add", "params": {"a": 1, "b": 1}}).info["error"] == "unknown_tool"
    finally:
        env.close()

    with pytest.raises(ConfigError, match="does not have: nope"):
        McpEnv(command, include_tools=["nope"]).reset(task="x")


def test_configuration_errors():
    with pytest.raises(ConfigError, match="exactly one of server"):
        McpEnv()
    with pytest.raises(ConfigError, match="exactly one of server"):
        McpEnv(["x"], url="http://127.0.0.1:1/mcp")
    with pytest.raises(ConfigError, match="http"):
        McpEnv(url="127.0.0.1:8000")
    with pytest.raises(EnvironmentUnavailable, match="was not found"):
        McpEnv(["/nonexistent/mcp-server"]).reset(task="x")
    failing = [sys.executable, "-c", "import sys; sys.stderr.write('bad config\\n'); sys.exit(2)"]
    with pytest.raises(EnvironmentUnavailable, match="bad config"):
        McpEnv(failing, call_timeout=5).reset(task="x")
    before = children()
    silent = [sys.executable, "-c", "import sys; sys.stdin.read()"]  # never answers
    started = time.monotonic()
    with pytest.raises(EnvironmentUnavailable, match="timed out"):
        McpEnv(silent, call_timeout=1).reset(task="x")
    assert time.monotonic() - started < 5
    assert settle(lambda: children() <= before)


# --- @modelcontextprotocol/server-filesystem (node) -------------------------------------------


def test_filesystem_server_reads_and_refuses_outside(tmp_path):
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "notes.txt").write_text("steplab was here\n")
    outside = tmp_path / "outside.txt"
    before = children()
    env = McpEnv([real_server("STEPLAB_MCP_FILESYSTEM"), str(allowed)], call_timeout=20)
    try:
        env.reset(task="Read the notes.")
        assert {"list_directory", "read_text_file", "write_file", "finish"} <= set(env.tool_names())
        ts = env.step({"tool": "list_directory", "params": {"path": str(allowed)}})
        assert "[FILE] notes.txt" in ts.observation
        ts = env.step({"tool": "read_text_file", "params": {"path": str(allowed / "notes.txt")}})
        assert ts.observation.strip() == "steplab was here"
        ts = env.step(
            {"tool": "write_file", "params": {"path": str(outside), "content": "escaped"}}
        )
        assert ts.info["error"] == "tool_error" and not ts.done
        assert "outside allowed directories" in ts.observation
        assert not outside.exists()
    finally:
        env.close()
    assert settle(lambda: children() <= before), "the node server outlived close()"


# --- the in-repo server over streamable HTTP ---------------------------------------------------


@pytest.fixture(scope="module")
def http_url(tmp_path_factory):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path_factory.mktemp("mcp-http") / "server.log"
    with open(log, "w") as out:
        server = subprocess.Popen(
            [sys.executable, str(TEST_SERVER), "http", str(port)], stdout=out, stderr=out
        )
    try:
        up = settle(lambda: _accepts(port) or server.poll() is not None, seconds=20)
        if not up or server.poll() is not None:
            pytest.fail(f"the MCP test server did not start: {log.read_text()[-2000:]}")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.terminate()
        server.wait(timeout=10)


def _accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def test_streamable_http(http_url):
    threads_before = set(threading.enumerate())
    env = make("steplab/mcp", url=http_url, call_timeout=1)
    try:
        ts = env.reset(task=Task(prompt="Add 2 and 3.", expected_answer="5"))
        assert ts.observation == "Add 2 and 3."
        names = env.tool_names()
        assert {"add", "echo", "fail", "slow", "server_finish", "finish"} <= set(names)
        assert env.step({"tool": "add", "params": {"a": 2, "b": 3}}).observation == "5"
        ts = env.step({"tool": "fail", "params": {"message": "no luck"}})
        assert ts.info["error"] == "tool_error" and "no luck" in ts.observation
        ts = env.step({"tool": "slow", "params": {"seconds": 5}})
        assert ts.info["error"] == "timeout" and "timed out after 1s" in ts.observation
        assert not ts.done
        assert env.step({"tool": "echo", "params": {"text": "still here"}}).observation == (
            "still here"
        )
        ts = env.step({"tool": "finish", "params": {"answer": "5"}})
        assert ts.terminated and ts.reward == 1.0
    finally:
        env.close()
    assert settle(lambda: set(threading.enumerate()) <= threads_before), threading.enumerate()


def test_http_server_down_is_environment_unavailable():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(EnvironmentUnavailable, match=f"127.0.0.1:{port}/mcp"):
        McpEnv(url=f"http://127.0.0.1:{port}/mcp", call_timeout=5).reset(task="x")
