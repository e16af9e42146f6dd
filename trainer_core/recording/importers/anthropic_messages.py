"""Anthropic Messages API transcripts: a JSON list of ``{role, content}`` messages (content a
string or a list of blocks), an object ``{model?, system?, messages, usage?}``, a list of such
objects, or JSONL with one such object per line.

Each ``tool_use`` block (id, name, input) is one step; its observation is the ``tool_result``
block with the same ``tool_use_id`` in a following user message (content a string or a list of
text blocks; ``is_error`` sets the step's error). The thought is the text and ``thinking`` blocks
before the ``tool_use`` in the same assistant message. Text after a message's last ``tool_use``
(or a message without one) is a message step in its place: the user's text, or the assistant's
text with its ``thinking`` as the thought; a system prompt (``system``) is a system message step
before them. Per-message ``usage`` (when the transcript kept the API responses) goes to the first
step of that message and to the total.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from trainer_core.recording.importers.base import RecordError, Source, register_importer
from trainer_core.recording.importers.common import (
    Transcript,
    message_step,
    message_text,
    renumber,
    require,
    type_error,
)
from trainer_core.recording.schema import Step, TaskRef, Trajectory, Usage

ANTHROPIC_TOOL_BLOCKS = {"tool_use", "tool_result", "server_tool_use"}
ANTHROPIC_BLOCKS = ANTHROPIC_TOOL_BLOCKS | {"text", "thinking", "redacted_thinking", "image"}


def _block_part_text(block: dict[str, Any]) -> str | None:
    """Text of one block: its text, or a marker for an image or a document."""
    if isinstance(block.get("text"), str):
        return block["text"]
    if block.get("type") in ("image", "document"):
        return f"[{block['type']}]"
    return None


def block_text(content: Any, *, record: Any, where: str) -> str:
    """Text of a string, or of a list of blocks (text kept, images marked)."""

    def bad_block(block: Any) -> None:
        raise type_error("a block", block, "an object", record=record, field=where)

    text = message_text(content, _block_part_text, other=bad_block)
    if text is None:
        raise type_error(
            "content", content, "a string or a list of blocks", record=record, field=where
        )
    return text


def usage_numbers(usage: Any) -> tuple[int, int, dict[str, int]]:
    """(tokens_in incl. cache reads/writes, tokens_out, breakdown) of an Anthropic ``usage``."""
    if not isinstance(usage, dict):
        return 0, 0, {}
    breakdown = {
        k: usage[k]
        for k in (
            "input_tokens",
            "cache_creation_input_tokens",
            "cache_read_input_tokens",
            "output_tokens",
        )
        if isinstance(usage.get(k), int)
    }
    tokens_in = sum(
        breakdown.get(k, 0)
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    return tokens_in, breakdown.get("output_tokens", 0), breakdown


@dataclass
class _Turn:
    """One message being walked: the text and thinking since the last tool_use (the next
    step's thought), and the message's usage, given to its first step only."""

    role: str
    tokens_in: int
    tokens_out: int
    pending_usage: dict[str, int] | None
    step_meta: dict[str, Any] | None
    thought: list[str] = field(default_factory=list)
    texts: list[str] = field(default_factory=list)
    thinking: list[str] = field(default_factory=list)


@dataclass
class BlockWalker(Transcript):
    """Accumulates steps from Anthropic-shaped messages, one message at a time."""

    record: Any = None
    tokens_in: int = 0
    tokens_out: int = 0
    _by_id: dict[str, Step] = field(default_factory=dict)

    def add(
        self,
        role: Any,
        content: Any,
        *,
        where: str,
        usage: Any = None,
        timestamp: datetime | None = None,
        block_times: list[datetime | None] | None = None,
        step_meta: dict[str, Any] | None = None,
        count_usage: bool = True,
    ) -> None:
        if not isinstance(role, str):
            raise RecordError("the message has no role", record=self.record, field=f"{where}.role")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        require(
            content,
            list,
            "content",
            "a string or a list of blocks",
            record=self.record,
            field=f"{where}.content",
        )
        tokens_in, tokens_out, breakdown = usage_numbers(usage) if count_usage else (0, 0, {})
        self.tokens_in += tokens_in
        self.tokens_out += tokens_out
        pending = breakdown if count_usage and breakdown else None
        turn = _Turn(role, tokens_in, tokens_out, pending, step_meta)
        for j, block in enumerate(content):
            bwhere = f"{where}.content[{j}]"
            when = block_times[j] if block_times and j < len(block_times) else timestamp
            require(block, dict, "a block", "an object", record=self.record, field=bwhere)
            self._block(turn, block, bwhere, when)
        self._end_turn(turn)

    def _block(self, turn: _Turn, block: dict[str, Any], where: str, when: datetime | None) -> None:
        kind = block.get("type")
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise RecordError(
                    "a text block needs a string 'text'", record=self.record, field=f"{where}.text"
                )
            turn.thought.append(text)
            turn.texts.append(text)
        elif kind == "thinking":
            if isinstance(block.get("thinking"), str) and block["thinking"]:
                turn.thought.append(block["thinking"])
                turn.thinking.append(block["thinking"])
        elif kind in ("image", "document") and turn.role == "user":
            turn.texts.append(f"[{kind}]")
        elif kind in ("tool_use", "server_tool_use") and turn.role == "assistant":
            self._tool_use(turn, block, where, when)
        elif kind == "tool_result":
            self._result(block, where, when)

    def _tool_use(
        self, turn: _Turn, block: dict[str, Any], where: str, when: datetime | None
    ) -> None:
        name = block.get("name")
        if not isinstance(name, str) or not name:
            raise RecordError(
                "the tool_use block has no name", record=self.record, field=f"{where}.name"
            )
        params = require(
            block.get("input", {}),
            dict,
            "input",
            "an object",
            record=self.record,
            field=f"{where}.input",
        )
        pending = turn.pending_usage
        meta = dict(turn.step_meta or {})
        if block.get("id"):
            meta["tool_use_id"] = block["id"]
        if pending:
            meta["usage"] = pending
        step = Step(
            index=len(self.steps),
            thought="\n".join(turn.thought),
            tool=name,
            params=params,
            started_at=when,
            tokens_in=turn.tokens_in if pending else None,
            tokens_out=turn.tokens_out if pending else None,
            metadata=meta,
        )
        turn.pending_usage = None
        turn.thought = []
        turn.texts = []
        turn.thinking = []
        self.steps.append(step)
        if isinstance(block.get("id"), str):
            self._by_id[block["id"]] = step
        self.final_text = ""

    def _end_turn(self, turn: _Turn) -> None:
        """The text after the last tool_use: a message step (the first user text is the prompt
        too), and for the assistant the final answer so far."""
        role = turn.role
        text = "\n".join(t for t in turn.texts if t)
        if role == "user" and text and not self.prompt:
            self.prompt = text
        if text or (role == "assistant" and turn.thought):
            thinking = "\n".join(turn.thinking) if role == "assistant" else ""
            meta = {k: v for k, v in (turn.step_meta or {}).items() if k != "usage"}
            if turn.pending_usage:  # a message without a tool_use: its usage is here
                meta["usage"] = turn.pending_usage
            step = self.message(role, text, thought=thinking, **meta)
            if turn.pending_usage:
                step.tokens_in, step.tokens_out = turn.tokens_in, turn.tokens_out
            if role == "assistant":
                self.final_text = "\n".join(turn.thought)

    def _result(self, block: dict[str, Any], where: str, timestamp: datetime | None) -> None:
        tool_use_id = block.get("tool_use_id")
        observation = block_text(block.get("content"), record=self.record, where=f"{where}.content")
        step = self._by_id.pop(tool_use_id, None) if isinstance(tool_use_id, str) else None
        if step is None:
            self.unmatched_results.append({"tool_use_id": tool_use_id, "content": observation})
            return
        step.observation = observation
        if block.get("is_error"):
            step.error = "tool_error"
        if timestamp is not None and step.started_at is not None:
            seconds = (timestamp - step.started_at).total_seconds()
            if seconds >= 0:
                step.duration = seconds

    def finish(self) -> None:
        for step in self._by_id.values():
            step.metadata["no_result"] = True


def _has_blocks(messages: Any) -> bool:
    if not isinstance(messages, list) or not messages:
        return False
    found = False
    for message in messages:
        if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
            return False
        if "tool_calls" in message:
            return False
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(b, dict)
            and b.get("type") in ANTHROPIC_TOOL_BLOCKS | {"thinking", "redacted_thinking"}
            for b in content
        ):
            found = True
    return found


def _conversations(source: Source) -> tuple[list[Any], bool] | None:
    data = source.json
    if isinstance(data, dict):
        return [data], False
    if isinstance(data, list):
        if data and all(isinstance(m, dict) and "role" in m for m in data):
            return [data], False
        return data, False
    if data is None and source.jsonl is not None:
        return source.jsonl, True
    return None


class AnthropicMessagesImporter:
    name = "anthropic-messages"
    description = "Anthropic Messages API transcripts with tool_use / tool_result blocks"

    def sniff(self, source: Source) -> bool:
        found = _conversations(source)
        if not found or not found[0]:
            return False
        first = found[0][0]
        return _has_blocks(first.get("messages") if isinstance(first, dict) else first)

    def parse(self, source: Source) -> tuple[list[Trajectory], str]:
        found = _conversations(source)
        if not found:
            raise RecordError("no conversation found", record=0)
        conversations, line_based = found
        out = []
        for n, convo in enumerate(conversations):
            record = n + 1 if line_based else n
            extra = convo if isinstance(convo, dict) else {}
            messages = convo.get("messages") if isinstance(convo, dict) else convo
            if not isinstance(messages, list):
                raise RecordError(
                    "expected a list of messages or an object with 'messages'",
                    record=record,
                    field="messages",
                )
            walker = BlockWalker(record=record)
            model = extra.get("model") if isinstance(extra.get("model"), str) else ""
            for i, message in enumerate(messages):
                where = f"messages[{i}]"
                require(message, dict, "a message", "an object", record=record, field=where)
                if not model and isinstance(message.get("model"), str):
                    model = message["model"]
                walker.add(
                    message.get("role"),
                    message.get("content"),
                    where=where,
                    usage=message.get("usage"),
                    step_meta={"message_index": i},
                )
            walker.finish()
            tokens_in, tokens_out = walker.tokens_in, walker.tokens_out
            if not tokens_in and not tokens_out:
                tokens_in, tokens_out, _ = usage_numbers(extra.get("usage"))
            meta: dict[str, Any] = {}
            system = extra.get("system")
            if system:
                walker.steps.insert(
                    0, message_step(0, "system", block_text(system, record=record, where="system"))
                )
                renumber(walker.steps)
            if isinstance(extra.get("tools"), list):
                meta["tools"] = [
                    t.get("name") if isinstance(t, dict) else t for t in extra["tools"]
                ]
            if isinstance(extra.get("metadata"), dict):
                meta.update(extra["metadata"])
            meta.update(walker.metadata())
            out.append(
                Trajectory(
                    task=TaskRef(id=str(extra.get("id", "")), prompt=walker.prompt),
                    agent="anthropic-messages",
                    model=model,
                    steps=walker.steps,
                    outcome=walker.outcome(),
                    usage=Usage(tokens_in=tokens_in, tokens_out=tokens_out),
                    metadata=meta,
                )
            )
        return out, ""


register_importer(AnthropicMessagesImporter())
