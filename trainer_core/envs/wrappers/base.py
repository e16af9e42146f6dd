"""The wrapper base: forwards everything to the wrapped env and records its constructor
arguments, so a stack can be described and rebuilt (``describe_stack`` / ``rebuild_stack`` in
:mod:`trainer_core.envs.registry`, which owns the ids a stack is rebuilt from)."""

from __future__ import annotations

import functools
import inspect
from typing import Any

from trainer_core.envs.core import AgentEnv, TimeStep
from trainer_core.tasks.model import ToolSpec


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
