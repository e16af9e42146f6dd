"""steplab/agentgym (env_name textcraft, the default) against the loopback TextCraft server
(tests/trainer_core/envs/agentgym_server.py, reproducing agentenv-textcraft's server.py: /create,
/step, /reset, /observation, /close, errors as {"error"} with status 200, FastAPI's 422) with a
tiny TextCraft-like game."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from tests.trainer_core.envs.agentgym_server import AgentGymServer
from trainer_core.envs import make
from trainer_core.envs.agentgym import AgentGymEnv
from trainer_core.errors import ConfigError, EnvironmentUnavailable
from trainer_core.policies.scripted import ScriptedPolicy, run_episode
from trainer_core.tasks.model import Task, ToolCall


@pytest.fixture()
def server():
    with AgentGymServer() as running:
        yield running


def act(text: str) -> dict:
    return {"tool": "act", "params": {"action": text}}


def posts(server: AgentGymServer, path: str) -> list:
    return [body for method, p, body in server.requests if method == "POST" and p == path]


def test_an_episode_create_step_done(server):
    env = make("steplab/agentgym", base_url=server.url, env_name="textcraft")
    try:
        assert [t.name for t in env.available_tools] == ["act"]
        ts = env.reset(task={"prompt": "Craft a stick.", "metadata": {"data_idx": 0}})
        assert "Goal: craft stick." in ts.observation
        assert "craft 4 stick using 2 oak planks" in ts.observation
        assert ts.info["agentgym_id"] == 0 and ts.info["data_idx"] == 0
        assert posts(server, "/create") == [{}]
        assert posts(server, "/reset") == [{"id": 0, "data_idx": 0}]

        ts = env.step(act("craft 4 stick using 2 oak planks"))
        assert ts.observation == "Could not find enough items to craft minecraft:stick"
        assert ts.reward == 0.0 and not ts.done
        assert env.step(act("get 2 oak planks")).observation == "Got 2 oak planks"
        assert env.step(act("inventory")).observation == "Inventory: [oak planks] (2)"
        ts = env.step(act("craft 4 stick using 2 oak planks"))
        assert ts.observation == "Crafted 4 minecraft:stick"
        assert ts.reward == 1.0 and ts.terminated
        assert ts.info["outcome"]["success"] is True
        assert ts.info["outcome"]["score"] == 1.0
        assert posts(server, "/step")[-1] == {"id": 0, "action": "craft 4 stick using 2 oak planks"}
    finally:
        env.close()


def test_data_idx_from_task_id_seed_and_later_resets(server):
    env = AgentGymEnv(server.url)
    try:
        # No data_idx at all: the environment as /create left it, no /reset.
        ts = env.reset(task="Play.")
        assert "Goal: craft stick." in ts.observation and ts.info["data_idx"] is None
        assert posts(server, "/reset") == []
        # Later episodes: POST /reset {id, data_idx} on the same id.
        assert "Goal: craft torch." in env.reset(task="Play.", seed=1).observation
        assert "Goal: craft oak planks." in env.reset(task=Task(id="2", prompt="x")).observation
        assert "Goal: craft stick." in env.reset(task="Play.").observation  # data_idx 0
        assert posts(server, "/reset") == [
            {"id": 0, "data_idx": 1},
            {"id": 0, "data_idx": 2},
            {"id": 0, "data_idx": 0},
        ]
        assert len(posts(server, "/create")) == 1
        assert env.current_observation() == env.history[0][1].observation
    finally:
        env.close()

    by_seed = AgentGymEnv(server.url, data_idx_from="seed")
    try:
        ts = by_seed.reset(task={"prompt": "x", "metadata": {"data_idx": 2}}, seed=1)
        assert "Goal: craft torch." in ts.observation
    finally:
        by_seed.close()


def test_a_task_checker_decides_the_outcome(server):
    task = Task(
        prompt="Craft a stick.",
        expected_answer="Crafted 8 minecraft:stick",
        checker="contains",
        metadata={"data_idx": 0},
    )
    env = AgentGymEnv(server.url)
    try:
        env.reset(task=task)
        env.step(act("get 2 oak planks"))
        ts = env.step(act("craft 4 stick using 2 oak planks"))
        assert ts.terminated and ts.reward == 1.0  # the server's reward stays the step reward
        assert ts.info["outcome"]["success"] is False  # but the task wanted 8 sticks
    finally:
        env.close()


def test_scripted_policy_plays_a_reference_solution(server):
    task = Task(
        prompt="Craft a torch.",
        metadata={"data_idx": 1},
        reference_solution=[
            ToolCall(tool="act", params={"action": "get 2 oak planks"}),
            ToolCall(tool="act", params={"action": "craft 4 stick using 2 oak planks"}),
            ToolCall(tool="act", params={"action": "get 1 coal"}),
            ToolCall(tool="act", params={"action": "craft 4 torch using 1 stick, 1 coal"}),
        ],
    )
    env = make("steplab/agentgym", base_url=server.url)
    try:
        steps, last = run_episode(env, ScriptedPolicy(), task)
    finally:
        env.close()
    assert len(steps) == 4
    assert last.terminated and last.reward == 1.0 and last.info["outcome"]["success"] is True


def test_errors_at_status_200(server):
    with pytest.raises(EnvironmentUnavailable, match="no recipe reaches the goal 'diamond'"):
        AgentGymEnv(server.url, create_params={"goal": "diamond"}).reset(task="x")

    env = AgentGymEnv(server.url, create_params={"goal": "torch"})
    try:
        assert "Goal: craft torch." in env.reset(task="x").observation
        with pytest.raises(EnvironmentUnavailable, match="data_idx 9 is out of range"):
            env.reset(task="x", seed=9)
        env.reset(task="x", seed=0)
        # Someone else closes our environment on the server: the step is refused, as an
        # observation; the episode goes on.
        import httpx2

        closed = httpx2.post(f"{server.url}/close", json={"id": env.env_id})
        assert closed.status_code == 200 and closed.json() is True
        ts = env.step(act("inventory"))
        assert ts.info["error"] == "env_error" and not ts.done
        assert f"The id {env.env_id} is not valid." in ts.observation
    finally:
        env.close()


def test_bad_actions_are_observations(server):
    env = AgentGymEnv(server.url)
    try:
        env.reset(task="x")
        assert env.step({"tool": "craft", "params": {}}).info["error"] == "unknown_tool"
        ts = env.step({"tool": "act", "params": {}})
        assert ts.info["error"] == "invalid_params" and "missing 'action'" in ts.observation
        ts = env.step({"tool": "act", "params": {"action": 3}})
        assert ts.info["error"] == "invalid_params" and "must be a string" in ts.observation
        ts = env.step(act("dance"))
        assert ts.observation == "Could not execute dance" and "error" not in ts.info
        assert len(posts(server, "/step")) == 1  # only the well-formed action reached the server
    finally:
        env.close()


def test_close_sends_close_and_leaves_no_thread(server):
    before = set(threading.enumerate())
    env = AgentGymEnv(server.url)
    env.reset(task="x")
    env_id = env.env_id
    env.close()
    assert posts(server, "/close") == [{"id": env_id}]
    assert env_id not in server.games
    env.close()  # twice is fine; nothing more is sent
    assert len(posts(server, "/close")) == 1

    def ours() -> set:  # the server's own request threads are not the env's
        return {
            t
            for t in threading.enumerate()
            if t not in before and "process_request_thread" not in t.name
        }

    deadline = time.monotonic() + 5
    while ours() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not ours()


def test_server_down_or_wrong_url_is_environment_unavailable(server):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    down = f"http://127.0.0.1:{port}"
    with pytest.raises(EnvironmentUnavailable, match=rf"{down}/create.*start it"):
        AgentGymEnv(down).reset(task="x")
    with pytest.raises(EnvironmentUnavailable, match="HTTP 404"):
        AgentGymEnv(f"{server.url}/nope").reset(task="x")

    env = AgentGymEnv(server.url)
    env.reset(task="x")
    server.stop()
    with pytest.raises(EnvironmentUnavailable, match="cannot reach"):
        env.step(act("inventory"))
    env.close()  # the server is gone: close() logs, never raises


def test_configuration_errors():
    with pytest.raises(ConfigError, match="base_url"):
        AgentGymEnv("127.0.0.1:36001")
    with pytest.raises(ConfigError, match="data_idx_from"):
        AgentGymEnv("http://127.0.0.1:36001", data_idx_from="random")
    with pytest.raises(ConfigError, match="reset"):
        AgentGymEnv("http://127.0.0.1:36001").step(act("inventory"))


def test_env_name_picks_the_protocol_and_an_unknown_one_lists_the_supported():
    from trainer_core.envs.agentgym import SUPPORTED, server_spec

    assert SUPPORTED == (
        "textcraft", "babyai", "sciworld", "alfworld", "maze", "wordle", "webshop", "sqlgym",
        "searchqa", "weather", "movie", "academia", "todo", "sheet", "webarena",
    )  # fmt: skip
    assert server_spec(None).name == "textcraft"
    assert server_spec("agentgym/WebShop").name == "webshop"
    assert server_spec("ScienceWorld").name == "sciworld"
    assert server_spec("LMRL-Gym.maze").name == "maze"
    with pytest.raises(
        ConfigError, match=r"'webshopp'.*Did you mean 'webshop'.*Supported: textcraft, babyai"
    ):
        AgentGymEnv("http://127.0.0.1:36001", env_name="webshopp")
    with pytest.raises(ConfigError, match="Supported: .*webarena"):
        make("steplab/agentgym", base_url="http://127.0.0.1:36001", env_name="minecraft")
    with pytest.raises(ConfigError, match="create_params are for TextCraft"):
        AgentGymEnv("http://127.0.0.1:36001", env_name="webshop", create_params={"goal": "x"})
    with pytest.raises(ConfigError, match="reset_params must be an object"):
        AgentGymEnv("http://127.0.0.1:36001", env_name="alfworld", reset_params=["Text"])
    with pytest.raises(ConfigError, match="max_observation_chars"):
        AgentGymEnv("http://127.0.0.1:36001", max_observation_chars=0)


def test_observations_and_answers_are_bounded(server):
    env = AgentGymEnv(server.url, max_observation_chars=20)
    try:
        ts = env.reset(task="x", seed=0)
        assert ts.observation.startswith("Crafting commands:\n")
        assert ts.observation.endswith("more characters cut]")
        assert len(ts.observation) < 60
    finally:
        env.close()
    small = AgentGymEnv(server.url, max_answer_bytes=50)
    with pytest.raises(EnvironmentUnavailable, match="answered more than 50 bytes"):
        small.reset(task="x")
    small.close()


def test_a_server_that_does_not_answer_is_a_timeout(server):
    release = threading.Event()
    step = server.routes[("POST", "/step")]
    server.routes[("POST", "/step")] = type(step)(lambda body: release.wait(5) and {}, step.fields)
    env = AgentGymEnv(server.url, timeout=0.2)
    try:
        env.reset(task="x")
        with pytest.raises(EnvironmentUnavailable, match="did not answer POST .*/step within 0.2s"):
            env.step(act("inventory"))
    finally:
        release.set()
        env.close()


def test_every_supported_server_names_the_loopback_that_checks_it():
    import importlib

    from trainer_core.envs.agentgym.protocols import COMMIT, SPECS

    for spec in SPECS.values():
        module_name, _, class_name = spec.checked.partition(":")
        module = importlib.import_module(f"tests.trainer_core.envs.{module_name}")
        cls = getattr(module, class_name)
        cited = f"{module.__doc__}\n{cls.__doc__}"
        assert COMMIT in cited, spec.name
        assert spec.source in cited or spec.source.replace(spec.name, "<name>") in cited, spec.name
