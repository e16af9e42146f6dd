"""steplab/customer-service: the database tools (a refused write changes nothing), respond and
the simulated user (scripted: facts only when asked, goals one at a time, a yes to a
confirmation, the stop token at the end; or any policy playing the user through PolicyUser,
here the OpenAI-compatible policy against a loopback chat-completions server), and the episode's
steps: assistant and user message steps in the shape the tau-bench importer gives."""

from __future__ import annotations

import json

import pytest

from tests.trainer_core.policies.fake_llm_servers import (
    OPENAI_PATH,
    FakeLLMServer,
    openai_completion,
    openai_tool_call,
)
from trainer_core.envs import make
from trainer_core.envs.users import STOP, UNKNOWN, YES, ScriptedUser, make_user
from trainer_core.envs.wrappers import Recorder
from trainer_core.errors import ConfigError, InputError
from trainer_core.policies.base import Turn
from trainer_core.policies.chat_format import system_prompt, to_messages, trajectory_to_messages
from trainer_core.policies.openai_compat import OpenAICompatPolicy
from trainer_core.policies.scripted import ScriptedPolicy
from trainer_core.policies.scripted import run_episode as play_reference
from trainer_core.policies.user import PolicyUser
from trainer_core.recording.importers import import_path
from trainer_core.rewards.scoring import RewardConfig, score_trajectory
from trainer_core.rollouts.collect import EpisodeSpec, collect, run_episode
from trainer_core.tasks.suites.customer_service import TEMPLATES, customer_service_task

TWO_GOALS = list(TEMPLATES).index("cancel_then_address")  # its seeds: this, mod 25
assert 1_000_000 % len(TEMPLATES) == 2_000_000 % len(TEMPLATES) == 0


@pytest.fixture
def env():
    environment = make("steplab/customer-service")
    yield environment
    environment.close()


def _customer(task):
    return next(
        c
        for c in task.metadata["database"]["customers"].values()
        if c["name"] in task.metadata["user"]["instruction"]
    )


# --- the tools ---------------------------------------------------------------------------------


def test_reset_reports_the_rules_and_the_opening_as_one_user_message(env):
    task = customer_service_task(0)
    ts = env.reset(task=task)
    assert ts.observation == task.prompt
    assert ts.info["messages"] == [{"role": "user", "text": task.prompt}]
    assert task.prompt.endswith(f"Customer: {task.metadata['user']['opening']}")
    assert "respond" in env.tool_names() and "cancel_order" in env.tool_names()


def test_reads_show_json_and_a_refused_write_changes_nothing(env):
    task = customer_service_task(0)
    env.reset(task=task)
    customer = _customer(task)
    found = env.step(
        {"tool": "find_customer_by_email", "params": {"email": customer["email"].upper()}}
    )
    assert found.observation == f"Customer id: {customer['id']}"
    record = json.loads(
        env.step(
            {"tool": "get_customer", "params": {"customer_id": customer["id"].lower()}}
        ).observation
    )
    assert record["email"] == customer["email"]
    delivered = next(
        o for o in task.metadata["database"]["orders"].values() if o["status"] == "delivered"
    )
    before = json.dumps(env.unwrapped.db, sort_keys=True)
    ts = env.step(
        {
            "tool": "cancel_order",
            "params": {"order_id": delivered["id"], "reason": "no longer needed"},
        }
    )
    assert ts.observation.startswith("Error:") and "delivered" in ts.observation
    assert ts.info["error"] == "refused"
    assert json.dumps(env.unwrapped.db, sort_keys=True) == before
    bad = env.step({"tool": "cancel_order", "params": {"order_id": delivered["id"]}})
    assert bad.info["error"] == "invalid_params" and "reason" in bad.observation
    assert (
        env.step({"tool": "calculate", "params": {"expression": "49 + 25"}}).observation
        == "49 + 25 = 74"
    )


def test_a_task_without_a_database_is_refused_with_a_hint(env):
    with pytest.raises(InputError, match="metadata\\['database'\\]"):
        env.reset(task={"prompt": "Help the customer.", "id": "x"})


