"""AnthropicPolicy through the real ``anthropic`` SDK against a loopback server that speaks the
Messages API: tool calls, history replay, retries (429, 5xx), malformed and tool-less answers,
auth errors and the API key's handling."""

from __future__ import annotations

import json
import socket

import pytest

from tests.trainer_core.policies.fake_llm_servers import (
    ANTHROPIC_PATH,
    FakeLLMServer,
    Reply,
    anthropic_error,
    anthropic_message,
    anthropic_text,
    anthropic_tool_use,
    rate_limited,
    server_error,
)
from trainer_core.envs import make
from trainer_core.errors import ConfigError, PolicyError
from trainer_core.policies.anthropic_api import AnthropicPolicy, to_anthropic_messages
from trainer_core.policies.base import Decision, Turn, decide, play_step
from trainer_core.policies.react import react_instructions, render_react_turn

KEY_ENV = "STEPLAB_TEST_ANTHROPIC_KEY"
KEY = "sk-ant-test-1f2e3d4c5b"
MODEL = "claude-haiku-4-5-20251001"  # $1 / $5 per million tokens
FAST = {"retry-after-ms": "1"}  # the SDK waits what the server asks: 1 ms


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


def _policy(server, **kwargs) -> AnthropicPolicy:
    kwargs.setdefault("max_retries", 2)
    kwargs.setdefault("timeout", 5.0)
    return AnthropicPolicy(MODEL, api_key_env=KEY_ENV, base_url=server.anthropic_base_url, **kwargs)


def _sent_key(request) -> str:
    headers = request.headers
    return headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")


def _first_step(env, policy, seed=3):
    ts = env.reset(seed=seed)
    policy.reset(env.task)
    return ts


def _tool_schemas(env):
    return [
        {"name": t.name, "input_schema": dict(t.parameters), "description": t.description}
        for t in env.available_tools
    ]


# --- a tool call ----------------------------------------------------------------------------


def test_a_tool_call_gives_the_action_thought_usage_and_cost(server, env):
    policy = _policy(server, system="Be brief.", temperature=0.2, max_tokens=256)
    ts = _first_step(env, policy)
    server.enqueue(
        anthropic_message(
            [
                anthropic_text("I add the numbers."),
                anthropic_tool_use("calculator", {"expression": "1 + 2"}, id="toolu_1"),
            ],
            input_tokens=1200,
            output_tokens=300,
        )
    )
    decision = decide(policy, ts.observation, [], env.available_tools)

    assert isinstance(decision, Decision)
    assert decision.error is None
    assert decision.action == {
        "tool": "calculator",
        "params": {"expression": "1 + 2"},
        "thought": "I add the numbers.",
    }
    assert decision.usage.tokens_in == 1200 and decision.usage.tokens_out == 300
    assert decision.usage.cost == pytest.approx(1200 * 1 / 1e6 + 300 * 5 / 1e6)
    assert 0 < decision.usage.latency < 5
    assert decision.metadata["attempts"] == 1
    assert decision.metadata["prompt_format"] == "native"
    assert decision.metadata["tool_call_id"] == "toolu_1"
    assert "calculator" in decision.raw and "I add the numbers." in decision.raw

    (request,) = server.requests
    assert request.path == ANTHROPIC_PATH
    assert _sent_key(request) == KEY
    body = request.json
    assert body["model"] == MODEL
    assert body["max_tokens"] == 256
    assert body["temperature"] == 0.2
    assert body["system"] == "Be brief."
    assert body["tools"] == _tool_schemas(env)
    assert body["tool_choice"] == {"type": "auto"}
    assert "stop_sequences" not in body
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": ts.observation}]}
    ]


def test_the_history_is_replayed_as_tool_use_and_tool_result_blocks(server, env):
    policy = _policy(server)
    ts = _first_step(env, policy)
    prompt = ts.observation
    server.enqueue(
        anthropic_message(
            [anthropic_text("Compute."), anthropic_tool_use("calculator", {"expression": "6*7"})]
        ),
        anthropic_message([anthropic_tool_use("submit", {"answer": "42"})]),
    )
    history: list[Turn] = []
    first = decide(policy, ts.observation, history, env.available_tools)
    ts = play_step(env, first)
    assert "42" in ts.observation
    history.append(Turn(action=first.action, observation=ts.observation, raw=first.raw))
    second = decide(policy, ts.observation, history, env.available_tools)
    assert second.action == {"tool": "submit", "params": {"answer": "42"}, "thought": ""}

    body = server.requests[1].json
    assert "system" not in body  # no system prompt was configured
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": prompt}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Compute."},
                {
                    "type": "tool_use",
                    "id": "call_0",
                    "name": "calculator",
                    "input": {"expression": "6*7"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "call_0", "content": ts.observation}
            ],
        },
    ]


