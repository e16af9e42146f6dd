"""SWE-agent ``.traj`` files: thought/action (``trajectory`` steps), function calling (history
messages carry ``tool_calls``) and history-only files (steps rebuilt from the chat history).

The messages of the history before the agent's first action — the system prompt, the instance
prompt, and demonstrations (``is_demo``, kept as system notes with ``metadata["is_demo"]``) — are
message steps before the tool steps; every later message is an action (a tool step) or its
observation (the step's observation)."""

from __future__ import annotations

import ast
import json
import re
import shlex
from typing import Any

from trainer_core.recording.importers.base import RecordError, Source, register_importer
from trainer_core.recording.importers.common import message_step, message_text, renumber
from trainer_core.recording.schema import Outcome, Step, TaskRef, Trajectory, Usage

# SWE-agent's own commands (tool bundles); any other first word is a plain shell command.
KNOWN_TOOLS = {
    "open",
    "goto",
    "scroll_up",
    "scroll_down",
    "create",
    "edit",
    "insert",
    "append",
    "search_file",
    "search_dir",
    "find_file",
    "filemap",
    "submit",
    "str_replace_editor",
    "view_image",
    "forfeit",
    "exit_forfeit",
    "exit_cost",
    "exit_context",
    "exit_format",
    "exit_api",
    "exit_error",
    "skip",
}
_TRUNCATING = ("exit_cost", "exit_context", "exit_format", "exit_api", "step_limit", "time")


# ----------------------------------------------------------------------------- shared helpers


def _part_text(part: dict[str, Any]) -> str | None:
    text = part.get("text")
    return text if isinstance(text, str) else None


def content_text(content: Any) -> str:
    """A message's content as text (a string, or a list of ``{type: text, text}`` parts)."""
    text = message_text(content, _part_text, keep_empty=True)
    if text is not None:
        return text
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return content["text"]
    return str(content)


def loose_structure(value: Any) -> Any:
    """A value that may be stored as a JSON or Python-repr string (SWE-agent does both)."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text or text[0] not in "[{":
        return value
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return value


def parse_arguments(arguments: Any) -> dict[str, Any]:
    """A tool call's arguments (a JSON string or a dict) as a dict."""
    if isinstance(arguments, dict):
        return dict(arguments)
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str):
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return {"raw_arguments": arguments}
        return parsed if isinstance(parsed, dict) else {"arguments": parsed}
    return {"arguments": arguments}


def tool_call_parts(call: Any) -> tuple[str, dict[str, Any], str]:
    """(name, arguments, id) of an OpenAI-style tool call."""
    if not isinstance(call, dict):
        return "", {}, ""
    function = call.get("function") if isinstance(call.get("function"), dict) else call
    name = function.get("name") or ""
    return str(name), parse_arguments(function.get("arguments")), str(call.get("id") or "")


def as_float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


def as_int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if number >= 0 else None


def stats_usage(stats: dict[str, Any], steps: list[Step], *, duration: float = 0.0) -> Usage:
    """Usage from a ``model_stats`` object (tokens sent and received, instance cost); the token
    counts the steps carry, when they carry any, come first."""
    return Usage(
        tokens_in=sum(s.tokens_in or 0 for s in steps) or as_int(stats.get("tokens_sent")) or 0,
        tokens_out=sum(s.tokens_out or 0 for s in steps)
        or as_int(stats.get("tokens_received"))
        or 0,
        cost_usd=as_float(stats.get("instance_cost")) or 0.0,
        duration=duration,
    )


def expect(value: Any, kind: type | tuple[type, ...], *, record: Any, field: str) -> Any:
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise RecordError(
            f"expected {names}, got {type(value).__name__}", record=record, field=field
        )
    return value


def optional_str(value: Any, *, record: Any, field: str) -> str:
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return expect(value, str, record=record, field=field)


# ----------------------------------------------------------------------------- SWE-agent


