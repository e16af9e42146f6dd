"""OpenAI chat transcripts: a JSON list of chat messages, an object with ``messages``, a list of
such objects, or JSONL with one ``{"messages": [...]}`` conversation per line.

Assistant messages carry ``tool_calls`` (``function.name``, ``function.arguments`` as a JSON
string); ``tool`` messages answer them by ``tool_call_id``. Each tool call is one step; the
assistant text (and any ``reasoning_content``) before it is the step's thought. The legacy
``function_call`` / ``role: function`` pair is read too. Every other message is a message step in
its place: system (``developer`` too), user, and assistant messages without a tool call (the text;
``reasoning_content`` as the thought).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from trainer_core.recording.importers.base import RecordError, Source, register_importer
from trainer_core.recording.importers.common import (
    Transcript,
    list_field,
    message_text,
    require,
    type_error,
)
from trainer_core.recording.schema import Step, TaskRef, Trajectory, Usage

OPENAI_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
_ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking"}


def _part_text(part: dict[str, Any]) -> str | None:
    """Text of one content part: its text, a marker for an image or audio, or a refusal."""
    kind = part.get("type")
    if isinstance(part.get("text"), str):
        return part["text"]
    if kind in ("image_url", "image", "input_image"):
        return "[image]"
    if kind in ("input_audio", "audio"):
        return "[audio]"
    if isinstance(part.get("refusal"), str):
        return part["refusal"]
    return None


def content_text(content: Any, *, where: str, record: Any) -> str:
    """Text of an OpenAI ``content``: a string, None, or a list of parts."""

    def bad_part(part: Any) -> None:
        raise type_error("a content part", part, "an object", record=record, field=where)

    text = message_text(content, _part_text, other=bad_part)
    if text is None:
        raise type_error(
            "content", content, "a string or a list of parts", record=record, field=where
        )
    return text


def parse_arguments(raw: Any, *, where: str, record: Any) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments: a JSON string (as the API sends) or already an object. A string that
    is not a JSON object is kept raw (models do emit broken JSON) and flagged."""
    if raw is None or raw == "":
        return {}, None
    if isinstance(raw, dict):
        return raw, None
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            return {"_raw_arguments": raw}, "arguments are not valid JSON"
        if isinstance(value, dict):
            return value, None
        return {"_raw_arguments": raw}, "arguments are not a JSON object"
    raise RecordError(
        f"arguments is a {type(raw).__name__}, expected a JSON string or an object",
        record=record,
        field=where,
    )


@dataclass
class ChatWalk(Transcript):
    """What :func:`walk_openai_messages` found; ``system`` is the first system message's text
    (a message step as well)."""

    system: str = ""


class _Walker:
    """Walks OpenAI chat messages into a :class:`ChatWalk`: each tool call becomes a step that
    waits for its result (matched by ``tool_call_id``, by function name for the legacy
    ``role: function``, else the oldest waiting call)."""

    def __init__(self, record: Any):
        self.record = record
        self.walk = ChatWalk()
        self.by_id: dict[str, Step] = {}
        self.waiting: list[Step] = []  # tool calls with no result yet, in order

    def assistant(self, message: dict[str, Any], text: str, *, index: int, where: str) -> None:
        walk = self.walk
        reasoning = message.get("reasoning_content") or message.get("reasoning")
        thought = "\n".join(t for t in (reasoning if isinstance(reasoning, str) else "", text) if t)
        calls = list_field(message, "tool_calls", record=self.record, where=where)
        if isinstance(message.get("function_call"), dict) and not calls:
            calls = [{"id": None, "function": message["function_call"], "_legacy": True}]
        for j, call in enumerate(calls):
            self._call(
                call,
                thought=thought if j == 0 else "",
                index=index,
                where=f"{where}.tool_calls[{j}]",
            )
        if calls:
            walk.final_text = ""
            return
        walk.message(
            "assistant",
            text,
            thought=reasoning if isinstance(reasoning, str) else "",
            message_index=index,
        )
        if text or thought:
            walk.final_text = thought

    def _call(self, call: Any, *, thought: str, index: int, where: str) -> None:
        if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
            raise RecordError(
                "a tool call needs a 'function' object", record=self.record, field=where
            )
        name = call["function"].get("name")
        if not isinstance(name, str) or not name:
            raise RecordError(
                "the tool call has no function name",
                record=self.record,
                field=f"{where}.function.name",
            )
        params, problem = parse_arguments(
            call["function"].get("arguments"),
            where=f"{where}.function.arguments",
            record=self.record,
        )
        meta: dict[str, Any] = {"message_index": index}
        if call.get("id"):
            meta["tool_call_id"] = call["id"]
        if problem:
            meta["arguments_problem"] = problem
        step = Step(
            index=len(self.walk.steps), thought=thought, tool=name, params=params, metadata=meta
        )
        self.walk.steps.append(step)
        self.waiting.append(step)
        if isinstance(call.get("id"), str):
            self.by_id[call["id"]] = step

    def result(self, message: dict[str, Any], role: str, text: str, *, index: int) -> None:
        call_id = message.get("tool_call_id")
        step = self.by_id.get(call_id) if isinstance(call_id, str) else None
        if step is None and role == "function":
            step = next((s for s in self.waiting if s.tool == message.get("name")), None)
        if step is None and call_id is None and self.waiting:
            step = self.waiting[0]
        if step is None or step not in self.waiting:
            self.walk.unmatched_results.append(
                {"message_index": index, "tool_call_id": call_id, "content": text}
            )
            return
        self.waiting.remove(step)
        step.observation = text
        if message.get("is_error") or message.get("error"):
            step.error = str(message.get("error") or "tool_error")

    def turn(self, role: str, text: str, *, index: int) -> None:
        """A user, system or other text turn: a message step (the first user text is the prompt,
        the first system text the system prompt too)."""
        walk = self.walk
        if role == "user" and not walk.prompt and text:
            walk.prompt = text
        elif role in ("system", "developer") and not walk.system and text:
            walk.system = text
        walk.message(role, text, message_index=index)


