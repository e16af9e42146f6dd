"""steplab/agentgym's ``{id, action}`` protocols other than TextCraft — BabyAI, SciWorld, ALFWorld
and LMRL-Gym's /maze/* and /wordle/* — end to end against the loopback servers of
agentgym_id_servers.py (each reproducing its AgentGym server's routes, fields and error shapes),
error shapes included."""

from __future__ import annotations

import httpx2
import pytest

from tests.trainer_core.envs.agentgym_id_servers import (
    ALFWorldServer,
    BabyAIServer,
    LmrlGymServer,
    SciWorldServer,
)
from trainer_core.envs import make
from trainer_core.envs.agentgym import AgentGymEnv
from trainer_core.errors import EnvironmentUnavailable


def act(text: str) -> dict:
    return {"tool": "act", "params": {"action": text}}


@pytest.fixture()
def babyai():
    with BabyAIServer() as running:
        yield running


def test_babyai_progress_rewards_sum_to_the_final_score(babyai):
    env = make("steplab/agentgym", base_url=babyai.url, env_name="agentgym/babyai")
    try:
        ts = env.reset(task={"prompt": "x", "metadata": {"data_idx": 0}})
        assert ts.observation.startswith("Your goal: go to the red ball\n")
        assert '"go to red ball 1"' in ts.observation  # the available actions are shown
        assert babyai.posts("/create") == [None]  # BabyAI's /create takes no body
        assert babyai.posts("/reset") == [{"id": 0, "data_idx": 0}]

        ts = env.step(act("dance"))
        assert "The action is not recognized" in ts.observation and ts.reward == 0.0
        ts = env.step(act("pick up green key 1"))
        assert ts.reward == 0.5 and not ts.done and ts.info["server_reward"] == 0.5
        ts = env.step(act("turn left"))
        assert ts.reward == 0.0  # the server's 0.5 again: no new progress
        assert (
            ts.info["score"] == 1.0
        )  # 0 + 0.5 + 0.5: BabyAI's "score" is a running sum, kept in info
        ts = env.step(act("go to red ball 1"))
        assert ts.terminated and ts.reward == 0.5  # 0.5 → 1.0
        assert "The task is completed." in ts.observation
        assert ts.info["outcome"]["success"] is True
        assert sum(step.reward for _, step in env.unwrapped.history) == 1.0

        # A step after done: BabyAI's {"error"} at 200 is an observation
        ts = env.step(act("turn left"))
        assert ts.info["error"] == "env_error" and "has finished" in ts.observation

        ts = env.reset(task="x", seed=1)
        assert ts.observation.startswith("Your goal: pick up the blue box")
        assert env.unwrapped.current_observation().startswith("Your goal: pick up the blue box")
    finally:
        env.close()
    assert babyai.posts("/close") == [{"id": 0}]


def test_babyai_error_shapes(babyai):
    env = AgentGymEnv(babyai.url, env_name="babyai")
    env.reset(task="x")
    # someone closes our environment: later steps answer {"error": "The id 0 is not valid."}
    assert httpx2.post(f"{babyai.url}/close", json={"id": 0}).json() is True
    ts = env.step(act("turn left"))
    assert ts.info["error"] == "env_error" and "The id 0 is not valid." in ts.observation
    with pytest.raises(EnvironmentUnavailable, match="The id 0 is not valid"):
        env.current_observation()
    with pytest.raises(EnvironmentUnavailable, match="data_idx 3.*The id 0 is not valid"):
        env.reset(task="x", seed=3)
    env.close()  # /close answers false now: logged, never raised

    # the wrong protocol for the server: clear errors naming FastAPI's answer and env_name
    with pytest.raises(
        EnvironmentUnavailable,
        match=r"/reset .*HTTP 422 \(body.data_idx: Field required\).*env_name",
    ):
        AgentGymEnv(babyai.url, env_name="alfworld").reset(task="x")
    with pytest.raises(EnvironmentUnavailable, match=r"/maze/create .*HTTP 404.*env_name"):
        AgentGymEnv(babyai.url, env_name="maze").reset(task="x")


