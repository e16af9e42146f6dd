"""Inspect AI eval logs: the ``.json`` EvalLog (``version``, ``eval``, ``samples``, ``results``)
and the ``.eval`` zip archive (``header.json`` — or ``_journal/start.json`` while the run is in
progress — plus one ``samples/<id>_epoch_<n>.json`` per sample and epoch).

One trajectory per sample and epoch. Each tool call of an assistant message is one step (tool =
the function name, params = its arguments); the observation is the ``tool`` message with the
same ``tool_call_id``; the thought is the assistant's text and reasoning. Every other message is a
message step in its place: system and user messages, and assistant messages without a tool call
(the text; the reasoning as the thought). The prompt comes from
``input``; the outcome from ``scores`` (``C``/``I``/``P``/``N``, a number or a bool; every
scorer's value, answer and explanation are kept in the outcome metadata). ``attachment://``
references are resolved from the sample's ``attachments``.
"""

from __future__ import annotations

import json
import zipfile
from typing import Any

from trainer_core.recording.importers.base import RecordError, Source, register_importer
from trainer_core.recording.importers.common import (
    list_field,
    message_step,
    require,
    type_error,
)
from trainer_core.recording.schema import Outcome, Step, TaskRef, Trajectory, Usage

_LETTER = {"C": (True, 1.0), "I": (False, 0.0), "P": (False, 0.5), "N": (False, 0.0)}


def _is_log(data: Any) -> bool:
    return (
        isinstance(data, dict)
        and isinstance(data.get("eval"), dict)
        and "version" in data
        and any(k in data for k in ("samples", "results", "status", "plan"))
    )


def _zip_names(source: Source) -> set[str]:
    return set(source.zip.namelist()) if source.zip is not None else set()


class _Sample:
    def __init__(self, sample: dict[str, Any], record: Any):
        self.sample = sample
        self.record = record
        self.attachments = sample.get("attachments") or {}

    def resolve(self, text: str) -> str:
        if text.startswith("attachment://") and isinstance(self.attachments, dict):
            value = self.attachments.get(text[len("attachment://") :])
            if isinstance(value, str):
                return value
        return text

    def text(self, content: Any, where: str) -> tuple[str, str]:
        """(text, reasoning) of an Inspect message content: a string or a list of contents."""
        if content is None:
            return "", ""
        if isinstance(content, str):
            return self.resolve(content), ""
        if not isinstance(content, list):
            raise RecordError(
                f"content is a {type(content).__name__}, expected a string or a list",
                record=self.record,
                field=where,
            )
        texts, reasoning = [], []
        for part in content:
            if not isinstance(part, dict):
                raise RecordError(
                    f"a content item is a {type(part).__name__}, expected an object",
                    record=self.record,
                    field=where,
                )
            kind = part.get("type")
            if kind == "reasoning":
                value = part.get("reasoning") or part.get("summary") or ""
                if isinstance(value, str) and value and not part.get("redacted"):
                    reasoning.append(self.resolve(value))
            elif isinstance(part.get("text"), str):
                texts.append(self.resolve(part["text"]))
            elif kind in ("image", "audio", "video", "document"):
                texts.append(f"[{kind}]")
        return "\n".join(t for t in texts if t), "\n".join(reasoning)


def _outcome(sample: dict[str, Any], record: Any) -> Outcome:
    scores = sample.get("scores")
    if scores is None and isinstance(sample.get("score"), dict):
        scores = {"score": sample["score"]}
    scores = scores or {}
    if not isinstance(scores, dict):
        raise RecordError(
            f"scores is a {type(scores).__name__}, expected an object",
            record=record,
            field="scores",
        )
    kept: dict[str, Any] = {}
    success: bool | None = None
    score: float | None = None
    for i, (name, entry) in enumerate(scores.items()):
        if not isinstance(entry, dict):
            raise RecordError(
                f"score {name!r} is a {type(entry).__name__}, expected an object",
                record=record,
                field=f"scores.{name}",
            )
        kept[name] = {
            k: entry.get(k) for k in ("value", "answer", "explanation", "metadata") if k in entry
        }
        if i:
            continue
        value = entry.get("value")
        if isinstance(value, bool):
            success, score = value, float(value)
        elif isinstance(value, (int, float)):
            score = float(value)
            success = score >= 1.0 if 0.0 <= score <= 1.0 else None
        elif isinstance(value, str) and value.upper() in _LETTER:
            success, score = _LETTER[value.upper()]
        elif isinstance(value, str):
            try:
                score = float(value)
            except ValueError:
                score = None
    meta: dict[str, Any] = {"scores": kept}
    if "target" in sample:
        meta["target"] = sample["target"]
    error = sample.get("error")
    if error:
        meta["error"] = error.get("message", error) if isinstance(error, dict) else error
    limit = sample.get("limit")
    if limit:
        meta["limit"] = limit
    output = sample.get("output") if isinstance(sample.get("output"), dict) else {}
    stop_reason = None
    choices = output.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        stop_reason = choices[0].get("stop_reason")
        meta["stop_reason"] = stop_reason
    return Outcome(
        success=success,
        score=score,
        terminated=not error and not limit and stop_reason == "stop",
        truncated=bool(limit) or stop_reason in ("max_tokens", "model_length"),
        metadata=meta,
    )


