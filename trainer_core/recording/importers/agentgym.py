"""AgentGym trajectories (AgentTraj / AgentEval): items ``{"item_id": "webshop_12",
"conversations": [{"from": "human"|"gpt", "loss": bool|null, "value": "..."}]}`` in a JSON list
or JSONL (one item per line).

The first human turn is the environment's instruction; when the next gpt turn is a short
acknowledgement ("Ok.") the exchange is the preamble and the task is the human turn after it.
The turns up to the task turn (system turns, the instruction and its acknowledgement, the task)
are message steps (``from`` system, human, gpt: system, user, assistant). Every later gpt turn is
one tool step: ``Thought: ...`` is the thought, ``Action: ...`` the action;
tool = the verb of a ``verb[arg]`` action (``search``, ``click``), else ``act``; params =
``{"action": <the full action>}``; the observation is the next human turn. Environment: the
``item_id`` prefix (``webshop``, ``alfworld``, ...). ``reward`` / ``success`` when present.
"""

from __future__ import annotations

import re
from typing import Any

from trainer_core.recording.importers.base import RecordError, Source, register_importer
from trainer_core.recording.importers.common import message_step, renumber, require
from trainer_core.recording.schema import Outcome, Step, TaskRef, Trajectory

_ACTION = re.compile(r"(?:^|\n)\s*Action\s*:\s*", re.IGNORECASE)
_THOUGHT = re.compile(r"^\s*Thought\s*:\s*", re.IGNORECASE)
_VERB = re.compile(r"^\s*([A-Za-z_][\w\- ]{0,40}?)\s*\[(.*)\]\s*$", re.DOTALL)
_ACK = re.compile(r"^\s*(ok|okay|sure|understood|got it)\b.{0,40}$", re.IGNORECASE | re.DOTALL)
_TASK_PATTERNS = [
    re.compile(r"Instruction:\s*\[SEP\]\s*(.+?)\s*\[SEP\]", re.DOTALL),  # webshop
    re.compile(r"Your task is to:\s*(.+?)(?:\n|$)"),  # alfworld
    re.compile(r"(?:^|\n)\s*(?:Task|Goal|Question)\s*:\s*(.+?)(?:\n\n|$)", re.DOTALL),
]


def _items(source: Source) -> tuple[list[Any], bool] | None:
    data = source.json
    if isinstance(data, dict):
        return [data], False
    if isinstance(data, list):
        return data, False
    if data is None and source.jsonl is not None:
        return source.jsonl, True
    return None


def split_turn(text: str) -> tuple[str, str]:
    """(thought, action) of a ``Thought: ...\\nAction: ...`` turn."""
    matches = list(_ACTION.finditer(text))
    if not matches:
        return "", text.strip()
    last = matches[-1]
    thought = _THOUGHT.sub("", text[: last.start()]).strip()
    return thought, text[last.end() :].strip()


def task_part(text: str) -> str:
    for pattern in _TASK_PATTERNS:
        match = pattern.search(text)
        if match:
            return match.group(1).strip()
    return text.strip()


class AgentGymImporter:
    name = "agentgym"
    description = "AgentGym AgentTraj conversations (from human/gpt, Thought/Action turns)"

    def sniff(self, source: Source) -> bool:
        found = _items(source)
        if not found or not found[0]:
            return False
        first = found[0][0]
        if not isinstance(first, dict) or not isinstance(first.get("conversations"), list):
            return False
        turns = first["conversations"]
        return bool(turns) and all(
            isinstance(t, dict) and "from" in t and "value" in t for t in turns[:4]
        )

    def parse(self, source: Source) -> tuple[list[Trajectory], str]:
        found = _items(source)
        if not found:
            raise RecordError("no items found", record=0)
        items, line_based = found
        out = []
        for n, item in enumerate(items):
            record = n + 1 if line_based else n
            if not isinstance(item, dict):
                raise RecordError(
                    f"an item is a {type(item).__name__}, expected an object", record=record
                )
            out.append(self._item(item, record))
        return out, ""

    def _item(self, item: dict[str, Any], record: Any) -> Trajectory:
        turns = item.get("conversations")
        if not isinstance(turns, list) or not turns:
            raise RecordError(
                "conversations must be a non-empty list", record=record, field="conversations"
            )
        _check_turns(turns, record)
        item_id = item.get("item_id", item.get("id", ""))
        environment = str(item_id).rsplit("_", 1)[0] if "_" in str(item_id) else ""
        instruction, task_turn = _preamble(turns)
        prompt_text = turns[task_turn]["value"] if task_turn < len(turns) else ""
        meta: dict[str, Any] = {"item_id": item_id, "task_turn": prompt_text}
        if instruction:
            meta["instruction"] = instruction
        for key, value in item.items():
            if key not in ("conversations", "item_id", "reward", "success"):
                meta.setdefault(key, value)
        return Trajectory(
            task=TaskRef(id=str(item_id), task_set=environment, prompt=task_part(prompt_text)),
            agent="agentgym",
            environment=f"agentgym/{environment}" if environment else "agentgym",
            steps=renumber([*_leading(turns, task_turn), *_steps(turns, task_turn)]),
            outcome=_outcome(item),
            metadata=meta,
        )


