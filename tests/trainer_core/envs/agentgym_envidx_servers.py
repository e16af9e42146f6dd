"""Loopback servers for AgentGym's ``env_idx`` environments: WebShop, SQLGym, SearchQA, the tool
environments (weather, movie, academia, todo, sheet) and WebArena, each reproducing the routes,
fields, answers and error shapes of its server at commit
3ef9235d23e68e7c2920c5422ad957dc8ced5c6c of WooooDyy/AgentGym, with a tiny deterministic task
behind them. None of these servers catches exceptions: an unknown ``env_idx``, an item out of
range or a step before reset is HTTP 500 (agentgym_loopback.py; WebArena's Quart answers HTML).
"""

from __future__ import annotations

import re
from typing import Any

from tests.trainer_core.envs.agentgym_loopback import LoopbackServer, Route

ENV_IDX = ("env_idx", int, True)
ACTION = ("action", str, True)


# --- WebShop --------------------------------------------------------------------------------

WEBSHOP_GOALS = [
    ("i need red running shoes, and price lower than 50.00 dollars", "b001"),
    ("i want a blue mug", "b002"),
]
WEBSHOP_PRODUCTS = {
    "b001": "Red Running Shoes $39.99",
    "b002": "Blue Ceramic Mug $9.99",
    "b003": "Red Dress Shoes $89.00",
}


class WebShopServer(LoopbackServer):
    """``agentenv-webshop/agentenv_webshop/server.py`` (+ ``model.py``, ``environment.py``):

    - ``POST /create`` (no body) → an integer (WebshopEnvServer picks a random one);
    - ``POST /reset {env_idx: int, session_id: int | None}`` → ``[observation, null]``
      (``Tuple[str, None]``); the official client reads the first observation from
      ``GET /observation?env_idx=`` (a JSON string);
    - ``POST /step {env_idx: int, action: str}`` → ``{state, reward, done, info: null}``:
      ``search[...]`` lists results, ``click[<asin>]`` opens one, ``click[buy now]`` ends the
      episode with reward 1 for the wanted product, 0.2 for another; an invalid action changes
      nothing (reward 0);
    - ``GET /state?env_idx=`` → ``{url, html, instruction_text}``; ``GET /available_actions``;
    - no ``/close``; an unknown ``env_idx`` anywhere: HTTP 500.
    """

    def __init__(self) -> None:
        self.env: dict[int, dict[str, Any]] = {}
        self.next_idx = 31337
        super().__init__()

    def make_routes(self) -> dict[tuple[str, str], Route]:
        return {
            ("GET", "/"): Route(lambda _: "ok"),
            ("POST", "/create"): Route(self._create),
            ("POST", "/reset"): Route(self._reset, [ENV_IDX, ("session_id", int, False)]),
            ("POST", "/step"): Route(self._step, [ENV_IDX, ACTION]),
            ("GET", "/observation"): Route(
                lambda q: self.env[q["env_idx"]]["page"], query=("env_idx",)
            ),
            ("GET", "/state"): Route(self._state, query=("env_idx",)),
            ("GET", "/available_actions"): Route(self._available, query=("env_idx",)),
        }

    def _create(self, _: Any) -> int:
        idx = self.next_idx
        self.next_idx += 7
        self.env[idx] = {"goal": 0, "page": "", "item": None}
        self._home(idx, 0)
        return idx

    def _home(self, idx: int, session: int) -> None:
        goal = WEBSHOP_GOALS[session % len(WEBSHOP_GOALS)][0]
        self.env[idx].update(
            {
                "goal": session % len(WEBSHOP_GOALS),
                "item": None,
                "page": f"WebShop [SEP] Instruction: [SEP] {goal} [SEP] Search",
            }
        )

    def _reset(self, body: dict[str, Any]) -> list[Any]:
        idx = body["env_idx"]
        self.env[idx]  # noqa: B018 - KeyError → 500 for an unknown env_idx
        self._home(idx, body.get("session_id") or 0)
        return [self.env[idx]["page"], None]

    def _step(self, body: dict[str, Any]) -> dict[str, Any]:
        env = self.env[body["env_idx"]]
        action = body["action"].strip().lower()
        reward, done = 0.0, False
        if m := re.fullmatch(r"search\[(.+)\]", action):
            words = m.group(1).split()
            found = [
                a for a, title in WEBSHOP_PRODUCTS.items() if all(w in title.lower() for w in words)
            ]
            env["page"] = "Back to Search [SEP] " + " [SEP] ".join(
                f"{a} [SEP] {WEBSHOP_PRODUCTS[a]}" for a in found
            )
        elif m := re.fullmatch(r"click\[(.+)\]", action):
            target = m.group(1)
            if target in WEBSHOP_PRODUCTS:
                env["item"] = target
                env["page"] = f"Back to Search [SEP] {WEBSHOP_PRODUCTS[target]} [SEP] Buy Now"
            elif target == "buy now" and env["item"]:
                wanted = WEBSHOP_GOALS[env["goal"]][1]
                reward, done = (1.0 if env["item"] == wanted else 0.2), True
                env["page"] = "Thank you for shopping with us!"
        return {"state": env["page"], "reward": reward, "done": done, "info": None}

    def _state(self, query: dict[str, Any]) -> dict[str, Any]:
        env = self.env[query["env_idx"]]
        return {
            "url": "http://127.0.0.1:3000/",
            "html": f"<html>{env['page']}</html>",
            "instruction_text": WEBSHOP_GOALS[env["goal"]][0],
        }

    def _available(self, query: dict[str, Any]) -> dict[str, Any]:
        self.env[query["env_idx"]]  # noqa: B018
        return {"has_search_bar": True, "clickables": ["search"]}


