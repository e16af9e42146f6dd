"""Loopback servers for AgentGym's ``{id, action}`` environments other than TextCraft: BabyAI,
SciWorld, ALFWorld and LMRL-Gym (maze, wordle), each reproducing the routes, fields, answers and
error shapes of its server at commit 3ef9235d23e68e7c2920c5422ad957dc8ced5c6c of
WooooDyy/AgentGym, with a tiny deterministic game behind them. The HTTP side (FastAPI's 422,
404, 500) is agentgym_loopback.py.
"""

from __future__ import annotations

from typing import Any

from tests.trainer_core.envs.agentgym_loopback import LoopbackServer, Route

ID = ("id", int, True)
ACTION = ("action", str, True)


def caught(method: Any) -> Any:
    """The wrappers' ``try: ... except Exception as e: return {"error": str(e)}``."""

    def call(arg: Any) -> Any:
        try:
            return method(arg)
        except Exception as exc:  # noqa: BLE001 - what the servers do
            return {"error": str(exc)}

    return call


class _Envs:
    """The wrappers' bookkeeping: ``info[id] = {deleted, done, ...}`` and ``_check_id``."""

    def __init__(self) -> None:
        self.info: dict[int, dict[str, Any]] = {}
        self.env: dict[int, Any] = {}
        self.max_id = 0

    def new(self) -> int:
        idx = self.max_id
        self.max_id += 1
        self.info[idx] = {"deleted": False, "done": False, "reward": 0}
        return idx

    def check(self, idx: int, is_reset: bool = False) -> None:
        if idx not in self.info:
            raise NameError(f"The id {idx} is not valid.")
        if self.info[idx]["deleted"]:
            raise NameError(f"The task with environment {idx} has been deleted.")
        if not is_reset and self.info[idx]["done"]:
            raise NameError(f"The task with environment {idx} has finished.")


# --- BabyAI ---------------------------------------------------------------------------------

BABYAI_GAMES = [
    # goal, {action: (observation, progress)}
    (
        "go to the red ball",
        {
            "pick up green key 1": ("You pick up green key 1.", 0.5),
            "go to red ball 1": ("You are now facing red ball 1.", 1.0),
        },
    ),
    ("pick up the blue box", {"pick up blue box 1": ("You pick up blue box 1.", 1.0)}),
]