def test_several_tool_calls_take_the_first_and_say_so(server, env):
    policy = _policy(server)
    ts = _first_step(env, policy)
    server.enqueue(
        anthropic_message(
            [
                anthropic_tool_use("calculator", {"expression": "1+1"}),
                anthropic_text("and then"),
                anthropic_tool_use("submit", {"answer": "2"}),
            ]
        )
    )
    decision = decide(policy, ts.observation, [], env.available_tools)
    assert decision.action == {"tool": "calculator", "params": {"expression": "1+1"}, "thought": ""}
    assert decision.metadata["ignored_tool_calls"] == ["submit"]


# --- retries --------------------------------------------------------------------------------


def test_a_429_with_retry_after_0_then_success_is_one_decision(server, env):
    policy = _policy(server)
    ts = _first_step(env, policy)
    server.enqueue(
        rate_limited("0"),
        anthropic_message([anthropic_tool_use("calculator", {"expression": "2+2"})]),
    )
    decision = decide(policy, ts.observation, [], env.available_tools)
    assert decision.action["tool"] == "calculator"
    assert len(server.requests) == 2
    assert [r.retry_count for r in server.requests] == [0, 1]
    assert server.requests[0].json == server.requests[1].json  # the same request, sent again
    assert decision.metadata["attempts"] == 2


def test_retry_after_is_honoured(server, env):
    policy = _policy(server)
    ts = _first_step(env, policy)
    server.enqueue(
        rate_limited(None, **{"retry-after-ms": "300"}),
        anthropic_message([anthropic_tool_use("calculator", {"expression": "2+2"})]),
    )
    decision = decide(policy, ts.observation, [], env.available_tools)
    assert decision.action is not None
    assert decision.usage.latency >= 0.3  # latency counts the wait: retries included


@pytest.mark.parametrize("status", [500, 503, 529])
def test_a_server_error_then_success_is_one_decision(server, env, status):
    policy = _policy(server)
    ts = _first_step(env, policy)
    server.enqueue(
        server_error(status, "Overloaded", **FAST),
        anthropic_message([anthropic_tool_use("calculator", {"expression": "2+2"})]),
    )
    decision = decide(policy, ts.observation, [], env.available_tools)
    assert decision.action["tool"] == "calculator"
    assert len(server.requests) == 2
    assert decision.metadata["attempts"] == 2


def test_a_persistent_429_raises_after_max_retries(server, env):
    policy = _policy(server, max_retries=2)
    ts = _first_step(env, policy)
    server.enqueue(*[rate_limited(None, **FAST) for _ in range(3)])
    with pytest.raises(PolicyError) as caught:
        decide(policy, ts.observation, [], env.available_tools)
    message = str(caught.value)
    assert len(server.requests) == 3  # the first try and max_retries=2 retries
    assert server.pending == 0
    assert "429" in message and "3 attempts" in message and "max_retries" in message
    assert caught.value.attempts == 3


def test_a_persistent_500_raises_after_max_retries(server, env):
    policy = _policy(server, max_retries=1)
    ts = _first_step(env, policy)
    server.enqueue(*[server_error(500, "database on fire", **FAST) for _ in range(2)])
    with pytest.raises(PolicyError) as caught:
        decide(policy, ts.observation, [], env.available_tools)
    message = str(caught.value)
    assert len(server.requests) == 2
    assert "server error 500" in message and "database on fire" in message
    assert "2 attempts" in message and "try again later" in message


# --- errors that are not retried ------------------------------------------------------------


def test_a_401_names_the_env_var_and_never_shows_the_key(server, env):
    policy = _policy(server)
    ts = _first_step(env, policy)
    server.enqueue(
        anthropic_error(401, "authentication_error", f"invalid x-api-key: {KEY}"),
    )
    with pytest.raises(PolicyError) as caught:
        decide(policy, ts.observation, [], env.available_tools)
    message = str(caught.value)
    assert len(server.requests) == 1  # not retried
    assert "401" in message and KEY_ENV in message
    assert KEY not in message and "***" in message
    assert KEY not in repr(policy)


