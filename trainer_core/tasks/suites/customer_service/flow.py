"""What a customer-service template writes: the user's side (an opening, goals revealed one at a
time, facts given only when asked) and the agent's reference (questions to the user, database
calls, confirmations, a closing), played on a working copy of the database as it is written so
that every reference call is checked and the expected final state is the state it leaves."""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from typing import Any

from trainer_core.tasks.model import ToolCall
from trainer_core.tasks.suites.customer_service.world import Ids, execute

#: fact key -> the pattern (a regex, matched on the agent's message in lower case) of a question
#: that asks for it. A scripted user gives a fact only when a message asks for it.
FACT_ASKS: dict[str, str] = {
    "email": r"e-?mail",
    "name": r"\bname\b",
    "zip": r"\bzip\b|post(al)? ?code",
    "order_id": r"order (id|number)|which order",
    "reason": r"\breason\b|\bwhy\b",
    "item": r"which (item|product)|what (item|product)",
    "option": r"which (size|colou?r|option|variant)|what (size|colou?r|option|variant)",
    "address": r"(?<!e-mail )(?<!email )\baddress\b",
    "payment": r"payment method|which card|refund (it |the money )?to|pay (with|by)",
    "tier": r"\btier\b|membership level|which (plan|level)",
    "date": r"\bdate\b|which day|what day",
    "time": r"what time|which time|\btime\b",
    "party_size": r"how many (people|guests)|party size|number of guests",
    "reservation_id": r"reservation (id|number)|which reservation|booking (id|number)",
    "new_email": r"new e-?mail",
}
#: what the agent says to ask for each fact (the reference's questions match FACT_ASKS)
QUESTIONS: dict[str, str] = {
    "order_id": "Which order is it? Please give me the order id.",
    "reason": "What is the reason: no longer needed, or ordered by mistake?",
    "item": "Which item is it?",
    "option": "Which option would you like instead (size or colour)?",
    "address": "What is the new address you want to use?",
    "payment": "Which payment method should I use?",
    "tier": "Which membership tier would you like?",
    "date": "For which date?",
    "time": "What time would you like?",
    "party_size": "How many guests will there be?",
    "reservation_id": "Which reservation is it? Please give me the reservation id.",
    "new_email": "What is the new email you would like to use?",
}
CONFIRM = "Shall I go ahead? (yes/no)"
CLOSING = "Is there anything else I can help you with?"


class TemplateError(Exception):
    """A template wrote a reference call that the database refuses (a bug in the template)."""


@dataclass
class Flow:
    """One task being written: the database, its customer, the user's side and the reference."""

    db: dict[str, Any]
    ids: Ids
    rng: random.Random
    customer: dict[str, Any]
    opening: str = ""
    goals: list[str] = field(default_factory=list)
    facts: dict[str, str] = field(default_factory=dict)
    calls: list[ToolCall] = field(default_factory=list)
    guess: list[ToolCall] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    wants: list[str] = field(default_factory=list)  # the hidden goal, in the user's words
    state: dict[str, Any] = field(default_factory=dict)  # the working copy (set by begin)

    def begin(self) -> None:
        """Fix the initial database (what the task stores) and start the working copy."""
        self.state = copy.deepcopy(self.db)
        first, last = self.customer["name"].split(" ", 1)
        self.facts.update(
            email=f"My email is {self.customer['email']}.",
            name=f"My name is {first} {last}.",
            zip=f"My zip code is {self.customer['address']['zip']}.",
        )

    @property
    def first_name(self) -> str:
        return self.customer["name"].split(" ", 1)[0]

    # --- the reference -----------------------------------------------------------------------------

    def call(self, tool: str, thought: str = "", **params: Any) -> str:
        """A database call of the reference, played on the working copy: its observation."""
        observation, ok = execute(self.state, tool, params)
        if not ok:
            raise TemplateError(f"reference call {tool} {params} refused: {observation}")
        self.calls.append(ToolCall(tool=tool, params=params, thought=thought or f"Call {tool}."))
        return observation

    def say(self, message: str, thought: str = "Talk to the customer.") -> None:
        self.calls.append(ToolCall(tool="respond", params={"message": message}, thought=thought))

    def ask(self, *keys: str, lead: str = "") -> None:
        """Ask the user for facts (each must be known to the user)."""
        for key in keys:
            if key not in self.facts:
                raise TemplateError(f"the user has no fact {key!r} to give")
        text = " ".join([lead, *(QUESTIONS[k] for k in keys)]).strip()
        self.say(text, f"Ask the customer for what only they know: {', '.join(keys)}.")

    def confirm(self, what: str) -> None:
        self.say(f"{what} {CONFIRM}", "Get an explicit yes before changing anything.")

    def close(self, what: str) -> None:
        self.say(f"{what} {CLOSING}", "Tell the customer it is done.")

    def identify(self) -> None:
        """Ask who the customer is (email, or name and zip), find them, read their record."""
        first, last = self.customer["name"].split(" ", 1)
        if self.rng.random() < 0.5:
            self.say(
                "I can help with that. First, what is the email on your account?",
                "Identify the customer before anything else.",
            )
            self.call("find_customer_by_email", "Find the account.", email=self.customer["email"])
        else:
            self.say(
                "I can help with that. First, please tell me your full name and zip code.",
                "Identify the customer before anything else.",
            )
            self.call(
                "find_customer_by_name_zip",
                "Find the account.",
                first_name=first,
                last_name=last,
                zip=self.customer["address"]["zip"],
            )
        self.call("get_customer", "Read the account.", customer_id=self.customer["id"])

    def guess_call(self, tool: str, **params: Any) -> None:
        """A call of the decoy path: acting on a guess, never asking the user."""
        thought = "Act on the most likely record without asking the customer."
        self.guess.append(ToolCall(tool=tool, params=params, thought=thought))

    def guess_done(self, what: str = "Your request is done.") -> None:
        self.guess.append(
            ToolCall(
                tool="respond",
                params={"message": f"{what} {CLOSING}"},
                thought="Tell the customer it is done.",
            )
        )

    # --- choosing records --------------------------------------------------------------------------

    def others(self) -> list[dict[str, Any]]:
        """The other customers (the first is the one sharing the surname when there is one)."""
        rest = [c for c in self.db["customers"].values() if c["id"] != self.customer["id"]]
        surname = self.customer["name"].split(" ", 1)[1]
        return sorted(rest, key=lambda c: c["name"].split(" ", 1)[1] != surname)

    def orders(self, customer: dict[str, Any], status: str) -> list[dict[str, Any]]:
        return [
            self.db["orders"][o]
            for o in customer["orders"]
            if self.db["orders"][o]["status"] == status
        ]

    def product(self, name: str) -> dict[str, Any]:
        return next(p for p in self.db["products"].values() if p["name"] == name)

    def new_address(self) -> dict[str, str]:
        from trainer_core.tasks.suites.customer_service.world import STREETS

        old = self.customer["address"]
        street = f"{self.rng.randint(100, 199)} {self.rng.choice(STREETS)}"
        return {"street": street, "city": old["city"], "zip": str(int(old["zip"]) % 89999 + 10001)}

    def expected(self) -> dict[str, Any]:
        return self.state
