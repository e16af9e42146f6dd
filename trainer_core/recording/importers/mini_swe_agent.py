"""mini-swe-agent trajectories: a bare list of ``{role, content}`` messages (actions in fenced
bash blocks, observations in the following user message) or the newer object with ``info``
(exit status, submission, model stats) and ``messages``. The messages before the first assistant
message (the system prompt, the task) are message steps before the tool steps."""

from __future__ import annotations

import re
from typing import Any

from trainer_core.recording.importers.base import RecordError, Source, register_importer
from trainer_core.recording.importers.common import renumber
from trainer_core.recording.importers.swe_agent import (
    as_int,
    content_text,
    expect,
    leading_messages,
    loose_structure,
    stats_usage,
    tool_call_parts,
)
from trainer_core.recording.schema import Outcome, Step, TaskRef, Trajectory

_FENCE = re.compile(r"```(?:bash|sh|shell|mswea_bash_command)[ \t]*\n(.*?)\n?```", re.S)
_SUBMIT = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_OUTPUT = re.compile(r"<output>\n?(.*?)\n?</output>", re.S)


def _is_mini_object(data: Any) -> bool:
    if not isinstance(data, dict) or "messages" not in data:
        return False
    fmt = data.get("trajectory_format")
    if isinstance(fmt, str) and fmt.startswith("mini-swe-agent"):
        return True
    info = data.get("info")
    return isinstance(info, dict) and (
        "mini_version" in info or ("exit_status" in info and "model_stats" in info)
    )


def _looks_like_messages(data: Any) -> bool:
    if not isinstance(data, list) or not data:
        return False
    if not all(isinstance(m, dict) and "role" in m and "content" in m for m in data):
        return False
    if any("tool_calls" in m or m.get("role") in ("tool", "function") for m in data):
        return False
    return any(
        m["role"] == "assistant" and isinstance(m["content"], str) and _FENCE.search(m["content"])
        for m in data
    )


def _task_text(text: str) -> str:
    match = re.search(r"<pr_description>\s*(.*?)\s*</pr_description>", text, re.S)
    if match:
        return match.group(1)
    match = re.search(r"Please solve this issue:\s*(.*?)(?:\n\n|\Z)", text, re.S)
    if match:
        return match.group(1)
    return text


