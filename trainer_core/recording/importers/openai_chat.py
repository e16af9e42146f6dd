"""OpenAI chat transcripts: a JSON list of chat messages, an object with ``messages``, a list of
such objects, or JSONL with one ``{"messages": [...]}`` conversation per line.

Assistant messages carry ``tool_calls`` (``function.name``, ``function.arguments`` as a JSON
string); ``tool`` messages answer them by ``tool_call_id``. Each tool call is one step; the
assistant text (and any ``reasoning_content``) before it is the step's thought. The legacy
``function_call`` / ``role: function`` pair is read too. Text turns without a tool call are kept
in ``metadata["dialogue"]`` with the index of the step they precede.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from trainer_core.recording.importers.base import RecordError, Source, register_importer
from trainer_core.recording.schema import Outcome, Step, TaskRef, Trajectory, Usage

OPENAI_ROLES = {"system", "developer", "user", "assistant", "tool", "function"}
_ANTHROPIC_BLOCKS = {"tool_use", "tool_result", "thinking", "redacted_thinking"}


def content_text(content: Any, *, where: str, record: Any) -> str:
    """Text of an OpenAI ``content``: a string, None, or a list of parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, str):
                parts.append(part)
            elif isinstance(part, dict):
                kind = part.get("type")
                if isinstance(part.get("text"), str):
                    parts.append(part["text"])
                elif kind in ("image_url", "image", "input_image"):
                    parts.append("[image]")
                elif kind in ("input_audio", "audio"):
                    parts.append("[audio]")
                elif isinstance(part.get("refusal"), str):
                    parts.append(part["refusal"])
            else:
                raise RecordError(
                    f"a content part is a {type(part).__name__}, expected an object",
                    record=record,
                    field=where,
                )
        return "\n".join(p for p in parts if p)
    raise RecordError(
        f"content is a {type(content).__name__}, expected a string or a list of parts",
        record=record,
        field=where,
    )


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
class ChatWalk:
    steps: list[Step] = field(default_factory=list)
    prompt: str = ""
    system: str = ""
    dialogue: list[dict[str, Any]] = field(default_factory=list)
    unmatched_results: list[dict[str, Any]] = field(default_factory=list)
    final_text: str = ""


def walk_openai_messages(messages: Any, *, record: Any, field_name: str = "messages") -> ChatWalk:
    """Steps from OpenAI chat messages (shared with tau-bench, whose ``traj`` is this shape)."""
    if not isinstance(messages, list):
        raise RecordError(
            f"expected a list of messages, got {type(messages).__name__}",
            record=record,
            field=field_name,
        )
    walk = ChatWalk()
    by_id: dict[str, Step] = {}
    waiting: list[Step] = []  # tool calls with no result yet, in order
    for i, message in enumerate(messages):
        where = f"{field_name}[{i}]"
        if not isinstance(message, dict):
            raise RecordError(
                f"a message is a {type(message).__name__}, expected an object",
                record=record,
                field=where,
            )
        role = message.get("role")
        if not isinstance(role, str):
            raise RecordError("the message has no role", record=record, field=f"{where}.role")
        text = content_text(message.get("content"), where=f"{where}.content", record=record)
        if role == "assistant":
            reasoning = message.get("reasoning_content") or message.get("reasoning")
            thought = "\n".join(
                t for t in (reasoning if isinstance(reasoning, str) else "", text) if t
            )
            calls = message.get("tool_calls") or []
            if not isinstance(calls, list):
                raise RecordError(
                    f"tool_calls is a {type(calls).__name__}, expected a list",
                    record=record,
                    field=f"{where}.tool_calls",
                )
            if isinstance(message.get("function_call"), dict) and not calls:
                calls = [{"id": None, "function": message["function_call"], "_legacy": True}]
            for j, call in enumerate(calls):
                cwhere = f"{where}.tool_calls[{j}]"
                if not isinstance(call, dict) or not isinstance(call.get("function"), dict):
                    raise RecordError(
                        "a tool call needs a 'function' object", record=record, field=cwhere
                    )
                name = call["function"].get("name")
                if not isinstance(name, str) or not name:
                    raise RecordError(
                        "the tool call has no function name",
                        record=record,
                        field=f"{cwhere}.function.name",
                    )
                params, problem = parse_arguments(
                    call["function"].get("arguments"),
                    where=f"{cwhere}.function.arguments",
                    record=record,
                )
                meta: dict[str, Any] = {"message_index": i}
                if call.get("id"):
                    meta["tool_call_id"] = call["id"]
                if problem:
                    meta["arguments_problem"] = problem
                step = Step(
                    index=len(walk.steps),
                    thought=thought if j == 0 else "",
                    tool=name,
                    params=params,
                    metadata=meta,
                )
                walk.steps.append(step)
                waiting.append(step)
                if isinstance(call.get("id"), str):
                    by_id[call["id"]] = step
            if not calls:
                if text or thought:
                    walk.dialogue.append(
                        {"role": role, "content": thought, "before_step": len(walk.steps)}
                    )
                    walk.final_text = thought
            else:
                walk.final_text = ""
        elif role in ("tool", "function"):
            call_id = message.get("tool_call_id")
            step = by_id.get(call_id) if isinstance(call_id, str) else None
            if step is None and role == "function":
                step = next((s for s in waiting if s.tool == message.get("name")), None)
            if step is None and call_id is None and waiting:
                step = waiting[0]
            if step is None or step not in waiting:
                walk.unmatched_results.append(
                    {"message_index": i, "tool_call_id": call_id, "content": text}
                )
                continue
            waiting.remove(step)
            step.observation = text
            if message.get("is_error") or message.get("error"):
                step.error = str(message.get("error") or "tool_error")
        else:
            if role == "user" and not walk.prompt and text:
                walk.prompt = text
            elif role in ("system", "developer") and not walk.system and text:
                walk.system = text
                continue
            walk.dialogue.append({"role": role, "content": text, "before_step": len(walk.steps)})
    for step in waiting:
        step.metadata["no_result"] = True
    return walk


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
            if walk.system:
                meta["system_prompt"] = walk.system
            if walk.dialogue:
                meta["dialogue"] = walk.dialogue
            if walk.unmatched_results:
                meta["unmatched_tool_results"] = walk.unmatched_results
            outcome = Outcome()
            if walk.final_text:
                outcome.metadata["final_answer"] = walk.final_text
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
