"""OpenAICompatPolicy through the real ``openai`` SDK against a loopback server that speaks the
chat-completions protocol: tool calls, history replay, retries, malformed tool-call JSON,
tool-less answers, keys, servers that need none, and the ReAct mode."""

from __future__ import annotations

import pytest

from tests.trainer_core.policies.fake_llm_servers import (
    OPENAI_PATH,
    FakeLLMServer,
    openai_completion,
    openai_error,
    openai_tool_call,
    rate_limited,
    server_error,
)
from trainer_core.envs import make
from trainer_core.errors import ConfigError, PolicyError
from trainer_core.policies.base import Turn, decide, play_step
from trainer_core.policies.chat_format import to_messages
from trainer_core.policies.openai_compat import OpenAICompatPolicy, parse_arguments
from trainer_core.policies.react import react_instructions

KEY_ENV = "STEPLAB_TEST_OPENAI_KEY"
KEY = "sk-proj-test-9a8b7c6d5e"
MODEL = "gpt-4o-mini-2024-07-18"  # $0.15 / $0.60 per million tokens
FAST = {"retry-after-ms": "1"}


@pytest.fixture
def server():
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY


@pytest.fixture
def env():
    environment = make("steplab/arithmetic")
    yield environment
    environment.close()


def _policy(server, **kwargs) -> OpenAICompatPolicy:
    kwargs.setdefault("max_retries", 2)
    kwargs.setdefault("timeout", 5.0)
    kwargs.setdefault("api_key_env", KEY_ENV)
    return OpenAICompatPolicy(MODEL, base_url=server.openai_base_url, **kwargs)


def _first_step(env, policy, seed=3):
    ts = env.reset(seed=seed)
    policy.reset(env.task)
    return ts


def _openai_tools(env):
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "parameters": dict(t.parameters),
                "description": t.description,
            },
        }
        for t in env.available_tools
    ]


# --- a tool call ----------------------------------------------------------------------------


def test_a_tool_call_gives_the_action_thought_usage_and_cost(server, env):
    policy = _policy(server, system="Be brief.", temperature=0.3, max_tokens=200)
    ts = _first_step(env, policy)
    server.enqueue(
        openai_completion(
            "I add the numbers.",
            [openai_tool_call("calculator", {"expression": "1 + 2"}, id="call_abc")],
            prompt_tokens=2000,
            completion_tokens=100,
        )
    )
    decision = decide(policy, ts.observation, [], env.available_tools)

    assert decision.error is None
    assert decision.action == {
        "tool": "calculator",
        "params": {"expression": "1 + 2"},
        "thought": "I add the numbers.",
    }
    assert decision.usage.tokens_in == 2000 and decision.usage.tokens_out == 100
    assert decision.usage.cost == pytest.approx(2000 * 0.15 / 1e6 + 100 * 0.60 / 1e6)
    assert 0 < decision.usage.latency < 5
    assert decision.metadata["attempts"] == 1
    assert decision.metadata["tool_call_id"] == "call_abc"
    assert decision.metadata["finish_reason"] == "tool_calls"

    (request,) = server.requests
    assert request.path == OPENAI_PATH
    assert request.headers["authorization"] == f"Bearer {KEY}"
    body = request.json
    assert body["model"] == MODEL
    assert body["max_tokens"] == 200
    assert body["temperature"] == 0.3
    assert body["tools"] == _openai_tools(env)
    assert body["tool_choice"] == "auto"
    assert "stop" not in body
    assert body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": ts.observation},
    ]


