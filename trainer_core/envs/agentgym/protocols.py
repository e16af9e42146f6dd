"""The protocols of AgentGym's environment servers, one :class:`ServerSpec` row per environment,
taken from the servers' code (``agentenv-*/agentenv_*/server.py`` with its request models and
environment wrapper) and the official clients (``agentenv/agentenv/envs/*.py``) at commit
``3ef9235d23e68e7c2920c5422ad957dc8ced5c6c`` of ``WooooDyy/AgentGym``.

Two families of wire shapes:

- :class:`IdProtocol`: ``{"id": int}`` in every body and ``?id=`` in queries; failures come back
  as ``{"error": "..."}`` with status 200 (TextCraft, BabyAI, SciWorld, ALFWorld and LMRL-Gym's
  per-game routes ``/maze/*`` and ``/wordle/*``);
- :class:`EnvIdxProtocol`: ``/create`` answers a bare integer (or WebArena's
  ``{"env_idx": n}``) and every later body carries ``"env_idx"``; failures are exceptions the
  server does not catch, i.e. HTTP 500 (WebShop, SQLGym, SearchQA, the tool environments,
  WebArena).

Each reply is normalised into a :class:`Reply`: the observation text, the server's reward
number (``value``, divided by ``scale``), done, truncated, and an ``{"error"}`` refusal.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from trainer_core.envs.agentgym.transport import Answer, Transport
from trainer_core.errors import EnvironmentUnavailable

COMMIT = "3ef9235d23e68e7c2920c5422ad957dc8ced5c6c"


@dataclass(frozen=True)
class ServerSpec:
    """How one AgentGym environment server speaks (see the module docstring)."""

    name: str
    family: str  # "id" or "env_idx" (which Protocol class)
    source: str  # the server file whose routes this row follows
    checked: str  # the loopback server (tests/trainer_core/envs/<module>:<class>) it is tested on
    prefix: str = ""  # LMRL-Gym's per-game route prefix, e.g. "/maze"
    create_body: str = "none"  # "params": create_params; "item": {"id": item}; "none"
    item_field: str = "data_idx"  # the /reset field that names the item
    reset_defaults: Mapping[str, Any] = field(default_factory=dict)  # other /reset fields
    first: str = "reset"  # the first observation: "reset" answer, or "observe" (GET after)
    step_text: str = "observation"  # the /step field holding the observation ("state")
    value_field: str = "reward"  # the /step (and /reset) field holding the reward number
    scale: float = 1.0  # value / scale is the normalised reward (SciWorld scores 0..100)
    progress: bool = False  # the value is the episode's score so far, not this step's reward
    has_close: bool = False  # the server serves POST /close

    @property
    def reward_kind(self) -> str:
        return "progress" if self.progress else "step"


@dataclass(frozen=True)
class Reply:
    observation: str = ""
    value: float | None = None  # the server's reward number / scale, None when absent
    done: bool = False
    truncated: bool = False
    error: str | None = None  # the text of an {"error"} refusal of a step
    extra: Mapping[str, Any] = field(default_factory=dict)


def number(value: Any) -> float:
    if isinstance(value, bool):
        return float(value)
    try:
        return float(value or 0.0)
    except (TypeError, ValueError):
        return 0.0


def text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


class Protocol:
    """The common flow; subclasses say what the wire looks like."""

    id_field = "id"

    def __init__(
        self,
        spec: ServerSpec,
        transport: Transport,
        *,
        create_params: Mapping[str, Any] | None = None,
        reset_params: Mapping[str, Any] | None = None,
    ) -> None:
        self.spec = spec
        self.t = transport
        self.create_params = dict(create_params or {})
        self.reset_params = {**spec.reset_defaults, **(reset_params or {})}

    def route(self, path: str) -> str:
        return f"{self.spec.prefix}{path}"

    def post(self, path: str, body: Any = None) -> Answer:
        return self.t.call("POST", self.route(path), body=body)

    def object(self, answer: Answer, what: str, *, hint: str = "") -> Mapping[str, Any]:
        """A 200 JSON object; an ``{"error"}`` or anything else raises."""
        payload = self.t.ok(answer, hint=hint)
        if not isinstance(payload, Mapping):
            raise EnvironmentUnavailable(
                f"{what} on the AgentGym server {self.t.label!r} answered {payload!r}, not an "
                f"object; check env_name ({self.spec.name!r} servers answer an object there)"
            )
        if "error" in payload:
            raise EnvironmentUnavailable(
                f"{what} on the AgentGym server {self.t.label!r} failed: {payload['error']}{hint}"
            )
        return payload

    def value(self, payload: Mapping[str, Any]) -> float | None:
        if self.spec.value_field not in payload:
            return None
        return number(payload[self.spec.value_field]) / self.spec.scale

    def step_reply(self, payload: Mapping[str, Any]) -> Reply:
        extra = {k: payload[k] for k in ("score", "available_actions") if k in payload}
        return Reply(
            observation=text(payload.get(self.spec.step_text)),
            value=self.value(payload),
            done=bool(payload.get("done", False)),
            extra=extra,
        )

    def observe(self, env_id: Any) -> str:
        """``GET /observation?<id>=``: the server's current observation."""
        answer = self.t.call("GET", self.route("/observation"), params={self.id_field: env_id})
        payload = self.t.ok(answer)
        if isinstance(payload, Mapping):
            if "error" in payload:
                raise EnvironmentUnavailable(
                    f"GET {self.route('/observation')} on the AgentGym server "
                    f"{self.t.label!r} failed: {payload['error']}"
                )
            return text(payload.get("observation"))
        return text(payload)

    def close(self, env_id: Any) -> str | None:
        """``POST /close`` where the server has one; a warning to log, or None."""
        if not self.spec.has_close:
            return None
        try:
            answer = self.post("/close", {self.id_field: env_id})
        except EnvironmentUnavailable as exc:
            return str(exc)
        if answer.status != 200 or not answer.is_json:
            return f"POST /close answered HTTP {answer.status}: {answer.text!r}"
        payload = answer.payload
        if payload is True or (isinstance(payload, Mapping) and payload.get("closed") == "closed"):
            return None
        return f"POST /close answered {payload!r}"

    # for subclasses
    def create(self, data_idx: int | None) -> tuple[Any, Reply | None]:
        raise NotImplementedError

    def reset(self, env_id: Any, data_idx: int) -> Reply:
        raise NotImplementedError

    def step(self, env_id: Any, action: str) -> Reply:
        raise NotImplementedError