class BabyAIServer(LoopbackServer):
    """``agentenv-babyai/agentenv_babyai/server.py`` (+ ``model.py``, ``environment.py``):

    - ``POST /create`` (no body) → ``{id}``;
    - ``POST /reset {id: int, data_idx: int}`` (both required) → ``{observation, reward, score,
      deleted, done}``, the observation ``"Your goal: <goal>\\n<view>\\nAvailable actions:
      [\\"a\\", ...]"``;
    - ``POST /step {id, action}`` → ``{observation, reward, score, done}``: ``reward`` is the
      best progress so far (0..1), ``score`` the previous score plus it; an unknown action
      leaves the state ("The action is not recognized. Please check valid actions."); a step
      before any reset: ``{"error": "<id>"}`` (a KeyError); after done: ``{"error": "The task
      with environment N has finished."}``;
    - ``GET /observation?id=`` → ``{observation, reward, score, done, deleted}``;
    - ``POST /close {id}`` → ``true``, ``false`` for an unknown id.
    """

    def __init__(self) -> None:
        self.envs = _Envs()
        super().__init__()

    def make_routes(self) -> dict[tuple[str, str], Route]:
        return {
            ("GET", "/"): Route(lambda _: "This is environment BabyAI."),
            ("POST", "/create"): Route(caught(lambda _: {"id": self.envs.new()})),
            ("POST", "/reset"): Route(caught(self._reset), [ID, ("data_idx", int, True)]),
            ("POST", "/step"): Route(caught(self._step), [ID, ACTION]),
            ("GET", "/observation"): Route(caught(self._observe), query=("id",)),
            ("POST", "/close"): Route(self._close, [ID]),
        }

    def _actions(self, game: dict[str, Any]) -> str:
        names = [
            "turn left",
            "turn right",
            "move forward",
            *game["moves"],
            "check available actions",
        ]
        return "\nAvailable actions: [" + ", ".join(f'"{a}"' for a in names) + "]"

    def _reset(self, body: dict[str, Any]) -> dict[str, Any]:
        idx = body["id"]
        self.envs.check(idx, True)
        goal, moves = BABYAI_GAMES[body["data_idx"] % len(BABYAI_GAMES)]
        game = {
            "goal": goal,
            "moves": dict(moves),
            "view": "In front of you in this room, you can see several objects.",
            "reward": 0.0,
            "done": False,
        }
        self.envs.env[idx] = game
        payload = {
            "observation": f"Your goal: {goal}\n{game['view']}{self._actions(game)}",
            "reward": 0.0,
            "score": 0.0,
            "deleted": False,
            "done": False,
        }
        self.envs.info[idx].update(payload)
        return payload

    def _step(self, body: dict[str, Any]) -> dict[str, Any]:
        idx = body["id"]
        self.envs.check(idx)
        game = self.envs.env[idx]  # KeyError before any reset, as in BabyAIEnv.step
        action = body["action"].lower().strip()
        if action in game["moves"]:
            game["view"], progress = game["moves"].pop(action)
            game["reward"] = max(game["reward"], progress)
            if game["reward"] >= 1:
                game["done"] = True
                game["view"] += "\n The task is completed."
        elif action not in ("turn left", "turn right", "move forward", "check available actions"):
            game["view"] = "The action is not recognized. Please check valid actions."
        payload = {
            "observation": game["view"] + self._actions(game),
            "reward": game["reward"],
            "score": self.envs.info[idx]["score"] + game["reward"],
            "done": game["done"],
        }
        self.envs.info[idx].update(payload)
        return payload

    def _observe(self, query: dict[str, Any]) -> dict[str, Any]:
        idx = query["id"]
        self.envs.check(idx)
        game = self.envs.env[idx]
        return {
            "observation": f"Your goal: {game['goal']}\n{game['view']}{self._actions(game)}",
            "reward": game["reward"],
            "score": self.envs.info[idx].get("score", 0),
            "done": game["done"],
            "deleted": False,
        }

    def _close(self, body: dict[str, Any]) -> bool:
        idx = body["id"]
        if idx not in self.envs.info:
            return False
        del self.envs.info[idx]
        self.envs.env.pop(idx, None)
        return True


# --- SciWorld -------------------------------------------------------------------------------

SCIWORLD_GAMES = [
    {
        "task_name": "boil",
        "task_description": "Your task is to boil water.",
        "look": "This room is called the kitchen. In it, you see: a stove, a pot of water.",
        "score_of": {"activate stove": 40, "move pot to stove": 70, "focus on water": 100},
    },
]


