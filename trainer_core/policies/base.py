"""The policy protocol: from the observation, the history and the tools, the next action.

Every policy (scripted, Anthropic, OpenAI-compatible, local Hugging Face model) has::

    policy.reset(task)                                  # start an episode
    decision = policy.act(observation, history, tools)  # -> Decision

``observation`` is the latest observation (the task prompt on the first step), ``history`` the
earlier turns of this episode as :class:`Turn` objects (oldest first), ``tools`` the
environment's :class:`~trainer_core.tasks.model.ToolSpec` list.

A :class:`Decision` carries the action ``{"tool", "params", "thought"}`` and the
:class:`Usage` of the call. When the model's output cannot be turned into an action (no tool
call, malformed JSON arguments, an unparseable ReAct block), the policy does **not** raise: it
returns a Decision with ``action=None`` and ``error`` saying what was wrong and how to answer
instead. The episode loop (:func:`play_step`) records that as a step whose observation is the
error, and the model sees it on its next turn, so one bad output never crashes an episode.

Failures that are not the model's fault (the API is down, the key is missing) raise
:class:`~trainer_core.errors.PolicyError` and fail the episode with that message.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from trainer_core.envs.core import AgentEnv, TimeStep
    from trainer_core.tasks.model import Task, ToolSpec

__all__ = [
    "PROMPT_FORMATS",
    "Decision",
    "Policy",
    "Turn",
    "Usage",
    "decide",
    "decide_many",
    "invalid_output_observation",
    "play_step",
    "text_reply",
]

#: ``native``: the backend's own tool calling (Anthropic tool_use, OpenAI tool_calls, the chat
#: format's tool-call tags for local models). ``react``: plain text ``Thought:`` / ``Action:``
#: with JSON arguments, for models or servers without tool calling.
PROMPT_FORMATS: tuple[str, ...] = ("native", "react")


@dataclass
class Usage:
    """What one policy call cost."""

    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0  # US dollars
    latency: float = 0.0  # seconds, wall clock, retries included

    def as_dict(self) -> dict[str, float | int]:
        return {
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "cost": self.cost,
            "latency": self.latency,
        }

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.tokens_in + other.tokens_in,
            self.tokens_out + other.tokens_out,
            self.cost + other.cost,
            self.latency + other.latency,
        )


@dataclass
class Decision:
    """A policy's answer for one step."""

    action: dict[str, Any] | None  # {"tool": str, "params": dict, "thought": str}; None: see error
    usage: Usage = field(default_factory=Usage)
    error: str | None = None  # what was wrong with the model's output (becomes the observation)
    raw: str = ""  # the model's output as text, for the record
    # For training (local models, when asked): the prompt's and the sampled completion's token
    # ids, and the log-probability of each sampled token under the policy.
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Turn:
    """One earlier step of the episode, as a policy sees it."""

    action: Mapping[str, Any] | None  # None when the model's output was not an action
    observation: str
    raw: str = ""  # the model's text output (used to replay a malformed turn faithfully)
    error: str | None = None  # set when the output was malformed (``observation`` says so too)


@runtime_checkable
class Policy(Protocol):
    name: str

    def reset(self, task: Task | None) -> None: ...

    def act(
        self, observation: str, history: Sequence[Turn], tools: Sequence[ToolSpec]
    ) -> Decision: ...


def invalid_output_observation(problem: str, *, prompt_format: str = "native") -> str:
    """The observation a model gets when its output was not a usable action."""
    if prompt_format == "react":
        how = (
            'Answer with a line "Thought: <your reasoning>" followed by a line '
            '"Action: <tool name>" and a line "Action Input: <JSON object of arguments>".'
        )
    else:
        how = "Call exactly one of the available tools, with a JSON object of arguments."
    return f"Your last output was not a valid action: {problem} {how}"


def decide(
    policy: Any, observation: str, history: Sequence[Turn], tools: Sequence[ToolSpec]
) -> Decision:
    """Call ``policy.act`` and normalise the answer to a Decision (a policy may return a bare
    action dict, with its usage in ``policy.last_usage``, as the scripted policy does)."""
    out = policy.act(observation, list(history), list(tools))
    if isinstance(out, Decision):
        return out
    last = getattr(policy, "last_usage", None) or {}
    usage = Usage(
        tokens_in=int(last.get("tokens_in", 0) or 0),
        tokens_out=int(last.get("tokens_out", 0) or 0),
        cost=float(last.get("cost", 0.0) or 0.0),
        latency=float(last.get("latency", 0.0) or 0.0),
    )
    return Decision(action=dict(out) if out is not None else None, usage=usage)


def decide_many(
    policies: Sequence[Any], requests: Sequence[tuple[str, Sequence[Turn], Sequence[ToolSpec]]]
) -> list[Decision]:
    """:func:`decide` for several episodes' turns at once, one ``(observation, history, tools)``
    request per policy: policies of one class that has ``act_together`` (a local model decodes
    them in one batch) answer together, any others one by one."""
    together = getattr(type(policies[0]), "act_together", None) if policies else None
    if len(policies) > 1 and together is not None and len({type(p) for p in policies}) == 1:
        return together(policies, [(o, list(h), list(t)) for o, h, t in requests])
    return [decide(p, *request) for p, request in zip(policies, requests, strict=True)]


def text_reply(env: AgentEnv, decision: Decision) -> Decision:
    """The decision an environment that talks to someone takes a plain-text answer as.

    An environment with ``text_reply = (tool, parameter)`` (steplab/customer-service:
    ``("respond", "message")``) takes a model's turn that is plain text — no tool call at all,
    not cut off: ``decision.metadata["plain_text"]``, set by the policies — as that tool called
    with the text, as tau-bench takes text as ``respond``. Anything else is returned unchanged
    (a malformed call stays malformed)."""
    target = getattr(env.unwrapped if hasattr(env, "unwrapped") else env, "text_reply", None)
    text = (decision.raw or "").strip()
    if decision.action is not None or not target or not decision.metadata.get("plain_text"):
        return decision
    if not text:
        return decision
    tool, parameter = target
    return replace(
        decision,
        action={"tool": tool, "params": {parameter: text}, "thought": ""},
        error=None,
        metadata={**decision.metadata, "text_reply": True},
    )


def play_step(env: AgentEnv, decision: Decision) -> TimeStep:
    """Apply a decision: step the environment with its action, or, when the model's output was
    malformed, answer with the error as the observation without touching the environment."""
    from trainer_core.envs.core import TimeStep

    if decision.action is None:
        problem = decision.error or "the output contained no action."
        return TimeStep(
            observation=invalid_output_observation(
                problem, prompt_format=decision.metadata.get("prompt_format", "native")
            ),
            info={"error": "malformed_output"},
        )
    return env.step(decision.action)
