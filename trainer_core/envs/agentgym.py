"""``steplab/agentgym``: a client for AgentGym's HTTP environment servers (TextCraft, BabyAI,
WebShop, ...), one server per environment::

    env = make("steplab/agentgym", base_url="http://127.0.0.1:36001", env_name="textcraft")
    ts = env.reset(task={"prompt": "TextCraft #3", "metadata": {"data_idx": 3}})
    ts = env.step({"tool": "act", "params": {"action": "inventory"}})

The protocol (AgentGym's ``agentenv-*/server.py`` and ``model.py``):

- ``POST /create`` with the environment's optional fields (``create_params``, e.g. TextCraft's
  ``commands`` and ``goal``) → ``{id, observation, reward, done}``;
- ``POST /step {id, action}`` (the action is text) → ``{observation, reward, done}``;
- ``POST /reset {id, data_idx}`` → ``{id, observation, reward, done}``;
- ``GET /observation?id=`` → the current observation;
- ``POST /close {id}``;
- a failure comes back as ``{"error": "..."}`` with status 200.

Episodes. The first ``reset`` creates the server-side environment and keeps its id; later
``reset`` calls reuse it with ``POST /reset``. Which item of the server's data an episode plays
(``data_idx``), with ``data_idx_from="task"`` (the default): ``task.metadata["data_idx"]``, else
the task id when it is a whole number, else the ``seed`` given to ``reset``; with
``data_idx_from="seed"``: the seed. On the first episode with no data_idx the environment is
played as ``/create`` left it (AgentGym servers start at their own default item); a later episode
with no data_idx plays item 0, the servers' default. The first observation is the server's
(it states the goal); the task's prompt is not shown.

Actions. One tool, ``act``, with a text ``action`` (AgentGym actions are text commands in the
environment's own language). The server's reward is each step's reward. ``done`` ends the
episode (``terminated``) with ``info["outcome"]``: when the task has a checker (``checker`` or an
``expected_answer``) the final observation is checked with it; otherwise success iff the server's
reward is at least 1 (``score`` is the reward clipped to 0..1).

Errors. ``{"error": ...}`` from ``/step`` is an observation (``info["error"] = "env_error"``,
the episode goes on): the action was refused. From ``/create`` or ``/reset`` it is
:class:`~trainer_core.errors.EnvironmentUnavailable`, as are a refused connection, a timeout,
a status other than 200 and a body that is not JSON. ``close()`` sends ``POST /close`` and never
raises (a server without ``/close`` or one already gone is logged).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from trainer_core.envs.core import Action, AgentEnv, TimeStep
from trainer_core.errors import ConfigError, EnvironmentUnavailable
from trainer_core.tasks.model import Task, ToolSpec

__all__ = ["ACT_TOOL", "AgentGymEnv"]

log = logging.getLogger(__name__)

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


class AgentGymEnv(AgentEnv):
    """An AgentGym environment server as an environment (see the module docstring).

    base_url: the server, e.g. ``http://127.0.0.1:36001``.
    env_name: a label for messages and ``info`` (e.g. ``textcraft``); defaults to the URL.
    create_params: the JSON body of ``POST /create`` (the environment's optional fields).
    timeout: seconds for each HTTP request.
    data_idx_from: ``"task"`` or ``"seed"``: where an episode's ``data_idx`` comes from.
    domain: the domain tasks of this env belong to.
    """

    def __init__(
        self,
        base_url: str,
        *,
        env_name: str | None = None,
        create_params: Mapping[str, Any] | None = None,
        timeout: float = 30.0,
        data_idx_from: str = "task",
        domain: str = "generic",
    ) -> None:
        super().__init__()
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ConfigError(
                f"base_url must be the AgentGym server's http(s) URL, e.g. "
                f"'http://127.0.0.1:36001', not {base_url!r}"
            )
        if data_idx_from not in DATA_IDX_SOURCES:
            raise ConfigError(
                f"data_idx_from must be one of {', '.join(DATA_IDX_SOURCES)}, not {data_idx_from!r}"
            )
        if not timeout or timeout <= 0:
            raise ConfigError(f"timeout must be a positive number of seconds, not {timeout!r}")
        if create_params is not None and not isinstance(create_params, Mapping):
            raise ConfigError("create_params must be an object (the JSON body of POST /create)")
        self.base_url = base_url.rstrip("/")
        self.env_name = env_name or self.base_url
        self.create_params = dict(create_params or {})
        self.timeout = float(timeout)
        self.data_idx_from = data_idx_from
        self.domain = domain
        self.env_id: Any = None  # the server's id of our environment, after the first reset
        self.data_idx: int | None = None
        self._client: Any = None

    # --- HTTP ----------------------------------------------------------------------------------

    def _http(self) -> Any:
        if self._client is None:
            import httpx2

            self._client = httpx2.Client(base_url=self.base_url, timeout=self.timeout)
        return self._client

    def _request(self, method: str, path: str, *, body: Any = None, params: Any = None) -> Any:
        import httpx2

        url = f"{self.base_url}{path}"
        try:
            response = self._http().request(method, path, json=body, params=params)
        except httpx2.ConnectError as exc:
            raise EnvironmentUnavailable(
                f"cannot reach the AgentGym server {self.env_name!r} at {url} ({exc}); start it "
                "(e.g. `textcraft --host 127.0.0.1 --port 36001`) or fix base_url"
            ) from None
        except httpx2.TimeoutException:
            raise EnvironmentUnavailable(
                f"the AgentGym server {self.env_name!r} did not answer {method} {url} within "
                f"{self.timeout:g}s; check that it is not stuck, or raise timeout"
            ) from None
        except httpx2.HTTPError as exc:
            raise EnvironmentUnavailable(
                f"{method} {url} failed: {type(exc).__name__}: {exc}; check the AgentGym server"
            ) from None
        if response.status_code != 200:
            raise EnvironmentUnavailable(
                f"{method} {url} answered HTTP {response.status_code}: {response.text[:300]!r}; "
                "check that base_url points at an AgentGym environment server (it serves "
                "/create, /step, /reset, /observation)"
            )
        try:
            return response.json()
        except ValueError:
            raise EnvironmentUnavailable(
                f"{method} {url} answered with a body that is not JSON: {response.text[:300]!r}; "
                "check that base_url points at an AgentGym environment server"
            ) from None

    def _checked(self, what: str, payload: Any) -> Mapping[str, Any]:
        """The payload of /create or /reset; an ``{"error"}`` or a malformed one raises."""
        if not isinstance(payload, Mapping):
            raise EnvironmentUnavailable(
                f"{what} on the AgentGym server {self.env_name!r} answered {payload!r}, not an "
                "object with observation, reward and done"
            )
        if "error" in payload:
            raise EnvironmentUnavailable(
                f"{what} on the AgentGym server {self.env_name!r} failed: {payload['error']}"
                f"{self._create_hint(what)}"
            )
        return payload

    def _create_hint(self, what: str) -> str:
        if what.startswith("POST /create"):
            return f" (create_params: {self.create_params!r}; check them against the server's /create fields)"
        return f" (data_idx {self.data_idx}; check that the server has that item)"

    # --- the protocol --------------------------------------------------------------------------

    @property
    def available_tools(self) -> list[ToolSpec]:
        return [ACT_TOOL]

    def _choose_data_idx(self, task: Task | None, seed: int | None) -> int | None:
        if self.data_idx_from == "task" and task is not None:
            value = task.metadata.get("data_idx") if task.metadata else None
            if value is not None:
                if isinstance(value, bool) or not isinstance(value, int | str):
                    raise ConfigError(
                        f"task {task.id or task.prompt[:40]!r}: metadata.data_idx must be a whole "
                        f"number, not {value!r}"
                    )
                try:
                    return int(value)
                except ValueError:
                    raise ConfigError(
                        f"task {task.id or task.prompt[:40]!r}: metadata.data_idx must be a whole "
                        f"number, not {value!r}"
                    ) from None
            if task.id.strip().isdigit():
                return int(task.id)
        return seed

    def _reset(self, *, task: Task | None, seed: int | None) -> TimeStep:
        data_idx = self._choose_data_idx(task, seed)
        if self.env_id is None:
            payload = self._checked(
                "POST /create", self._request("POST", "/create", body=self.create_params)
            )
            if payload.get("id") is None:
                raise EnvironmentUnavailable(
                    f"POST /create on the AgentGym server {self.env_name!r} answered without an "
                    f"id: {dict(payload)!r}"
                )
            self.env_id = payload["id"]
            if data_idx is None:
                self.data_idx = None
                return self._first(payload)
        self.data_idx = 0 if data_idx is None else data_idx
        payload = self._checked(
            f"POST /reset (data_idx {self.data_idx})",
            self._request("POST", "/reset", body={"id": self.env_id, "data_idx": self.data_idx}),
        )
        return self._first(payload)

    def _first(self, payload: Mapping[str, Any]) -> TimeStep:
        observation = payload.get("observation")
        if observation is None:
            observation = self.current_observation()
        return TimeStep(
            observation=_text(observation),
            info={"agentgym_id": self.env_id, "data_idx": self.data_idx, "env_name": self.env_name},
        )

    def _step(self, action: Action) -> TimeStep:
        if action.tool != ACT_TOOL.name:
            return self.unknown_tool(action.tool)
        params = dict(action.params)
        text = params.get("action")
        unknown = sorted(set(params) - {"action"})
        if not isinstance(text, str) or unknown:
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
        if self.env_id is None:
            raise ConfigError("reset() the AgentGym environment before step()")
        payload = self._request("POST", "/step", body={"id": self.env_id, "action": text})
        if not isinstance(payload, Mapping):
            raise EnvironmentUnavailable(
                f"POST /step on the AgentGym server {self.env_name!r} answered {payload!r}, not "
                "an object with observation, reward and done"
            )
        if "error" in payload:
            return TimeStep(
                observation=f"The environment could not take the action: {payload['error']}",
                info={"tool": "act", "error": "env_error"},
            )
        observation = _text(payload.get("observation"))
        reward = _number(payload.get("reward"))
        done = bool(payload.get("done", False))
        info: dict[str, Any] = {"tool": "act", "server_reward": reward}
        if done:
            info["outcome"] = self._outcome(observation, reward)
        return TimeStep(observation=observation, reward=reward, terminated=done, info=info)

    def _outcome(self, observation: str, reward: float) -> dict[str, Any]:
        from trainer_core.envs.toolenv import _outcome_dict
        from trainer_core.tasks.checkers import Outcome, check_outcome

        task = self.task
        if task is not None and (task.checker or task.expected_answer is not None):
            outcome = check_outcome(task, final_text=observation)
        else:
            outcome = Outcome(
                success=reward >= 1.0,
                score=min(max(reward, 0.0), 1.0),
                detail=f"the server's reward was {reward:g} (success means at least 1)",
            )
        return _outcome_dict(outcome)

    def current_observation(self) -> str:
        """``GET /observation?id=``: the server's current observation of our environment."""
        if self.env_id is None:
            raise ConfigError("reset() the AgentGym environment before asking for its observation")
        payload = self._request("GET", "/observation", params={"id": self.env_id})
        if isinstance(payload, Mapping):
            if "error" in payload:
                raise EnvironmentUnavailable(
                    f"GET /observation on the AgentGym server {self.env_name!r} failed: "
                    f"{payload['error']}"
                )
            if "observation" in payload:
                return _text(payload["observation"])
        return _text(payload)

    def close(self) -> None:
        if self._client is not None:
            if self.env_id is not None:
                try:
                    payload = self._request("POST", "/close", body={"id": self.env_id})
                    if isinstance(payload, Mapping) and "error" in payload:
                        log.warning(
                            "AgentGym %s: POST /close for id %s: %s",
                            self.env_name,
                            self.env_id,
                            payload["error"],
                        )
                except EnvironmentUnavailable as exc:
                    log.warning("AgentGym %s: closing id %s: %s", self.env_name, self.env_id, exc)
            self._client.close()
            self._client = None
        self.env_id = None
        super().close()


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _number(value: Any) -> float:
    if isinstance(value, bool):
        return float(value)
    try:
        return float(value or 0.0)
    except (TypeError, ValueError):
        return 0.0
