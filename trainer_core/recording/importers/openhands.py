"""OpenHands logs: an event array (actions and observations, observations linked to actions by
``cause``), the same events one per line (JSONL), or an evaluation ``output.jsonl`` (one run per
line, events under ``history``).

Every action the agent took is a tool step, observed by the observation that names it; the
dialogue is message steps in its place: the user's ``message`` actions, the agent's ``message``
actions that are no tool call (its text replies), and the ``system`` action (the system prompt).
Bookkeeping events (agent state changes, recalls, condensation) are not turns and are left out."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from trainer_core.recording.importers.base import RecordError, Source, register_importer
from trainer_core.recording.importers.common import message_step
from trainer_core.recording.importers.swe_agent import (
    as_float,
    as_int,
    content_text,
    expect,
    parse_arguments,
)
from trainer_core.recording.schema import Outcome, Step, TaskRef, Trajectory, Usage

# Bookkeeping, not agent behaviour.
SKIP_ACTIONS = {
    "system",
    "change_agent_state",
    "recall",
    "null",
    "condensation",
    "condensation_request",
    "add_task",
    "modify_task",
    "start",
    "pause",
    "resume",
    "stop",
}
SKIP_OBSERVATIONS = {"agent_state_changed", "null", "recall", "condense", "delegate_state"}
# Action fields that are internal or repeat something kept elsewhere.
INTERNAL_ARGS = {
    "thought",
    "impl_source",
    "translated_ipython_code",
    "is_confirmed",
    "confirmation_state",
    "security_risk",
    "action_risk",
    "kernel_init_code",
    "keep_prompt",
    "blocking",
    "hidden",
    "wait_for_response",
    "image_urls",
    "images_urls",
    "is_input",
    "include_extra",
    "source",
    "timeout",
}
_EVENT_KEYS = {"action", "observation"}


def _is_event(item: Any) -> bool:
    return isinstance(item, dict) and (
        isinstance(item.get("action"), str) or isinstance(item.get("observation"), str)
    )


def _events_like(history: Any) -> bool:
    """A history of events, flat or as [action, observation] pairs."""
    if not isinstance(history, list) or not history:
        return False
    first = history[0]
    if isinstance(first, list):
        return any(_is_event(x) for x in first)
    return _is_event(first)


def _is_eval_row(row: Any) -> bool:
    """A run of an evaluation output (its events under ``history``; every other key optional)."""
    return isinstance(row, dict) and "history" in row


def _is_event_stream(items: Any) -> bool:
    """A list of events (a JSON array, or JSON lines one event each): mostly actions and
    observations, no chat messages."""
    return (
        isinstance(items, list)
        and bool(items)
        and all(isinstance(x, dict) for x in items)
        and sum(_is_event(x) for x in items) * 2 >= len(items)
        and not any("role" in x for x in items)
    )


def _timestamp(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


def _model_response(event: dict[str, Any]) -> dict[str, Any]:
    meta = event.get("tool_call_metadata")
    if isinstance(meta, dict) and isinstance(meta.get("model_response"), dict):
        return meta["model_response"]
    return {}


def _tool_call_arguments(event: dict[str, Any]) -> dict[str, Any]:
    """The arguments of the tool call that produced the action, from the stored model response."""
    meta = event.get("tool_call_metadata")
    if not isinstance(meta, dict):
        return {}
    call_id = meta.get("tool_call_id")
    for choice in _model_response(event).get("choices") or []:
        message = choice.get("message") if isinstance(choice, dict) else None
        for call in (message or {}).get("tool_calls") or []:
            if isinstance(call, dict) and call.get("id") == call_id:
                function = call.get("function") or {}
                return parse_arguments(function.get("arguments"))
    return {}


@dataclass
class _EventWalk:
    """What walking one run's events has found so far."""

    steps: list[Step] = field(default_factory=list)
    by_id: dict[Any, Step] = field(default_factory=dict)
    action_time: dict[int, datetime | None] = field(default_factory=dict)
    pending: list[Step] = field(default_factory=list)  # waiting for an observation, oldest first
    prompt: str = ""
    user_messages: int = 0
    models: list[str] = field(default_factory=list)
    seen_responses: set[str] = field(default_factory=set)
    unpaired: list[dict[str, Any]] = field(default_factory=list)
    finished: bool = False
    last_metrics: dict[str, Any] | None = None