class IdProtocol(Protocol):
    """``{"id": int}`` bodies, ``{"error"}`` at status 200 (TextCraft, BabyAI, SciWorld,
    ALFWorld, LMRL-Gym)."""

    def create(self, data_idx: int | None) -> tuple[Any, Reply | None]:
        body = self.create_params if self.spec.create_body == "params" else None
        hint = (
            f" (create_params: {self.create_params!r}; check them against the server's "
            "/create fields)"
            if self.create_params
            else ""
        )
        payload = self.object(
            self.post("/create", body), f"POST {self.route('/create')}", hint=hint
        )
        if payload.get("id") is None:
            raise EnvironmentUnavailable(
                f"POST {self.route('/create')} on the AgentGym server {self.t.label!r} answered "
                f"without an id: {dict(payload)!r}"
            )
        first = None
        if "observation" in payload:  # TextCraft: the new environment is ready to play
            first = Reply(observation=text(payload["observation"]), value=self.value(payload))
        return payload["id"], first

    def reset(self, env_id: Any, data_idx: int) -> Reply:
        body = {self.id_field: env_id, self.spec.item_field: data_idx, **self.reset_params}
        what = f"POST {self.route('/reset')} ({self.spec.item_field} {data_idx})"
        payload = self.object(
            self.post("/reset", body),
            what,
            hint=f" ({self.spec.item_field} {data_idx}; check that the server has that item)",
        )
        observation = text(payload.get("observation"))
        if "task_description" in payload:  # SciWorld: the official client shows both
            observation = f"{text(payload['task_description'])}\n{observation}"
        actions = payload.get("available_actions")
        if isinstance(actions, list):  # ALFWorld: the official client's first observation
            observation += "\nAVAILABLE ACTIONS: " + ",".join(map(text, actions))
        extra = {k: payload[k] for k in ("available_actions", "task_type", "score") if k in payload}
        return Reply(observation=observation, value=self.value(payload), extra=extra)

    def step(self, env_id: Any, action: str) -> Reply:
        answer = self.post("/step", {self.id_field: env_id, "action": action})
        payload = self.t.ok(answer)
        if not isinstance(payload, Mapping):
            raise EnvironmentUnavailable(
                f"POST {self.route('/step')} on the AgentGym server {self.t.label!r} answered "
                f"{payload!r}, not an object with observation, reward and done"
            )
        if "error" in payload:
            return Reply(error=text(payload["error"]))
        return self.step_reply(payload)