def walk_openai_messages(messages: Any, *, record: Any, field_name: str = "messages") -> ChatWalk:
    """Steps from OpenAI chat messages (shared with tau-bench, whose ``traj`` is this shape)."""
    if not isinstance(messages, list):
        raise RecordError(
            f"expected a list of messages, got {type(messages).__name__}",
            record=record,
            field=field_name,
        )
    walker = _Walker(record)
    for i, message in enumerate(messages):
        where = f"{field_name}[{i}]"
        require(message, dict, "a message", "an object", record=record, field=where)
        role = message.get("role")
        if not isinstance(role, str):
            raise RecordError("the message has no role", record=record, field=f"{where}.role")
        text = content_text(message.get("content"), where=f"{where}.content", record=record)
        if role == "assistant":
            walker.assistant(message, text, index=i, where=where)
        elif role in ("tool", "function"):
            walker.result(message, role, text, index=i)
        else:
            walker.turn(role, text, index=i)
    for step in walker.waiting:
        step.metadata["no_result"] = True
    return walker.walk


def usage_from(raw: Any) -> Usage:
    if not isinstance(raw, dict):
        return Usage()
    tokens_in = raw.get("prompt_tokens", raw.get("input_tokens", 0))
    tokens_out = raw.get("completion_tokens", raw.get("output_tokens", 0))
    return Usage(
        tokens_in=tokens_in if isinstance(tokens_in, int) else 0,
        tokens_out=tokens_out if isinstance(tokens_out, int) else 0,
    )


def _looks_like_messages(value: Any) -> bool:
    if not isinstance(value, list) or not value:
        return False
    for message in value:
        if not isinstance(message, dict) or message.get("role") not in OPENAI_ROLES:
            return False
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") in _ANTHROPIC_BLOCKS for b in content
        ):
            return False
    return True


def _conversations(source: Source) -> list[Any] | None:
    data = source.json
    if data is None and source.jsonl is not None:
        data = source.jsonl
    if isinstance(data, dict):
        return [data]
    if isinstance(data, list):
        if data and all(isinstance(m, dict) and "role" in m for m in data):
            return [data]
        return data
    return None


class OpenAIChatImporter:
    name = "openai-chat"
    description = "OpenAI chat messages with tool_calls / tool results (JSON list, object or JSONL)"

    def sniff(self, source: Source) -> bool:
        conversations = _conversations(source)
        if not conversations:
            return False
        first = conversations[0]
        if isinstance(first, dict):
            return _looks_like_messages(first.get("messages"))
        return _looks_like_messages(first)

    def parse(self, source: Source) -> tuple[list[Trajectory], str]:
        conversations = _conversations(source)
        if not conversations:
            raise RecordError("no conversation found", record=0)
        line_based = source.json is None
        out = []
        for n, convo in enumerate(conversations):
            record = n + 1 if line_based else n
            if isinstance(convo, dict):
                messages = convo.get("messages")
                extra = convo
            else:
                messages, extra = convo, {}
            if not isinstance(messages, list):
                raise RecordError(
                    "expected an object with a 'messages' list", record=record, field="messages"
                )
            walk = walk_openai_messages(messages, record=record)
            meta: dict[str, Any] = {}
            for key, value in extra.items():
                if key not in ("messages", "model", "usage", "tools") and not isinstance(
                    value, (dict, list)
                ):
                    meta[key] = value
            if isinstance(extra.get("metadata"), dict):
                meta.update(extra["metadata"])
            if isinstance(extra.get("tools"), list):
                meta["tools"] = [
                    t.get("function", {}).get("name") if isinstance(t, dict) else t
                    for t in extra["tools"]
                ]
            meta.update(walk.metadata())
            outcome = walk.outcome()
            if isinstance(extra.get("reward"), (int, float)) and not isinstance(
                extra["reward"], bool
            ):
                outcome.score = float(extra["reward"])
                outcome.success = extra["reward"] == 1
            model = extra.get("model")
            out.append(
                Trajectory(
                    task=TaskRef(id=str(extra.get("id", "")), prompt=walk.prompt),
                    agent="openai-chat",
                    model=model if isinstance(model, str) else "",
                    steps=walk.steps,
                    outcome=outcome,
                    usage=usage_from(extra.get("usage")),
                    metadata=meta,
                )
            )
        return out, ""


register_importer(OpenAIChatImporter())