def test_sciworld_scores_are_divided_by_100_and_close_500_is_logged(caplog):
    with SciWorldServer() as server:
        env = make("steplab/agentgym", base_url=server.url, env_name="SciWorld")
        ts = env.reset(task="x")
        assert ts.observation == (
            "Your task is to boil water.\n"
            "This room is called the kitchen. In it, you see: a stove, a pot of water."
        )
        assert server.posts("/reset") == [{"id": 0, "data_idx": 0}]
        ts = env.step(act("activate stove"))
        assert ts.reward == pytest.approx(0.4) and ts.info["score"] == 40
        ts = env.step(act("jump"))
        assert ts.observation == "No known action matches that input." and ts.reward == 0.0
        ts = env.step(act("move pot to stove"))
        assert ts.reward == pytest.approx(0.3)
        ts = env.step(act("focus on water"))
        assert ts.terminated and ts.reward == pytest.approx(0.3)
        assert ts.info["outcome"]["success"] is True and ts.info["outcome"]["score"] == 1.0
        ts = env.step(act("look around"))
        assert ts.info["error"] == "env_error" and "has finished" in ts.observation

        with pytest.raises(EnvironmentUnavailable, match="list index out of range"):
            env.reset(task="x", seed=5)
        env.close()
        assert server.posts("/close") == [{"id": 0}]
        # closing twice: the server raises, FastAPI answers 500 text; close() only logs
        again = AgentGymEnv(server.url, env_name="sciworld")
        again.reset(task="x")
        httpx2.post(f"{server.url}/close", json={"id": again.env_id})
        with caplog.at_level("WARNING", logger="trainer_core.envs.agentgym"):
            again.close()
        assert "HTTP 500" in caplog.text and "Internal Server Error" in caplog.text


def test_alfworld_reset_with_world_type_and_available_actions():
    with ALFWorldServer() as server:
        env = make("steplab/agentgym", base_url=server.url, env_name="alfworld")
        ts = env.reset(task={"prompt": "x", "metadata": {"data_idx": 0}})
        assert server.posts("/reset") == [{"id": 0, "game": 0, "world_type": "Text"}]
        assert ts.observation.endswith(
            "AVAILABLE ACTIONS: look,inventory,go to countertop 1,take mug 1 from countertop 1,"
            "go to cabinet 1,move mug 1 to cabinet 1"
        )
        assert ts.info["task_type"] == "pick_and_place_simple/trial_0"
        ts = env.step(act("go to countertop 1"))
        assert ts.observation == "On the countertop 1, you see a mug 1."
        assert "go to cabinet 1" in ts.info["available_actions"] and ts.reward == 0.0
        assert env.step(act("fly")).observation == "Nothing happens."
        ts = env.step(act("move mug 1 to cabinet 1"))
        assert ts.terminated and ts.reward == 1.0 and ts.info["outcome"]["success"] is True
        env.close()  # ALFWorld has no /close: nothing is sent
        assert server.posts("/close") == []

        bad = AgentGymEnv(server.url, env_name="alfworld", reset_params={"world_type": "3D"})
        with pytest.raises(EnvironmentUnavailable, match='world_type must be one of "Text"'):
            bad.reset(task="x")
        with pytest.raises(EnvironmentUnavailable, match="game 7.*list index out of range"):
            AgentGymEnv(server.url, env_name="alfworld").reset(task="x", seed=7)
        # no /close route: FastAPI's 404 {"detail": "Not Found"}
        missing = httpx2.post(f"{server.url}/close", json={"id": 0})
        assert missing.status_code == 404 and missing.json() == {"detail": "Not Found"}


def test_lmrl_maze_per_game_routes():
    with LmrlGymServer() as server:
        env = make("steplab/agentgym", base_url=server.url, env_name="maze")
        ts = env.reset(task="x", seed=0)
        assert server.posts("/maze/create") == [None]
        assert server.posts("/maze/reset") == [{"id": 0, "game": 0}]
        assert ts.observation.startswith("The goal is at position 2, 2. Your current position")
        ts = env.step(act("fly"))
        assert ts.reward == -4.0 and not ts.done  # LMRL-Gym's illegal-action penalty
        ts = env.step(act("move down"))
        assert ts.reward == -1.0
        ts = env.step(act("move right"))
        assert ts.observation == "Success" and ts.terminated and ts.reward == 1.0
        assert ts.info["outcome"]["success"] is True
        assert env.step(act("move up")).info["error"] == "env_error"  # "... has finished."
        with pytest.raises(EnvironmentUnavailable, match="The game 9 is not valid"):
            env.reset(task="x", seed=9)
        env.close()
        assert [p for _, p, _ in server.requests if p.endswith("/close")] == []


def test_lmrl_wordle_per_game_routes():
    with LmrlGymServer() as server:
        env = AgentGymEnv(server.url, env_name="wordle")
        ts = env.reset(task="x", seed=1)  # crane
        assert ts.observation == "Let's start Wordle!"
        assert server.posts("/wordle/reset") == [{"id": 0, "seed": 1}]
        assert env.step(act("crane")).observation == "invalid word"
        ts = env.step(act("s h i r e"))
        assert ts.observation == "b b b y g" and ts.reward == 0.0 and not ts.done
        assert env.current_observation() == "b b b y g"
        ts = env.step(act("c r a n e"))
        assert ts.observation == "g g g g g" and ts.terminated and ts.reward == 1.0
        assert ts.info["outcome"]["success"] is True
        # a step before any reset on a fresh id: the wrapper's KeyError text at 200
        fresh = httpx2.post(f"{server.url}/wordle/create").json()["id"]
        answer = httpx2.post(f"{server.url}/wordle/step", json={"id": fresh, "action": "x"})
        assert answer.status_code == 200 and "error" in answer.json()
        env.close()
