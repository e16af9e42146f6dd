"""Claude Code session logs (``~/.claude/projects/<project>/<session>.jsonl``): one event per
line with ``type`` (``user``, ``assistant``, ``summary``, ``system``, ...), ``message`` (the
Anthropic message shape, with ``tool_use`` / ``tool_result`` blocks), ``sessionId``, ``uuid``,
``parentUuid``, ``timestamp``, ``cwd``.

One trajectory per ``sessionId``. Each ``tool_use`` block is a step; the ``tool_result`` with the
same id (in a later user event) is its observation, and the gap between the two timestamps its
duration. Claude Code writes one line per content block of an API message, repeating the
message's ``usage``; usage is therefore counted once per ``message.id``. Model: the session's
most used ``message.model``. Sub-agent (``isSidechain``) steps are flagged in step metadata. The
user's text and the assistant's text turns are message steps in their place; ``isMeta`` user
events (command caveats, not the user's words) and ``system`` events (notes such as a compaction
or a hook's output) are system message steps (``metadata["is_meta"]`` / ``["subtype"]``);
``summary`` lines are attached to their session through ``leafUuid``. Version: Claude Code's
``version`` field.
"""

from __future__ import annotations

import json
from collections import Counter
from datetime import datetime
from typing import Any

from trainer_core.recording.importers.base import RecordError, Source, register_importer
from trainer_core.recording.importers.common import require
from trainer_core.recording.schema import TaskRef, Trajectory, Usage


class _Broken:
    def __init__(self, message: str):
        self.message = message


def _lines(source: Source) -> list[tuple[int, Any]] | None:
    if source.text is None:
        return None
    out = []
    for number, line in enumerate(source.text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((number, json.loads(line)))
        except json.JSONDecodeError as exc:
            out.append((number, _Broken(f"invalid JSON at column {exc.colno}: {exc.msg}")))
    return out


def _is_event(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("sessionId"), str)
        and value.get("type") in ("user", "assistant", "system")
        and ("message" in value or value.get("type") == "system")
    )


def _timestamp(event: dict[str, Any], record: str) -> datetime | None:
    raw = event.get("timestamp")
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise RecordError(
            f"timestamp is a {type(raw).__name__}, expected an ISO 8601 string",
            record=record,
            field="timestamp",
        )
    try:
        return datetime.fromisoformat(raw)
    except ValueError:
        raise RecordError(f"invalid timestamp {raw!r}", record=record, field="timestamp") from None


