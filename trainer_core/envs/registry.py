"""The environment registry: ``register``, ``make``, ``spec``, ``list_envs``, and
``describe_stack`` / ``rebuild_stack`` (a wrapped env as JSON and back, rebuilt from its id).

Ids are ``namespace/name``. Steplab's own environments register when ``trainer_core.envs`` is
imported, so ``make("steplab/conversation")`` works in a fresh interpreter.
"""

from __future__ import annotations

import difflib
import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainer_core.envs.core import AgentEnv
from trainer_core.envs.wrappers import MaxSteps, Timeout, Wrapper
from trainer_core.errors import ConfigError

_ID = re.compile(r"^[a-z0-9][a-z0-9_.-]*/[a-z0-9][a-z0-9_.-]*$")


class UnknownEnvironment(ConfigError, KeyError):
    """No environment is registered under that id."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


@dataclass(frozen=True)
class EnvSpec:
    id: str
    entry_point: str | Callable[..., AgentEnv]  # "module:Class" or a callable
    domain: str = "generic"
    kwargs: dict[str, Any] = field(default_factory=dict)
    max_steps: int | None = None  # make() adds MaxSteps when set
    step_seconds: float | None = None  # make() adds Timeout when set
    description: str = ""

    def load(self) -> Callable[..., AgentEnv]:
        if callable(self.entry_point):
            return self.entry_point
        return _import_path(self.entry_point)


def _import_path(path: str) -> Any:
    """The object an import path ``"module:Qualified.name"`` names."""
    module, _, attr = path.partition(":")
    target: Any = importlib.import_module(module)
    for part in attr.split("."):
        target = getattr(target, part)
    return target


_REGISTRY: dict[str, EnvSpec] = {}


def register(
    id: str,
    entry_point: str | Callable[..., AgentEnv],
    *,
    domain: str = "generic",
    kwargs: dict[str, Any] | None = None,
    max_steps: int | None = None,
    step_seconds: float | None = None,
    description: str = "",
    override: bool = False,
) -> EnvSpec:
    if not _ID.match(id):
        raise ConfigError(
            f"environment id {id!r} must look like 'namespace/name' (lowercase letters, digits, - _ .)"
        )
    if id in _REGISTRY and not override:
        raise ConfigError(
            f"environment {id!r} is already registered; pass override=True to replace it"
        )
    new = EnvSpec(id, entry_point, domain, dict(kwargs or {}), max_steps, step_seconds, description)
    _REGISTRY[id] = new
    return new


def spec(id: str) -> EnvSpec:
    try:
        return _REGISTRY[id]
    except KeyError:
        close = difflib.get_close_matches(id, list(_REGISTRY), n=3, cutoff=0.6)
        if not close and "/" not in id:
            close = [known for known in _REGISTRY if known.split("/", 1)[1] == id][:3]
        hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise UnknownEnvironment(
            f"No environment {id!r} is registered.{hint} Registered: {', '.join(sorted(_REGISTRY)) or 'none'}."
        ) from None


def list_envs(domain: str | None = None) -> list[str]:
    return sorted(i for i, s in _REGISTRY.items() if domain is None or s.domain == domain)


def make(id: str, *, wrappers: bool = True, **overrides: Any) -> AgentEnv:
    """Build a registered environment; ``overrides`` replace the spec's kwargs. With
    ``wrappers=True`` the spec's step limit and step timeout are applied."""
    env_spec = spec(id)
    kwargs = {**env_spec.kwargs, **overrides}
    max_steps = kwargs.pop("max_steps", env_spec.max_steps)
    step_seconds = kwargs.pop("step_seconds", env_spec.step_seconds)
    env = env_spec.load()(**kwargs)
    env.spec = env_spec
    env._make_kwargs = dict(overrides)
    if wrappers:
        if step_seconds:
            env = Timeout(env, step_seconds=step_seconds)
        if max_steps:
            env = MaxSteps(env, max_steps=max_steps)
    return env


def _ref(obj: Any) -> Any:
    """A JSON-friendly form of a constructor argument (callables by import path)."""
    if callable(obj) and hasattr(obj, "__module__") and hasattr(obj, "__qualname__"):
        return {"callable": f"{obj.__module__}:{obj.__qualname__}"}
    return obj


def _unref(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"callable"}:
        return _import_path(value["callable"])
    return value


def describe_stack(env: AgentEnv) -> dict[str, Any]:
    """{"env": {"id": ..., "kwargs": ...}, "wrappers": [innermost first]}."""
    wrappers = []
    current = env
    while isinstance(current, Wrapper):
        cls = type(current)
        wrappers.append(
            {
                "wrapper": f"{cls.__module__}:{cls.__qualname__}",
                "kwargs": {k: _ref(v) for k, v in current.constructor_args.items()},
            }
        )
        current = current.env
    env_spec = current.spec
    base = {
        "id": env_spec.id if env_spec else None,
        "kwargs": dict(getattr(current, "_make_kwargs", {}) or {}),
    }
    return {"env": base, "wrappers": list(reversed(wrappers))}


def rebuild_stack(description: dict[str, Any]) -> AgentEnv:
    """The env a :func:`describe_stack` description describes: made from its id without the
    spec's wrappers, then wrapped as described (innermost first)."""
    base = description["env"]
    if not base.get("id"):
        raise ValueError(
            "cannot rebuild: the innermost environment was not made from a registered id"
        )
    env = make(base["id"], wrappers=False, **base.get("kwargs", {}))
    for item in description.get("wrappers", []):
        module, _, name = item["wrapper"].partition(":")
        cls = getattr(importlib.import_module(module), name)
        env = cls(env, **{k: _unref(v) for k, v in item.get("kwargs", {}).items()})
    return env