def _usage(sample: dict[str, Any]) -> Usage:
    tokens_in = tokens_out = 0
    model_usage = sample.get("model_usage")
    entries: list[Any] = []
    if isinstance(model_usage, dict) and model_usage:
        entries = list(model_usage.values())
    elif isinstance(sample.get("output"), dict):
        entries = [sample["output"].get("usage")]
    for entry in entries:
        if isinstance(entry, dict):
            tokens_in += int(entry.get("input_tokens") or 0)
            tokens_out += int(entry.get("output_tokens") or 0)
    duration = sample.get("total_time") or sample.get("working_time") or 0.0
    return Usage(
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        duration=float(duration) if isinstance(duration, (int, float)) else 0.0,
    )


def _prompt(helper: _Sample, raw_input: Any) -> str:
    """The sample's ``input``: a string, or the user messages of a message list."""
    if isinstance(raw_input, str):
        return helper.resolve(raw_input)
    if isinstance(raw_input, list):
        return "\n".join(
            helper.text(m.get("content"), "input")[0]
            for m in raw_input
            if isinstance(m, dict) and m.get("role") == "user"
        )
    raise type_error(
        "input",
        raw_input,
        "a string or a list of messages",
        record=helper.record,
        field="input",
    )


def _call_step(
    call: Any, *, record: Any, index: int, thought: str, message_index: int, where: str
) -> Step:
    """The step of one tool call (``function`` a name, or OpenAI-shaped ``{name}``)."""
    if not isinstance(call, dict):
        raise RecordError("a tool call must be an object", record=record, field=where)
    name = call.get("function")
    if isinstance(name, dict):  # OpenAI-shaped, just in case
        name = name.get("name")
    if not isinstance(name, str) or not name:
        raise RecordError(
            "the tool call has no function name", record=record, field=f"{where}.function"
        )
    args = call.get("arguments") or {}
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except json.JSONDecodeError:
            args = {"_raw_arguments": args}
    require(args, dict, "arguments", "an object", record=record, field=f"{where}.arguments")
    meta: dict[str, Any] = {"message_index": message_index}
    if call.get("id"):
        meta["tool_call_id"] = call["id"]
    if call.get("parse_error"):
        meta["parse_error"] = call["parse_error"]
    return Step(
        index=index,
        thought=thought,
        tool=name,
        params=args,
        error="parse_error" if call.get("parse_error") else None,
        metadata=meta,
    )


def _observe(step: Step, message: dict[str, Any], text: str) -> None:
    """A ``tool`` message answers its step: the observation, and the error when there is one."""
    step.observation = text
    error = message.get("error")
    if isinstance(error, dict):
        step.error = str(error.get("type") or "tool_error")
        step.metadata["error_message"] = error.get("message", "")
        if not step.observation:
            step.observation = str(error.get("message", ""))
    elif error:
        step.error = str(error)


def _steps(helper: _Sample, messages: list[Any]) -> tuple[list[Step], str]:
    """The steps of the sample's messages (one per tool call, observed by the ``tool`` message
    with its id, else by the latest step still without an observation; a message step for every
    other message), and the final answer (the last assistant text without a tool call)."""
    record = helper.record
    steps: list[Step] = []
    by_id: dict[str, Step] = {}
    final_answer = ""
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise RecordError("a message must be an object with a role", record=record, field=where)
        role = message["role"]
        text, reasoning = helper.text(message.get("content"), f"{where}.content")
        if role == "assistant":
            calls = list_field(message, "tool_calls", record=record, where=where)
            thought = "\n".join(t for t in (reasoning, text) if t)
            if not calls:
                final_answer = text
                steps.append(
                    message_step(len(steps), "assistant", text, thought=reasoning, message_index=i)
                )
            for j, call in enumerate(calls):
                step = _call_step(
                    call,
                    record=record,
                    index=len(steps),
                    thought=thought if j == 0 else "",
                    message_index=i,
                    where=f"{where}.tool_calls[{j}]",
                )
                steps.append(step)
                if isinstance(call.get("id"), str):
                    by_id[call["id"]] = step
        elif role == "tool":
            step = by_id.get(message.get("tool_call_id"))
            if step is None:
                step = next(
                    (s for s in reversed(steps) if s.kind == "tool" and not s.observation), None
                )
            if step is not None:
                _observe(step, message, text)
        else:
            steps.append(message_step(len(steps), role, text, message_index=i))
    return steps, final_answer