class _Session:
    """One sessionId's events: its messages (lines of one API message merged), metadata,
    models and time span; ``walker`` turns the messages into steps."""

    def __init__(self, session_id: str):
        from trainer_core.recording.importers.anthropic_messages import BlockWalker

        self.id = session_id
        self.walker = BlockWalker(record=None)
        self.models: Counter[str] = Counter()
        self.entries: list[dict[str, Any]] = []
        self.first: datetime | None = None
        self.last: datetime | None = None
        self.meta: dict[str, Any] = {"session_id": session_id}
        self.uuids: set[str] = set()
        self.events = 0

    def add_event(self, event: dict[str, Any], kind: str, record: str) -> None:
        """A user or assistant event: its metadata, time and message."""
        self.events += 1
        if isinstance(event.get("uuid"), str):
            self.uuids.add(event["uuid"])
        when = _timestamp(event, record)
        if when is not None:
            self.first = self.first or when
            self.last = when
        for key, name in (("cwd", "cwd"), ("gitBranch", "git_branch"), ("version", "version")):
            if isinstance(event.get(key), str):
                self.meta.setdefault(name, event[key])
        if kind == "system":
            self._system_note(event, when, record)
            return
        message = require(
            event.get("message"), dict, "message", "an object", record=record, field="message"
        )
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        require(
            content, list, "content", "a string or a list", record=record, field="message.content"
        )
        if event.get("isMeta"):  # a note the client wrote in the user's place: a system note
            self._append("system", content, when, record, event, {"is_meta": True})
            return
        message_id = message.get("id") if kind == "assistant" else None
        if kind == "assistant":
            model = message.get("model")
            if isinstance(model, str) and model and not model.startswith("<"):
                self.models[model] += 1
        last = self.entries[-1] if self.entries else None
        if last is not None and isinstance(message_id, str) and last["message_id"] == message_id:
            # Claude Code writes one line per content block of one API message.
            last["content"].extend(content)
            last["times"].extend([when] * len(content))
            if isinstance(message.get("usage"), dict):
                last["usage"] = message["usage"]  # the last line's usage is the final one
            return
        usage = message.get("usage") if kind == "assistant" else None
        self._append(message.get("role", kind), content, when, record, event, {}, usage, message_id)

    def _system_note(self, event: dict[str, Any], when: datetime | None, record: str) -> None:
        text = event.get("content")
        if not isinstance(text, str) or not text:
            return
        meta = {"subtype": event["subtype"]} if isinstance(event.get("subtype"), str) else {}
        self._append("system", [{"type": "text", "text": text}], when, record, event, meta)

    def _append(
        self,
        role: Any,
        content: list[Any],
        when: datetime | None,
        record: str,
        event: dict[str, Any],
        step_meta: dict[str, Any],
        usage: Any = None,
        message_id: Any = None,
    ) -> None:
        """One message of the session (steps come from it when the session is walked)."""
        if isinstance(event.get("uuid"), str):
            step_meta["event_uuid"] = event["uuid"]
        if event.get("isSidechain"):
            step_meta["sidechain"] = True
        self.entries.append(
            {
                "role": role,
                "content": list(content),
                "times": [when] * len(content),
                "usage": usage,
                "message_id": message_id,
                "record": record,
                "step_meta": step_meta,
            }
        )

    def walk(self) -> None:
        for entry in self.entries:
            self.walker.record = entry["record"]
            self.walker.add(
                entry["role"],
                entry["content"],
                where="message",
                usage=entry["usage"],
                block_times=entry["times"],
                step_meta=entry["step_meta"],
            )

    def trajectory(self, summaries: list[tuple[str, str]]) -> Trajectory:
        """The walked session as a trajectory, titled by the last summary of its events."""
        walker = self.walker
        walker.finish()
        meta = dict(self.meta)
        titles = [text for leaf, text in summaries if leaf in self.uuids]
        if titles:
            meta["summary"] = titles[-1]
        if self.first:
            meta["started_at"] = self.first.isoformat()
        meta.update(walker.metadata())
        duration = 0.0
        if self.first and self.last:
            duration = max(0.0, (self.last - self.first).total_seconds())
        return Trajectory(
            task=TaskRef(id=self.id, prompt=walker.prompt),
            agent="claude-code",
            model=self.models.most_common(1)[0][0] if self.models else "",
            environment="claude-code",
            steps=walker.steps,
            outcome=walker.outcome(),
            usage=Usage(
                tokens_in=walker.tokens_in, tokens_out=walker.tokens_out, duration=duration
            ),
            metadata=meta,
        )


def _read_sessions(source: Source) -> tuple[dict[str, _Session], list[tuple[str, str]], str]:
    """The sessions of the file (by sessionId, in first-seen order), the ``summary`` lines as
    (leafUuid, summary), and Claude Code's version."""
    sessions: dict[str, _Session] = {}
    summaries: list[tuple[str, str]] = []
    version = ""
    for number, event in _lines(source) or []:
        record = f"line {number}"
        if isinstance(event, _Broken):
            raise RecordError(event.message, record=record)
        require(event, dict, "an event", "an object", record=record)
        kind = event.get("type")
        if kind == "summary":
            if isinstance(event.get("summary"), str):
                summaries.append((str(event.get("leafUuid", "")), event["summary"]))
            continue
        if kind not in ("user", "assistant", "system"):
            continue
        session_id = event.get("sessionId")
        if not isinstance(session_id, str) or not session_id:
            raise RecordError("the event has no sessionId", record=record, field="sessionId")
        if not version and isinstance(event.get("version"), str):
            version = event["version"]
        session = sessions.get(session_id) or sessions.setdefault(session_id, _Session(session_id))
        session.add_event(event, kind, record)
    return sessions, summaries, version


class ClaudeCodeImporter:
    name = "claude-code"
    description = "Claude Code session JSONL (one event per line, grouped by sessionId)"

    def sniff(self, source: Source) -> bool:
        if source.data.lstrip().startswith(b"["):
            return False
        lines = _lines(source)
        if not lines:
            return False
        head = [value for _, value in lines[:20] if not isinstance(value, _Broken)]
        return any(_is_event(v) for v in head) and all(isinstance(v, dict) for v in head)

    def parse(self, source: Source) -> tuple[list[Trajectory], str]:
        sessions, summaries, version = _read_sessions(source)
        for session in sessions.values():
            session.walk()
        if not sessions:
            raise RecordError("no user or assistant event with a sessionId", record="line 1")
        return [session.trajectory(summaries) for session in sessions.values()], version


register_importer(ClaudeCodeImporter())