class EnvIdxProtocol(Protocol):
    """A bare integer from ``/create``, ``"env_idx"`` in later bodies, HTTP 500 for failures
    (WebShop, SQLGym, SearchQA, the tool environments, WebArena)."""

    id_field = "env_idx"

    def create(self, data_idx: int | None) -> tuple[Any, Reply | None]:
        body = {"id": data_idx or 0} if self.spec.create_body == "item" else None
        payload = self.t.ok(self.post("/create", body))
        if isinstance(payload, Mapping) and "env_idx" in payload:  # WebArena (Quart)
            payload = payload["env_idx"]
        if isinstance(payload, bool) or not isinstance(payload, int):
            raise EnvironmentUnavailable(
                f"POST /create on the AgentGym server {self.t.label!r} answered {payload!r}, "
                f"not an environment index; check env_name ({self.spec.name!r})"
            )
        return payload, None

    def reset(self, env_id: Any, data_idx: int) -> Reply:
        body = {self.id_field: env_id, **self.reset_params, self.spec.item_field: data_idx}
        answer = self.post("/reset", body)
        payload = self.t.ok(
            answer, hint=f" ({self.spec.item_field} {data_idx}; is that item on the server?)"
        )
        observation = payload if isinstance(payload, str) else None
        if isinstance(payload, Mapping):  # WebArena: {observation, sites, object}
            observation = text(payload.get("observation"))
            if observation == "TimeoutError":  # how WebArena's /reset reports any failure
                raise EnvironmentUnavailable(
                    f"POST /reset on the AgentGym server {self.t.label!r} failed for "
                    f"{self.spec.item_field} {data_idx} (it answered 'TimeoutError'); check "
                    "the server's log, its config_files and its login cookies"
                )
        if self.spec.first == "observe" or observation is None:
            observation = self.observe(env_id)
        return Reply(observation=observation)

    def step(self, env_id: Any, action: str) -> Reply:
        payload = self.t.ok(self.post("/step", {self.id_field: env_id, "action": action}))
        if not isinstance(payload, Mapping):
            raise EnvironmentUnavailable(
                f"POST /step on the AgentGym server {self.t.label!r} answered {payload!r}, not "
                "an object"
            )
        if "error" in payload:
            return Reply(error=text(payload["error"]))
        if "terminated" in payload:  # WebArena: gymnasium's five fields
            terminated = bool(payload.get("terminated"))
            # the official client counts the reward only when the episode terminates
            value = self.value(payload) if terminated else 0.0
            return Reply(
                observation=text(payload.get("observation")),
                value=value,
                done=terminated,
                truncated=bool(payload.get("truncated")) and not terminated,
            )
        return self.step_reply(payload)


def _tool(name: str) -> ServerSpec:
    return ServerSpec(
        name,
        "env_idx",
        f"agentenv-tool/agentenv_{name}/{name}_server.py",
        "agentgym_envidx_servers:ToolServer",
        create_body="item",
        item_field="id",
        progress=True,
    )


SPECS: dict[str, ServerSpec] = {
    s.name: s
    for s in [
        ServerSpec(
            "textcraft",
            "id",
            "agentenv-textcraft/agentenv_textcraft/server.py",
            "agentgym_server:AgentGymServer",
            create_body="params",
            has_close=True,
        ),
        ServerSpec(
            "babyai",
            "id",
            "agentenv-babyai/agentenv_babyai/server.py",
            "agentgym_id_servers:BabyAIServer",
            progress=True,
            has_close=True,
        ),
        ServerSpec(
            "sciworld",
            "id",
            "agentenv-sciworld/agentenv_sciworld/server.py",
            "agentgym_id_servers:SciWorldServer",
            value_field="score",
            scale=100.0,
            progress=True,
            has_close=True,
        ),
        ServerSpec(
            "alfworld",
            "id",
            "agentenv-alfworld/agentenv_alfworld/server.py",
            "agentgym_id_servers:ALFWorldServer",
            item_field="game",
            reset_defaults={"world_type": "Text"},
        ),
        ServerSpec(
            "maze",
            "id",
            "agentenv-lmrlgym/agentenv_lmrlgym/server.py",
            "agentgym_id_servers:LmrlGymServer",
            prefix="/maze",
            item_field="game",
        ),
        ServerSpec(
            "wordle",
            "id",
            "agentenv-lmrlgym/agentenv_lmrlgym/server.py",
            "agentgym_id_servers:LmrlGymServer",
            prefix="/wordle",
            item_field="seed",
        ),
        ServerSpec(
            "webshop",
            "env_idx",
            "agentenv-webshop/agentenv_webshop/server.py",
            "agentgym_envidx_servers:WebShopServer",
            item_field="session_id",
            first="observe",
            step_text="state",
        ),
        ServerSpec(
            "sqlgym",
            "env_idx",
            "agentenv-sqlgym/agentenv_sqlgym/server.py",
            "agentgym_envidx_servers:SqlGymServer",
            item_field="item_id",
            first="observe",
            step_text="state",
        ),
        ServerSpec(
            "searchqa",
            "env_idx",
            "agentenv-searchqa/agentenv_searchqa/server.py",
            "agentgym_envidx_servers:SearchQAServer",
            create_body="item",
            item_field="id",
            has_close=True,
        ),
        *[_tool(name) for name in ("weather", "movie", "academia", "todo", "sheet")],
        ServerSpec(
            "webarena",
            "env_idx",
            "agentenv-webarena/agentenv_webarena/server.py",
            "agentgym_envidx_servers:WebArenaServer",
            item_field="idx",
            reset_defaults={"seed": 0},
            first="observe",
            has_close=True,
        ),
    ]
}
ALIASES = {
    "scienceworld": "sciworld",
    "lmrlgym.maze": "maze",
    "lmrlgym.wordle": "wordle",
    "lmrl-gym.maze": "maze",
    "lmrl-gym.wordle": "wordle",
    "sql": "sqlgym",
}
FAMILIES: dict[str, type[Protocol]] = {"id": IdProtocol, "env_idx": EnvIdxProtocol}