class SciWorldServer(LoopbackServer):
    """``agentenv-sciworld/agentenv_sciworld/server.py`` (+ ``model.py``, ``environment.py``):

    - ``POST /create`` (no body) → ``{id}``;
    - ``POST /reset {id: int, data_idx: int}`` → ``{task_name, var_num, task_description,
      observation, reward, score, deleted, done}`` (``observation`` is the look-around);
      ``data_idx`` past the games: ``{"error": "list index out of range"}``;
    - ``POST /step {id, action}`` → ``{observation, reward, score, done}``: ``score`` 0..100,
      ``reward`` its change; an unknown action: "No known action matches that input.";
      after done: ``{"error": "The task with environment N has finished."}``;
    - ``GET /observation?id=`` → the last observation (a JSON string) or ``{"error"}``;
    - ``POST /close {id}`` → ``true``; an unknown or already closed id raises: HTTP 500.
    """

    def __init__(self) -> None:
        self.envs = _Envs()
        super().__init__()

    def make_routes(self) -> dict[tuple[str, str], Route]:
        return {
            ("GET", "/"): Route(lambda _: "This is environment ScienceWorld."),
            ("POST", "/create"): Route(caught(lambda _: {"id": self.envs.new()})),
            ("POST", "/reset"): Route(caught(self._reset), [ID, ("data_idx", int, True)]),
            ("POST", "/step"): Route(caught(self._step), [ID, ACTION]),
            ("GET", "/observation"): Route(caught(self._observe), query=("id",)),
            ("POST", "/close"): Route(self._close, [ID]),  # not caught: 500
        }

    def _reset(self, body: dict[str, Any]) -> dict[str, Any]:
        idx = body["id"]
        self.envs.check(idx, True)
        game = SCIWORLD_GAMES[body["data_idx"]]  # IndexError: "list index out of range"
        self.envs.env[idx] = {"game": game, "score": 0}
        payload = {
            "task_name": game["task_name"],
            "var_num": 0,
            "task_description": game["task_description"],
            "observation": game["look"],
            "reward": 0,
            "score": 0,
            "deleted": False,
            "done": False,
        }
        self.envs.info[idx].update(payload)
        return payload

    def _step(self, body: dict[str, Any]) -> dict[str, Any]:
        idx = body["id"]
        self.envs.check(idx)
        env = self.envs.env[idx]
        action = body["action"].strip()
        if action == "look around":
            observation, score = env["game"]["look"], env["score"]
        elif action in env["game"]["score_of"]:
            observation, score = f"You {action}.", env["game"]["score_of"][action]
        else:
            observation, score = "No known action matches that input.", env["score"]
        reward, env["score"] = score - env["score"], score
        payload = {
            "observation": observation,
            "reward": reward,
            "score": score,
            "done": score >= 100,
        }
        self.envs.info[idx].update(payload)
        return payload

    def _observe(self, query: dict[str, Any]) -> Any:
        self.envs.check(query["id"])
        return self.envs.info[query["id"]]["observation"]

    def _close(self, body: dict[str, Any]) -> bool:
        idx = body["id"]
        if self.envs.info[idx]["deleted"]:  # KeyError for an unknown id: 500 either way
            raise ValueError(f"The task with environment {idx} has been deleted.")
        self.envs.info[idx]["deleted"] = True
        return True


# --- ALFWorld -------------------------------------------------------------------------------

ALFWORLD_GAMES = [
    {
        "task_type": "pick_and_place_simple/trial_0",
        "intro": "You are in the middle of a room. Looking quickly around you, you see a "
        "cabinet 1 and a countertop 1.\n\nYour task is to: put a mug in cabinet 1.",
        "moves": {
            "go to countertop 1": "On the countertop 1, you see a mug 1.",
            "take mug 1 from countertop 1": "You pick up the mug 1 from the countertop 1.",
            "go to cabinet 1": "You arrive at cabinet 1. The cabinet 1 is open.",
        },
        "win": "move mug 1 to cabinet 1",
    },
]


class ALFWorldServer(LoopbackServer):
    """``agentenv-alfworld/agentenv_alfworld/server.py`` (+ ``model.py``, ``env_wrapper.py``):

    - ``POST /create`` (no body) → ``{id}``;
    - ``POST /reset {id: int, game: int, world_type: str}`` (all required) → ``{id,
      observation, available_actions, task_type}``; a ``world_type`` other than Text, Embody,
      Hybrid: ``{"error": 'world_type must be one of "Text", "Embody" and "Hybrid"'}``; a game
      past the list: ``{"error": "list index out of range"}``;
    - ``POST /step {id, action}`` → ``{observation, reward, available_actions, done}``:
      ``reward`` is ``float(won)``; an action it does not know: "Nothing happens."; before any
      reset: ``{"error": "<id>"}``; after done: ``{"error": "... has finished."}``;
    - ``GET /observation?id=``, ``GET /available_actions?id=``; no ``/close`` (404).
    """

    def __init__(self) -> None:
        self.envs = _Envs()
        super().__init__()

    def make_routes(self) -> dict[tuple[str, str], Route]:
        return {
            ("GET", "/"): Route(lambda _: "This is environment AlfWorld."),
            ("POST", "/create"): Route(caught(lambda _: {"id": self.envs.new()})),
            ("POST", "/reset"): Route(
                self._reset, [ID, ("game", int, True), ("world_type", str, True)]
            ),
            ("POST", "/step"): Route(caught(self._step), [ID, ACTION]),
            ("GET", "/observation"): Route(
                caught(lambda q: self._info(q)["observation"]), query=("id",)
            ),
            ("GET", "/available_actions"): Route(
                caught(lambda q: self._info(q)["available_actions"]), query=("id",)
            ),
        }

    def _info(self, query: dict[str, Any]) -> dict[str, Any]:
        self.envs.check(query["id"])
        return self.envs.info[query["id"]]

    @staticmethod
    def _admissible(game: dict[str, Any]) -> list[str]:
        return ["look", "inventory", *game["moves"], game["win"]]

    def _reset(self, body: dict[str, Any]) -> dict[str, Any]:
        if body["world_type"] not in ["Text", "Embody", "Hybrid"]:
            return {"error": 'world_type must be one of "Text", "Embody" and "Hybrid"'}
        try:
            idx = body["id"]
            self.envs.check(idx, True)
            game = ALFWORLD_GAMES[body["game"]]
            self.envs.env[idx] = game
            actions = self._admissible(game)
            self.envs.info[idx] = {
                "world_type": body["world_type"],
                "game": body["game"],
                "observation": game["intro"],
                "available_actions": actions,
                "done": False,
                "reward": 0,
                "deleted": False,
            }
            return {
                "id": idx,
                "observation": game["intro"],
                "available_actions": actions,
                "task_type": game["task_type"],
            }
        except Exception as exc:  # noqa: BLE001 - ALFWorld_Wrapper.reset
            return {"error": str(exc)}

    def _step(self, body: dict[str, Any]) -> dict[str, Any]:
        idx = body["id"]
        self.envs.check(idx)
        game = self.envs.env[idx]  # KeyError before any reset (env_init[idx] in the wrapper)
        action = body["action"].strip()
        won = action == game["win"]
        observation = (
            "You move the mug 1 to the cabinet 1."
            if won
            else game["moves"].get(action, "Nothing happens.")
        )
        payload = {
            "observation": observation,
            "reward": float(won),
            "available_actions": self._admissible(game),
            "done": won,
        }
        self.envs.info[idx].update(payload)
        return payload