def test_a_400_is_not_retried_and_quotes_the_server(server, env):
    policy = _policy(server)
    ts = _first_step(env, policy)
    server.enqueue(
        anthropic_error(400, "invalid_request_error", "temperature is not supported by this model")
    )
    with pytest.raises(PolicyError) as caught:
        decide(policy, ts.observation, [], env.available_tools)
    message = str(caught.value)
    assert len(server.requests) == 1
    assert "400" in message and "temperature is not supported" in message
    assert "temperature=None" in message


def test_temperature_none_is_not_sent(server, env):
    policy = _policy(server, temperature=None)
    ts = _first_step(env, policy)
    server.enqueue(anthropic_message([anthropic_tool_use("submit", {"answer": "1"})]))
    decide(policy, ts.observation, [], env.available_tools)
    assert "temperature" not in server.requests[0].json


def test_an_unset_env_var_fails_before_any_request(server, env, monkeypatch):
    monkeypatch.delenv(KEY_ENV)
    policy = _policy(server)
    ts = _first_step(env, policy)
    with pytest.raises(PolicyError) as caught:
        decide(policy, ts.observation, [], env.available_tools)
    assert KEY_ENV in str(caught.value) and "not set" in str(caught.value)
    assert server.requests == []


def test_an_unreachable_server_is_a_policy_error(env):
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    policy = AnthropicPolicy(
        MODEL, api_key_env=KEY_ENV, base_url=f"http://127.0.0.1:{port}", max_retries=0, timeout=2
    )
    ts = _first_step(env, policy)
    with pytest.raises(PolicyError) as caught:
        decide(policy, ts.observation, [], env.available_tools)
    assert "could not be reached" in str(caught.value)
    assert f"127.0.0.1:{port}" in str(caught.value)


def test_a_server_that_does_not_answer_in_time_is_a_policy_error(server, env):
    policy = _policy(server, timeout=0.3, max_retries=0)
    ts = _first_step(env, policy)
    server.enqueue(Reply(200, {}, delay=1.5))
    with pytest.raises(PolicyError) as caught:
        decide(policy, ts.observation, [], env.available_tools)
    assert "did not answer within 0.3 s" in str(caught.value)


# --- answers that are not actions -------------------------------------------------------------


def test_an_answer_without_a_tool_call_is_a_decision_with_an_error(server, env):
    policy = _policy(server)
    ts = _first_step(env, policy)
    server.enqueue(anthropic_message("The answer is 5.", input_tokens=50, output_tokens=7))
    decision = decide(policy, ts.observation, [], env.available_tools)
    assert decision.action is None
    assert "answered without calling a tool" in decision.error
    assert decision.raw == "The answer is 5."
    assert decision.usage.tokens_in == 50 and decision.usage.cost > 0
    step = play_step(env, decision)
    assert not step.done
    assert step.observation.startswith("Your last output was not a valid action:")
    assert "answered without calling a tool" in step.observation


def test_an_answer_cut_off_at_max_tokens_says_so(server, env):
    policy = _policy(server, max_tokens=16)
    ts = _first_step(env, policy)
    server.enqueue(anthropic_message("Let me think about this very", stop_reason="max_tokens"))
    decision = decide(policy, ts.observation, [], env.available_tools)
    assert decision.action is None and "max_tokens=16" in decision.error


# --- the ReAct mode ---------------------------------------------------------------------------


def test_react_mode_sends_no_tools_and_parses_the_text(server, env):
    policy = _policy(server, prompt_format="react", system="Be careful.")
    ts = _first_step(env, policy)
    server.enqueue(
        anthropic_message(
            'Thought: Use the calculator.\nAction: calculator\nAction Input: {"expression": "3*3"}'
        )
    )
    decision = decide(policy, ts.observation, [], env.available_tools)
    assert decision.action == {
        "tool": "calculator",
        "params": {"expression": "3*3"},
        "thought": "Use the calculator.",
    }
    assert decision.metadata["prompt_format"] == "react"
    body = server.requests[0].json
    assert "tools" not in body and "tool_choice" not in body
    assert body["system"].startswith("Be careful.")
    assert react_instructions(env.available_tools) in body["system"]
    assert body["stop_sequences"] == ["\nObservation:"]


