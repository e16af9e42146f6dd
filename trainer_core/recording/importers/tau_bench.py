"""tau-bench result files: a JSON list of ``{task_id, reward, info, traj, trial}``.

``traj`` is the OpenAI chat history of the agent with the simulated user. Every tool call is one
tool step (observation: the matching ``tool`` message); the system prompt, the user's turns and
the agent's plain text replies (tau-bench's ``respond`` action) are message steps in their place
(:func:`~trainer_core.recording.importers.openai_chat.walk_openai_messages`). Outcome: ``reward`` (success when it is 1); ``info`` is kept in the outcome metadata. A run
that raised (``info.error``, with its traceback) has its error in ``metadata["error"]``: the store
keeps it as a failed trajectory.
"""

from __future__ import annotations

from typing import Any

from trainer_core.recording.importers.base import RecordError, Source, register_importer
from trainer_core.recording.schema import TaskRef, Trajectory

_DOMAINS = {"airline": "airline", "retail": "retail"}


def _items(source: Source) -> list[Any] | None:
    data = source.json
    if isinstance(data, dict) and isinstance(data.get("results"), list):
        data = data["results"]
    if data is None and source.jsonl is not None:
        data = source.jsonl
    return data if isinstance(data, list) else None


def _domain(system: str) -> str:
    head = system[:200].lower()
    for word, domain in _DOMAINS.items():
        if word in head:
            return domain
    return ""


class TauBenchImporter:
    name = "tau-bench"
    description = "tau-bench results: a list of {task_id, reward, info, traj} (OpenAI messages)"

    def sniff(self, source: Source) -> bool:
        items = _items(source)
        if not items:
            return False
        first = items[0]
        return (
            isinstance(first, dict)
            and "task_id" in first
            and "traj" in first
            and ("reward" in first or "info" in first)
        )

    def parse(self, source: Source) -> tuple[list[Trajectory], str]:
        from trainer_core.recording.importers.openai_chat import walk_openai_messages

        items = _items(source) or []
        out = []
        for n, item in enumerate(items):
            if not isinstance(item, dict):
                raise RecordError(
                    f"a result is a {type(item).__name__}, expected an object", record=n
                )
            for key in ("task_id", "traj"):
                if key not in item:
                    raise RecordError(f"missing {key!r}", record=n, field=key)
            reward = item.get("reward")
            if reward is not None and (
                isinstance(reward, bool) or not isinstance(reward, (int, float))
            ):
                raise RecordError(
                    f"reward is a {type(reward).__name__}, expected a number",
                    record=n,
                    field="reward",
                )
            info = item.get("info") if item.get("info") is not None else {}
            if not isinstance(info, dict):
                raise RecordError(
                    f"info is a {type(info).__name__}, expected an object", record=n, field="info"
                )
            walk = walk_openai_messages(item["traj"], record=n, field_name="traj")
            task = info.get("task") if isinstance(info.get("task"), dict) else {}
            instruction = (
                task.get("instruction") if isinstance(task.get("instruction"), str) else ""
            )
            domain = _domain(walk.system)
            stopped = any(
                s.kind == "message" and s.role == "user" and "###STOP###" in s.text
                for s in walk.steps
            )
            transferred = any(s.tool == "transfer_to_human_agents" for s in walk.steps)
            outcome = walk.outcome(
                success=None if reward is None else reward == 1,
                score=None if reward is None else float(reward),
                terminated=stopped or transferred,
                metadata={"info": info},
            )
            meta: dict[str, Any] = {"first_user_message": walk.prompt}
            if "trial" in item:
                meta["trial"] = item["trial"]
            meta.update(walk.metadata())
            if isinstance(info.get("user_cost"), (int, float)):
                meta["user_cost_usd"] = info["user_cost"]
            if info.get("error"):  # the run raised (tau-bench records reward 0 and no traj)
                meta["error"] = str(info["error"])
            out.append(
                Trajectory(
                    task=TaskRef(
                        id=str(item["task_id"]),
                        task_set=f"tau-bench/{domain}" if domain else "tau-bench",
                        prompt=instruction or walk.prompt,
                    ),
                    agent="tau-bench",
                    environment=f"tau-bench/{domain}" if domain else "tau-bench",
                    steps=walk.steps,
                    outcome=outcome,
                    metadata=meta,
                )
            )
        return out, ""


register_importer(TauBenchImporter())