class MiniSweAgentImporter:
    name = "mini-swe-agent"
    description = (
        "mini-swe-agent trajectories: a list of messages with fenced bash actions, or the "
        "object with info (exit status, submission, model stats) and messages."
    )

    def sniff(self, source: Source) -> bool:
        data = source.json
        return _is_mini_object(data) or _looks_like_messages(data)

    def parse(self, source: Source) -> tuple[list[Trajectory], str]:
        data = source.json
        if isinstance(data, list):
            messages, info, version = data, {}, "messages-list"
            field = "messages"
        else:
            expect(data, dict, record=0, field="(root)")
            messages = expect(data.get("messages"), list, record=0, field="messages")
            info = data.get("info") or {}
            expect(info, dict, record=0, field="info")
            version = str(data.get("trajectory_format") or "") or "info-messages"
            if info.get("mini_version"):
                version += f"/{info['mini_version']}"
            field = "messages"
        for i, message in enumerate(messages):
            expect(message, dict, record=0, field=f"{field}[{i}]")
            if "role" not in message:
                raise RecordError("message has no role", record=0, field=f"{field}[{i}].role")
            content = message.get("content")
            if content is not None and not isinstance(content, (str, list)):
                raise RecordError(
                    f"expected str or list, got {type(content).__name__}",
                    record=0,
                    field=f"{field}[{i}].content",
                )

        steps = renumber([*leading_messages(messages), *self._steps(messages, field)])
        prompt = ""
        for message in messages:
            if message.get("role") == "user":
                prompt = _task_text(content_text(message.get("content"))).strip()
                break

        status = info.get("exit_status")
        status = str(status) if status is not None else ""
        tools = [s for s in steps if s.kind == "tool"]
        submitted_by_command = bool(tools) and any(
            marker in str(tools[-1].params.get("command", "")) for marker in _SUBMIT
        )
        outcome_meta: dict[str, Any] = {"exit_status": status or None}
        if "submission" in info:
            outcome_meta["submission"] = info["submission"]
        low = status.lower()
        outcome = Outcome(
            success=info.get("resolved") if isinstance(info.get("resolved"), bool) else None,
            terminated=low in ("submitted",) or (not status and submitted_by_command),
            truncated=any(k in low for k in ("limit", "cost", "timeout", "context")),
            metadata=outcome_meta,
        )
        if "error" in low or "exception" in low:
            outcome.metadata["error"] = status

        stats = info.get("model_stats") or {}
        expect(stats, dict, record=0, field="info.model_stats")
        config = info.get("config") if isinstance(info.get("config"), dict) else {}
        model_cfg = config.get("model") if isinstance(config.get("model"), dict) else {}
        model = str(model_cfg.get("model_name") or info.get("model_name") or "")
        metadata: dict[str, Any] = {}
        if "api_calls" in stats:
            metadata["api_calls"] = stats["api_calls"]
        if info.get("mini_version"):
            metadata["mini_version"] = info["mini_version"]
        instance = data.get("instance_id") if isinstance(data, dict) else None
        task_id = str(instance or re.sub(r"\.traj(\.json)?$|\.json$", "", source.name))
        trajectory = Trajectory(
            task=TaskRef(id=task_id, domain="swe", prompt=prompt),
            agent="mini-swe-agent",
            model=model,
            steps=steps,
            outcome=outcome,
            usage=stats_usage(stats, steps),
            metadata=metadata,
        )
        return [trajectory], version

    def _steps(self, messages: list[dict[str, Any]], field: str) -> list[Step]:
        steps: list[Step] = []
        i = 0
        while i < len(messages):
            message = messages[i]
            if message.get("role") != "assistant":
                i += 1
                continue
            j = i + 1
            replies = []
            while j < len(messages) and messages[j].get("role") != "assistant":
                if messages[j].get("role") in ("user", "tool"):
                    replies.append(messages[j])
                j += 1
            steps.extend(self._message_steps(message, replies, len(steps)))
            i = j
        return steps

    def _message_steps(
        self, message: dict[str, Any], replies: list[dict[str, Any]], start: int
    ) -> list[Step]:
        text = content_text(message.get("content"))
        observation_raw = "\n".join(content_text(r.get("content")) for r in replies)
        observation, exit_code = observation_raw, None
        code = _RETURNCODE.search(observation_raw)
        if code:
            exit_code = int(code.group(1))
            output = _OUTPUT.search(observation_raw)
            if output:
                observation = output.group(1)
        extra = message.get("extra") if isinstance(message.get("extra"), dict) else {}
        response = extra.get("response") if isinstance(extra.get("response"), dict) else {}
        usage = response.get("usage") if isinstance(response.get("usage"), dict) else {}
        tokens_in = as_int(usage.get("prompt_tokens"))
        tokens_out = as_int(usage.get("completion_tokens"))

        commands: list[str] = []
        calls = loose_structure(message.get("tool_calls"))
        if isinstance(calls, list) and calls:
            for call in calls:
                name, arguments, _ = tool_call_parts(call)
                commands.append(str(arguments.get("command") or arguments.get("cmd") or ""))
            thought = text
        else:
            blocks = list(_FENCE.finditer(text))
            commands = [b.group(1).strip() for b in blocks]
            thought = _FENCE.sub("", text) if blocks else text
        thought = re.sub(r"^\s*THOUGHT:\s*", "", thought.strip())
        metadata: dict[str, Any] = {}
        if not commands:
            # a response without an action (a format error): keep it, the agent spent a turn
            return [
                Step(
                    index=start,
                    thought=thought,
                    tool="message",
                    observation=observation,
                    error="format_error",
                    tokens_in=tokens_in,
                    tokens_out=tokens_out,
                    metadata={"no_action": True},
                )
            ]
        if len(commands) > 1 and not calls:
            metadata["extra_commands"] = commands[1:]
            commands = commands[:1]
        steps = []
        for n, command in enumerate(commands):
            steps.append(
                Step(
                    index=start + n,
                    thought=thought if n == 0 else "",
                    tool="bash",
                    params={"command": command},
                    observation=observation,
                    exit_code=exit_code,
                    tokens_in=tokens_in if n == 0 else None,
                    tokens_out=tokens_out if n == 0 else None,
                    metadata=dict(metadata),
                )
            )
        return steps


register_importer(MiniSweAgentImporter())
