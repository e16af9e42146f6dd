"""ScriptedPolicy: plays a task's reference solution, optionally with deliberate mistakes.

For tests and demos: a policy that needs no model, solves every task that has a correct
reference solution, and makes mistakes on purpose and reproducibly when asked to::

    policy = ScriptedPolicy(mistakes={"wrong_tool": 0.2, "wrong_answer": 0.1}, seed=7)
    steps, last = run_episode(make("steplab/conversation"), policy, task)
    policy.mistakes_made  # [{"step": 2, "kind": "wrong_tool", ...}, ...]

Mistake kinds (each with a probability per reference step; the draws come from
``random.Random(seed)``, in the order of :data:`MISTAKE_KINDS`, one draw per kind with a
probability above 0 at every reference step, so the same seed and the same sequence of tasks give
the same episodes):

``skip_step``
    The reference call is dropped. Only a non-final call that is not an answer (respond, submit,
    finish) or a ``think`` is skipped. The episode has one step fewer; the scripted answer does
    not depend on observations, so the outcome is unchanged.
``repeat_step``
    The previous reference call is sent again before this one (a redundant duplicate: same
    action, same observation). Needs a previous call.
``wrong_tool``
    A call to a tool that does not exist (``<tool>_v2``) is sent before the right call; the
    environment answers "Unknown tool ...".
``bad_params``
    The call is sent first without one of its required parameters (from the tool's JSON schema
    in ``tools``), then correctly; the environment answers "Invalid parameters ...". Only calls
    that have a required parameter.
``wrong_answer``
    The final answer is changed: a number gets 1 added, a string gets " (guess)" appended (inside
    the last ``<answer>`` tag when there is one). Only answer calls (respond, submit, finish).
    Where the answer is the work — the reference's answer call states no answer, as a coding
    task's ``submit {}`` — the fix is what goes wrong instead: drawn at the reference's first
    write (a call with ``new_string``, ``new_str``, ``content`` or ``file_text``), the rest of
    the episode plays the task's ``metadata["wrong_patch"]`` (a plausible fix that fails a
    hidden test: its writes, then its submit); a task without one gets its first write aimed at
    a file that does not exist (``pkg/mod.py`` → ``pkg/mod_old.py``), then the reference's
    other calls without its writes. Either way the hidden tests fail. Each wrong write is
    recorded (a write the reference also makes is not a mistake).
``follow_decoy``
    At the step where the task's wrong path (``metadata["decoy_solution"]``: tool calls that
    share the reference's first calls, then fetch a near-duplicate record and follow it, as the
    ``steplab/lookup`` tasks carry) leaves the reference, the policy takes that path to its end:
    it fetches the decoy and submits the wrong answer the decoy leads to. Only tasks with a
    decoy solution.

A wrong call is always followed by the right one, so every reference step is eventually played
and an episode always ends. When the reference is exhausted and the episode goes on, the policy
submits (``submit`` without an answer when the environment has that tool, else ``respond`` with
an empty message).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from trainer_core.errors import ConfigError
from trainer_core.tasks.model import Task, ToolCall, coerce_task

if TYPE_CHECKING:
    from trainer_core.envs.core import AgentEnv, TimeStep

__all__ = ["MISTAKE_KINDS", "ScriptedPolicy", "run_episode"]

MISTAKE_KINDS: tuple[str, ...] = (
    "skip_step",
    "repeat_step",
    "wrong_tool",
    "bad_params",
    "wrong_answer",
    "follow_decoy",
)
ANSWER_TOOLS = frozenset({"respond", "submit", "finish"})
_ANSWER_TAG = re.compile(r"(<\s*answer\s*>)(.*?)(<\s*/\s*answer\s*>)", re.IGNORECASE | re.DOTALL)


def _zero_usage() -> dict[str, float | int]:
    return {"tokens_in": 0, "tokens_out": 0, "cost": 0.0, "latency": 0.0}


def _tool_info(tools: Sequence[Any] | None) -> tuple[list[str], dict[str, list[str]]]:
    """Tool names and each tool's required parameters, from ToolSpecs, dicts or names."""
    names: list[str] = []
    required: dict[str, list[str]] = {}
    for tool in tools or []:
        if isinstance(tool, str):
            name, parameters = tool, None
        elif isinstance(tool, Mapping):
            name, parameters = tool.get("name"), tool.get("parameters")
        else:
            name, parameters = getattr(tool, "name", None), getattr(tool, "parameters", None)
        if not isinstance(name, str):
            continue
        names.append(name)
        if isinstance(parameters, Mapping):
            required[name.lower()] = [str(p) for p in parameters.get("required", []) or []]
    return names, required


