"""Customer service (``steplab/customer-service``): tau-bench-style conversations. A simulated
customer with a hidden goal talks to the agent; the agent has tools over a small database
(orders, accounts, table reservations) and talks back with ``respond``; the final state of the
database decides.

The task carries its world in ``metadata`` (``trainer_core.tasks.suites.customer_service``
generates them from a seed): ``database`` (the initial state), ``user`` (the scripted customer),
``expected_database`` and ``required_outputs`` (for the ``final_state`` checker) and
``instructions`` (the agent's rules). ``reset(seed=k)`` without a task plays the ``k``-th task
of ``split``.

``respond(message)``
    sends ``message`` to the user; the observation is the user's reply. The timestep's
    ``info["messages"]`` holds both turns (``{"role": "assistant" | "user", "text"}``), so the
    episode records them as an assistant and a user message step — the shape tau-bench logs
    import as. When the reply holds the stop token (``###STOP###``) the episode ends and the
    checker runs.
``transfer_to_human_agents(summary)``
    ends the episode too (the checker runs on the state as it is).
database tools
    :data:`~trainer_core.tasks.suites.customer_service.world.DATABASE_TOOLS`: reads return
    JSON; a write changes the database; a refused call changes nothing and says why.
``calculate``, ``think``
    arithmetic; a thought.

The user is :class:`~trainer_core.envs.users.ScriptedUser` unless ``user=`` names another (a
user object, or a factory of one — e.g. ``PolicyUser`` around any policy). The reset's
``info["messages"]`` holds one user message: the first observation (the rules, then the user's
opening), as the agent's policy is prompted with it.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from trainer_core.envs.arithmetic import CalculatorError, evaluate
from trainer_core.envs.core import TimeStep
from trainer_core.envs.toolenv import ProfileEnv, _outcome_dict
from trainer_core.envs.users import STOP, UserSimulator, make_user
from trainer_core.errors import ConfigError, InputError
from trainer_core.tasks.model import Task
from trainer_core.tasks.suites.arithmetic import format_number
from trainer_core.tasks.suites.customer_service import SPLITS, customer_service_task, task_prompt
from trainer_core.tasks.suites.customer_service.world import DATABASE_TOOLS, execute


class CustomerServiceEnv(ProfileEnv):
    """A database, a simulated user, and the tools over both (see the module docstring)."""

    profile_name = "customer-service"
    #: a model's plain-text turn is a ``respond`` to the customer, as in tau-bench
    #: (:func:`trainer_core.policies.base.text_reply`)
    text_reply = ("respond", "message")

    def __init__(self, split: str = "train", user: Any = None):
        super().__init__()
        if split not in SPLITS:
            raise ConfigError(f"unknown split {split!r}; use {', '.join(SPLITS)}")
        self.split = split
        self._user_spec = user
        self.user: UserSimulator | None = None
        self.db: dict[str, Any] = {}
        self.said: list[str] = []
        self._user_billed = 0.0
        for name in DATABASE_TOOLS:
            setattr(self, f"tool_{name}", functools.partial(self._database, name))

    def _reset(self, *, task: Task | None, seed: int | None) -> TimeStep:
        if task is None:
            task = customer_service_task(SPLITS[self.split][0] + (seed or 0), self.split)
            self.task = task
        meta = task.metadata or {}
        if not isinstance(meta.get("database"), dict):
            raise InputError(
                f"task {task.id or '(no id)'} has no metadata['database']: a customer-service "
                "task carries its database (see trainer_core.tasks.suites.customer_service)"
            )
        self.db = copy.deepcopy(meta["database"])
        self.said = []
        self._user_billed = 0.0
        self.user = make_user(self._user_spec)
        opening = self.user.reset(task)
        prompt = task_prompt(str(meta.get("instructions") or task.prompt), opening)
        return TimeStep(
            observation=prompt,
            info={"task_id": task.id, "messages": [{"role": "user", "text": prompt}]},
        )

    # --- the conversation -----------------------------------------------------------------------

    def tool_respond(self, message: str) -> TimeStep:
        if self.user is None:
            raise ConfigError("reset the environment before stepping it")
        self.said.append(message)
        reply = self.user.reply(message)
        messages = [{"role": "assistant", "text": message}, {"role": "user", "text": reply}]
        if STOP in reply:
            return self._finish(reply, messages=messages)
        return TimeStep(
            observation=reply, info=self._billed({"messages": messages, "source": "user"})
        )

    def _billed(self, info: dict[str, Any]) -> dict[str, Any]:
        """``info`` with ``user_cost_step``: what the simulated user's model cost (US dollars)
        since the last step that said so (its opening included), when anything; the collect loop
        records it as the step's ``metadata.user_cost`` and adds it to the run's cost."""
        total = getattr(self.user, "cost", None)
        if isinstance(total, int | float) and total > self._user_billed:
            info["user_cost_step"] = float(total) - self._user_billed
            self._user_billed = float(total)
        return info

    def tool_transfer_to_human_agents(self, summary: str) -> TimeStep:
        return self._finish(f"Transferred to a human agent: {summary}")

    def _finish(
        self, observation: str, *, messages: list[dict[str, str]] | None = None
    ) -> TimeStep:
        """End the episode: the checker sees the final database and what the agent said."""
        from trainer_core.tasks.checkers import check_outcome, outcome_reward

        task = self.task or Task(prompt="")
        outcome = check_outcome(
            task,
            final_text=self.said[-1] if self.said else "",
            run_result={"database": self.db, "said": list(self.said)},
        )
        info: dict[str, Any] = {"outcome": _outcome_dict(outcome), "source": "user"}
        if messages:
            info["messages"] = messages
        cost = getattr(self.user, "cost", None)
        if isinstance(cost, int | float) and cost:
            info["user_cost"] = float(cost)  # the episode's total, as tau-bench's info says
        self._billed(info)
        return TimeStep(
            observation=observation,
            reward=outcome_reward(outcome),
            terminated=True,
            info=info,
        )

    # --- the database -----------------------------------------------------------------------------

    def _database(self, tool: str, **params: Any) -> TimeStep:
        observation, ok = execute(self.db, tool, params)
        return TimeStep(observation=observation, info={} if ok else {"error": "refused"})

    def tool_calculate(self, expression: str) -> TimeStep:
        try:
            value = evaluate(expression)
        except CalculatorError as exc:
            return TimeStep(observation=f"Error: {exc}", info={"error": "calculator_error"})
        return TimeStep(observation=f"{expression} = {format_number(value)}")

    def tool_think(self, thought: str) -> TimeStep:
        return TimeStep(observation="(thought noted)")