# --- LMRL-Gym: maze and wordle ------------------------------------------------------------------

MAZE_WALLS = {
    (0, 0),
    (0, 1),
    (0, 2),
    (1, 0),
    (2, 0),
    (3, 0),
    (3, 1),
    (3, 2),
    (2, 3),
    (0, 3),
    (1, 3),
}
MAZE_STARTS = [(1, 1), (2, 1)]
MAZE_GOAL = (2, 2)
MAZE_MOVES = {"move up": (-1, 0), "move down": (1, 0), "move left": (0, -1), "move right": (0, 1)}
WORDLE_WORDS = ["shire", "crane"]


class LmrlGymServer(LoopbackServer):
    """``agentenv-lmrlgym/agentenv_lmrlgym/server.py`` (+ ``maze/`` and ``wordle/`` model.py and
    environment.py): two games on one server, each under its own prefix:

    - ``POST /maze/create`` (no body) → ``{id}``; ``POST /maze/reset {id: int, game: int}`` →
      ``{observation}``; a game past the start positions: ``{"error": "The game N is not
      valid."}``; ``POST /maze/step {id, action}`` → ``{observation, reward, done}`` (−1 a move,
      1 on reaching the goal, whose observation is "Success"; −4 for an illegal action);
      ``GET /maze/observation?id=``; ``GET /maze/available_actions``;
    - ``POST /wordle/create`` → ``{id}``; ``POST /wordle/reset {id: int, seed: int}`` →
      ``{id, observation: "Let's start Wordle!"}``; ``POST /wordle/step {id, action}`` →
      ``{observation, reward, done}``: the letters' colours ("b y g g b"), reward 0 for a wrong
      guess and 1 for the word (LMRL-Gym's −1/0 shifted by one), "invalid word" for a word not
      of five space-separated letters; six guesses end the game;
    - both: ``{"error"}`` at 200 (an unknown id, a step before reset: ``"<id>"``, after done:
      "... has finished."); no ``/close`` (404).
    """

    def __init__(self) -> None:
        self.maze = _Envs()
        self.wordle = _Envs()
        super().__init__()

    def make_routes(self) -> dict[tuple[str, str], Route]:
        return {
            ("GET", "/"): Route(lambda _: "This is environment LMRL-Gym."),
            ("POST", "/maze/create"): Route(caught(lambda _: {"id": self.maze.new()})),
            ("POST", "/maze/reset"): Route(caught(self._maze_reset), [ID, ("game", int, True)]),
            ("POST", "/maze/step"): Route(caught(self._maze_step), [ID, ACTION]),
            ("GET", "/maze/observation"): Route(
                caught(lambda q: self._observed(self.maze, q)), query=("id",)
            ),
            ("GET", "/maze/available_actions"): Route(lambda _: list(MAZE_MOVES)),
            ("POST", "/wordle/create"): Route(caught(lambda _: {"id": self.wordle.new()})),
            ("POST", "/wordle/reset"): Route(caught(self._wordle_reset), [ID, ("seed", int, True)]),
            ("POST", "/wordle/step"): Route(caught(self._wordle_step), [ID, ACTION]),
            ("GET", "/wordle/observation"): Route(
                caught(lambda q: self._observed(self.wordle, q)), query=("id",)
            ),
        }

    @staticmethod
    def _observed(envs: _Envs, query: dict[str, Any]) -> Any:
        envs.check(query["id"])
        return envs.info[query["id"]]["observation"]

    @staticmethod
    def _describe(position: tuple[int, int]) -> str:
        walls = [
            name
            for name, (dy, dx) in [
                ("to your right", (0, 1)),
                ("to your left", (0, -1)),
                ("above you", (-1, 0)),
                ("below you", (1, 0)),
            ]
            if (position[0] + dy, position[1] + dx) in MAZE_WALLS
        ]
        return (
            f"The goal is at position {MAZE_GOAL[0]}, {MAZE_GOAL[1]}. Your current position "
            f"is at position {position[0]}, {position[1]}. There are walls "
            f"{', '.join(walls)}."
        )

    def _maze_reset(self, body: dict[str, Any]) -> dict[str, Any]:
        idx, game = body["id"], body["game"]
        self.maze.check(idx, True)
        if game >= len(MAZE_STARTS):
            raise NameError(f"The game {game} is not valid.")
        self.maze.env[idx] = MAZE_STARTS[game]
        observation = self._describe(MAZE_STARTS[game])
        self.maze.info[idx] = {
            "observation": observation,
            "done": False,
            "reward": 0,
            "deleted": False,
        }
        return {"observation": observation}

    def _maze_step(self, body: dict[str, Any]) -> dict[str, Any]:
        idx = body["id"]
        self.maze.check(idx)
        position = self.maze.env[idx]
        move = MAZE_MOVES.get(body["action"].strip())
        if move is None:
            observation, reward, done = self._describe(position), -4.0, False
        else:
            target = (position[0] + move[0], position[1] + move[1])
            if target not in MAZE_WALLS:
                position = self.maze.env[idx] = target
            done = position == MAZE_GOAL
            observation = "Success" if done else self._describe(position)
            reward = 1.0 if done else -1.0
        info = self.maze.info[idx]
        info.update({"observation": observation, "reward": info["reward"] + reward, "done": done})
        return {"observation": observation, "reward": reward, "done": done}

    def _wordle_reset(self, body: dict[str, Any]) -> dict[str, Any]:
        idx = body["id"]
        self.wordle.check(idx, True)
        self.wordle.env[idx] = {"word": WORDLE_WORDS[body["seed"] % len(WORDLE_WORDS)], "left": 6}
        observation = "Let's start Wordle!"
        self.wordle.info[idx].update(
            {
                "seed": body["seed"],
                "observation": observation,
                "done": False,
                "reward": 0,
                "deleted": False,
            }
        )
        return {"id": idx, "observation": observation}

    def _wordle_step(self, body: dict[str, Any]) -> dict[str, Any]:
        idx = body["id"]
        self.wordle.check(idx)
        game = self.wordle.env[idx]
        letters = body["action"].strip().lower().split()
        if len(letters) != 5 or any(len(c) != 1 for c in letters):
            observation, reward, done = "invalid word", 0.0, False  # ob empty → "invalid word"
        else:
            guess, word = "".join(letters), game["word"]
            colours = [
                "g" if g == w else "y" if g in word else "b"
                for g, w in zip(guess, word, strict=True)
            ]
            game["left"] -= 1
            won = guess == word
            done = won or game["left"] == 0
            observation, reward = " ".join(colours), 1.0 if won else 0.0
        info = self.wordle.info[idx]
        info.update({"observation": observation, "reward": info["reward"] + reward, "done": done})
        return {"observation": observation, "reward": reward, "done": done}