def parse_action(action: str) -> tuple[str, dict[str, Any]]:
    """Tool and params of a thought/action command line, e.g. ``find_file x.py src``."""
    action = action.strip()
    if not action:
        return "noop", {"command": ""}
    first = action.split(None, 1)[0]
    if first not in KNOWN_TOOLS:
        return "bash", {"command": action}
    params: dict[str, Any] = {"command": action}
    head, _, body = action.partition("\n")
    try:
        tokens = shlex.split(action, posix=True)
    except ValueError:
        try:
            tokens = shlex.split(head, posix=True)
        except ValueError:
            tokens = head.split()
        if body:
            params["body"] = body
    args: list[str] = []
    options: dict[str, str] = {}
    rest = tokens[1:]
    i = 0
    while i < len(rest):
        token = rest[i]
        if token.startswith("--") and len(token) > 2:
            value = rest[i + 1] if i + 1 < len(rest) else ""
            options[token[2:]] = value
            i += 2
            continue
        args.append(token)
        i += 1
    if first == "str_replace_editor" and args:
        params["subcommand"] = args[0]
        if len(args) > 1:
            params["path"] = args[1]
        args = args[2:]
    if args:
        params["args"] = args
    params.update({k: v for k, v in options.items() if k not in params})
    return first, params


def _issue_text(text: str) -> str:
    match = re.search(r"ISSUE:\s*\n(.*?)(?:\n\s*INSTRUCTIONS:|\Z)", text, re.S)
    if match:
        return match.group(1).strip()
    match = re.search(r"<pr_description>\s*(.*?)\s*</pr_description>", text, re.S)
    if match:
        return match.group(1).strip()
    return text.strip()


def _history(data: dict[str, Any]) -> list[dict[str, Any]]:
    history = data.get("history")
    if history is None:
        return []
    expect(history, list, record=0, field="history")
    for i, message in enumerate(history):
        expect(message, dict, record=0, field=f"history[{i}]")
    return history


def leading_messages(messages: list[dict[str, Any]]) -> list[Step]:
    """The message steps of the messages before the agent's first (non-demonstration) assistant
    message: the system prompt, the task's user message, demonstrations (system notes with
    ``metadata["is_demo"]``). Indexes are set by the caller."""
    out: list[Step] = []
    for i, message in enumerate(messages):
        if _is_assistant(message):
            break
        role = str(message.get("role") or "user")
        text = content_text(message.get("content"))
        meta: dict[str, Any] = {"message_index": i}
        if message.get("is_demo"):
            meta.update(is_demo=True, source_role=role)
            role = "system"
        elif role not in ("user", "system"):
            meta["source_role"] = role
            role = "system"
        out.append(message_step(len(out), role, text, **meta))
    return out


def _is_assistant(message: dict[str, Any]) -> bool:
    return message.get("role") == "assistant" and not message.get("is_demo")


def _tool_calls(message: dict[str, Any]) -> list[Any]:
    calls = loose_structure(message.get("tool_calls"))
    return calls if isinstance(calls, list) else []