def _sample_trajectory(log: dict[str, Any], sample: Any, record: Any) -> Trajectory:
    require(sample, dict, "a sample", "an object", record=record)
    helper = _Sample(sample, record)
    ev = log.get("eval") if isinstance(log.get("eval"), dict) else {}
    prompt = _prompt(helper, sample.get("input", ""))
    steps, final_answer = _steps(helper, list_field(sample, "messages", record=record))
    model = ev.get("model") if isinstance(ev.get("model"), str) else ""
    output = sample.get("output") if isinstance(sample.get("output"), dict) else {}
    if not model and isinstance(output.get("model"), str):
        model = output["model"]
    outcome = _outcome(sample, record)
    if final_answer:
        outcome.metadata["final_answer"] = final_answer
    meta = {
        "sample_id": sample.get("id"),
        "epoch": sample.get("epoch"),
        "sample_uuid": sample.get("uuid"),
        "eval_id": ev.get("eval_id"),
        "run_id": ev.get("run_id"),
        "created": ev.get("created"),
        "task_file": ev.get("task_file"),
        "output_model": output.get("model"),
        "sample_metadata": sample.get("metadata") or {},
        "error": outcome.metadata.get("error"),  # the sample errored: a failed trajectory
    }
    dataset = ev.get("dataset") if isinstance(ev.get("dataset"), dict) else {}
    task_name = ev.get("task") if isinstance(ev.get("task"), str) else ""
    return Trajectory(
        task=TaskRef(
            id=str(sample.get("id", "")),
            task_set=str(dataset.get("name") or task_name),
            prompt=prompt,
        ),
        agent="inspect_ai",
        model=model,
        environment=f"inspect/{task_name}" if task_name else "inspect",
        steps=steps,
        outcome=outcome,
        usage=_usage(sample),
        metadata={k: v for k, v in meta.items() if v is not None},
    )


def _read_member(zf: zipfile.ZipFile, name: str) -> Any:
    try:
        raw = zf.read(name)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise RecordError(f"cannot read the archive member: {exc}", record=name) from None
    try:
        return json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise RecordError(f"invalid JSON: {exc}", record=name) from None


class InspectImporter:
    name = "inspect"
    description = "Inspect AI eval logs (.json EvalLog and .eval zip archives)"

    def sniff(self, source: Source) -> bool:
        if source.zip is not None:
            names = _zip_names(source)
            return "header.json" in names or "_journal/start.json" in names
        if not source.data.lstrip().startswith(b"{"):
            return False
        return _is_log(source.json)

    def parse(self, source: Source) -> tuple[list[Trajectory], str]:
        if source.zip is not None:
            return self._parse_zip(source.zip)
        log = source.json
        if not _is_log(log):
            raise RecordError("not an Inspect eval log", record=0)
        samples = log.get("samples") or []
        if not isinstance(samples, list):
            raise RecordError(
                f"samples is a {type(samples).__name__}, expected a list", field="samples"
            )
        out = [_sample_trajectory(log, s, record=n) for n, s in enumerate(samples)]
        return out, str(log.get("version", ""))

    def _parse_zip(self, zf: zipfile.ZipFile) -> tuple[list[Trajectory], str]:
        names = zf.namelist()
        header_name = "header.json" if "header.json" in names else "_journal/start.json"
        header = _read_member(zf, header_name)
        if not isinstance(header, dict) or not isinstance(header.get("eval"), dict):
            raise RecordError("the header has no 'eval' object", record=header_name, field="eval")
        members = sorted(
            (n for n in names if n.startswith("samples/") and n.endswith(".json")),
            key=_sample_key,
        )
        out = []
        for name in members:
            out.append(_sample_trajectory(header, _read_member(zf, name), record=name))
            out[-1].metadata["archive_member"] = name
        return out, str(header.get("version", ""))


def _sample_key(name: str) -> tuple[Any, ...]:
    stem = name[len("samples/") : -len(".json")]
    sample, _, epoch = stem.rpartition("_epoch_")
    try:
        epoch_n = int(epoch)
    except ValueError:
        return (1, stem, 0)
    return (0, int(sample), epoch_n) if sample.isdigit() else (1, sample, epoch_n)


register_importer(InspectImporter())
