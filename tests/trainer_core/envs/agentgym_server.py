"""A loopback server speaking AgentGym's environment-server protocol (as in
``agentenv-textcraft/agentenv_textcraft/server.py`` and ``model.py``), with a tiny deterministic
crafting game in TextCraft's command language, for the steplab/agentgym tests::

    with AgentGymServer() as server:          # http://127.0.0.1:<free port>
        server.url, server.requests            # every request: (method, path, body or query)

Endpoints and fields, exactly:
- ``POST /create`` ``{commands?: str, goal?: str}`` → ``{id, observation, reward, done}``; like
  TextCraft, the new environment starts on item ``data_idx = id`` (modulo the item count here),
  or on the item whose goal is ``goal``;
- ``POST /step`` ``{id: int, action: str}`` → ``{observation, reward, done}``;
- ``POST /reset`` ``{id: int, data_idx: int = 0}`` → ``{id, observation, reward, done}``;
- ``GET /observation?id=`` → the current observation (a JSON string);
- ``POST /close`` ``{id: int}`` → ``{"closed": id}``;
- failures: ``{"error": "..."}`` with status 200; a body that misses a required field or has
  one of the wrong type: 422 with ``{"detail": ...}`` (FastAPI's validation answer).

The game: ``get N ITEM`` takes a base item, ``inventory`` lists what you carry,
``craft N TARGET using K A, M B`` follows a recipe; crafting the goal gives reward 1 and ends
the episode; 20 steps without it end it with reward 0.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

# data_idx -> the goal, the recipes shown (target, count made, ingredients), the base items
GAMES: list[dict[str, Any]] = [
    {
        "goal": "stick",
        "recipes": [("stick", 4, {"oak planks": 2})],
        "base": {"oak planks"},
    },
    {
        "goal": "torch",
        "recipes": [("stick", 4, {"oak planks": 2}), ("torch", 4, {"stick": 1, "coal": 1})],
        "base": {"oak planks", "coal"},
    },
    {
        "goal": "oak planks",
        "recipes": [("oak planks", 4, {"oak log": 1})],
        "base": {"oak log"},
    },
]
MAX_STEPS = 20
_GET = re.compile(r"^get (\d+) (.+)$")
_CRAFT = re.compile(r"^craft (\d+) (.+?) using (.+)$")
_PART = re.compile(r"^(\d+) (.+)$")


class Game:
    def __init__(self, data_idx: int):
        spec = GAMES[data_idx]
        self.data_idx = data_idx
        self.goal: str = spec["goal"]
        self.recipes = {
            target: (made, ingredients) for target, made, ingredients in spec["recipes"]
        }
        self.base: set[str] = set(spec["base"])
        self.inventory: dict[str, int] = {}
        self.steps = 0
        self.done = False
        lines = [
            f"craft {made} {target} using "
            + ", ".join(f"{n} {name}" for name, n in ingredients.items())
            for target, made, ingredients in spec["recipes"]
        ]
        self.observation = (
            "Crafting commands:\n" + "\n".join(lines) + f"\n\nGoal: craft {self.goal}."
        )

    def step(self, action: str) -> tuple[str, float, bool]:
        self.steps += 1
        action = action.strip().lower()
        reward = 0.0
        if action == "inventory":
            held = ", ".join(f"[{name}] ({n})" for name, n in sorted(self.inventory.items()) if n)
            observation = (
                f"Inventory: {held}" if held else "Inventory: You are not carrying anything."
            )
        elif m := _GET.match(action):
            count, item = int(m.group(1)), m.group(2)
            if item in self.base:
                self.inventory[item] = self.inventory.get(item, 0) + count
                observation = f"Got {count} {item}"
            else:
                observation = f"Could not find {item}"
        elif m := _CRAFT.match(action):
            observation, reward = self._craft(int(m.group(1)), m.group(2), m.group(3))
        else:
            observation = f"Could not execute {action}"
        if reward >= 1 or self.steps >= MAX_STEPS:
            self.done = True
        self.observation = observation
        return observation, reward, self.done

    def _craft(self, count: int, target: str, using: str) -> tuple[str, float]:
        if target not in self.recipes:
            return f"Could not find a valid recipe for {target}", 0.0
        made, ingredients = self.recipes[target]
        given: dict[str, int] = {}
        for part in using.split(","):
            m = _PART.match(part.strip())
            if not m:
                return f"Could not execute craft {count} {target} using {using}", 0.0
            given[m.group(2)] = int(m.group(1))
        if count % made or set(given) != set(ingredients):
            return f"Could not find a valid recipe for {count} {target}", 0.0
        batches = count // made
        if any(given[name] != n * batches for name, n in ingredients.items()):
            return f"Could not find a valid recipe for {count} {target}", 0.0
        if any(self.inventory.get(name, 0) < n for name, n in given.items()):
            return f"Could not find enough items to craft minecraft:{target}", 0.0
        for name, n in given.items():
            self.inventory[name] -= n
        self.inventory[target] = self.inventory.get(target, 0) + count
        return f"Crafted {count} minecraft:{target}", 1.0 if target == self.goal else 0.0


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.games: dict[int, Game] = {}
        self.deleted: set[int] = set()
        self.next_id = 0
        self.requests: list[tuple[str, str, Any]] = []

    def game(self, env_id: int) -> Game:
        if env_id in self.deleted:
            raise ValueError(f"The task with environment {env_id} has been deleted.")
        if env_id not in self.games:
            raise ValueError(f"The id {env_id} is not valid.")
        return self.games[env_id]


# (field, type, required) per endpoint: FastAPI answers 422 when a body does not fit.
_BODIES: dict[str, list[tuple[str, type, bool]]] = {
    "/create": [("commands", str, False), ("goal", str, False)],
    "/step": [("id", int, True), ("action", str, True)],
    "/reset": [("id", int, True), ("data_idx", int, False)],
    "/close": [("id", int, True)],
}


def _invalid(path: str, body: Any) -> list[dict[str, Any]]:
    if not isinstance(body, dict):
        return [{"loc": ["body"], "msg": "Input should be a valid dictionary", "type": "dict_type"}]
    problems = []
    for name, kind, required in _BODIES[path]:
        value = body.get(name)
        if value is None:
            if required:
                problems.append({"loc": ["body", name], "msg": "Field required", "type": "missing"})
        elif not isinstance(value, kind) or isinstance(value, bool):
            problems.append({"loc": ["body", name], "msg": f"Input should be {kind.__name__}"})
    return problems


class _Handler(BaseHTTPRequestHandler):
    state: _State  # set on the subclass made per server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        with self.state.lock:
            self.state.requests.append(("GET", parts.path, {k: v[0] for k, v in query.items()}))
            if parts.path == "/":
                return self._send(200, "This is environment TextCraft (Steplab test server).")
            if parts.path != "/observation":
                return self._send(404, {"detail": "Not Found"})
            raw = query.get("id", [""])[0]
            if not raw.lstrip("-").isdigit():
                return self._send(422, {"detail": [{"loc": ["query", "id"], "msg": "int"}]})
            try:
                return self._send(200, self.state.game(int(raw)).observation)
            except ValueError as exc:
                return self._send(200, {"error": str(exc)})

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        path = urlsplit(self.path).path
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"null")
        except ValueError:
            return self._send(422, {"detail": [{"loc": ["body"], "msg": "JSON decode error"}]})
        with self.state.lock:
            self.state.requests.append(("POST", path, body))
            if path not in _BODIES:
                return self._send(404, {"detail": "Not Found"})
            problems = _invalid(path, body)
            if problems:
                return self._send(422, {"detail": problems})
            try:
                return self._send(200, getattr(self, "_" + path.strip("/"))(body))
            except ValueError as exc:  # AgentGym's wrappers: every failure is {"error"} at 200
                return self._send(200, {"error": str(exc)})

    def _create(self, body: dict[str, Any]) -> dict[str, Any]:
        env_id = self.state.next_id
        goal = body.get("goal")
        if goal is not None:
            matches = [i for i, spec in enumerate(GAMES) if spec["goal"] == goal]
            if not matches:
                raise ValueError(f"no recipe reaches the goal {goal!r}")
            data_idx = matches[0]
        else:
            data_idx = env_id % len(GAMES)
        game = Game(data_idx)
        self.state.games[env_id] = game
        self.state.next_id += 1
        return {"id": env_id, "observation": game.observation, "reward": 0, "done": False}

    def _step(self, body: dict[str, Any]) -> dict[str, Any]:
        game = self.state.game(body["id"])
        observation, reward, done = game.step(body["action"])
        return {"observation": observation, "reward": reward, "done": done}

    def _reset(self, body: dict[str, Any]) -> dict[str, Any]:
        env_id = body["id"]
        self.state.game(env_id)
        data_idx = body.get("data_idx") or 0
        if not 0 <= data_idx < len(GAMES):
            raise ValueError(f"data_idx {data_idx} is out of range (0..{len(GAMES) - 1})")
        game = Game(data_idx)
        self.state.games[env_id] = game
        return {"id": env_id, "observation": game.observation, "reward": 0, "done": False}

    def _close(self, body: dict[str, Any]) -> dict[str, Any]:
        env_id = body["id"]
        self.state.game(env_id)
        self.state.deleted.add(env_id)
        return {"closed": env_id}


class AgentGymServer:
    """The server on 127.0.0.1 with a free port, in a thread; a context manager."""

    def __init__(self) -> None:
        self.state = _State()
        handler = type("Handler", (_Handler,), {"state": self.state})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="agentgym-test-server",
            daemon=True,
        )

    @property
    def requests(self) -> list[tuple[str, str, Any]]:
        with self.state.lock:
            return list(self.state.requests)

    def start(self) -> AgentGymServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> AgentGymServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