# --- SQLGym ---------------------------------------------------------------------------------

SQLGYM_ITEMS = [
    ("How many singers are there?", "SELECT count(*) FROM singer", "[(6,)]"),
    (
        "Name the oldest singer.",
        "SELECT name FROM singer ORDER BY age DESC LIMIT 1",
        "[('Joe Sharp',)]",
    ),
]


class SqlGymServer(LoopbackServer):
    """``agentenv-sqlgym/agentenv_sqlgym/server.py`` (+ ``model.py``, ``environment.py``):

    - ``POST /create`` (no body) → an integer; the environment is not initialised until reset;
    - ``POST /reset {env_idx: int, item_id: int}`` (both required) → ``[observation, null]``;
      an item out of range raises ``ValueError`` → 500; the official client then reads
      ``GET /observation?env_idx=``;
    - ``POST /step {env_idx, action}`` → ``{state, reward, done, info}``: ``state`` is the
      query's execution result as text (cut to 100 characters and "..."); reward 1 when it
      matches the gold result; a query ends the episode and ``info`` is ``{ground_truth}``
      (``SqlGymEnv.step`` of the sqlgym package, KYLN24/sqlgym, in its single mode); a step
      before reset: 500 (the environment is still None);
    - no ``/close``; an unknown ``env_idx``: 500 (IndexError).
    """

    def __init__(self) -> None:
        self.env: dict[int, int | None] = {}
        super().__init__()

    def make_routes(self) -> dict[tuple[str, str], Route]:
        return {
            ("GET", "/"): Route(lambda _: "ok"),
            ("POST", "/create"): Route(self._create),
            ("POST", "/reset"): Route(self._reset, [ENV_IDX, ("item_id", int, True)]),
            ("POST", "/step"): Route(self._step, [ENV_IDX, ACTION]),
            ("GET", "/observation"): Route(self._observe, query=("env_idx",)),
        }

    def _create(self, _: Any) -> int:
        idx = 4242 + len(self.env)
        self.env[idx] = None
        return idx

    def _observation(self, item: int) -> str:
        question = SQLGYM_ITEMS[item][0]
        return f"CREATE TABLE singer (singer_id int, name text, age int)\n-- {question}"

    def _reset(self, body: dict[str, Any]) -> list[Any]:
        idx, item = body["env_idx"], body["item_id"]
        if idx not in self.env:
            raise IndexError(f"Env {idx} not found")
        if not 0 <= item < len(SQLGYM_ITEMS):
            raise ValueError(f"Item id {item} is out of range.")
        self.env[idx] = item
        return [self._observation(item), None]

    def _observe(self, query: dict[str, Any]) -> str:
        return self._observation(self.env[query["env_idx"]])  # None before reset → 500

    def _step(self, body: dict[str, Any]) -> dict[str, Any]:
        item = self.env[body["env_idx"]]
        _, gold, result = SQLGYM_ITEMS[item]  # TypeError before reset → 500
        query = body["action"].strip().rstrip(";")
        correct = " ".join(query.lower().split()) == gold.lower()
        state = result if correct else "no such column: " + query * 3
        if len(state) > 100:
            state = state[:100] + "..."
        return {
            "state": state,
            "reward": 1.0 if correct else 0.0,
            "done": True,
            "info": {"ground_truth": gold},
        }