def test_reset_by_seed_plays_the_splits_tasks():
    validation = make("steplab/customer-service", split="validation")
    ts = validation.reset(seed=2)
    assert validation.task.id == "service-validation-1000002"
    assert ts.observation == validation.task.prompt
    with pytest.raises(ConfigError, match="unknown split"):
        make("steplab/customer-service", split="dev")


# --- the scripted user -----------------------------------------------------------------------------


def test_the_scripted_user_gives_facts_only_when_asked_and_reveals_goals_one_at_a_time():
    task = customer_service_task(TWO_GOALS)
    user = ScriptedUser()
    spec = task.metadata["user"]
    assert user.reset(task) == spec["opening"]
    facts = {f["key"]: f["say"] for f in spec["facts"]}
    assert user.reply("Sure.") == spec["goals"][0]  # nothing asked: the next goal comes
    assert user.reply("Can you tell me your favourite colour?") == UNKNOWN
    assert user.reply("What is the email on your account?") == facts["email"]
    answer = user.reply("Which order is it? And the reason?")
    assert facts["order_id"] in answer and facts["reason"] in answer
    assert facts["address"] not in answer  # not asked
    assert user.reply("I will cancel it. Shall I go ahead? (yes/no)") == YES
    assert user.reply("Done. Is there anything else I can help you with?") == STOP


def test_a_confirmation_that_guesses_a_fact_gets_the_fact_not_a_yes():
    task = customer_service_task(TWO_GOALS)
    user = ScriptedUser()
    user.reset(task)
    address = next(f["say"] for f in task.metadata["user"]["facts"] if f["key"] == "address")
    assert user.reply("Shall I use the address on file? (yes/no)") == address
    assert user.reply("I will use that address. Shall I go ahead? (yes/no)") == YES
    assert user.reply("What was the address again?") == address  # asked again: said again


def test_the_scripted_user_leaves_when_it_has_nothing_to_say():
    task = customer_service_task(0)
    user = ScriptedUser(patience=3)
    user.reset(task)
    assert user.reply("") == "Okay."
    assert user.reply("What is your shoe size?") == UNKNOWN
    assert user.reply("") == STOP
    with pytest.raises(ConfigError, match="metadata\\['user'\\]"):
        ScriptedUser().reset(customer_service_task(0).model_copy(update={"metadata": {}}))
    assert isinstance(make_user(None), ScriptedUser)
    assert isinstance(make_user(ScriptedUser), ScriptedUser)  # a factory
    with pytest.raises(ConfigError, match="user must be"):
        make_user(42)


# --- a policy playing the user ------------------------------------------------------------------------


def _model_playing(task):
    """A chat-completions "model" that answers as the task's scripted user would: it reads the
    agent's last message from the request and calls reply(message=...)."""
    scripted = ScriptedUser()

    def answer(request):
        messages = request.json["messages"]
        if len(messages) == 1:  # the user prompt (the instruction): the opening
            text = scripted.reset(task)
        else:
            text = scripted.reply(messages[-1]["content"])
        return openai_completion(None, [openai_tool_call("reply", {"message": text})])

    return answer


def test_any_policy_can_play_the_user_and_the_reference_still_passes(monkeypatch):
    task = customer_service_task(2_000_000 + TWO_GOALS, "test")
    with FakeLLMServer() as server:
        server.enqueue(*[_model_playing(task)] * 40)
        policy = OpenAICompatPolicy(
            "user-model", base_url=server.openai_base_url, api_key_env=None, timeout=5.0
        )
        env = make("steplab/customer-service", user=lambda: PolicyUser(policy))
        result = run_episode(env, ScriptedPolicy(), EpisodeSpec(task, 0, 1), max_steps=40)
        bodies = server.bodies(OPENAI_PATH)
    assert result.error is None and result.trajectory.outcome.success is True
    first = bodies[0]
    assert [t["function"]["name"] for t in first["tools"]] == ["reply"]
    prompt = first["messages"][-1]["content"]
    assert task.metadata["user"]["instruction"] in prompt and STOP in prompt
    # the agent's messages reach the user model as the observations of its turns
    said = [
        s.text for s in result.trajectory.steps if s.kind == "message" and s.role == "assistant"
    ]
    assert bodies[1]["messages"][-1]["content"] == said[0]
    assert len(bodies) == len(said) + 1