def wrong_value(text: str) -> str:
    """A wrong version of an answer: a number plus 1, else the text with " (guess)" appended."""
    from trainer_core.tasks.checkers import parse_number

    value = parse_number(text)
    if value is None:
        return f"{text.strip()} (guess)".strip()
    changed = value + 1
    if changed.denominator == 1:
        return str(changed.numerator)
    return f"{float(changed):.10g}"


def wrong_answer_text(text: str) -> str:
    """``text`` with its answer changed: inside the last ``<answer>`` tag, else the whole text."""
    matches = list(_ANSWER_TAG.finditer(text))
    if not matches:
        return wrong_value(text)
    last = matches[-1]
    return (
        text[: last.start()]
        + last.group(1)
        + wrong_value(last.group(2).strip())
        + last.group(3)
        + text[last.end() :]
    )


class ScriptedPolicy:
    """Plays ``task.reference_solution`` step by step, injecting mistakes with the given
    probabilities (see the module docstring). ``reset(task)``, then ``act(...)`` per step."""

    def __init__(self, mistakes: dict[str, float] | None = None, seed: int = 0, delay: float = 0.0):
        if isinstance(delay, bool) or not isinstance(delay, int | float) or not 0 <= delay <= 60:
            raise ConfigError("delay must be a number of seconds within 0..60")
        self.delay = float(delay)  # "think time" per action, like a model's latency
        self.name = "scripted"
        mistakes = dict(mistakes or {})
        for kind, probability in mistakes.items():
            if kind not in MISTAKE_KINDS:
                raise ConfigError(
                    f"unknown mistake kind {kind!r}; known: {', '.join(MISTAKE_KINDS)}"
                )
            if isinstance(probability, bool) or not isinstance(probability, int | float):
                raise ConfigError(f"the probability of {kind!r} must be a number in 0..1")
            if not 0.0 <= float(probability) <= 1.0:
                raise ConfigError(
                    f"the probability of {kind!r} must be within 0..1, not {probability!r}"
                )
        self.mistakes: dict[str, float] = {k: float(v) for k, v in mistakes.items()}
        self.seed = seed
        self._rng = random.Random(seed)
        self.task: Task | None = None
        self.mistakes_made: list[dict[str, Any]] = []
        self.last_usage: dict[str, float | int] = _zero_usage()
        self._reference: list[ToolCall] = []
        self._next = 0
        self._queue: list[tuple[dict[str, Any], dict[str, Any] | None]] = []
        self._previous: ToolCall | None = None
        self._steps = 0
        self._wrong_fix_at: set[int] = set()  # reference indices of a wrong fix's calls

    # --- the policy protocol ----------------------------------------------------------------

    def reset(self, task: Task | dict[str, Any] | str | None) -> None:
        """Start an episode of ``task``. The random stream goes on across episodes."""
        self.task = coerce_task(task)
        self._reference = list(self.task.reference_solution) if self.task else []
        self._next = 0
        self._queue = []
        self._previous = None
        self._steps = 0
        self._wrong_fix_at = set()
        self.mistakes_made = []
        self.last_usage = _zero_usage()

    def resume(self, history: Sequence[Any]) -> None:
        """Continue an episode from its middle (branch-and-resample): the reference calls the
        ``history`` turns already made, in order from the start of the reference, are skipped, so
        the policy goes on with the first one not played."""
        for turn in history:
            action = getattr(turn, "action", None)
            if action is None or self._next >= len(self._reference):
                continue
            call = self._reference[self._next]
            if call.tool == action.get("tool") and dict(call.params) == dict(
                action.get("params") or {}
            ):
                self._next += 1
                self._previous = call

    def act(
        self, observation: str, history: list | None = None, tools: list | None = None
    ) -> dict[str, Any]:
        """The next action ``{"tool", "params", "thought"}``."""
        self.last_usage = _zero_usage()
        if self.delay:
            import time

            time.sleep(self.delay)
            self.last_usage["latency"] = self.delay
        names, required = _tool_info(tools)
        while not self._queue and self._next < len(self._reference):
            self._plan(self._next, names, required)
            self._next += 1
        self._steps += 1
        if not self._queue:
            return self._closing_action(names)
        action, mistake = self._queue.pop(0)
        if mistake is not None:
            self.mistakes_made.append({"step": self._steps, **mistake, "action": _copy(action)})
        return _copy(action)

    # --- planning -----------------------------------------------------------------------------

    def _plan(self, index: int, names: list[str], required: dict[str, list[str]]) -> None:
        call = self._reference[index]
        drawn = {
            kind
            for kind in MISTAKE_KINDS
            if self.mistakes.get(kind, 0.0) > 0 and self._rng.random() < self.mistakes[kind]
        }
        tool = call.tool.strip().lower()
        is_answer = tool in ANSWER_TOOLS
        is_last = index == len(self._reference) - 1
        where = {"reference_index": index, "tool": call.tool}

        if "skip_step" in drawn and not is_answer and not is_last and tool != "think":
            self.mistakes_made.append(
                {
                    "step": self._steps + 1,
                    "kind": "skip_step",
                    **where,
                    "action": None,
                    "detail": f"skipped the reference call {call.tool}",
                }
            )
            return
        decoy = self._decoy_call(index) if "follow_decoy" in drawn else None
        if decoy is not None:
            call, tool = decoy, decoy.tool.strip().lower()
        wrong_fix = self._wrong_fix_call(index) if "wrong_answer" in drawn else None
        if wrong_fix is not None:
            call, tool = wrong_fix, wrong_fix.tool.strip().lower()
        if "repeat_step" in drawn and self._previous is not None:
            self._queue.append(
                (
                    _action(self._previous),
                    {
                        "kind": "repeat_step",
                        **where,
                        "detail": f"repeated the previous call {self._previous.tool}",
                    },
                )
            )
        if "wrong_tool" in drawn:
            wrong = f"{call.tool}_v2"
            taken = {n.lower() for n in names}
            while wrong.lower() in taken:
                wrong += "_v2"
            self._queue.append(
                (
                    {"tool": wrong, "params": dict(call.params), "thought": _thought(call)},
                    {"kind": "wrong_tool", **where, "detail": f"called {wrong} for {call.tool}"},
                )
            )
        if "bad_params" in drawn:
            needed = [p for p in required.get(tool, []) if p in call.params]
            if needed:
                params = {k: v for k, v in call.params.items() if k != needed[0]}
                self._queue.append(
                    (
                        {"tool": call.tool, "params": params, "thought": _thought(call)},
                        {
                            "kind": "bad_params",
                            **where,
                            "detail": f"left out the required parameter {needed[0]!r}",
                        },
                    )
                )
        action = _action(call)
        mistake = None
        if decoy is not None:
            detail = f"took the decoy path: {call.tool} {dict(call.params)}"
            mistake = {"kind": "follow_decoy", **where, "detail": detail}
        if index in self._wrong_fix_at:
            detail = f"applied a wrong fix: {call.tool} {_brief(call.params)}"
            mistake = {"kind": "wrong_answer", **where, "detail": detail}
        if "wrong_answer" in drawn and is_answer:
            changed = _with_wrong_answer(action)
            if changed is not None:
                action = changed
                mistake = {"kind": "wrong_answer", **where, "detail": "changed the final answer"}
        self._queue.append((action, mistake))
        self._previous = call

    def _decoy_call(self, index: int) -> ToolCall | None:
        """The call at ``index`` of the task's decoy solution when that path leaves the reference
        exactly there (the calls before agree); the policy then plays the decoy path to its end."""
        raw = (self.task.metadata or {}).get("decoy_solution") if self.task else None
        if not isinstance(raw, list) or index >= min(len(raw), len(self._reference)):
            return None
        try:
            decoy = [ToolCall.model_validate(c) for c in raw]
        except ValueError:
            return None
        same = [_same_call(a, b) for a, b in zip(decoy, self._reference, strict=False)]
        if same[index] or not all(same[:index]):
            return None
        self._reference = decoy
        return decoy[index]

    def _wrong_fix_call(self, index: int) -> ToolCall | None:
        """At the reference's first write, when the task's answer is its work (see
        ``wrong_answer`` in the module doc): the call at ``index`` of a wrong fix, which then
        replaces the reference's writes. None anywhere else, and once a wrong fix is chosen."""
        calls = self._reference
        answers = [c for c in calls if c.tool.strip().lower() in ANSWER_TOOLS]
        if self._wrong_fix_at or not answers or _with_wrong_answer(_action(answers[-1])):
            return None
        if not _is_write(calls[index]) or any(_is_write(c) for c in calls[:index]):
            return None
        raw = (self.task.metadata or {}).get("wrong_patch") if self.task else None
        try:
            patch = [ToolCall.model_validate(c) for c in raw] if isinstance(raw, list) else []
        except ValueError:
            patch = []
        wrong = [c for c in patch if _is_write(c)]
        if wrong:  # the wrong patch to its end (its writes, then its submit)
            self._reference = [*calls[:index], *patch]
        else:  # the first write on another file, then the reference's other calls
            wrong = _elsewhere(calls[index])
            if not wrong:
                return None
            rest = [c for c in calls[index:] if not _is_write(c)]
            self._reference = [*calls[:index], *wrong, *rest]
        fixes = [c for c in calls if _is_write(c)]
        played = self._reference
        self._wrong_fix_at = {
            n
            for n in range(index, len(played))
            if _is_write(played[n]) and not any(_same_call(played[n], f) for f in fixes)
        }
        return played[index]

    def _closing_action(self, names: list[str]) -> dict[str, Any]:
        lowered = {n.lower() for n in names}
        thought = "The reference solution is done; end the episode."
        if "submit" in lowered:
            return {"tool": "submit", "params": {}, "thought": thought}
        if "respond" not in lowered and "finish" in lowered:
            return {"tool": "finish", "params": {}, "thought": thought}
        return {"tool": "respond", "params": {"message": ""}, "thought": thought}