# --- SearchQA -------------------------------------------------------------------------------

SEARCHQA_ITEMS = [("who wrote the hobbit?", "tolkien"), ("capital of france?", "paris")]


class SearchQAServer(LoopbackServer):
    """``agentenv-searchqa/agentenv_searchqa/server.py`` (+ ``model.py``, ``env_wrapper.py``):

    - ``POST /create {id: int}`` (required) → an integer; ``id`` past the data raises → 500;
    - ``POST /reset {env_idx: int, id: int | None}`` → the observation (a JSON string: the
      instructions and "Question: ..."); without ``id`` the wrapper raises → 500;
    - ``POST /step {env_idx, action}`` → ``{observation, reward, done, info: null}``:
      ``<search>q</search>`` → ``<information>Doc 1(Title: ...) ...</information>``,
      ``<answer>a</answer>`` → reward 1 and done when right, else "Sorry, your answer is
      incorrect. Please try again." with reward 0; anything else: "Your previous action is
      invalid. ...";
    - ``GET /observation?env_idx=`` → the same text as /reset;
    - ``POST /close {env_idx}`` → ``true``, ``false`` for an unknown one.
    """

    def __init__(self) -> None:
        self.env: dict[int, int] = {}
        self.max_id = 0
        super().__init__()

    def make_routes(self) -> dict[tuple[str, str], Route]:
        return {
            ("GET", "/"): Route(lambda _: "ok"),
            ("POST", "/create"): Route(self._create, [("id", int, True)]),
            ("POST", "/reset"): Route(self._reset, [ENV_IDX, ("id", int, False)]),
            ("POST", "/step"): Route(self._step, [ENV_IDX, ACTION]),
            ("GET", "/observation"): Route(
                lambda q: self._observe(q["env_idx"]), query=("env_idx",)
            ),
            ("POST", "/close"): Route(self._close, [ENV_IDX]),
        }

    @staticmethod
    def _fetch(item: Any) -> int:
        if not 0 <= item < len(SEARCHQA_ITEMS):  # TypeError for None, as in _fetch_data
            raise ValueError(f"Item id {item} is out of range.")
        return item

    def _create(self, body: dict[str, Any]) -> int:
        item = self._fetch(body["id"])
        idx, self.max_id = self.max_id, self.max_id + 1
        self.env[idx] = item
        return idx

    def _check(self, idx: int) -> None:
        if idx not in self.env:
            raise IndexError(f"Env {idx} not found")

    def _reset(self, body: dict[str, Any]) -> str:
        self._check(body["env_idx"])
        self.env[body["env_idx"]] = self._fetch(body.get("id"))
        return self._observe(body["env_idx"])

    def _observe(self, idx: int) -> str:
        self._check(idx)
        question = SEARCHQA_ITEMS[self.env[idx]][0]
        return (
            "You must reason inside <think>...</think> first. ... For example, "
            f"<answer> Beijing </answer>.\n\n Question: {question}"
        )

    def _step(self, body: dict[str, Any]) -> dict[str, Any]:
        self._check(body["env_idx"])
        match = re.search(r"<(search|answer)>(.*?)</\1>", body["action"], re.DOTALL)
        reward, done = 0, False
        if match and match.group(1) == "search":
            observation = (
                f"<information>Doc 1(Title: {match.group(2).strip()}) The Hobbit "
                "is a novel by J. R. R. Tolkien.\n</information>"
            )
        elif match:
            if match.group(2).strip().lower() == SEARCHQA_ITEMS[self.env[body["env_idx"]]][1]:
                reward, done = 1, True
                observation = "Congratulations! You have answered the question correctly."
            else:
                observation = "Sorry, your answer is incorrect. Please try again."
        else:
            observation = (
                "Your previous action is invalid. If you want to search, you should "
                "put the query between <search> and </search>. ..."
            )
        return {"observation": observation, "reward": reward, "done": done, "info": None}

    def _close(self, body: dict[str, Any]) -> bool:
        return self.env.pop(body["env_idx"], None) is not None