def test_a_plain_text_answer_of_the_user_model_is_the_message():
    task = customer_service_task(0)
    with FakeLLMServer() as server:
        server.enqueue(openai_completion("Hi, I want to cancel an order."), openai_completion(STOP))
        policy = OpenAICompatPolicy(
            "user-model", base_url=server.openai_base_url, api_key_env=None, timeout=5.0
        )
        user = PolicyUser(policy)
        assert user.reset(task) == "Hi, I want to cancel an order."
        assert user.reply("Anything else?") == STOP


def test_an_agents_plain_text_turn_is_a_respond_and_a_cut_off_one_stays_invalid():
    """As tau-bench takes text as ``respond``: the customer hears the agent's text; text cut off
    at the token limit is still an invalid output (the customer hears nothing)."""
    task = customer_service_task(0)
    with FakeLLMServer() as server:
        server.enqueue(
            openai_completion("Hello! How can I help you today?"),
            openai_completion("I will look that up for", finish_reason="length"),
            openai_completion(
                None, [openai_tool_call("transfer_to_human_agents", {"summary": "x"})]
            ),
        )
        agent = OpenAICompatPolicy(
            "agent-model", base_url=server.openai_base_url, api_key_env=None, timeout=5.0
        )
        env = make("steplab/customer-service")
        result = run_episode(env, agent, EpisodeSpec(task, 0, 1), max_steps=5)
    assert result.error is None
    steps = result.trajectory.steps
    said = [s for s in steps if s.kind == "message" and s.role == "assistant"]
    assert [s.text for s in said] == ["Hello! How can I help you today?"]
    heard = steps[steps.index(said[0]) + 1]
    assert heard.role == "user" and heard.text  # the customer answered the text
    invalid = [s for s in steps if s.tool == "invalid_output"]
    assert len(invalid) == 1 and "cut off" in invalid[0].observation


# --- the episode's steps ---------------------------------------------------------------------------


def _as_tau_bench(trajectory) -> dict:
    """The episode written as a tau-bench result (OpenAI messages in ``traj``)."""
    traj, calls = [], 0
    for step in trajectory.steps:
        if step.kind == "message":
            traj.append({"role": step.role, "content": step.text})
            continue
        calls += 1
        call = {
            "id": f"call_{calls}",
            "type": "function",
            "function": {"name": step.tool, "arguments": json.dumps(step.params)},
        }
        traj.append({"role": "assistant", "content": step.thought, "tool_calls": [call]})
        traj.append(
            {
                "role": "tool",
                "tool_call_id": f"call_{calls}",
                "name": step.tool,
                "content": step.observation,
            }
        )
    return {
        "task_id": trajectory.task.id,
        "reward": 1.0 if trajectory.outcome.success else 0.0,
        "info": {},
        "traj": traj,
        "trial": 0,
    }