def _same_call(a: ToolCall, b: ToolCall) -> bool:
    return a.tool == b.tool and a.params == b.params


#: parameters that carry what a write puts into a file
_WRITE_KEYS = frozenset({"new_string", "new_str", "content", "file_text"})
_PATH_KEYS = ("file_path", "path", "filename")


def _is_write(call: ToolCall) -> bool:
    """A call that changes a file (it carries new text: an edit or a full write)."""
    return not _WRITE_KEYS.isdisjoint(call.params)


def _elsewhere(call: ToolCall) -> list[ToolCall]:
    """``call`` aimed at a file that does not exist beside its own (``pkg/mod.py`` →
    ``pkg/mod_old.py``); empty when it names no file."""
    for key in _PATH_KEYS:
        path = call.params.get(key)
        if isinstance(path, str) and path:
            stem, dot, suffix = path.rpartition(".")
            moved = f"{stem}_old.{suffix}" if dot and "/" not in suffix else f"{path}_old"
            return [call.model_copy(update={"params": {**call.params, key: moved}})]
    return []


def _brief(params: Mapping[str, Any]) -> str:
    text = ", ".join(f"{k}={v!r}" for k, v in params.items())
    return text if len(text) <= 120 else text[:119] + "…"


def _thought(call: ToolCall) -> str:
    return call.thought or f"Call {call.tool}."


