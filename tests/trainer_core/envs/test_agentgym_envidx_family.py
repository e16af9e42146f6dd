"""steplab/agentgym's ``env_idx`` protocols — WebShop, SQLGym, SearchQA, the tool environments and
WebArena — end to end against the loopback servers of agentgym_envidx_servers.py (each
reproducing its AgentGym server's routes, fields and error shapes: HTTP 500 for what the server
does not catch, Quart's HTML for WebArena), error shapes included."""

from __future__ import annotations

import httpx2
import pytest

from tests.trainer_core.envs.agentgym_envidx_servers import (
    SearchQAServer,
    SqlGymServer,
    ToolServer,
    WebArenaServer,
    WebShopServer,
)
from trainer_core.envs import make
from trainer_core.envs.agentgym import AgentGymEnv
from trainer_core.errors import EnvironmentUnavailable
from trainer_core.tasks.model import Task


def act(text: str) -> dict:
    return {"tool": "act", "params": {"action": text}}


def test_webshop_state_is_the_observation():
    with WebShopServer() as server:
        env = make("steplab/agentgym", base_url=server.url, env_name="webshop")
        ts = env.reset(task=Task(id="0", prompt="shop"))
        env_idx = env.unwrapped.env_id
        assert env_idx == 31337 and ts.info["agentgym_id"] == 31337
        assert server.posts("/create") == [None]
        assert server.posts("/reset") == [{"env_idx": env_idx, "session_id": 0}]
        # the first observation comes from GET /observation?env_idx=, as the official client
        assert ("GET", "/observation", {"env_idx": str(env_idx)}) in server.requests
        assert ts.observation.startswith("WebShop [SEP] Instruction: [SEP] i need red running")

        ts = env.step(act("search[red shoes]"))
        assert "b001 [SEP] Red Running Shoes" in ts.observation and "b003" in ts.observation
        assert server.posts("/step")[-1] == {"env_idx": env_idx, "action": "search[red shoes]"}
        assert env.step(act("jump")).observation == ts.observation  # nothing changes
        env.step(act("click[b001]"))
        ts = env.step(act("click[buy now]"))
        assert ts.terminated and ts.reward == 1.0 and ts.info["outcome"]["success"] is True

        ts = env.reset(task=Task(id="1", prompt="shop"))
        assert "i want a blue mug" in ts.observation
        env.step(act("search[shoes]"))
        env.step(act("click[b003]"))
        ts = env.step(act("click[buy now]"))
        assert ts.reward == pytest.approx(0.2) and ts.info["outcome"]["success"] is False
        assert ts.info["outcome"]["score"] == pytest.approx(0.2)
        env.close()
        assert server.posts("/close") == []  # WebShop has no /close


def test_webshop_unknown_env_idx_is_a_500_and_a_clear_error():
    with WebShopServer() as server:
        env = AgentGymEnv(server.url, env_name="webshop")
        env.reset(task="x")
        server.env.clear()  # the server restarted: our env_idx is gone
        with pytest.raises(
            EnvironmentUnavailable, match=r"/step .*HTTP 500: 'Internal Server Error'"
        ):
            env.step(act("search[x]"))
        with pytest.raises(
            EnvironmentUnavailable, match="session_id 0; is that item on the server"
        ):
            env.reset(task="x")
        raw = httpx2.post(f"{server.url}/step", json={"env_idx": "x", "action": "a"})
        assert raw.status_code == 422 and raw.json()["detail"][0]["type"] == "int_parsing"
        env.close()


def test_sqlgym_one_query_per_episode_and_its_errors():
    with SqlGymServer() as server:
        env = AgentGymEnv(server.url, env_name="sqlgym", data_idx_from="seed")
        ts = env.reset(task="x", seed=1)
        assert server.posts("/reset") == [{"env_idx": 4242, "item_id": 1}]
        assert ts.observation.endswith("-- Name the oldest singer.")
        ts = env.step(act("SELECT name FROM singer ORDER BY age DESC LIMIT 1;"))
        assert ts.observation == "[('Joe Sharp',)]" and ts.terminated and ts.reward == 1.0
        env.reset(task="x", seed=0)
        ts = env.step(act("SELECT nope, nothing, nowhere FROM singer"))
        assert ts.terminated and ts.reward == 0.0 and ts.observation.endswith("...")
        assert len(ts.observation) == 103  # the server cuts execution results at 100 + "..."
        with pytest.raises(EnvironmentUnavailable, match="HTTP 500.*item_id 99"):
            env.reset(task="x", seed=99)
        env.close()

        # a step on an environment that was never reset: 500 → EnvironmentUnavailable
        fresh = httpx2.post(f"{server.url}/create").json()
        answer = httpx2.post(f"{server.url}/step", json={"env_idx": fresh, "action": "SELECT 1"})
        assert answer.status_code == 500 and answer.text == "Internal Server Error"


