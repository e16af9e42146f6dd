"""Simulated users: the other side of a conversation task (tau-bench's user simulator).

A user has two calls::

    opening = user.reset(task)      # the user's first message
    reply = user.reply(message)     # the user's answer to what the agent said

and says :data:`STOP` (``###STOP###``, tau-bench's token) when their goal is met; the
environment then ends the episode. ``user.cost`` (US dollars, optional) is what playing the user
cost so far.

:class:`ScriptedUser` plays the task's ``metadata["user"]`` (see
``trainer_core.tasks.suites.customer_service``): it gives a fact only when a message asks for
it, reveals its further goals one at a time when the agent closes one, agrees to a
confirmation (unless it asks for a fact not given yet: "shall I ship it to your current
address?" gets the new address), and says the stop token when the agent asks whether there is
anything else and nothing is left. Any policy can play the user instead through
:class:`trainer_core.policies.user.PolicyUser`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

from trainer_core.errors import ConfigError
from trainer_core.tasks.model import Task

STOP = "###STOP###"
YES = "Yes, please go ahead."
UNKNOWN = "Sorry, I don't know that."
WAITING = "Okay."

#: a message asking the user to confirm a change
CONFIRM = re.compile(
    r"\(yes/no\)|\bconfirm|\bproceed\b|go ahead|do you want me to|would you like me to|"
    r"\bshall i\b(?! use)"
)
#: a message closing a request (what else can the agent do?)
CLOSING = re.compile(r"anything else|something else|anything more|all set")
#: an open question (how can the agent help?)
OPEN = re.compile(r"how (can|may) i help|what can i do for you|what would you like me to do")


@runtime_checkable
class UserSimulator(Protocol):
    def reset(self, task: Task) -> str: ...

    def reply(self, message: str) -> str: ...


class ScriptedUser:
    """A deterministic user played from the task's ``metadata["user"]``: ``opening``, ``goals``
    (revealed in order), ``facts`` (``{"key", "ask", "say"}``, ``ask`` a regex matched on the
    agent's message in lower case) and ``stop``. It leaves (says the stop token) after
    ``max_replies`` replies, or after ``patience`` replies in a row with nothing to say (a
    question it cannot answer, a message that asks nothing)."""

    name = "scripted-user"

    def __init__(self, max_replies: int = 40, patience: int = 3):
        self.max_replies = max_replies
        self.patience = patience
        self.cost = 0.0
        self._facts: dict[str, tuple[re.Pattern[str], str]] = {}
        self._given: set[str] = set()
        self._goals: list[str] = []
        self._current = ""
        self._stop = STOP
        self._replies = self._idle = 0

    def reset(self, task: Task) -> str:
        spec = (task.metadata or {}).get("user")
        if not isinstance(spec, Mapping) or not isinstance(spec.get("opening"), str):
            raise ConfigError(
                "a scripted user needs the task's metadata['user'] with an 'opening' message "
                "(and 'goals', 'facts'); or play the user with a policy (PolicyUser)"
            )
        self._facts = {
            str(f.get("key") or n): (re.compile(str(f["ask"])), str(f["say"]))
            for n, f in enumerate(spec.get("facts") or [])
            if isinstance(f, Mapping) and f.get("ask") and f.get("say")
        }
        self._given = set()
        self._goals = [str(g) for g in spec.get("goals") or []]
        self._stop = str(spec.get("stop") or STOP)
        self._current = spec["opening"]
        self._replies = self._idle = 0
        return self._current

    def reply(self, message: str) -> str:
        self._replies += 1
        answer = self._answer((message or "").lower())
        self._idle = self._idle + 1 if answer in (UNKNOWN, WAITING) else 0
        if self._replies > self.max_replies or self._idle >= self.patience:
            return self._stop
        return answer

    def _answer(self, text: str) -> str:
        """What the user says to ``text`` (lower case), in this order: facts it asks for that
        were not given yet; a yes to a confirmation; the next goal or the stop token to a
        closing; facts asked again; the current goal to an open question; "I don't know" to
        another question; the next goal, or "Okay.", to anything else."""
        asked = [(key, say) for key, (pattern, say) in self._facts.items() if pattern.search(text)]
        new = [(key, say) for key, say in asked if key not in self._given]
        if new:
            self._given.update(key for key, _ in new)
            return " ".join(say for _, say in new)
        if CONFIRM.search(text):
            return YES
        if CLOSING.search(text):
            return self._next_goal() or self._stop
        if asked:
            return " ".join(say for _, say in asked)
        if OPEN.search(text):
            return self._current
        if "?" in text:
            return UNKNOWN
        return self._next_goal() or WAITING

    def _next_goal(self) -> str:
        if not self._goals:
            return ""
        self._current = self._goals.pop(0)
        return self._current


def make_user(user: Any) -> UserSimulator:
    """A user for one episode from what an environment was given: None or ``"scripted"`` (a
    :class:`ScriptedUser`), a user object (used as it is), or a factory called with no
    arguments (a fresh user per environment: pass one when episodes run in parallel)."""
    if user is None or user == "scripted":
        return ScriptedUser()
    if isinstance(user, UserSimulator) and not isinstance(user, type):
        return user
    if callable(user):
        made = user()
        if isinstance(made, UserSimulator):
            return made
    raise ConfigError(
        "user must be 'scripted', a user (reset(task) -> str, reply(message) -> str) or a "
        f"factory of one, not {type(user).__name__}"
    )


UserFactory = Callable[[], UserSimulator]