# --- the tool environments --------------------------------------------------------------------

TOOL_ITEMS = [
    {
        "goal": "What was the lowest temperature in Shanghai on 2015-01-01?",
        "subgoals": ["get_user_current_location", "get_historical_temp"],
        "answer": "-3.6",
    },
]


class ToolServer(LoopbackServer):
    """``agentenv-tool/agentenv_<name>/<name>_server.py`` (+ ``<name>_model.py`` and
    ``<name>_environment.py``; the five servers share these routes and fields):

    - ``POST /create {id: int}`` (required) → an integer; an ``id`` past the data: 500;
    - ``POST /reset {env_idx: int, id: int | None}`` → the observation (a JSON string, "Now new
      trial starts.\\nYou should perform actions to accomplish the goal: ...\\nGive me one
      action.");
    - ``POST /step {env_idx, action}`` → ``{observation, reward, done}``: an action "Action: X
      with Action Input: {json}" → "Observation: ...\\nGive me one action."; anything else:
      the format error text; ``reward`` is the progress rate (subgoals matched / subgoals, the
      best so far; weather rounds any progress up to 1.0); done when the action is
      ``finish``; on todo's finish the reward becomes a boolean (progress 1 and the right
      final state);
    - ``GET /observation?env_idx=``; no ``/close``; an unknown ``env_idx``: 500.
    """

    def __init__(self, name: str = "weather") -> None:
        self.name = name
        self.env: dict[int, dict[str, Any]] = {}
        super().__init__()

    def make_routes(self) -> dict[tuple[str, str], Route]:
        return {
            ("GET", "/"): Route(lambda _: "ok"),
            ("POST", "/create"): Route(self._create, [("id", int, True)]),
            ("POST", "/reset"): Route(self._reset, [ENV_IDX, ("id", int, False)]),
            ("POST", "/step"): Route(self._step, [ENV_IDX, ACTION]),
            ("GET", "/observation"): Route(
                lambda q: self._observe(q["env_idx"]), query=("env_idx",)
            ),
        }

    def _create(self, body: dict[str, Any]) -> int:
        item = TOOL_ITEMS[body["id"]]  # IndexError → 500
        idx = len(self.env)
        self.env[idx] = {"item": item, "done": set(), "reward": 0.0, "last": None}
        return idx

    def _reset(self, body: dict[str, Any]) -> str:
        env = self.env[body["env_idx"]]
        item = TOOL_ITEMS[body["id"]] if body.get("id") is not None else env["item"]
        env.update({"item": item, "done": set(), "reward": 0.0, "last": None})
        return self._observe(body["env_idx"])

    def _observe(self, idx: int) -> str:
        env = self.env[idx]
        if env["last"] is None:
            return (
                "Now new trial starts.\nYou should perform actions to accomplish the goal: "
                f"{env['item']['goal']}\nGive me one action."
            )
        return "Observation: " + env["last"]

    def _step(self, body: dict[str, Any]) -> dict[str, Any]:
        env = self.env[body["env_idx"]]
        m = re.match(r"\s*(?:Action:\s*)?(\w+) with Action Input:\s*(.*)$", body["action"], re.S)
        if not m:
            observation = (
                'Format error, please response in the format of  "Action: [your '
                "action] with Action Input: [your action input]"
            )
            return {"observation": observation, "reward": self._reward(env), "done": False}
        tool, done = m.group(1), m.group(1).lower() == "finish"
        env["last"] = env["item"]["answer"] if tool == "get_historical_temp" else f"{tool} ok"
        if tool in env["item"]["subgoals"]:
            env["done"].add(tool)
            env["reward"] = max(env["reward"], len(env["done"]) / len(env["item"]["subgoals"]))
        reward: Any = self._reward(env)
        if done and self.name == "todo":
            reward = reward == 1.0
        return {
            "observation": f"Observation: {env['last']}\nGive me one action.",
            "reward": reward,
            "done": done,
        }

    def _reward(self, env: dict[str, Any]) -> float:
        if self.name == "weather" and env["reward"] > 0:
            return 1.0
        return env["reward"]