def test_episodes_have_the_steps_an_imported_tau_bench_log_has(tmp_path):
    task = customer_service_task(1_000_000 + TWO_GOALS, "validation")
    result = run_episode(
        make("steplab/customer-service"), ScriptedPolicy(), EpisodeSpec(task, 0, 1), max_steps=40
    )
    ours = result.trajectory
    assert [s.index for s in ours.steps] == list(range(len(ours.steps)))
    assert [(s.kind, s.role) for s in ours.steps[:3]] == [
        ("message", "user"),
        ("message", "assistant"),
        ("message", "user"),
    ]
    assert ours.steps[0].text == task.prompt
    assistant = [s for s in ours.steps if s.kind == "message" and s.role == "assistant"]
    responds = [c for c in task.reference_solution if c.tool == "respond"]
    assert [s.text for s in assistant] == [c.params["message"] for c in responds]
    assert all(s.metadata["tool"] == "respond" and s.thought for s in assistant)
    assert all(s.metadata["params"] == {"message": s.text} for s in assistant)
    assert [s.tool for s in ours.tool_steps] == [
        c.tool for c in task.reference_solution if c.tool != "respond"
    ]
    assert ours.steps[-1].role == "user" and ours.steps[-1].text == STOP
    assert ours.steps[-2].reward == 1.0  # the closing message carries the outcome's reward
    path = tmp_path / "tau.json"
    path.write_text(json.dumps([_as_tau_bench(ours)]))
    [imported] = import_path(path)[0].trajectories
    shape = lambda t: [(s.kind, s.role, s.text, s.tool, s.params, s.observation) for s in t.steps]  # noqa: E731
    assert shape(imported) == shape(ours)
    # scoring is shared: both score on the same rubrics, step for step
    config = RewardConfig.for_profile("customer-service")
    mine, theirs = score_trajectory(ours, config), score_trajectory(imported, config)
    assert (
        len(mine.steps) == len(theirs.steps) == len([s for s in ours.steps if s.is_assistant_turn])
    )
    assert mine.total is not None


def test_the_recorder_wrapper_records_the_same_steps_as_the_episode_runner():
    task = customer_service_task(1_000_000 + TWO_GOALS, "validation")
    ours = run_episode(
        make("steplab/customer-service"), ScriptedPolicy(), EpisodeSpec(task, 0, 1), max_steps=40
    ).trajectory
    recorder = Recorder(make("steplab/customer-service", wrappers=False))
    play_reference(recorder, ScriptedPolicy(), task, max_steps=40)
    recorded = recorder.trajectories[-1]

    def shape(trajectory):
        return [(s.index, s.kind, s.role, s.text, s.tool, s.params) for s in trajectory.steps]

    assert shape(recorded) == shape(ours)
    assert recorded.steps[-2].reward == ours.steps[-2].reward == 1.0
    assert recorded.outcome.success is True


def test_a_rollout_exports_exactly_as_its_policy_was_prompted():
    """The chat format renders an episode's respond messages as the respond calls the policy
    made and the user's replies as their results: training data is the prompt."""
    task = customer_service_task(1_000_000 + TWO_GOALS, "validation")
    env = make("steplab/customer-service")
    trajectory = run_episode(
        env, ScriptedPolicy(), EpisodeSpec(task, 0, 1), max_steps=40
    ).trajectory
    played, last = play_reference(make("steplab/customer-service"), ScriptedPolicy(), task)
    seen = [Turn(action=action, observation=ts.observation) for action, ts in played]
    system = system_prompt(env.available_tools)
    prompted = to_messages(prompt=task.prompt, history=seen, system=system)
    assert trajectory_to_messages(trajectory, system=system) == prompted
    assert [m["role"] for m in prompted[1:4]] == ["user", "assistant", "tool"]
    assert prompted[2]["tool_calls"][0]["function"]["name"] == "respond"
    # an imported log's plain assistant messages stay plain messages
    plain = trajectory.model_copy(
        update={"steps": [s.model_copy(update={"metadata": {}}) for s in trajectory.steps]}
    )
    rendered = trajectory_to_messages(plain, system=system)
    assert rendered[2] == {
        "role": "assistant",
        "content": f"{plain.steps[1].thought}\n{plain.steps[1].text}",
    }
    assert rendered[3] == {"role": "user", "content": plain.steps[2].text}


def test_collect_streams_every_step_in_order_with_a_user_per_episode():
    tasks = [customer_service_task(n, "test") for n in range(2_000_000, 2_000_004)]
    streamed: list[tuple[str, int]] = []
    results = collect(
        "steplab/customer-service",
        tasks,
        lambda seed: ScriptedPolicy(seed=seed),
        concurrency=2,
        max_steps=40,
        env_kwargs={"user": ScriptedUser},
        on_step=lambda spec, step: streamed.append((spec.task.id, step.index)),
    )
    assert all(r.trajectory.outcome.success for r in results)
    for result in results:
        indexes = [i for task_id, i in streamed if task_id == result.spec.task.id]
        assert indexes == list(range(len(result.trajectory.steps)))