def _check_turns(turns: list[Any], record: Any) -> None:
    """Every turn is an object ``{"from": "human"|"gpt"|"system", "value": str}``."""
    for i, turn in enumerate(turns):
        where = f"conversations[{i}]"
        require(turn, dict, "a turn", "an object", record=record, field=where)
        if turn.get("from") not in ("human", "gpt", "system"):
            raise RecordError(
                f"'from' is {turn.get('from')!r}, expected 'human' or 'gpt'",
                record=record,
                field=f"{where}.from",
            )
        require(turn.get("value"), str, "value", "a string", record=record, field=f"{where}.value")


def _preamble(turns: list[dict[str, Any]]) -> tuple[str, int]:
    """(the instruction, the index of the task turn): after any system turns, a human turn
    answered by a short acknowledgement is the environment's instruction and the task is the
    human turn after it; otherwise there is no instruction and the task is the first turn."""
    start = 0
    while start < len(turns) and turns[start]["from"] == "system":
        start += 1
    if (
        start + 2 < len(turns)
        and turns[start]["from"] == "human"
        and turns[start + 1]["from"] == "gpt"
        and _ACK.match(turns[start + 1]["value"])
    ):
        return turns[start]["value"], start + 2
    return "", start


_ROLES = {"system": "system", "human": "user", "gpt": "assistant"}


def _leading(turns: list[dict[str, Any]], task_turn: int) -> list[Step]:
    """Message steps of the turns before the task turn, and of the task turn itself."""
    out = []
    for i, turn in enumerate(turns[: task_turn + 1]):
        if i == task_turn and turn["from"] != "human":
            break
        meta: dict[str, Any] = {"turn_index": i}
        if turn.get("loss") is not None:
            meta["loss"] = turn["loss"]
        out.append(message_step(i, _ROLES[turn["from"]], turn["value"], **meta))
    return out


def _steps(turns: list[dict[str, Any]], task_turn: int) -> list[Step]:
    """One step per gpt turn from the task turn on, observed by the human turn after it."""
    steps: list[Step] = []
    for i in range(task_turn, len(turns)):
        turn = turns[i]
        if turn["from"] != "gpt":
            continue
        thought, action = split_turn(turn["value"])
        verb = _VERB.match(action)
        tool = verb.group(1).strip().replace(" ", "_").lower() if verb else "act"
        nxt = turns[i + 1] if i + 1 < len(turns) and turns[i + 1]["from"] == "human" else None
        meta: dict[str, Any] = {"turn_index": i}
        if turn.get("loss") is not None:
            meta["loss"] = turn["loss"]
        if nxt is None:
            meta["no_observation"] = True
        steps.append(
            Step(
                index=len(steps),
                thought=thought,
                tool=tool,
                params={"action": action},
                observation=nxt["value"] if nxt else "",
                metadata=meta,
            )
        )
    return steps


def _outcome(item: dict[str, Any]) -> Outcome:
    """``reward`` (success at 1 or more) and ``success``, when the item has them."""
    outcome = Outcome()
    reward = item.get("reward")
    if isinstance(reward, (int, float)) and not isinstance(reward, bool):
        outcome.score = float(reward)
        outcome.success = reward >= 1
    if isinstance(item.get("success"), (bool, int)):
        outcome.success = bool(item["success"])
    return outcome


register_importer(AgentGymImporter())
