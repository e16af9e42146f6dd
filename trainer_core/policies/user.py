"""PolicyUser: any policy (Anthropic, OpenAI-compatible, a local model...) plays the simulated
user of a conversation task, as tau-bench's LLM user does.

::

    from trainer_core.policies.user import PolicyUser
    env = make("steplab/customer-service",
               user=lambda: PolicyUser(OpenAICompatPolicy("qwen", base_url=...)))

The policy is reset on a task of its own whose prompt is :func:`user_prompt`: the rules of
playing a user (one message at a time, reveal the goal gradually, never invent what the
instruction does not say, say the stop token when the goal is met), the hidden goal (the task's
``metadata["user"]["instruction"]``, else its prompt) and the agent's greeting. It answers with
one tool, ``reply(message)``; a turn that is not a tool call (plain text) is taken as the message
itself. Each later agent message is the observation of the policy's next turn. ``cost`` adds up
the policy's cost (US dollars).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainer_core.envs.users import STOP
from trainer_core.policies.base import Turn, decide
from trainer_core.tasks.model import Task, ToolSpec

GREETING = "Hi! How can I help you today?"

REPLY_TOOL = ToolSpec(
    "reply",
    "Send your next message to the agent.",
    {
        "type": "object",
        "properties": {"message": {"type": "string", "description": "your message, one line"}},
        "required": ["message"],
    },
    "write",
)


def user_prompt(instruction: str, *, stop: str = STOP, greeting: str = GREETING) -> str:
    """What a policy playing the user is told (tau-bench's user rules, in our words)."""
    return (
        "You are a customer talking to a customer-service agent. Play the customer described "
        f"below.\n\nInstruction: {instruction}\n\n"
        "Rules:\n"
        "- Write one short message at a time, as the customer would.\n"
        "- Do not give away the whole instruction at once: say only what the current step "
        "needs, and answer what the agent asks.\n"
        "- Never make up information the instruction does not give (an order id, an email): "
        "say you do not know it.\n"
        f"- When your goal is met, answer with {stop} alone to end the conversation.\n"
        "- Do not repeat the instruction word for word.\n"
        "Send each message with the reply tool.\n\n"
        f"The agent says: {greeting}"
    )


class PolicyUser:
    """A simulated user played by ``policy`` (see the module docstring)."""

    def __init__(self, policy: Any, *, stop: str = STOP, greeting: str = GREETING):
        self.policy = policy
        self.name = f"user:{getattr(policy, 'name', type(policy).__name__)}"
        self.stop = stop
        self.greeting = greeting
        self.cost = 0.0
        self._history: list[Turn] = []
        self._pending: Mapping[str, Any] | None = None
        self._raw = ""
        self._prompt = ""

    def reset(self, task: Task) -> str:
        spec = (task.metadata or {}).get("user")
        instruction = spec.get("instruction") if isinstance(spec, Mapping) else None
        self._prompt = user_prompt(
            str(instruction or task.prompt), stop=self.stop, greeting=self.greeting
        )
        self.policy.reset(Task(id=f"{task.id}:user" if task.id else "", prompt=self._prompt))
        self._history = []
        self._pending = None
        self.cost = 0.0
        return self._say(self._prompt)

    def reply(self, message: str) -> str:
        self._history.append(Turn(action=self._pending, observation=message, raw=self._raw))
        return self._say(message)

    def _say(self, observation: str) -> str:
        decision = decide(self.policy, observation, self._history, [REPLY_TOOL])
        self.cost += decision.usage.cost
        self._pending, self._raw = decision.action, decision.raw
        action = decision.action or {}
        text = (action.get("params") or {}).get("message") if action else None
        if not isinstance(text, str):
            text = decision.raw
        text = (text or "").strip()
        return text or "..."
