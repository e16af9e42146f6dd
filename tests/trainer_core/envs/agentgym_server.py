"""A loopback TextCraft server: the routes, fields and error shapes of AgentGym's
``agentenv-textcraft/agentenv_textcraft/server.py`` (with ``model.py`` and ``env_wrapper.py``) at
commit 3ef9235d23e68e7c2920c5422ad957dc8ced5c6c, with a tiny deterministic crafting game in
TextCraft's command language, for the steplab/agentgym tests::

    with AgentGymServer() as server:          # http://127.0.0.1:<free port>
        server.url, server.requests            # every request: (method, path, body or query)

Routes and fields, exactly:
- ``POST /create`` ``{commands?: str, goal?: str}`` → ``{id, observation, done, reward}``; like
  TextCraft, the new environment starts on item ``data_idx = id`` (modulo the item count here),
  or on the item whose goal is ``goal``;
- ``POST /step`` ``{id: int, action: str}`` → ``{observation, reward, done}``;
- ``POST /reset`` ``{id: int, data_idx: int = 0}`` → ``{id, observation, done, reward}``;
- ``GET /observation?id=`` → the current observation (a JSON string);
- ``POST /close`` ``{id: int}`` → ``true``, or ``false`` for an id it does not hold; a closed
  id is forgotten (later calls: "The id N is not valid.");
- failures: ``{"error": "..."}`` with status 200 (the wrapper catches every exception); a body
  that does not fit: FastAPI's 422 (see agentgym_loopback.py).

The game: ``get N ITEM`` takes a base item, ``inventory`` lists what you carry,
``craft N TARGET using K A, M B`` follows a recipe; crafting the goal gives reward 1 and ends
the episode; 20 steps without it end it with reward 0.
"""

from __future__ import annotations

import re
from typing import Any

from tests.trainer_core.envs.agentgym_loopback import LoopbackServer, Route

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


class AgentGymServer(LoopbackServer):
    """The TextCraft loopback server (see the module docstring)."""

    def __init__(self) -> None:
        self.games: dict[int, Game] = {}
        self.next_id = 0
        super().__init__()

    def make_routes(self) -> dict[tuple[str, str], Route]:
        return {
            ("GET", "/"): Route(lambda _: "This is environment TextCraft."),
            ("POST", "/create"): Route(
                self._wrapped(self._create), [("commands", str, False), ("goal", str, False)]
            ),
            ("POST", "/step"): Route(
                self._wrapped(self._step), [("id", int, True), ("action", str, True)]
            ),
            ("POST", "/reset"): Route(
                self._wrapped(self._reset), [("id", int, True), ("data_idx", int, False)]
            ),
            ("GET", "/observation"): Route(self._wrapped(self._observation), query=("id",)),
            ("POST", "/close"): Route(self._close, [("id", int, True)]),
        }

    @staticmethod
    def _wrapped(method: Any) -> Any:
        def call(arg: Any) -> Any:
            try:
                return method(arg)
            except Exception as exc:  # noqa: BLE001 - TextCraft_Wrapper: {"error"} at 200
                return {"error": str(exc)}

        return call

    def game(self, env_id: int) -> Game:
        if env_id not in self.games:
            raise NameError(f"The id {env_id} is not valid.")
        return self.games[env_id]

    def _create(self, body: dict[str, Any]) -> dict[str, Any]:
        env_id = self.next_id
        self.next_id += 1
        goal = body.get("goal")
        if goal is not None:
            matches = [i for i, spec in enumerate(GAMES) if spec["goal"] == goal]
            if not matches:
                raise ValueError(f"no recipe reaches the goal {goal!r}")
            data_idx = matches[0]
        else:
            data_idx = env_id % len(GAMES)
        game = Game(data_idx)
        self.games[env_id] = game
        return {"id": env_id, "observation": game.observation, "done": False, "reward": 0}

    def _step(self, body: dict[str, Any]) -> dict[str, Any]:
        observation, reward, done = self.game(int(body["id"])).step(body["action"])
        return {"observation": observation, "reward": reward, "done": done}

    def _reset(self, body: dict[str, Any]) -> dict[str, Any]:
        env_id = int(body["id"])
        self.game(env_id)
        data_idx = body.get("data_idx") or 0
        if not 0 <= data_idx < len(GAMES):
            raise IndexError(f"data_idx {data_idx} is out of range (0..{len(GAMES) - 1})")
        game = Game(data_idx)
        self.games[env_id] = game
        return {"id": env_id, "observation": game.observation, "done": False, "reward": 0}

    def _observation(self, query: dict[str, Any]) -> Any:
        return self.game(query["id"]).observation

    def _close(self, body: dict[str, Any]) -> bool:
        return self.games.pop(int(body["id"]), None) is not None