class OpenHandsImporter:
    name = "openhands"
    description = (
        "OpenHands event arrays (actions and observations linked by cause) and evaluation "
        "output.jsonl files (one run per line with history, metrics and test results)."
    )

    def sniff(self, source: Source) -> bool:
        data = source.json
        if isinstance(data, list):
            return _is_event_stream(data)
        if isinstance(data, dict):
            return _is_eval_row(data) and _events_like(data.get("history"))
        rows = source.jsonl
        if not rows or not all(isinstance(r, dict) for r in rows):
            return False
        if _is_event_stream(rows):
            return True
        return all(_is_eval_row(r) for r in rows) and any(
            _events_like(r.get("history")) for r in rows
        )

    def parse(self, source: Source) -> tuple[list[Trajectory], str]:
        data = source.json
        if data is None and _is_event_stream(source.jsonl):
            data = source.jsonl  # events one per line: the same as an event array
            variant = "events.jsonl"
        else:
            variant = "events"
        if isinstance(data, list):
            events = self._flatten(data, record=0, field="(root)")
            trajectory = self._trajectory(events, record=0)
            trajectory.task.id = trajectory.task.id or source.name.rsplit(".", 1)[0]
            return [trajectory], variant
        rows = [data] if isinstance(data, dict) else source.jsonl
        if rows is None:
            raise RecordError(source._errors.get("jsonl") or "not JSON lines", record=None)
        trajectories = []
        for number, row in enumerate(rows, 1):
            record: Any = number
            expect(row, dict, record=record, field="(line)")
            if isinstance(row.get("instance_id"), (str, int)):
                record = row["instance_id"]
            history = expect(row.get("history"), list, record=record, field="history")
            events = self._flatten(history, record=record, field="history")
            trajectories.append(self._eval_trajectory(row, events, record, number))
        return trajectories, "output.jsonl"

    # -- events

    def _flatten(self, items: list[Any], *, record: Any, field: str) -> list[dict[str, Any]]:
        events = []
        for i, item in enumerate(items):
            if isinstance(item, list):  # older eval output: [action, observation] pairs
                for k, part in enumerate(item):
                    expect(part, dict, record=record, field=f"{field}[{i}][{k}]")
                    if part:
                        events.append(part)
                continue
            expect(item, dict, record=record, field=f"{field}[{i}]")
            events.append(item)
        for i, event in enumerate(events):
            for key in ("action", "observation"):
                if key in event and not isinstance(event[key], str):
                    raise RecordError(
                        f"expected str, got {type(event[key]).__name__}",
                        record=record,
                        field=f"{field}[{i}].{key}",
                    )
            for key in ("args", "extras"):
                if event.get(key) is not None and not isinstance(event[key], dict):
                    raise RecordError(
                        f"expected dict, got {type(event[key]).__name__}",
                        record=record,
                        field=f"{field}[{i}].{key}",
                    )
        return events

    def _trajectory(self, events: list[dict[str, Any]], *, record: Any) -> Trajectory:
        walk = _EventWalk()
        for event in events:
            if isinstance(event.get("llm_metrics"), dict):
                walk.last_metrics = event["llm_metrics"]
            if "action" in event:
                self._on_action(walk, event)
            elif "observation" in event:
                self._on_observation(walk, event)
        steps = walk.steps
        usage = Usage(
            tokens_in=sum(s.tokens_in or 0 for s in steps),
            tokens_out=sum(s.tokens_out or 0 for s in steps),
        )
        if walk.last_metrics:
            self._apply_metrics(usage, walk.last_metrics)
        metadata: dict[str, Any] = {}
        if walk.unpaired:
            metadata["unpaired_observations"] = walk.unpaired
        if walk.user_messages > 1:
            metadata["user_messages"] = walk.user_messages
        outcome = Outcome(terminated=walk.finished)
        tools = [s for s in steps if s.kind == "tool"]
        if tools and tools[-1].tool != "finish" and tools[-1].metadata.get("action") == "finish":
            outcome.terminated = True
        return Trajectory(
            task=TaskRef(domain="generic", prompt=walk.prompt.strip()),
            agent="openhands",
            model=walk.models[-1] if walk.models else "",
            steps=steps,
            outcome=outcome,
            usage=usage,
            metadata=metadata,
        )

    def _on_action(self, walk: _EventWalk, event: dict[str, Any]) -> None:
        """A message (a message step; the first user message is the prompt too), bookkeeping
        (skipped) or a tool step, with its model's token usage counted once per model
        response."""
        kind = event["action"]
        args = event.get("args")
        if args is None:  # older flat events: the args sit beside "action"
            args = {k: v for k, v in event.items() if k not in _EVENT_KEYS}
        source = event.get("source")
        if source == "environment" or (kind in SKIP_ACTIONS and kind != "system"):
            return
        first = not walk.prompt and not walk.action_time  # no user text, no tool step yet
        if kind == "message" and (source == "user" or (source is None and first)):
            walk.user_messages += 1
            text = content_text(args.get("content") or event.get("message"))
            walk.prompt = walk.prompt or text
            walk.steps.append(self._message(event, "user", text, len(walk.steps)))
            return
        if kind == "system" or (kind == "message" and not event.get("tool_call_metadata")):
            role = "system" if kind == "system" else "assistant"
            text = content_text(args.get("content") or event.get("message"))
            step = self._message(event, role, text, len(walk.steps))
            thought = args.get("thought")
            step.thought = (
                thought.strip() if role == "assistant" and isinstance(thought, str) else ""
            )
            walk.steps.append(step)
        else:
            step = self._tool_step(walk, event, kind, args)
        response = _model_response(event)
        if response.get("model"):
            walk.models.append(str(response["model"]))
        usage = response.get("usage") if isinstance(response.get("usage"), dict) else {}
        rid = str(response.get("id") or "")
        if usage and rid not in walk.seen_responses:
            walk.seen_responses.add(rid)
            step.tokens_in = as_int(usage.get("prompt_tokens"))
            step.tokens_out = as_int(usage.get("completion_tokens"))

    def _tool_step(
        self, walk: _EventWalk, event: dict[str, Any], kind: str, args: dict[str, Any]
    ) -> Step:
        step = self._action_step(event, kind, args, len(walk.steps))
        walk.steps.append(step)
        if "id" in event:
            walk.by_id[event["id"]] = step
        walk.action_time[id(step)] = _timestamp(event.get("timestamp"))
        walk.pending.append(step)
        if kind == "finish":
            walk.finished = True
        return step

    def _message(self, event: dict[str, Any], role: str, text: str, index: int) -> Step:
        metadata: dict[str, Any] = {"action": event["action"]}
        if "id" in event:
            metadata["event_id"] = event["id"]
        step = message_step(index, role, text, **metadata)
        step.started_at = _timestamp(event.get("timestamp"))
        return step

    def _on_observation(self, walk: _EventWalk, event: dict[str, Any]) -> None:
        """An observation answers the action it names by ``cause`` (or, with no link, the latest
        action still waiting); one that answers nothing is kept as unpaired."""
        kind = event["observation"]
        if kind in SKIP_OBSERVATIONS:
            return
        cause = event.get("cause")
        if cause is not None:
            step = walk.by_id.get(cause)
            step = step if step is not None and step in walk.pending else None
        else:
            step = walk.pending[-1] if walk.pending else None
        if step is None:
            walk.unpaired.append(
                {"observation": kind, "content": self._observation_text(event)[:2000]}
            )
            return
        walk.pending.remove(step)
        self._observe(step, event, kind, walk.action_time.get(id(step)))

    def _action_step(
        self, event: dict[str, Any], kind: str, args: dict[str, Any], index: int
    ) -> Step:
        meta = event.get("tool_call_metadata")
        function = meta.get("function_name") if isinstance(meta, dict) else None
        tool = str(function or kind)
        params = {k: v for k, v in args.items() if k not in INTERNAL_ARGS and v is not None}
        params.update(_tool_call_arguments(event))
        # the event's "message" on most actions is an auto summary ("Running command: ..."):
        # the agent's own words are in args.thought (or a message action's content param)
        thought = args.get("thought")
        if not isinstance(thought, str):
            thought = ""
        if kind == "finish" and isinstance(args.get("final_thought"), str):
            thought = thought or args["final_thought"]
        metadata: dict[str, Any] = {"action": kind}
        if isinstance(meta, dict) and meta.get("tool_call_id"):
            metadata["tool_call_id"] = meta["tool_call_id"]
        if "id" in event:
            metadata["event_id"] = event["id"]
        return Step(
            index=index,
            thought=thought.strip(),
            tool=tool,
            params=params,
            started_at=_timestamp(event.get("timestamp")),
            metadata=metadata,
        )

    def _observation_text(self, event: dict[str, Any]) -> str:
        content = event.get("content")
        if content is None:
            content = event.get("message")
        return content_text(content)

    def _observe(
        self, step: Step, event: dict[str, Any], kind: str, started: datetime | None
    ) -> None:
        step.observation = self._observation_text(event)
        extras = event.get("extras")
        if extras is None:
            extras = {k: v for k, v in event.items() if k not in _EVENT_KEYS}
        exit_code = extras.get("exit_code")
        if exit_code is None and isinstance(extras.get("metadata"), dict):
            exit_code = extras["metadata"].get("exit_code")
        if isinstance(exit_code, int) and not isinstance(exit_code, bool):
            step.exit_code = exit_code
        if kind == "error":
            step.error = str(extras.get("error_id") or "error")
        elif step.exit_code not in (None, 0, -1):
            step.error = f"exit code {step.exit_code}"
        step.metadata["observation"] = kind
        ended = _timestamp(event.get("timestamp"))
        if started and ended:
            try:
                seconds = (ended - started).total_seconds()
            except TypeError:
                seconds = -1
            if seconds >= 0:
                step.duration = seconds

    # -- eval output

    def _apply_metrics(self, usage: Usage, metrics: dict[str, Any]) -> None:
        cost = as_float(metrics.get("accumulated_cost"))
        if cost is not None:
            usage.cost_usd = cost
        tokens = metrics.get("accumulated_token_usage")
        if isinstance(tokens, dict):
            usage.tokens_in = as_int(tokens.get("prompt_tokens")) or usage.tokens_in
            usage.tokens_out = as_int(tokens.get("completion_tokens")) or usage.tokens_out

    def _eval_trajectory(
        self, row: dict[str, Any], events: list[dict[str, Any]], record: Any, number: int
    ) -> Trajectory:
        trajectory = self._trajectory(events, record=record)
        instruction = row.get("instruction")
        if instruction is not None:
            instruction = expect(instruction, str, record=record, field="instruction")
            trajectory.task.prompt = instruction.strip()
        issue = row.get("issue") if isinstance(row.get("issue"), dict) else {}
        task_id = row.get("instance_id")
        if task_id is None and issue:
            task_id = f"{issue.get('owner')}/{issue.get('repo')}#{issue.get('number')}"
        trajectory.task.id = str(task_id if task_id is not None else f"line-{number}")
        instance = row.get("instance") if isinstance(row.get("instance"), dict) else {}
        if instance.get("repo") or issue.get("repo"):
            trajectory.task.domain = "swe"
        metrics = row.get("metrics")
        if metrics is not None:
            expect(metrics, dict, record=record, field="metrics")
            self._apply_metrics(trajectory.usage, metrics)
            if isinstance(metrics.get("costs"), list):
                trajectory.metadata["llm_calls"] = len(metrics["costs"])
        meta = row.get("metadata") if isinstance(row.get("metadata"), dict) else {}
        llm = meta.get("llm_config") if isinstance(meta.get("llm_config"), dict) else {}
        if llm.get("model"):
            trajectory.model = str(llm["model"])
        if meta.get("agent_class"):
            trajectory.metadata["agent_class"] = meta["agent_class"]

        outcome = trajectory.outcome
        success = row.get("success")
        test_result = row.get("test_result")
        report = row.get("report")
        if isinstance(test_result, dict):
            report = report if isinstance(report, dict) else test_result.get("report")
            if isinstance(test_result.get("resolved"), bool):
                success = test_result["resolved"] if success is None else success
            if test_result.get("git_patch"):
                outcome.metadata["git_patch"] = test_result["git_patch"]
        elif isinstance(test_result, bool) and success is None:
            success = test_result
        if isinstance(report, dict):
            if isinstance(report.get("resolved"), bool) and success is None:
                success = report["resolved"]
            outcome.metadata["report"] = report
        if success is not None and not isinstance(success, bool):
            raise RecordError(
                f"expected bool, got {type(success).__name__}", record=record, field="success"
            )
        outcome.success = success
        if row.get("git_patch"):
            outcome.metadata["git_patch"] = row["git_patch"]
        for key in ("result_explanation", "comment_success"):
            if row.get(key) is not None:
                outcome.metadata[key] = row[key]
        error = row.get("error")
        if error:
            outcome.metadata["error"] = error
            trajectory.metadata["error"] = str(error)  # the run ended in an error: failed
            if any(k in str(error).lower() for k in ("iteration", "budget", "limit")):
                outcome.truncated = True
        if issue:
            trajectory.metadata["issue"] = {
                k: issue.get(k) for k in ("owner", "repo", "number", "title")
            }
        return trajectory


register_importer(OpenHandsImporter())
