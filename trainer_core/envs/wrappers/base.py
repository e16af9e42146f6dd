"""The wrapper base: forwards everything to the wrapped env and records its constructor
arguments, so a stack can be described (``describe_stack``) and rebuilt (``rebuild_stack``)."""

from __future__ import annotations

import functools
import importlib
import inspect
from typing import Any

from trainer_core.envs.core import AgentEnv, TimeStep, ToolSpec


class Wrapper(AgentEnv):
    """Subclasses override ``reset`` / ``step`` and call ``self.env``."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        original = cls.__init__
        signature = inspect.signature(original)

        @functools.wraps(original)
        def init(self, *args: Any, **kw: Any) -> None:
            if "_ctor_args" not in self.__dict__:  # the outermost class records
                bound = signature.bind(self, *args, **kw)
                bound.apply_defaults()
                self._ctor_args = {
                    k: v for k, v in bound.arguments.items() if k not in ("self", "env")
                }
            original(self, *args, **kw)

        cls.__init__ = init

    def __init__(self, env: AgentEnv):
        # No AgentEnv.__init__: task and history live on the wrapped env.
        self.env = env

    # forwarded state
    @property
    def available_tools(self) -> list[ToolSpec]:
        return self.env.available_tools

    @property
    def domain(self) -> str:  # type: ignore[override]
        return self.env.domain

    @property
    def spec(self):  # type: ignore[override]
        return self.env.spec

    @property
    def task(self):
        return self.env.task

    @property
    def history(self):
        return self.env.history

    @property
    def unwrapped(self) -> AgentEnv:
        return self.env.unwrapped

    def reset(self, *, task=None, seed: int | None = None) -> TimeStep:
        return self.env.reset(task=task, seed=seed)

    def step(self, action: Any) -> TimeStep:
        return self.env.step(action)

    def close(self) -> None:
        self.env.close()

    def interrupt(self) -> None:
        self.env.interrupt()

    def _reset(self, *, task, seed):  # pragma: no cover - wrappers forward reset()
        raise NotImplementedError

    def _step(self, action):  # pragma: no cover - wrappers forward step()
        raise NotImplementedError

    @property
    def constructor_args(self) -> dict[str, Any]:
        return dict(getattr(self, "_ctor_args", {}))

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.constructor_args.items())
        return f"{type(self).__name__}({self.env!r}{', ' if args else ''}{args})"


def _ref(obj: Any) -> Any:
    """A JSON-friendly form of a constructor argument (callables by import path)."""
    if callable(obj) and hasattr(obj, "__module__") and hasattr(obj, "__qualname__"):
        return {"callable": f"{obj.__module__}:{obj.__qualname__}"}
    return obj


def _unref(value: Any) -> Any:
    if isinstance(value, dict) and set(value) == {"callable"}:
        module, _, name = value["callable"].partition(":")
        target: Any = importlib.import_module(module)
        for part in name.split("."):
            target = getattr(target, part)
        return target
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
    spec = current.spec
    base = {
        "id": spec.id if spec else None,
        "kwargs": dict(getattr(current, "_make_kwargs", {}) or {}),
    }
    return {"env": base, "wrappers": list(reversed(wrappers))}


def rebuild_stack(description: dict[str, Any]) -> AgentEnv:
    from trainer_core.envs.registry import make

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