class SweAgentImporter:
    name = "swe-agent"
    description = (
        "SWE-agent .traj files (thought/action, function calling, or history only), with "
        "exit status, submission and model stats."
    )

    def sniff(self, source: Source) -> bool:
        data = source.json
        if not isinstance(data, dict):
            return False
        if "messages" in data or "trajectory_format" in data or "eval" in data:
            return False
        markers = {"info", "history", "environment", "replay_config"}
        if "trajectory" in data:
            steps = data["trajectory"]
            return bool(markers & data.keys()) or (
                isinstance(steps, list)
                and bool(steps)
                and all(isinstance(s, dict) and "action" in s for s in steps)
            )
        # history only: chat messages (role and content are SWE-agent's required keys)
        history = data.get("history")
        if isinstance(history, list) and history:
            return all(isinstance(m, dict) and "role" in m for m in history)
        return False

    def parse(self, source: Source) -> tuple[list[Trajectory], str]:
        data = source.json
        expect(data, dict, record=0, field="(root)")
        info = data.get("info") or {}
        expect(info, dict, record=0, field="info")
        history = _history(data)
        has_calls = any(_is_assistant(m) and _tool_calls(m) for m in history)
        if "trajectory" in data:
            raw = expect(data["trajectory"], list, record=0, field="trajectory")
            steps = self._trajectory_steps(raw, history)
            variant = "function-calling" if has_calls else "thought-action"
        else:
            steps = self._history_steps(history)
            variant = "history-only"
        steps = renumber([*leading_messages(history), *steps])

        replay = loose_structure(data.get("replay_config"))
        replay = replay if isinstance(replay, dict) else {}
        task = self._task(source, data, history, replay)
        model = ""
        agent_cfg = replay.get("agent") if isinstance(replay.get("agent"), dict) else {}
        model_cfg = agent_cfg.get("model")
        if isinstance(model_cfg, dict):
            model = str(model_cfg.get("name") or "")
        elif isinstance(model_cfg, str):
            model = model_cfg
        if not model and isinstance(data.get("model"), str):
            model = data["model"]

        outcome = self._outcome(info)
        stats = info.get("model_stats") or {}
        expect(stats, dict, record=0, field="info.model_stats")
        metadata: dict[str, Any] = {"variant": variant}
        if outcome.metadata.get("error"):  # the run ended in an error: failed
            metadata["error"] = outcome.metadata["error"]
        if "api_calls" in stats:
            metadata["api_calls"] = stats["api_calls"]
        if isinstance(data.get("environment"), str):
            metadata["environment"] = data["environment"]
        trajectory = Trajectory(
            task=task,
            agent="swe-agent",
            model=model,
            steps=steps,
            outcome=outcome,
            usage=stats_usage(stats, steps, duration=sum(s.duration or 0.0 for s in steps)),
            metadata=metadata,
        )
        return [trajectory], f"traj/{variant}"

    # -- steps

    def _trajectory_steps(self, raw: list[Any], history: list[dict[str, Any]]) -> list[Step]:
        actions = [m for m in history if _is_assistant(m) and ("action" in m or _tool_calls(m))]
        cursor = 0
        steps = []
        for i, item in enumerate(raw):
            where = f"trajectory[{i}]"
            expect(item, dict, record=0, field=where)
            action = optional_str(item.get("action"), record=0, field=f"{where}.action")
            observation = optional_str(
                item.get("observation"), record=0, field=f"{where}.observation"
            )
            thought = item.get("thought")
            if thought is None:
                thought = item.get("response")
            thought = optional_str(thought, record=0, field=f"{where}.thought")

            call = None
            for j in range(cursor, len(actions)):
                if str(actions[j].get("action") or "").strip() == action.strip():
                    calls = _tool_calls(actions[j])
                    call = calls[0] if calls else None
                    cursor = j + 1
                    break
            metadata: dict[str, Any] = {"action": action}
            name, arguments, call_id = tool_call_parts(call)
            if name:
                tool, params = name, arguments
                metadata["tool_call_id"] = call_id
            else:
                tool, params = parse_action(action)
            state = loose_structure(item.get("state"))
            if state not in (None, "", {}):
                metadata["state"] = state
            if isinstance(item.get("extra_info"), dict) and item["extra_info"]:
                metadata["extra_info"] = item["extra_info"]
            steps.append(
                Step(
                    index=len(steps),
                    thought=thought.strip(),
                    tool=tool,
                    params=params,
                    observation=observation,
                    duration=as_float(item.get("execution_time")),
                    metadata=metadata,
                )
            )
        return steps

    def _history_steps(self, history: list[dict[str, Any]]) -> list[Step]:
        steps: list[Step] = []
        i = 0
        while i < len(history):
            message = history[i]
            if not _is_assistant(message):
                i += 1
                continue
            # the observations that follow, up to the next assistant message
            j = i + 1
            replies = []
            while j < len(history) and history[j].get("role") != "assistant":
                if history[j].get("role") in ("tool", "user") and not history[j].get("is_demo"):
                    replies.append(history[j])
                j += 1
            steps.extend(self._message_steps(message, replies, len(steps), f"history[{i}]"))
            i = j
        return steps

    def _message_steps(
        self, message: dict[str, Any], replies: list[dict[str, Any]], start: int, where: str
    ) -> list[Step]:
        content = content_text(message.get("content"))
        thought = message.get("thought")
        thought = (
            content
            if thought is None
            else optional_str(thought, record=0, field=f"{where}.thought")
        )
        action = optional_str(message.get("action"), record=0, field=f"{where}.action")
        calls = _tool_calls(message)

        def observation_for(call_id: str) -> str:
            if call_id:
                matched = [
                    content_text(r.get("content"))
                    for r in replies
                    if call_id == r.get("tool_call_id")
                    or call_id in (loose_structure(r.get("tool_call_ids")) or [])
                ]
                if matched:
                    return "\n".join(matched)
            return "\n".join(content_text(r.get("content")) for r in replies)

        if calls:
            steps = []
            for n, call in enumerate(calls):
                name, arguments, call_id = tool_call_parts(call)
                metadata: dict[str, Any] = {"tool_call_id": call_id}
                if action:
                    metadata["action"] = action
                steps.append(
                    Step(
                        index=start + n,
                        thought=thought.strip() if n == 0 else "",
                        tool=name or "unknown",
                        params=arguments,
                        observation=observation_for(call_id if len(calls) > 1 else ""),
                        metadata=metadata,
                    )
                )
            return steps
        if not action:
            blocks = list(re.finditer(r"```[^\n]*\n(.*?)```", content, re.S))
            if blocks:
                action = blocks[-1].group(1).strip()
                if message.get("thought") is None:
                    thought = content[: blocks[-1].start()]
        if action:
            tool, params = parse_action(action)
            metadata = {"action": action}
        else:
            tool, params, metadata = "message", {}, {"no_action": True}
        return [
            Step(
                index=start,
                thought=thought.strip(),
                tool=tool,
                params=params,
                observation=observation_for(""),
                metadata=metadata,
            )
        ]

    # -- task and outcome

    def _task(
        self,
        source: Source,
        data: dict[str, Any],
        history: list[dict[str, Any]],
        replay: dict[str, Any],
    ) -> TaskRef:
        problem = loose_structure(replay.get("problem_statement"))
        problem = problem if isinstance(problem, dict) else {}
        task_id = str(problem.get("id") or "")
        prompt = problem.get("text") if isinstance(problem.get("text"), str) else ""
        if not prompt:
            for message in history:
                if message.get("role") == "user" and not message.get("is_demo"):
                    prompt = _issue_text(content_text(message.get("content")))
                    break
        if not prompt and isinstance(data.get("problem_statement"), str):
            prompt = data["problem_statement"]
        if not task_id:
            task_id = str(data.get("instance_id") or "")
        if not task_id:
            task_id = re.sub(r"\.traj(\.json)?$", "", source.name.rsplit(":", 1)[-1])
        return TaskRef(id=task_id, domain="swe", prompt=prompt.strip())

    def _outcome(self, info: dict[str, Any]) -> Outcome:
        status = optional_str(info.get("exit_status"), record=0, field="info.exit_status")
        submission = info.get("submission")
        metadata: dict[str, Any] = {"exit_status": status or None, "submission": submission}
        success = None
        for key in ("resolved", "success"):
            if isinstance(info.get(key), bool):
                success = info[key]
        terminated = status in ("submitted", "exit_forfeit", "forfeit")
        truncated = any(marker in status for marker in _TRUNCATING)
        if "error" in status:
            metadata["error"] = status
        return Outcome(
            success=success, terminated=terminated, truncated=truncated, metadata=metadata
        )


register_importer(SweAgentImporter())