def test_searchqa_search_then_answer():
    with SearchQAServer() as server:
        env = make("steplab/agentgym", base_url=server.url, env_name="searchqa")
        ts = env.reset(task={"prompt": "q", "metadata": {"data_idx": 0}})
        assert server.posts("/create") == [{"id": 0}]
        assert server.posts("/reset") == [{"env_idx": 0, "id": 0}]
        assert ts.observation.endswith("Question: who wrote the hobbit?")
        ts = env.step(act("<search>the hobbit</search>"))
        assert ts.observation.startswith("<information>Doc 1(Title: the hobbit)")
        ts = env.step(act("<answer>lewis</answer>"))
        assert ts.observation.startswith("Sorry") and ts.reward == 0.0 and not ts.done
        assert env.step(act("tolkien")).observation.startswith("Your previous action is invalid")
        ts = env.step(act("<answer>Tolkien</answer>"))
        assert ts.terminated and ts.reward == 1.0 and ts.info["outcome"]["success"] is True
        with pytest.raises(EnvironmentUnavailable, match="HTTP 500"):
            env.reset(task="x", seed=7)
        env.close()
        assert server.posts("/close") == [{"env_idx": 0}]
        assert server.env == {}


@pytest.mark.parametrize("name", ["weather", "movie", "academia", "todo", "sheet"])
def test_tool_environments_progress_rewards(name):
    with ToolServer(name) as server:
        env = make("steplab/agentgym", base_url=server.url, env_name=name)
        ts = env.reset(task="x")
        assert server.posts("/create") == [{"id": 0}]
        assert server.posts("/reset") == [{"env_idx": 0, "id": 0}]
        assert ts.observation.startswith("Now new trial starts.\nYou should perform actions")
        ts = env.step(act("what is the weather"))
        assert ts.observation.startswith("Format error") and ts.reward == 0.0
        ts = env.step(act("Action: get_user_current_location with Action Input: {}"))
        first = 1.0 if name == "weather" else 0.5  # weather rounds any progress up to 1
        assert ts.reward == first and ts.info["server_reward"] == first
        ts = env.step(act('Action: get_historical_temp with Action Input: {"latitude": 31.2}'))
        assert ts.observation == "Observation: -3.6\nGive me one action."
        assert ts.reward == 1.0 - first  # the progress rate rose to 1: its increase
        assert env.current_observation() == "Observation: -3.6"
        ts = env.step(act('Action: finish with Action Input: {"answer": "-3.6"}'))
        assert ts.terminated and ts.reward == 0.0
        assert ts.info["outcome"]["success"] is True  # the score is 1 (todo: true)
        assert sum(step.reward for _, step in env.unwrapped.history) == 1.0
        env.close()
        with pytest.raises(EnvironmentUnavailable, match="HTTP 500"):
            AgentGymEnv(server.url, env_name=name).reset(task="x", seed=5)


def test_webarena_quart_shapes():
    with WebArenaServer() as server:
        env = make("steplab/agentgym", base_url=server.url, env_name="webarena")
        ts = env.reset(task="x", seed=0)
        assert server.posts("/create") == [None]
        assert server.posts("/reset") == [{"env_idx": 0, "seed": 0, "idx": 0}]
        assert "OBJECTIVE: What is the top product?" in ts.observation  # GET /observation
        ts = env.step(act("I would click it"))
        assert ts.observation.startswith("Cannot parse action from response")
        assert ts.reward == 0.0 and not ts.done and "error" not in ts.info
        ts = env.step(act("Let's think. ```click [12]```"))
        assert "PREVIOUS ACTION: click [12]" in ts.observation and not ts.done
        ts = env.step(act("```stop [Sprite]```"))
        assert ts.terminated and ts.reward == 1.0 and ts.info["outcome"]["success"] is True
        env.close()
        assert server.posts("/close") == [{"env_idx": 0}]

        # truncated after 4 actions, the reward uncounted
        again = AgentGymEnv(server.url, env_name="webarena")
        again.reset(task="x")
        for _ in range(3):
            assert not again.step(act("```scroll [down]```")).done
        ts = again.step(act("```scroll [down]```"))
        assert ts.truncated and not ts.terminated and ts.info["outcome"]["success"] is False
        # /reset's failure shape: {"observation": "TimeoutError", ...}
        with pytest.raises(EnvironmentUnavailable, match="answered 'TimeoutError'"):
            again.reset(task="x", seed=3)
        again.close()
        # a body without the fields the handler reads: Quart's HTML 500
        raw = httpx2.post(f"{server.url}/reset", json={"env_idx": 0})
        assert raw.status_code == 500 and raw.text.startswith("<!doctype html>")
        # the SearchQA protocol against it: /reset without "seed" and "idx" → the same 500
        wrong = AgentGymEnv(server.url, env_name="searchqa")
        with pytest.raises(EnvironmentUnavailable, match="HTTP 500: '<!doctype html>"):
            wrong.reset(task="x")
        wrong.close()
