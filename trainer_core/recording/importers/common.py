"""Pieces several format modules share (this module registers no importer): type checks that
raise a :class:`RecordError` naming the record and the field, the text of a message's content,
and :class:`Transcript`, the steps of a chat transcript (tool calls and message turns, in
order) and what else walking it finds (the prompt, tool results that answer no call, the final
answer)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from trainer_core.recording.importers.base import RecordError
from trainer_core.recording.schema import MESSAGE_ROLES, Outcome, Step

T = TypeVar("T")


def type_error(
    what: str, value: Any, expected: str, *, record: Any, field: str | None = None
) -> RecordError:
    """The RecordError ``"<what> is a <type>, expected <expected>"`` (e.g. ``"a message is a
    str, expected an object"``)."""
    return RecordError(
        f"{what} is a {type(value).__name__}, expected {expected}", record=record, field=field
    )


def require(
    value: Any,
    kind: type[T] | tuple[type, ...],
    what: str,
    expected: str,
    *,
    record: Any,
    field: str | None = None,
) -> T:
    """``value`` when it is a ``kind``; else the :func:`type_error` of it."""
    if not isinstance(value, kind):
        raise type_error(what, value, expected, record=record, field=field)
    return value


def list_field(obj: dict[str, Any], key: str, *, record: Any, where: str = "") -> list[Any]:
    """``obj[key]`` as a list (``[]`` when missing or empty); a RecordError naming
    ``<where>.<key>`` when it is something else."""
    return require(
        obj.get(key) or [],
        list,
        key,
        "a list",
        record=record,
        field=f"{where}.{key}" if where else key,
    )


def message_text(
    content: Any,
    part_text: Callable[[dict[str, Any]], str | None],
    *,
    other: Callable[[Any], None] | None = None,
    keep_empty: bool = False,
) -> str | None:
    """Text of a message's content: ``""`` for None, a string as it is, a list of parts joined
    by newlines (a string part as it is, an object through ``part_text`` — None: it holds no
    text —, anything else passed to ``other``, which raises the format's error, or skipped);
    empty texts are dropped unless ``keep_empty``. None for content of any other type: the
    caller raises or falls back."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = []
    for part in content:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            text = part_text(part)
            if text is not None:
                texts.append(text)
        elif other is not None:
            other(part)
    return "\n".join(t for t in texts if t or keep_empty)


@dataclass
class Transcript:
    """The steps of a chat transcript, in order — tool calls and the message turns between them
    (:meth:`message`) — and what else its walk found: the first user text (the prompt), tool
    results that answer no call, and the last assistant text after the last tool call (the final
    answer)."""

    steps: list[Step] = field(default_factory=list)
    prompt: str = ""
    unmatched_results: list[dict[str, Any]] = field(default_factory=list)
    final_text: str = ""

    def message(self, role: str, text: str, *, thought: str = "", **metadata: Any) -> Step:
        """Append a message step (``role`` user, assistant or system) and return it."""
        step = message_step(len(self.steps), role, text, thought=thought, **metadata)
        self.steps.append(step)
        return step

    def metadata(self) -> dict[str, Any]:
        """The trajectory metadata the walk adds: the unmatched results, when any."""
        meta: dict[str, Any] = {}
        if self.unmatched_results:
            meta["unmatched_tool_results"] = self.unmatched_results
        return meta

    def outcome(self, **fields: Any) -> Outcome:
        """An Outcome of ``fields``, with the final answer in its metadata when there is one."""
        outcome = Outcome(**fields)
        if self.final_text:
            outcome.metadata["final_answer"] = self.final_text
        return outcome


def message_step(index: int, role: str, text: str, *, thought: str = "", **metadata: Any) -> Step:
    """A message step; a role outside user/assistant/system (``developer``, ``ipython``, ...) is
    a system message that keeps its role as ``metadata["source_role"]``."""
    if role not in MESSAGE_ROLES:
        metadata["source_role"] = role
        role = "system"
    return Step(
        index=index, kind="message", role=role, text=text, thought=thought, metadata=metadata
    )


def renumber(steps: list[Step]) -> list[Step]:
    """``steps`` with their indexes set to their positions (after interleaving)."""
    for position, step in enumerate(steps):
        step.index = position
    return steps
