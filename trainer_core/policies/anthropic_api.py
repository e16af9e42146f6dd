"""AnthropicPolicy: an agent backed by Claude through the Messages API (the ``anthropic`` SDK).

::

    policy = AnthropicPolicy("claude-sonnet-4-5", system="Be brief.")   # key: $ANTHROPIC_API_KEY
    policy.reset(task)
    decision = decide(policy, ts.observation, history, env.available_tools)

``prompt_format="native"`` sends the environment's tools as Messages-API tools (``tool_choice``
auto); the first ``tool_use`` block of the answer is the action and the text before it the
thought. An answer without a tool call is not an exception: the Decision has ``action=None`` and
an ``error`` the model sees as its next observation. ``prompt_format="react"`` sends no tools:
the system prompt carries the ReAct instructions (:mod:`.react`) and the answer text is parsed
with :func:`~trainer_core.policies.react.parse_react`.

The conversation is rebuilt on every call from the episode's first observation and the history,
with the shared chat format (:func:`~trainer_core.policies.chat_format.to_messages`) converted to
Messages-API content blocks: tool calls become ``tool_use`` blocks, observations ``tool_result``
blocks, a malformed turn its raw text and the error as a user message; consecutive messages of
one role are merged, as the API requires.

The API key is read from the environment variable ``api_key_env`` at the first call and is never
stored elsewhere or shown. 429 and 5xx answers are retried by the SDK with backoff, honouring
``Retry-After``, up to ``max_retries`` times; what still fails raises
:class:`~trainer_core.errors.PolicyError` with the status and what to do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from trainer_core.errors import ConfigError
from trainer_core.policies._api import ApiPolicy
from trainer_core.policies.base import Decision, Turn, Usage
from trainer_core.policies.chat_format import render_tool_call, system_prompt, to_messages
from trainer_core.policies.react import STOP_SEQUENCES, parse_react, react_messages, tool_fields

__all__ = ["AnthropicPolicy", "to_anthropic_messages"]

# The Messages API rejects empty text blocks; an empty turn is sent as this.
EMPTY_TEXT = "(empty)"


class AnthropicPolicy(ApiPolicy):
    """A policy that asks Claude for each action (see the module docstring)."""

    provider = "the Anthropic API"

    def __init__(
        self,
        model: str,
        *,
        api_key_env: str = "ANTHROPIC_API_KEY",
        name: str = "anthropic",
        **settings: Any,
    ) -> None:
        """``settings``: base_url, temperature (0.0), max_tokens (1024), system, prompt_format
        (``native`` or ``react``), max_retries (4), timeout (60 s), price_in, price_out; see
        :class:`~trainer_core.policies._api.ApiPolicy`."""
        if not api_key_env:
            raise ConfigError(
                "the Anthropic API needs a key: api_key_env must name the environment variable "
                "that holds it (e.g. 'ANTHROPIC_API_KEY')"
            )
        super().__init__(model, api_key_env=api_key_env, name=name, **settings)

    def _sdk_client(self) -> Any:
        if self._client is None:
            import anthropic

            self._client = self._new_client(anthropic.Anthropic)
        return self._client

    def request(
        self, observation: str, history: Sequence[Turn], tools: Sequence[Any]
    ) -> dict[str, Any]:
        """The keyword arguments of ``messages.create`` for this step (no network)."""
        prompt = self._episode_prompt(observation, history)
        kwargs: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens}
        if self.prompt_format == "react":
            system = system_prompt(tools, prompt_format="react", instructions=self.system)
            messages = react_messages(prompt, history)
            kwargs["stop_sequences"] = list(STOP_SEQUENCES)
        else:
            system = self.system
            messages = to_messages(prompt=prompt, history=history)
            if tools:
                kwargs["tools"] = [_tool(t) for t in tools]
                kwargs["tool_choice"] = {"type": "auto"}
        extra_system, kwargs["messages"] = to_anthropic_messages(messages)
        system = "\n\n".join(s for s in (system, extra_system) if s)
        if system:
            kwargs["system"] = system
        if self.temperature is not None:
            # The SDK no longer has a typed ``temperature`` argument (newer models refuse
            # sampling parameters); older models still take it in the body.
            kwargs["extra_body"] = {"temperature": self.temperature}
        return kwargs

    def act(self, observation: str, history: Sequence[Turn], tools: Sequence[Any]) -> Decision:
        import anthropic

        kwargs = self.request(observation, history, tools)
        create = self._sdk_client().messages.with_raw_response.create
        message, attempts, latency = self._call(anthropic, create, kwargs)
        tokens_in = int(getattr(message.usage, "input_tokens", 0) or 0)
        tokens_out = int(getattr(message.usage, "output_tokens", 0) or 0)
        usage = Usage(tokens_in, tokens_out, self._cost(tokens_in, tokens_out), latency)
        metadata: dict[str, Any] = {
            "prompt_format": self.prompt_format,
            "attempts": attempts,
            "model": message.model,
            "stop_reason": message.stop_reason,
            "response_id": message.id,
        }
        for field in ("cache_creation_input_tokens", "cache_read_input_tokens"):
            value = getattr(message.usage, field, None)
            if value:
                metadata[field] = value
        if self.prompt_format == "react":
            return self._react_decision(message, usage, metadata)
        return self._native_decision(message, usage, metadata)

    # --- answers ----------------------------------------------------------------------------

    def _native_decision(self, message: Any, usage: Usage, metadata: dict[str, Any]) -> Decision:
        texts: list[str] = []
        calls = [b for b in message.content if b.type == "tool_use"]
        for block in message.content:
            if block.type == "tool_use":
                break
            if block.type == "text" and block.text.strip():
                texts.append(block.text.strip())
        thinking = [getattr(b, "thinking", "") for b in message.content if b.type == "thinking"]
        if any(thinking):
            metadata["thinking"] = "\n\n".join(t for t in thinking if t)
        thought = "\n\n".join(texts)
        if not calls:
            all_text = "\n\n".join(
                b.text.strip() for b in message.content if b.type == "text" and b.text.strip()
            )
            if all_text and message.stop_reason != "max_tokens":
                metadata["plain_text"] = True
            return Decision(
                action=None,
                usage=usage,
                error=_no_tool_problem(message.stop_reason, self.max_tokens),
                raw=all_text,
                metadata=metadata,
            )
        call = calls[0]
        metadata["tool_call_id"] = call.id
        if len(calls) > 1:
            metadata["ignored_tool_calls"] = [c.name for c in calls[1:]]
        params = call.input
        if not isinstance(params, dict):
            return Decision(
                action=None,
                usage=usage,
                error=(
                    f"the arguments of {call.name} must be a JSON object of named arguments, "
                    f"not {type(params).__name__}."
                ),
                raw=json.dumps(params, ensure_ascii=False, default=str),
                metadata=metadata,
            )
        raw = "\n".join(p for p in (thought, render_tool_call(call.name, params)) if p)
        return Decision(
            action={"tool": call.name, "params": dict(params), "thought": thought},
            usage=usage,
            raw=raw,
            metadata=metadata,
        )

    def _react_decision(self, message: Any, usage: Usage, metadata: dict[str, Any]) -> Decision:
        text = "".join(b.text for b in message.content if b.type == "text")
        parsed = parse_react(text)
        if isinstance(parsed, str):
            if message.stop_reason == "max_tokens":
                parsed += (
                    f" (the answer was cut off at max_tokens={self.max_tokens}; keep the thought "
                    "short.)"
                )
            return Decision(action=None, usage=usage, error=parsed, raw=text, metadata=metadata)
        return Decision(action=parsed, usage=usage, raw=text, metadata=metadata)


def _no_tool_problem(stop_reason: str | None, max_tokens: int) -> str:
    if stop_reason == "max_tokens":
        return (
            f"the answer was cut off at max_tokens={max_tokens} before any tool call; keep the "
            "thought short and call a tool."
        )
    if stop_reason == "refusal":
        return "you refused and answered without calling a tool."
    return "you answered without calling a tool."


def _tool(tool: Any) -> dict[str, Any]:
    name, description, schema = tool_fields(tool)
    out: dict[str, Any] = {"name": name, "input_schema": schema}
    if description:
        out["description"] = description
    return out


def to_anthropic_messages(
    messages: Sequence[Mapping[str, Any]],
) -> tuple[str | None, list[dict[str, Any]]]:
    """OpenAI-schema messages (as :func:`~.chat_format.to_messages` and
    :func:`~.react.react_messages` make them) → ``(system, messages)`` for the Messages API:
    system messages joined into the system prompt, assistant tool calls as ``tool_use`` blocks,
    ``tool`` messages as ``tool_result`` blocks of a user message, empty texts as
    :data:`EMPTY_TEXT`, consecutive messages of one role merged."""
    system: list[str] = []
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        if role == "system":
            if text:
                system.append(text)
            continue
        if role == "tool":
            role = "user"
            blocks: list[dict[str, Any]] = [
                {
                    "type": "tool_result",
                    "tool_use_id": message.get("tool_call_id"),
                    "content": text if text.strip() else EMPTY_TEXT,
                }
            ]
        elif role == "assistant":
            blocks = [{"type": "text", "text": text}] if text.strip() else []
            for call in message.get("tool_calls") or []:
                function = call.get("function", call)
                arguments = function.get("arguments")
                if isinstance(arguments, str):
                    try:
                        arguments = json.loads(arguments) if arguments.strip() else {}
                    except ValueError:
                        arguments = {}
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.get("id"),
                        "name": function.get("name"),
                        "input": arguments if isinstance(arguments, dict) else {},
                    }
                )
            if not blocks:
                blocks = [{"type": "text", "text": EMPTY_TEXT}]
        elif role == "user":
            blocks = [{"type": "text", "text": text if text.strip() else EMPTY_TEXT}]
        else:
            raise ConfigError(f"unknown message role {role!r}; use system, user, assistant or tool")
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return ("\n\n".join(system) or None), out