def test_react_mode_malformed_text_is_an_error_observation_and_is_replayed(server, env):
    policy = _policy(server, prompt_format="react")
    ts = _first_step(env, policy)
    prompt = ts.observation
    bad = "Thought: add.\nAction: calculator\nAction Input: {'expression': '1+1'}"
    good = 'Thought: add.\nAction: calculator\nAction Input: {"expression": "1+1"}'
    server.enqueue(anthropic_message(bad), anthropic_message(good))

    history: list[Turn] = []
    first = decide(policy, ts.observation, history, env.available_tools)
    assert first.action is None
    assert "not valid JSON" in first.error and "double quotes" in first.error
    assert first.raw == bad
    ts = play_step(env, first)
    assert "react" == first.metadata["prompt_format"]
    assert 'Answer with a line "Thought:' in ts.observation  # the ReAct how-to
    history.append(Turn(action=None, observation=ts.observation, raw=first.raw, error=first.error))

    second = decide(policy, ts.observation, history, env.available_tools)
    assert second.action["params"] == {"expression": "1+1"}
    assert server.requests[1].json["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": prompt}]},
        {"role": "assistant", "content": [{"type": "text", "text": bad}]},
        {"role": "user", "content": [{"type": "text", "text": f"Observation: {ts.observation}"}]},
    ]
    # and an action turn is replayed in the ReAct text the model is asked for
    history.append(Turn(action=second.action, observation="2"))
    server.enqueue(anthropic_message('Action: submit\nAction Input: {"answer": "2"}'))
    decide(policy, "2", history, env.available_tools)
    replay = server.requests[2].json["messages"]
    assert replay[3] == {
        "role": "assistant",
        "content": [{"type": "text", "text": render_react_turn(second.action)}],
    }
    assert replay[4]["content"] == [{"type": "text", "text": "Observation: 2"}]


# --- an episode end to end ------------------------------------------------------------------


def test_an_arithmetic_episode_with_a_malformed_turn_then_correct_ones(server, env):
    policy = _policy(server)
    ts = _first_step(env, policy, seed=11)
    answer = str(env.task.expected_answer)
    server.enqueue(
        anthropic_message("I know this one: it is a number."),
        anthropic_message(
            [anthropic_text("Use the tool."), anthropic_tool_use("calculator", {"expression": "1"})]
        ),
        anthropic_message([anthropic_tool_use("submit", {"answer": answer})]),
    )
    history: list[Turn] = []
    total = None
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
        total = decision.usage if total is None else total + decision.usage
    assert ts.terminated and ts.reward == 1.0
    assert len(server.requests) == 3 and server.unexpected == []
    assert total.tokens_in == 30

    second = server.requests[1].json["messages"]
    assert second[1] == {
        "role": "assistant",
        "content": [{"type": "text", "text": "I know this one: it is a number."}],
    }
    error_text = second[2]["content"][0]["text"]
    assert error_text == history[0].observation
    assert "answered without calling a tool" in error_text
    third = server.requests[2].json["messages"]
    assert third[-1] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "call_1", "content": history[1].observation}
        ],
    }
    assert history[1].observation.endswith("1")  # the calculator's answer


# --- settings and the message conversion --------------------------------------------------


def test_settings_are_checked():
    with pytest.raises(ConfigError, match="prompt_format"):
        AnthropicPolicy(MODEL, prompt_format="xml")
    with pytest.raises(ConfigError, match="max_tokens"):
        AnthropicPolicy(MODEL, max_tokens=0)
    with pytest.raises(ConfigError, match="api_key_env"):
        AnthropicPolicy(MODEL, api_key_env="")
    with pytest.raises(ConfigError, match="model"):
        AnthropicPolicy(" ")


def test_act_with_a_history_but_no_first_observation_is_a_clear_error():
    policy = AnthropicPolicy(MODEL, api_key_env=KEY_ENV)
    with pytest.raises(PolicyError, match="first observation"):
        policy.act("obs", [Turn(action=None, observation="x")], [])


def test_conversion_merges_roles_and_fills_empty_texts():
    system, messages = to_anthropic_messages(
        [
            {"role": "system", "content": "S"},
            {"role": "user", "content": "P"},
            {"role": "assistant", "content": ""},
            {"role": "user", "content": ""},
            {"role": "user", "content": "more"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {"id": "c1", "function": {"name": "t", "arguments": json.dumps({"a": 1})}}
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": ""},
            {"role": "user", "content": "next"},
        ]
    )
    assert system == "S"
    assert messages == [
        {"role": "user", "content": [{"type": "text", "text": "P"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "(empty)"}]},
        {
            "role": "user",
            "content": [{"type": "text", "text": "(empty)"}, {"type": "text", "text": "more"}],
        },
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c1", "name": "t", "input": {"a": 1}}],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "(empty)"},
                {"type": "text", "text": "next"},
            ],
        },
    ]