def test_the_history_is_replayed_in_the_shared_chat_format(server, env):
    policy = _policy(server)
    ts = _first_step(env, policy)
    prompt = ts.observation
    server.enqueue(
        openai_completion("Compute.", [openai_tool_call("calculator", {"expression": "6*7"})]),
        openai_completion(None, [openai_tool_call("submit", {"answer": "42"})]),
    )
    history: list[Turn] = []
    first = decide(policy, ts.observation, history, env.available_tools)
    ts = play_step(env, first)
    history.append(Turn(action=first.action, observation=ts.observation, raw=first.raw))
    second = decide(policy, ts.observation, history, env.available_tools)
    assert second.action == {"tool": "submit", "params": {"answer": "42"}, "thought": ""}

    body = server.requests[1].json
    assert body["messages"] == to_messages(prompt=prompt, history=history)
    assert body["messages"][1:] == [
        {
            "role": "assistant",
            "content": "Compute.",
            "tool_calls": [
                {
                    "id": "call_0",
                    "type": "function",
                    "function": {"name": "calculator", "arguments": '{"expression": "6*7"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_0", "name": "calculator", "content": ts.observation},
    ]


def test_several_tool_calls_take_the_first_and_say_so(server, env):
    policy = _policy(server)
    ts = _first_step(env, policy)
    server.enqueue(
        openai_completion(
            None,
            [
                openai_tool_call("calculator", {"expression": "1+1"}),
                openai_tool_call("submit", {"answer": "2"}),
            ],
        )
    )
    decision = decide(policy, ts.observation, [], env.available_tools)
    assert decision.action == {"tool": "calculator", "params": {"expression": "1+1"}, "thought": ""}
    assert decision.metadata["ignored_tool_calls"] == ["submit"]


def test_empty_arguments_mean_no_arguments(server, env):
    policy = _policy(server)
    ts = _first_step(env, policy)
    server.enqueue(openai_completion(None, [openai_tool_call("submit", "")]))
    decision = decide(policy, ts.observation, [], env.available_tools)
    assert decision.action == {"tool": "submit", "params": {}, "thought": ""}


# --- malformed tool calls -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"expression": "2+2"', ["not valid JSON", "line 1 column 21", "char 20"]),
        ("{'expression': '2+2'}", ["not valid JSON", "line 1 column 2"]),
        ('{"expression": "2+2",}', ["not valid JSON"]),
        ('["2+2"]', ["must be a JSON object", "a list"]),
        ('"2+2"', ["must be a JSON object", "a string"]),
    ],
)
def test_malformed_tool_call_json_is_a_decision_with_the_problem(server, env, arguments, expected):
    policy = _policy(server)
    ts = _first_step(env, policy)
    server.enqueue(openai_completion("Thinking.", [openai_tool_call("calculator", arguments)]))
    decision = decide(policy, ts.observation, [], env.available_tools)
    assert decision.action is None
    assert decision.raw == arguments
    assert "calculator" in decision.error
    for part in expected:
        assert part in decision.error, (part, decision.error)
    assert decision.usage.tokens_in == 10  # usage is still counted


def test_a_malformed_turn_is_replayed_with_its_error_and_the_model_recovers(server, env):
    policy = _policy(server)
    ts = _first_step(env, policy)
    prompt = ts.observation
    bad = '{"expression": "2+2"'
    server.enqueue(
        openai_completion(None, [openai_tool_call("calculator", bad)]),
        openai_completion(None, [openai_tool_call("calculator", {"expression": "2+2"})]),
    )
    history: list[Turn] = []
    first = decide(policy, ts.observation, history, env.available_tools)
    ts = play_step(env, first)
    assert ts.info["error"] == "malformed_output"
    history.append(Turn(action=None, observation=ts.observation, raw=first.raw, error=first.error))
    second = decide(policy, ts.observation, history, env.available_tools)
    assert second.action["params"] == {"expression": "2+2"}
    assert server.requests[1].json["messages"] == [
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": bad},
        {"role": "user", "content": ts.observation},
    ]
    assert "not valid JSON" in ts.observation


def test_parse_arguments():
    assert parse_arguments('{"a": 1}', tool="t") == {"a": 1}
    assert parse_arguments(None, tool="t") == {}
    assert parse_arguments("  ", tool="t") == {}
    assert "a number" in parse_arguments("3", tool="t")
    assert "null" in parse_arguments("null", tool="t")


def test_an_answer_without_a_tool_call_is_a_decision_with_an_error(server, env):
    policy = _policy(server)
    ts = _first_step(env, policy)
    server.enqueue(openai_completion("The answer is 5."))
    decision = decide(policy, ts.observation, [], env.available_tools)
    assert decision.action is None
    assert "answered without calling a tool" in decision.error
    assert decision.raw == "The answer is 5."
    step = play_step(env, decision)
    assert "answered without calling a tool" in step.observation and not step.done


def test_an_answer_cut_off_at_max_tokens_says_so(server, env):
    policy = _policy(server, max_tokens=8)
    ts = _first_step(env, policy)
    server.enqueue(openai_completion("Let me think", finish_reason="length"))
    decision = decide(policy, ts.observation, [], env.available_tools)
    assert decision.action is None and "max_tokens=8" in decision.error


def test_a_server_without_usage_counts_zero_tokens_and_unknown_models_cost_nothing(server, env):
    policy = OpenAICompatPolicy(
        "local-model", base_url=server.openai_base_url, api_key_env=None, timeout=5
    )
    ts = _first_step(env, policy)
    server.enqueue(
        openai_completion(None, [openai_tool_call("submit", {"answer": "1"})], prompt_tokens=None)
    )
    decision = decide(policy, ts.observation, [], env.available_tools)
    assert decision.usage.tokens_in == 0 and decision.usage.tokens_out == 0
    assert decision.usage.cost == 0.0
    # api_key_env=None: a placeholder key, no environment variable needed
    assert server.requests[0].headers["authorization"] == "Bearer EMPTY"


def test_explicit_prices_extra_body_and_max_completion_tokens(server, env):
    policy = _policy(
        server,
        price_in=2.0,
        price_out=4.0,
        extra_body={"top_k": 20, "chat_template_kwargs": {"enable_thinking": False}},
        max_tokens_field="max_completion_tokens",
        temperature=None,
    )
    ts = _first_step(env, policy)
    server.enqueue(
        openai_completion(
            None,
            [openai_tool_call("submit", {"answer": "1"})],
            prompt_tokens=1000,
            completion_tokens=500,
            message_extra={"reasoning_content": "hidden reasoning"},
        )
    )
    decision = decide(policy, ts.observation, [], env.available_tools)
    assert decision.usage.cost == pytest.approx(1000 * 2.0 / 1e6 + 500 * 4.0 / 1e6)
    assert decision.metadata["reasoning"] == "hidden reasoning"
    body = server.requests[0].json
    assert body["top_k"] == 20
    assert body["chat_template_kwargs"] == {"enable_thinking": False}
    assert body["max_completion_tokens"] == 1024 and "max_tokens" not in body
    assert "temperature" not in body


# --- retries and errors ---------------------------------------------------------------------


def test_a_429_with_retry_after_0_then_success_is_one_decision(server, env):
    policy = _policy(server)
    ts = _first_step(env, policy)
    server.enqueue(
        rate_limited("0"),
        openai_completion(None, [openai_tool_call("calculator", {"expression": "2+2"})]),
    )
    decision = decide(policy, ts.observation, [], env.available_tools)
    assert decision.action["tool"] == "calculator"
    assert len(server.requests) == 2
    assert [r.retry_count for r in server.requests] == [0, 1]
    assert decision.metadata["attempts"] == 2


def test_a_500_then_success_is_one_decision(server, env):
    policy = _policy(server)
    ts = _first_step(env, policy)
    server.enqueue(
        server_error(500, **FAST),
        openai_completion(None, [openai_tool_call("calculator", {"expression": "2+2"})]),
    )
    decision = decide(policy, ts.observation, [], env.available_tools)
    assert decision.action["tool"] == "calculator"
    assert len(server.requests) == 2 and decision.metadata["attempts"] == 2


def test_a_persistent_429_raises_after_max_retries(server, env):
    policy = _policy(server, max_retries=3)
    ts = _first_step(env, policy)
    server.enqueue(*[rate_limited(None, **FAST) for _ in range(4)])
    with pytest.raises(PolicyError) as caught:
        decide(policy, ts.observation, [], env.available_tools)
    assert len(server.requests) == 4 and server.pending == 0
    assert "429" in str(caught.value) and "4 attempts" in str(caught.value)


def test_a_401_names_the_env_var_and_never_shows_the_key(server, env):
    policy = _policy(server)
    ts = _first_step(env, policy)
    server.enqueue(openai_error(401, f"Incorrect API key provided: {KEY}.", kind="invalid_api_key"))
    with pytest.raises(PolicyError) as caught:
        decide(policy, ts.observation, [], env.available_tools)
    message = str(caught.value)
    assert len(server.requests) == 1
    assert "401" in message and KEY_ENV in message
    assert KEY not in message
    assert server.openai_base_url in message


def test_a_401_from_a_keyless_setup_says_to_configure_a_key(server, env):
    policy = _policy(server, api_key_env=None)
    ts = _first_step(env, policy)
    server.enqueue(openai_error(401, "key required"))
    with pytest.raises(PolicyError, match="set api_key_env"):
        decide(policy, ts.observation, [], env.available_tools)


def test_a_404_points_at_the_model_name(server, env):
    policy = _policy(server)
    ts = _first_step(env, policy)
    server.enqueue(openai_error(404, "The model `gpt-4o-mini-2024-07-18` does not exist"))
    with pytest.raises(PolicyError) as caught:
        decide(policy, ts.observation, [], env.available_tools)
    assert "404" in str(caught.value) and "model name" in str(caught.value)


def test_an_unset_env_var_fails_before_any_request(server, env, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    policy = _policy(server)
    ts = _first_step(env, policy)
    with pytest.raises(PolicyError) as caught:
        decide(policy, ts.observation, [], env.available_tools)
    assert KEY_ENV in str(caught.value) and "not set" in str(caught.value)
    assert server.requests == []


# --- the ReAct mode ---------------------------------------------------------------------------


def test_react_mode_sends_text_only_and_parses_the_answer(server, env):
    policy = _policy(server, prompt_format="react")
    ts = _first_step(env, policy)
    prompt = ts.observation
    server.enqueue(
        openai_completion("Thought: compute\nAction: calculator"),  # no Action Input
        openai_completion(
            'Thought: compute\nAction: calculator\nAction Input: {"expression": "5*5"}\n'
            "Observation: 25"
        ),
    )
    history: list[Turn] = []
    first = decide(policy, ts.observation, history, env.available_tools)
    assert first.action is None and '"Action Input:"' in first.error
    ts = play_step(env, first)
    history.append(Turn(action=None, observation=ts.observation, raw=first.raw, error=first.error))
    second = decide(policy, ts.observation, history, env.available_tools)
    assert second.action == {
        "tool": "calculator",
        "params": {"expression": "5*5"},
        "thought": "compute",
    }
    body = server.requests[1].json
    assert "tools" not in body
    assert body["stop"] == ["\nObservation:"]
    assert body["messages"][0]["role"] == "system"
    assert react_instructions(env.available_tools) in body["messages"][0]["content"]
    assert body["messages"][1:] == [
        {"role": "user", "content": prompt},
        {"role": "assistant", "content": "Thought: compute\nAction: calculator"},
        {"role": "user", "content": f"Observation: {ts.observation}"},
    ]


# --- an episode end to end ------------------------------------------------------------------


def test_an_arithmetic_episode_with_a_malformed_turn_then_correct_ones(server, env):
    policy = _policy(server)
    ts = _first_step(env, policy, seed=5)
    answer = str(env.task.expected_answer)
    server.enqueue(
        openai_completion(None, [openai_tool_call("calculator", "{expression: 1}")]),
        openai_completion(None, [openai_tool_call("calculator", {"expression": "1"})]),
        openai_completion(None, [openai_tool_call("submit", {"answer": answer})]),
    )
    history: list[Turn] = []
    while not ts.done:
        decision = decide(policy, ts.observation, history, env.available_tools)
        ts = play_step(env, decision)
        history.append(
            Turn(
                action=decision.action,
                observation=ts.observation,
                raw=decision.raw,
                error=decision.error,
            )
        )
    assert ts.terminated and ts.reward == 1.0
    assert len(history) == 3 and history[0].action is None
    assert len(server.requests) == 3 and server.unexpected == []
    second = server.requests[1].json["messages"]
    assert second[-2] == {"role": "assistant", "content": "{expression: 1}"}
    assert second[-1]["role"] == "user"
    assert second[-1]["content"] == history[0].observation
    assert "not valid JSON" in second[-1]["content"]


def test_settings_are_checked():
    with pytest.raises(ConfigError, match="base_url"):
        OpenAICompatPolicy(MODEL, base_url="")
    with pytest.raises(ConfigError, match="max_tokens_field"):
        OpenAICompatPolicy(MODEL, base_url="http://x/v1", max_tokens_field="n")
    with pytest.raises(ConfigError, match="temperature"):
        OpenAICompatPolicy(MODEL, base_url="http://x/v1", temperature=-1)
    with pytest.raises(ConfigError, match="timeout"):
        OpenAICompatPolicy(MODEL, base_url="http://x/v1", timeout=0)