# --- WebArena (Quart) ---------------------------------------------------------------------------


class WebArenaServer(LoopbackServer):
    """``agentenv-webarena/agentenv_webarena/server.py`` (Quart, + ``environment.py``):

    - ``POST /create`` (no body) → ``{"env_idx": n}``;
    - ``POST /reset {env_idx, seed, idx}`` → ``{observation, sites, object}`` (``observation``
      the page's accessibility tree, ``object`` the intent); any failure (here: an ``idx``
      without a config file) → ``{"observation": "TimeoutError", "sites": "Error",
      "object": "Error"}``;
    - ``GET /observation?env_idx=`` → the prompt (objective, URL, page, previous action) as a
      JSON string;
    - ``POST /step {env_idx, action}`` → ``{observation, reward, terminated, truncated, info}``:
      an action it cannot parse (none in triple backticks) or an unknown ``env_idx`` comes back
      as the error's text with reward 0; ``stop [answer]`` terminates with the evaluator's
      reward (1.0 for the right answer, else 0.0); the 4th action is truncated;
    - ``POST /close {env_idx}`` → ``{"closed": "closed"}``;
    - a body without a field the handler reads: KeyError → Quart's HTML 500.
    """

    quart = True
    CONFIGS = {0: ("What is the top product?", "shopping", "Sprite")}

    def __init__(self) -> None:
        self.env: dict[int, dict[str, Any]] = {}
        super().__init__()

    def make_routes(self) -> dict[tuple[str, str], Route]:
        return {
            ("GET", "/"): Route(lambda _: "ok"),
            ("POST", "/create"): Route(self._create),
            ("POST", "/reset"): Route(self._reset),
            ("POST", "/step"): Route(self._step),
            ("GET", "/observation"): Route(lambda q: self._prompt(int(q["env_idx"]))),
            ("POST", "/close"): Route(self._close),
        }

    def _create(self, _: Any) -> dict[str, Any]:
        idx = len(self.env)
        self.env[idx] = {"intent": "", "last": "None", "steps": 0}
        return {"env_idx": idx}

    def _reset(self, body: dict[str, Any]) -> dict[str, Any]:
        idx, seed, item = body["env_idx"], body["seed"], body["idx"]  # KeyError → 500
        del seed
        if item not in self.CONFIGS or idx not in self.env:
            return {"observation": "TimeoutError", "sites": "Error", "object": "Error"}
        intent, site, _ = self.CONFIGS[item]
        self.env[idx] = {"intent": intent, "item": item, "last": "None", "steps": 0}
        return {
            "observation": "[1] RootWebArea 'One Stop Market'",
            "sites": [site],
            "object": intent,
        }

    def _prompt(self, idx: int) -> str:
        env = self.env[idx]
        return (
            f"OBSERVATION:\n[1] RootWebArea 'One Stop Market'\nURL: http://shop.test/\n"
            f"OBJECTIVE: {env['intent']}\nPREVIOUS ACTION: {env['last']}"
        )

    def _step(self, body: dict[str, Any]) -> dict[str, Any]:
        idx, action = body["env_idx"], body["action"]
        try:
            env = self.env[idx]
            m = re.search(r"```((.|\n)*?)```", action)
            if not m:
                raise ValueError(f"Cannot parse action from response {action}")
            env["last"], env["steps"] = m.group(1).strip(), env["steps"] + 1
            stop = re.fullmatch(r"stop \[(.*)\]", env["last"])
            reward = 0.0
            if stop:
                reward = 1.0 if stop.group(1) == self.CONFIGS[env["item"]][2] else 0.0
            return {
                "observation": self._prompt(idx),
                "reward": reward,
                "terminated": bool(stop),
                "truncated": env["steps"] >= 4 and not stop,
                "info": {"page": "http://shop.test/"},
            }
        except Exception as exc:  # noqa: BLE001 - WebarenaEnvServer.step
            return {
                "observation": str(exc),
                "reward": 0,
                "terminated": False,
                "truncated": False,
                "info": None,
            }

    def _close(self, body: dict[str, Any]) -> dict[str, Any]:
        self.env.pop(body["env_idx"], None)
        return {"closed": "closed"}
