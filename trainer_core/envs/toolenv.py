"""ProfileEnv: an environment whose tools come from a domain profile (aliases resolved, unknown
tools and bad parameters answered with observations), and which checks the outcome with the
task's outcome checker when the agent submits."""

from __future__ import annotations

import dataclasses
from typing import Any

from trainer_core.envs.core import Action, AgentEnv, TimeStep
from trainer_core.envs.profiles import DomainProfile, get_profile
from trainer_core.tasks.model import Task, ToolSpec


class ProfileEnv(AgentEnv):
    profile_name = "generic"

    def __init__(self, profile: DomainProfile | None = None):
        super().__init__()
        self.profile = profile or get_profile(self.profile_name)
        self.domain = self.profile.name
        self._tools = [
            ToolSpec(t.name, t.description, t.parameters, t.category) for t in self.profile.tools
        ]

    @property
    def available_tools(self) -> list[ToolSpec]:
        return list(self._tools)

    def _step(self, action: Action) -> TimeStep:
        tool = self.profile.tool(action.tool)
        if tool is None:
            return self.unknown_tool(action.tool)
        problem = _check_params(dict(action.params), tool.parameters)
        if problem:
            return TimeStep(
                observation=f"Invalid parameters for {tool.name}: {problem}.",
                info={"tool": tool.name, "error": "invalid_params"},
            )
        handler = getattr(self, f"tool_{tool.name}", None)
        if handler is None:
            return TimeStep(
                observation=f"The tool {tool.name!r} is not available in this environment.",
                info={"tool": tool.name, "error": "unavailable_tool"},
            )
        ts = handler(**dict(action.params))
        return ts.replace(info={"tool": tool.name, **dict(ts.info)})

    # --- outcome ---------------------------------------------------------------------------------

    def finish_with_answer(self, answer: str | None, *, observation: str | None = None) -> TimeStep:
        """End the episode: check ``answer`` with the task's outcome checker."""
        from trainer_core.tasks.checkers import check_outcome, outcome_reward

        task = self.task or Task(prompt="")
        outcome = check_outcome(task, final_text=answer or "", answer=None)
        reward = outcome_reward(outcome)
        verdict = "correct" if outcome.success else "not correct"
        if task.expected_answer is None and not task.checker and not task.test_command:
            verdict = "recorded (this task has no checker)"
        return TimeStep(
            observation=observation or f"Submitted: {answer!r} — {verdict}.",
            reward=reward,
            terminated=True,
            info={"outcome": _outcome_dict(outcome), "answer": answer},
        )


def _outcome_dict(outcome: Any) -> dict[str, Any]:
    data = dataclasses.asdict(outcome) if dataclasses.is_dataclass(outcome) else dict(outcome)
    meta = dict(data.pop("metadata", {}) or {})
    for key in ("extracted_answer", "detail"):
        if data.get(key) is not None:
            meta[key] = data.pop(key)
        else:
            data.pop(key, None)
    data["metadata"] = meta
    return data


_JSON_TYPES = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "array": list,
    "object": dict,
}


def _check_params(params: dict[str, Any], schema: dict[str, Any]) -> str:
    """A short message when ``params`` do not fit the tool's JSON schema (top level only)."""
    props = schema.get("properties", {})
    missing = [name for name in schema.get("required", []) if name not in params]
    if missing:
        return f"missing {', '.join(repr(m) for m in missing)} (expected: {_signature(schema)})"
    unknown = [name for name in params if name not in props]
    if unknown:
        return f"unknown {', '.join(repr(u) for u in unknown)} (expected: {_signature(schema)})"
    for name, value in params.items():
        expected = props[name].get("type")
        py = _JSON_TYPES.get(expected)
        if py is None or value is None:
            continue
        if expected in ("integer", "number") and isinstance(value, bool):
            return f"{name!r} must be a {expected}, got a boolean"
        if not isinstance(value, py):
            return f"{name!r} must be a {expected}, got {type(value).__name__}"
    return ""


def _signature(schema: dict[str, Any]) -> str:
    required = set(schema.get("required", []))
    parts = [
        f"{name}: {spec.get('type', 'any')}{'' if name in required else ' (optional)'}"
        for name, spec in schema.get("properties", {}).items()
    ]
    return ", ".join(parts) or "no parameters"