def _action(call: ToolCall) -> dict[str, Any]:
    return {"tool": call.tool, "params": dict(call.params), "thought": _thought(call)}


def _copy(action: dict[str, Any]) -> dict[str, Any]:
    return {**action, "params": dict(action.get("params") or {})}


def _with_wrong_answer(action: dict[str, Any]) -> dict[str, Any] | None:
    """The action with its answer changed, or None when it carries no answer."""
    params = dict(action["params"])
    for key in ("message", "answer"):
        if key in params and params[key] is not None:
            params[key] = wrong_answer_text(str(params[key]))
            return {**action, "params": params}
    return None


def run_episode(
    env: AgentEnv, policy: Any, task: Task | dict[str, Any] | str | None, *, max_steps: int = 50
) -> tuple[list[tuple[dict[str, Any], TimeStep]], TimeStep]:
    """Reset ``env`` and ``policy`` on ``task`` and step until the episode is done.

    Returns the ``(action, timestep)`` pairs and the last timestep. After ``max_steps`` actions
    without the episode ending, the last timestep is marked truncated (``truncated_reason``
    ``"max_steps"``).
    """
    if max_steps < 1:
        raise ConfigError("max_steps must be at least 1")
    ts = env.reset(task=task)
    policy.reset(env.task if env.task is not None else task)
    steps: list[tuple[dict[str, Any], TimeStep]] = []
    while not ts.done and len(steps) < max_steps:
        action = policy.act(ts.observation, list(steps), env.available_tools)
        ts = env.step(action)
        steps.append((action, ts))
    if not ts.done:
        ts = ts.replace(truncated=True, info={**ts.info, "truncated_reason": "max_steps"})
        if steps:
            steps[-1] = (steps[-1][0], ts)
    return steps, ts
