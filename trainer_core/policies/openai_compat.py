"""OpenAICompatPolicy: an agent served by any OpenAI-compatible chat-completions server with tool
calling (vLLM, SGLang, Ollama, OpenAI itself), through the ``openai`` SDK.

::

    policy = OpenAICompatPolicy("Qwen/Qwen2.5-7B-Instruct", base_url="http://gpu1:8000/v1",
                                api_key_env=None)          # a local server that needs no key
    policy.reset(task)
    decision = decide(policy, ts.observation, history, env.available_tools)

``prompt_format="native"`` sends the tools as ``tools=[{"type": "function", ...}]`` and the
conversation in the shared chat format (:func:`~trainer_core.policies.chat_format.to_messages`,
unchanged). The first tool call of the answer is the action and the message text the thought.
``arguments`` arrive as a JSON string that models do get wrong: malformed JSON, or JSON that is
not an object, gives a Decision with ``action=None``, an ``error`` saying what is wrong and where,
and ``raw`` = the arguments text; the model sees the error as its next observation. Several tool
calls: the first is taken and the others are named in ``metadata["ignored_tool_calls"]``. No tool
call: ``action=None`` and an error. An empty ``arguments`` string means no arguments (``{}``).

``prompt_format="react"`` sends no tools: the ReAct instructions go in the system prompt, the
history is plain text (:func:`~trainer_core.policies.react.react_messages`) and the answer is
parsed with :func:`~trainer_core.policies.react.parse_react`; for servers without tool calling.

``api_key_env=None`` sends a placeholder key (for servers that check none). Retries (429, 5xx,
connection errors) are the SDK's, with backoff honouring ``Retry-After``; what still fails raises
:class:`~trainer_core.errors.PolicyError`. ``extra_body`` is merged into the request body as it
is (e.g. ``{"top_k": 20}`` for vLLM); ``max_tokens_field="max_completion_tokens"`` for OpenAI's
reasoning models, which refuse ``max_tokens``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from trainer_core.errors import ConfigError
from trainer_core.policies._api import ApiPolicy
from trainer_core.policies.base import Decision, Turn, Usage
from trainer_core.policies.chat_format import render_tool_call, system_prompt, to_messages
from trainer_core.policies.react import STOP_SEQUENCES, parse_react, react_messages, tool_fields

__all__ = ["OpenAICompatPolicy", "parse_arguments"]


class OpenAICompatPolicy(ApiPolicy):
    """A policy that asks an OpenAI-compatible server for each action (see the module
    docstring)."""

    provider = "the OpenAI-compatible server"

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key_env: str | None = "OPENAI_API_KEY",
        name: str = "openai-compatible",
        extra_body: dict[str, Any] | None = None,
        max_tokens_field: str = "max_tokens",
        **settings: Any,
    ) -> None:
        """``settings``: temperature (0.0), max_tokens (1024), system, prompt_format (``native``
        or ``react``), max_retries (4), timeout (60 s), price_in, price_out; see
        :class:`~trainer_core.policies._api.ApiPolicy`."""
        if not isinstance(base_url, str) or not base_url.strip():
            raise ConfigError(
                "base_url is required: the server's OpenAI-compatible root, e.g. "
                "'http://localhost:8000/v1' for vLLM or 'http://localhost:11434/v1' for Ollama"
            )
        if max_tokens_field not in ("max_tokens", "max_completion_tokens"):
            raise ConfigError(
                "max_tokens_field must be 'max_tokens' or 'max_completion_tokens', "
                f"not {max_tokens_field!r}"
            )
        if extra_body is not None and not isinstance(extra_body, dict):
            raise ConfigError("extra_body must be a dict of extra request fields")
        super().__init__(
            model, base_url=base_url.strip(), api_key_env=api_key_env, name=name, **settings
        )
        self.extra_body = dict(extra_body or {})
        self.max_tokens_field = max_tokens_field

    def _sdk_client(self) -> Any:
        if self._client is None:
            import openai

            self._client = self._new_client(openai.OpenAI)
        return self._client

    def request(
        self, observation: str, history: Sequence[Turn], tools: Sequence[Any]
    ) -> dict[str, Any]:
        """The keyword arguments of ``chat.completions.create`` for this step (no network)."""
        prompt = self._episode_prompt(observation, history)
        kwargs: dict[str, Any] = {"model": self.model, self.max_tokens_field: self.max_tokens}
        if self.prompt_format == "react":
            system = system_prompt(tools, prompt_format="react", instructions=self.system)
            kwargs["messages"] = react_messages(prompt, history, system)
            kwargs["stop"] = list(STOP_SEQUENCES)
        else:
            kwargs["messages"] = to_messages(prompt=prompt, history=history, system=self.system)
            if tools:
                kwargs["tools"] = [_tool(t) for t in tools]
                kwargs["tool_choice"] = "auto"
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.extra_body:
            kwargs["extra_body"] = dict(self.extra_body)
        return kwargs

    def act(self, observation: str, history: Sequence[Turn], tools: Sequence[Any]) -> Decision:
        import openai

        kwargs = self.request(observation, history, tools)
        create = self._sdk_client().chat.completions.with_raw_response.create
        completion, attempts, latency = self._call(openai, create, kwargs)
        usage_in = getattr(completion, "usage", None)
        tokens_in = int(getattr(usage_in, "prompt_tokens", 0) or 0)
        tokens_out = int(getattr(usage_in, "completion_tokens", 0) or 0)
        usage = Usage(tokens_in, tokens_out, self._cost(tokens_in, tokens_out), latency)
        metadata: dict[str, Any] = {
            "prompt_format": self.prompt_format,
            "attempts": attempts,
            "model": getattr(completion, "model", None),
            "response_id": getattr(completion, "id", None),
        }
        choices = getattr(completion, "choices", None) or []
        if not choices:
            return Decision(
                action=None,
                usage=usage,
                error="the server returned no answer (no choices).",
                metadata=metadata,
            )
        choice = choices[0]
        metadata["finish_reason"] = choice.finish_reason
        message = choice.message
        text = message.content or ""
        if self.prompt_format == "react":
            parsed = parse_react(text)
            if isinstance(parsed, str):
                if choice.finish_reason == "length":
                    parsed += (
                        f" (the answer was cut off at max_tokens={self.max_tokens}; keep the "
                        "thought short.)"
                    )
                return Decision(action=None, usage=usage, error=parsed, raw=text, metadata=metadata)
            return Decision(action=parsed, usage=usage, raw=text, metadata=metadata)
        return self._native_decision(choice, text, usage, metadata)

    def _native_decision(
        self, choice: Any, text: str, usage: Usage, metadata: dict[str, Any]
    ) -> Decision:
        message = choice.message
        reasoning = getattr(message, "reasoning_content", None) or getattr(
            message, "reasoning", None
        )
        if isinstance(reasoning, str) and reasoning.strip():
            metadata["reasoning"] = reasoning.strip()
        calls = [c for c in (message.tool_calls or []) if getattr(c, "function", None) is not None]
        if not calls:
            if choice.finish_reason == "length":
                problem = (
                    f"the answer was cut off at max_tokens={self.max_tokens} before any tool "
                    "call; keep the thought short and call a tool."
                )
            else:
                problem = "you answered without calling a tool."
                if text.strip():
                    metadata["plain_text"] = True
            return Decision(action=None, usage=usage, error=problem, raw=text, metadata=metadata)
        call = calls[0]
        metadata["tool_call_id"] = call.id
        if len(calls) > 1:
            metadata["ignored_tool_calls"] = [c.function.name for c in calls[1:]]
        name = call.function.name or ""
        arguments = call.function.arguments
        if not name.strip():
            return Decision(
                action=None,
                usage=usage,
                error="the tool call has no tool name.",
                raw=arguments or "",
                metadata=metadata,
            )
        params = parse_arguments(arguments, tool=name)
        if isinstance(params, str):
            return Decision(
                action=None, usage=usage, error=params, raw=arguments or "", metadata=metadata
            )
        thought = text.strip()
        raw = "\n".join(p for p in (thought, render_tool_call(name, arguments or "{}")) if p)
        return Decision(
            action={"tool": name, "params": params, "thought": thought},
            usage=usage,
            raw=raw,
            metadata=metadata,
        )


def parse_arguments(arguments: str | None, *, tool: str) -> dict[str, Any] | str:
    """A tool call's ``arguments`` string → the parameters, or a message saying what is wrong
    (with the position of a JSON error). Empty means no arguments."""
    if arguments is None or not str(arguments).strip():
        return {}
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError as exc:
        return (
            f"the arguments of {tool} are not valid JSON: {exc.msg.removesuffix(' at')} at line "
            f"{exc.lineno} column {exc.colno} (char {exc.pos}); send a JSON object with "
            "double-quoted keys and strings."
        )
    if not isinstance(value, dict):
        kind = {list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
            type(value), "a number"
        )
        return f"the arguments of {tool} must be a JSON object of named arguments, not {kind}."
    return value


def _tool(tool: Any) -> dict[str, Any]:
    name, description, schema = tool_fields(tool)
    function: dict[str, Any] = {"name": name, "parameters": schema}
    if description:
        function["description"] = description
    return {"type": "function", "function": function}
