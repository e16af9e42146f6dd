"""``AgentGymEnv``: one AgentGym environment server as an :class:`AgentEnv` (see the package
docstring for the protocols, the reward mapping and how each was checked)."""

from __future__ import annotations

import difflib
import logging
from collections.abc import Mapping
from typing import Any

from trainer_core.envs.agentgym.protocols import (
    ALIASES,
    FAMILIES,
    SPECS,
    Protocol,
    Reply,
    ServerSpec,
)
from trainer_core.envs.agentgym.transport import MAX_ANSWER_BYTES, Transport
from trainer_core.envs.core import Action, AgentEnv, TimeStep
from trainer_core.errors import ConfigError
from trainer_core.tasks.model import Task, ToolSpec

log = logging.getLogger("trainer_core.envs.agentgym")

ACT_TOOL = ToolSpec(
    name="act",
    description=(
        "Send one action to the environment as text, in its own command language "
        "(the first observation says which commands it understands)."
    ),
    parameters={
        "type": "object",
        "properties": {
            "action": {"type": "string", "description": "The action, e.g. 'inventory'."}
        },
        "required": ["action"],
    },
    category="execute",
)
DATA_IDX_SOURCES = ("task", "seed")
MAX_OBSERVATION_CHARS = 32_000


def server_spec(env_name: str | None) -> ServerSpec:
    """The protocol row for an env name (``webshop``, ``agentgym/webshop``, ``WebShop``...);
    None means ``textcraft``. An unknown name raises ConfigError listing the supported ones."""
    if env_name is None:
        return SPECS["textcraft"]
    if not isinstance(env_name, str):
        raise ConfigError(f"env_name must be a string, not {env_name!r}")
    key = env_name.strip().lower().removeprefix("agentgym/").removeprefix("agentgym-")
    key = ALIASES.get(key, key)
    if key in SPECS:
        return SPECS[key]
    close = difflib.get_close_matches(key, list(SPECS), n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    raise ConfigError(
        f"env_name {env_name!r} is not an AgentGym environment Steplab speaks to.{hint} "
        f"Supported: {', '.join(SPECS)}."
    )


def _cap(value: str, limit: int) -> str:
    if len(value) <= limit:
        return value
    return f"{value[:limit]}\n… [{len(value) - limit} more characters cut]"


class AgentGymEnv(AgentEnv):
    """An AgentGym environment server as an environment (see the package docstring).

    base_url: the server, e.g. ``http://127.0.0.1:36001``.
    env_name: which AgentGym environment the server is (``textcraft``, ``webshop``,
        ``alfworld``, ...; ``agentgym/<name>`` works too); it picks the protocol. Default
        ``textcraft``.
    create_params: the JSON body of TextCraft's ``POST /create`` (``commands``, ``goal``).
    reset_params: more fields for ``POST /reset`` (ALFWorld's ``world_type``, default
        ``"Text"``; WebArena's ``seed``, default 0).
    timeout: seconds for each HTTP request.
    data_idx_from: ``"task"`` or ``"seed"``: where an episode's item number comes from.
    domain: the domain tasks of this env belong to.
    max_observation_chars: longer observations are cut to this many characters (with a note).
    max_answer_bytes: a server answer larger than this is EnvironmentUnavailable.
    """

    def __init__(
        self,
        base_url: str,
        *,
        env_name: str | None = None,
        create_params: Mapping[str, Any] | None = None,
        reset_params: Mapping[str, Any] | None = None,
        timeout: float = 30.0,
        data_idx_from: str = "task",
        domain: str = "generic",
        max_observation_chars: int = MAX_OBSERVATION_CHARS,
        max_answer_bytes: int = MAX_ANSWER_BYTES,
    ) -> None:
        super().__init__()
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"base_url must be the AgentGym server's http(s) URL, e.g. "
                f"'http://127.0.0.1:36001', not {base_url!r}"
            )
        self.server = server_spec(env_name)
        if data_idx_from not in DATA_IDX_SOURCES:
            raise ConfigError(
                f"data_idx_from must be one of {', '.join(DATA_IDX_SOURCES)}, not {data_idx_from!r}"
            )
        if not timeout or timeout <= 0:
            raise ConfigError(f"timeout must be a positive number of seconds, not {timeout!r}")
        for name, value in (("create_params", create_params), ("reset_params", reset_params)):
            if value is not None and not isinstance(value, Mapping):
                raise ConfigError(f"{name} must be an object (JSON fields of the request)")
        if create_params and self.server.create_body != "params":
            raise ConfigError(
                f"create_params are for TextCraft's POST /create; the {self.server.name} "
                "server's /create takes none"
            )
        for name, value in (
            ("max_observation_chars", max_observation_chars),
            ("max_answer_bytes", max_answer_bytes),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive whole number, not {value!r}")
        self.base_url = base_url.rstrip("/")
        self.env_name = self.server.name
        self.create_params = dict(create_params or {})
        self.timeout = float(timeout)
        self.data_idx_from = data_idx_from
        self.domain = domain
        self.max_observation_chars = max_observation_chars
        self.transport = Transport(
            self.base_url, label=self.env_name, timeout=self.timeout, max_bytes=max_answer_bytes
        )
        self.protocol: Protocol = FAMILIES[self.server.family](
            self.server, self.transport, create_params=create_params, reset_params=reset_params
        )
        self.env_id: Any = None  # the server's id of our environment, after the first reset
        self.data_idx: int | None = None
        self.score = 0.0  # AgentGym's score of the episode so far (the last reward it gave)

    @property
    def available_tools(self) -> list[ToolSpec]:
        return [ACT_TOOL]

    def _choose_data_idx(self, task: Task | None, seed: int | None) -> int | None:
        if self.data_idx_from == "task" and task is not None:
            value = task.metadata.get("data_idx") if task.metadata else None
            if value is not None:
                problem = ConfigError(
                    f"task {task.id or task.prompt[:40]!r}: metadata.data_idx must be a whole "
                    f"number, not {value!r}"
                )
                if isinstance(value, bool) or not isinstance(value, int | str):
                    raise problem
                try:
                    return int(value)
                except ValueError:
                    raise problem from None
            if task.id.strip().isdigit():
                return int(task.id)
        return seed

    def _reset(self, *, task: Task | None, seed: int | None) -> TimeStep:
        data_idx = self._choose_data_idx(task, seed)
        if self.env_id is None:
            self.env_id, first = self.protocol.create(data_idx)
            if first is not None and data_idx is None:
                # TextCraft: the environment as /create left it (its own default item)
                self.data_idx = None
                return self._first(first)
        self.data_idx = 0 if data_idx is None else data_idx
        return self._first(self.protocol.reset(self.env_id, self.data_idx))

    def _first(self, reply: Reply) -> TimeStep:
        self.score = reply.value or 0.0
        observation = reply.observation
        if not observation:
            observation = self.protocol.observe(self.env_id)
        info = {"agentgym_id": self.env_id, "data_idx": self.data_idx, "env_name": self.env_name}
        info.update(reply.extra)
        return TimeStep(observation=_cap(observation, self.max_observation_chars), info=info)

    def _invalid(self, params: Mapping[str, Any]) -> TimeStep | None:
        text = params.get("action")
        unknown = sorted(set(params) - {"action"})
        if isinstance(text, str) and not unknown:
            return None
        problem = (
            f"unknown {', '.join(map(repr, unknown))}"
            if unknown
            else "'action' must be a string"
            if "action" in params
            else "missing 'action'"
        )
        return TimeStep(
            observation=f"Invalid parameters for act: {problem} (expected: action: string).",
            info={"tool": "act", "error": "invalid_params"},
        )

    def _step(self, action: Action) -> TimeStep:
        if action.tool != ACT_TOOL.name:
            return self.unknown_tool(action.tool)
        invalid = self._invalid(action.params)
        if invalid is not None:
            return invalid
        if self.env_id is None:
            raise ConfigError("reset() the AgentGym environment before step()")
        reply = self.protocol.step(self.env_id, action.params["action"])
        if reply.error is not None:
            return TimeStep(
                observation=_cap(
                    f"The environment could not take the action: {reply.error}",
                    self.max_observation_chars,
                ),
                info={"tool": "act", "error": "env_error"},
            )
        value = reply.value or 0.0
        reward = value - self.score if self.server.progress else value
        self.score = value
        observation = _cap(reply.observation, self.max_observation_chars)
        info: dict[str, Any] = {"tool": "act", "server_reward": value, **reply.extra}
        if reply.done or reply.truncated:
            info["outcome"] = self._outcome(observation)
        return TimeStep(
            observation=observation,
            reward=reward,
            terminated=reply.done,
            truncated=reply.truncated,
            info=info,
        )

    def _outcome(self, observation: str) -> dict[str, Any]:
        from trainer_core.envs.toolenv import _outcome_dict
        from trainer_core.tasks.checkers import Outcome, check_outcome

        task = self.task
        if task is not None and (task.checker or task.expected_answer is not None):
            outcome = check_outcome(task, final_text=observation)
        else:
            outcome = Outcome(
                success=self.score >= 1.0,
                score=min(max(self.score, 0.0), 1.0),
                detail=f"AgentGym's score of the episode was {self.score:g} (the last reward "
                "the server gave; success means at least 1)",
            )
        return _outcome_dict(outcome)

    def current_observation(self) -> str:
        """``GET /observation``: the server's current observation of our environment."""
        if self.env_id is None:
            raise ConfigError("reset() the AgentGym environment before asking for its observation")
        return _cap(self.protocol.observe(self.env_id), self.max_observation_chars)

    def close(self) -> None:
        if self.env_id is not None:
            warning = self.protocol.close(self.env_id)
            if warning:
                log.warning("AgentGym %s: closing id %s: %s", self.env_name, self.env_id, warning)
        self.transport.close()
        self.env_id = None
        super().close()
