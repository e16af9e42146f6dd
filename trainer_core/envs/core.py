"""The environment protocol (Gymnasium's shape, for tool-using agents).

State is text, an action is a tool call, the environment executes it and returns an
observation::

    with make("steplab/arithmetic") as env:
        ts = env.reset(seed=3)
        while not ts.done:
            ts = env.step({"tool": "calculator", "params": {"expression": "2+2"}})

An action is ``{"tool": str, "params": dict, "thought": str (optional)}``. An action of another
shape is not an exception: the observation says what is wrong (the agent caused it).
"""

from __future__ import annotations

import types
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainer_core.tasks.model import Task, ToolSpec, coerce_task


def _frozen(mapping: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return types.MappingProxyType(dict(mapping or {}))


@dataclass(frozen=True)
class TimeStep:
    observation: str
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False
    info: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "info", _frozen(self.info))

    @property
    def done(self) -> bool:
        return self.terminated or self.truncated

    def replace(self, **changes: Any) -> TimeStep:
        data = {
            "observation": self.observation,
            "reward": self.reward,
            "terminated": self.terminated,
            "truncated": self.truncated,
            "info": dict(self.info),
        }
        data.update(changes)
        return TimeStep(**data)


@dataclass(frozen=True)
class Action:
    tool: str
    params: Mapping[str, Any]
    thought: str | None = None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"tool": self.tool, "params": dict(self.params)}
        if self.thought is not None:
            out["thought"] = self.thought
        return out


ACTION_SHAPE = '{"tool": "<name>", "params": {...}, "thought": "<optional>"}'


def parse_action(action: Any) -> Action | str:
    """An Action, or a message saying what is wrong with the action's shape."""
    if isinstance(action, Action):
        return action
    if hasattr(action, "model_dump"):
        action = action.model_dump()
    if not isinstance(action, Mapping):
        return (
            f"Invalid action: expected an object like {ACTION_SHAPE}, got {type(action).__name__}."
        )
    unknown = sorted(set(action) - {"tool", "params", "thought"})
    if unknown:
        return f"Invalid action: unknown field(s) {', '.join(unknown)}; an action looks like {ACTION_SHAPE}."
    tool = action.get("tool")
    if not isinstance(tool, str) or not tool.strip():
        return f"Invalid action: 'tool' must be a non-empty string naming a tool; an action looks like {ACTION_SHAPE}."
    params = action.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        return f"Invalid action: 'params' must be an object of named parameters, got {type(params).__name__}."
    thought = action.get("thought")
    if thought is not None and not isinstance(thought, str):
        return "Invalid action: 'thought' must be a string when given."
    return Action(tool=tool.strip(), params=dict(params), thought=thought)


class AgentEnv(ABC):
    """Base class of environments. Subclasses implement ``_reset`` and ``_step``."""

    domain: str = "generic"
    spec: Any = None  # the EnvSpec when built by make()

    def __init__(self) -> None:
        self.task: Task | None = None
        self.history: list[tuple[Action | None, TimeStep]] = []
        self._closed = False

    # --- the protocol ---------------------------------------------------------------------

    @property
    @abstractmethod
    def available_tools(self) -> list[ToolSpec]:
        """Tools the agent may call now, with JSON-schema parameters."""

    def reset(self, *, task: Task | dict | str | None = None, seed: int | None = None) -> TimeStep:
        self.task = coerce_task(task, domain=self.domain)
        self.history = []
        ts = self._reset(task=self.task, seed=seed)
        self.history.append((None, ts))
        return ts

    def step(self, action: Any) -> TimeStep:
        parsed = parse_action(action)
        if isinstance(parsed, str):
            ts = TimeStep(observation=parsed, info={"error": "invalid_action"})
            self.history.append((None, ts))
            return ts
        ts = self._step(parsed)
        self.history.append((parsed, ts))
        return ts

    def close(self) -> None:
        self._closed = True

    @property
    def unwrapped(self) -> AgentEnv:
        return self

    def __enter__(self) -> AgentEnv:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- for subclasses ---------------------------------------------------------------------

    @abstractmethod
    def _reset(self, *, task: Task | None, seed: int | None) -> TimeStep: ...

    @abstractmethod
    def _step(self, action: Action) -> TimeStep: ...

    def interrupt(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Stop a step in progress (the timeout wrapper calls this from another thread)."""

    def tool_names(self) -> list[str]:
        return [t.name for t in self.available_tools]

    def unknown_tool(self, name: str) -> TimeStep:
        import difflib

        names = self.tool_names()
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.5)
        hint = f" Did you mean {', '.join(close)}?" if close else ""
        return TimeStep(
            observation=f"Unknown tool {name!r}.{hint} Available tools: {', '.join(names) or 'none'}.",
            info={"error": "unknown_tool"},
        )
