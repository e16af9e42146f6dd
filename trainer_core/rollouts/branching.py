"""Branch-and-resample: restore an environment's state at step ``k`` of a recorded trajectory,
sample continuations of a policy from there, and read what they say about the step.

::

    from trainer_core.rollouts.branching import BranchSampler, preference_pairs, value_estimate
    sampler = BranchSampler(trajectory, 2, make_env=lambda: make("steplab/sandbox"), task=task,
                            make_policy=lambda seed: ScriptedPolicy(seed=seed), max_steps=10)
    results = sampler.run([(0, 11), (1, 12), (2, 13)])        # (continuation, seed) pairs
    value = value_estimate([r.trajectory.outcome.success for r in results])
    pairs = preference_pairs([r.trajectory for r in results], start=2)

Restoring the state
    *Replay* (the main path: it works for any stored rollout): a fresh environment is reset on
    the trajectory's task with its recorded seed, and the actions of the steps before ``k`` are
    played again. After each action the replayed observation is compared with the recorded one;
    the first that differs stops the replay with :class:`ReplayMismatch` (which step, the
    recorded and the replayed text, truncated). The comparison is exact after whitespace
    normalisation (trailing spaces of each line, leading and trailing blank lines); an
    environment whose observations carry nondeterministic parts (times, temporary paths) masks
    them itself with a ``normalise_observation(text) -> str`` method, applied to both sides. An
    output of the policy that was not an action (``invalid_output``) never reached the
    environment and is not replayed; an assistant's message that was an action (``respond``) is
    replayed and the user's reply compared.

    *Snapshot* (in-process, within one sandbox's lifetime): when the environment works in a
    sandbox that can ``snapshot()`` and ``restore()`` (``steplab/sandbox``, both backends), the
    replay runs once, the workspace is snapshotted, and every further continuation starts from
    that snapshot instead of replaying again. Snapshots die with their sandbox, so a stored
    trajectory is always first restored by replay.

Continuations
    Each continuation is a whole trajectory: the parent's steps before ``k`` copied (their
    ``metadata["branch_prefix"]`` is true), then the policy's own steps from index ``k`` on. The
    policy sees the prefix as its history (LLM and local policies prompt with it); a policy
    with a ``resume(history)`` method is told it after ``reset`` (the scripted policy skips the
    reference calls already played). ``max_steps`` counts the continuation's own actions.

Value and pairs
    :func:`value_estimate`: the Monte-Carlo value of the state before step ``k`` — the success
    rate of its continuations, with a Wilson interval (continuations whose outcome is unknown,
    crashed ones, are left out of both counts). :func:`preference_pairs`: every successful
    continuation against every failed one that acts differently, from the first step where their
    agent turns differ (at or after ``k``); :mod:`trainer_core.datasets.branch_pairs` turns them into
    step-level DPO rows and PRM labels with their lineage.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from trainer_core.errors import InputError, SandboxError, SteplabError
from trainer_core.policies.base import Turn, decide
from trainer_core.recording.dialogue import reported_messages
from trainer_core.recording.schema import Step, Trajectory
from trainer_core.rollouts.collect import (
    INVALID_OUTPUT_TOOL,
    EpisodeResult,
    EpisodeSpec,
    StopEpisode,
    _Episode,
    _Propagate,
    stop_env,
)

__all__ = [
    "MAX_PAIRS",
    "SHOWN_CHARS",
    "BranchPair",
    "BranchRefused",
    "BranchSampler",
    "ReplayMismatch",
    "Restored",
    "ValueEstimate",
    "branch_refusal",
    "first_divergence",
    "preference_pairs",
    "prefix_actions",
    "restore",
    "value_estimate",
]

#: characters of the recorded and the replayed observation a mismatch shows
SHOWN_CHARS = 300
#: at most this many preference pairs per branch set (successful × failed continuations)
MAX_PAIRS = 64


class BranchRefused(InputError):
    """This trajectory (or this step of it) cannot be branched; the message says why."""


class ReplayMismatch(SteplabError):
    """The replay of the steps before the branch step diverged from the record."""

    def __init__(self, index: int, tool: str, expected: str, got: str, why: str = ""):
        self.index, self.tool = index, tool
        self.expected, self.got = _shown(expected), _shown(got)
        what = why or "the replayed observation differs from the recorded one"
        super().__init__(
            f"Replay diverged at step {index} ({tool or 'message'}): {what}. "
            f"Recorded: {self.expected!r}. Replayed: {self.got!r}. The environment no longer "
            f"reproduces this trajectory (its task or environment changed, or it is not "
            f"deterministic); branch at step {index} or before."
        )

    def as_dict(self) -> dict[str, Any]:
        return {"step": self.index, "tool": self.tool, "expected": self.expected, "got": self.got}


def _shown(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _normalise(text: str) -> str:
    return "\n".join(line.rstrip() for line in (text or "").strip().splitlines())


# --- what can be branched ------------------------------------------------------------------------


def branch_refusal(
    *, source: str, environment: str, has_task: bool, known_environment: bool
) -> str | None:
    """Why a stored trajectory cannot be branched (None: it can). Only rollouts Steplab played
    in an environment it has, on a task it still has, can be restored."""
    if source == "import":
        return (
            "This trajectory was imported from an agent's log: the environment that produced it "
            "is not here, so its state cannot be restored. Branch a rollout collected by Steplab."
        )
    if source == "live":
        return (
            "This trajectory was pushed live by an agent running elsewhere: its environment is "
            "not here, so its state cannot be restored."
        )
    if not environment:
        return "This trajectory names no environment, so its state cannot be restored here."
    if not known_environment:
        return f"The environment {environment!r} is not registered here; it cannot be replayed."
    if not has_task:
        return "This trajectory's task is no longer stored, so its environment cannot be reset."
    return None


@dataclass(frozen=True)
class PrefixAction:
    """One agent turn before the branch step: its step, the action (None: an output that was not
    an action), and the message steps recorded after it (the turns it reported)."""

    step: Step
    action: dict[str, Any] | None
    replies: tuple[Step, ...] = ()

    @property
    def recorded(self) -> str:
        if self.step.kind == "tool":
            return self.step.observation
        return "\n".join(reply.text for reply in self.replies)


def _is_agent_turn(step: Step) -> bool:
    return step.kind == "tool" or step.role == "assistant"


def _action_of(step: Step) -> dict[str, Any] | None:
    if step.kind == "tool":
        if step.tool == INVALID_OUTPUT_TOOL:
            return None
        return {"tool": step.tool, "params": dict(step.params), "thought": step.thought}
    tool = step.metadata.get("tool")
    if not isinstance(tool, str) or not tool:
        return None
    return {
        "tool": tool,
        "params": dict(step.metadata.get("params") or {}),
        "thought": step.thought,
    }


def prefix_actions(trajectory: Trajectory, step: int) -> list[PrefixAction]:
    """The agent turns before step ``step`` (BranchRefused when ``step`` is not an agent turn
    of the trajectory, or an assistant message there is not an action it could replay)."""
    steps = sorted(trajectory.steps, key=lambda s: s.index)
    at = next((s for s in steps if s.index == step), None)
    if at is None:
        last = steps[-1].index if steps else None
        raise BranchRefused(
            f"The trajectory has no step {step}"
            + (f"; its steps are 0..{last}." if last is not None else " (it has no steps).")
        )
    if not _is_agent_turn(at):
        raise BranchRefused(
            f"Step {step} is a {at.role or 'message'} message, not the agent's turn; branch at a "
            "tool call or an assistant message."
        )
    out: list[PrefixAction] = []
    for s in steps:
        if s.index >= step:
            break
        if _is_agent_turn(s):
            action = _action_of(s)
            if action is None and s.kind != "tool":
                raise BranchRefused(
                    f"Step {s.index} is an assistant message that records no tool call; a "
                    "conversation without its actions cannot be replayed."
                )
            out.append(PrefixAction(s, action))
        elif out:  # a turn the previous action reported (a user's reply)
            last = out[-1]
            out[-1] = PrefixAction(last.step, last.action, (*last.replies, s))
    return out


# --- restoring the state -------------------------------------------------------------------------


@dataclass
class Restored:
    """An environment at the branch step: what the policy sees there and how it got there."""

    env: Any
    observation: str
    history: list[Turn]
    prefix: list[Step]
    method: str  # "replay" | "snapshot"
    replayed: int  # actions replayed and compared
    timestep: Any = None
    tools: list[dict] = field(default_factory=list)


def _compare(env: Any, item: PrefixAction, ts: Any) -> None:
    normalise = getattr(getattr(env, "unwrapped", env), "normalise_observation", None)
    if item.step.kind == "tool":
        got = ts.observation
    else:
        got = "\n".join(m["text"] for m in reported_messages(ts.info)[1:])
    expected = item.recorded
    a, b = _normalise(expected), _normalise(got)
    if normalise is not None:
        a, b = normalise(a), normalise(b)
    if a != b:
        raise ReplayMismatch(item.step.index, item.step.tool, expected, got)


def restore(
    trajectory: Trajectory, step: int, *, env: Any, task: Any, seed: int | None = None
) -> Restored:
    """Reset ``env`` on ``task`` and replay the actions before ``step``, comparing each
    observation with the recorded one (:class:`ReplayMismatch` at the first that differs)."""
    items = prefix_actions(trajectory, step)
    if seed is None:
        recorded_seed = trajectory.metadata.get("seed")
        seed = recorded_seed if isinstance(recorded_seed, int) else None
    ts = env.reset(task=task, seed=seed)
    observation, history, replayed = ts.observation, [], 0
    for item in items:
        raw = str(item.step.metadata.get("raw") or "")
        if item.action is None:  # not an action: it never reached the environment
            error = str(item.step.metadata.get("malformed") or "not an action")
            history.append(
                Turn(action=None, observation=item.step.observation, raw=raw, error=error)
            )
            observation = item.step.observation
            continue
        ts = env.step(item.action)
        replayed += 1
        _compare(env, item, ts)
        if ts.done:
            raise ReplayMismatch(
                item.step.index,
                item.step.tool,
                item.recorded,
                ts.observation,
                why="the replayed episode ended here, but the recorded one went on",
            )
        history.append(Turn(action=item.action, observation=ts.observation, raw=raw))
        observation = ts.observation
    prefix = [
        _prefix_copy(s) for s in sorted(trajectory.steps, key=lambda s: s.index) if s.index < step
    ]
    tools = [t.as_dict() for t in env.available_tools]
    return Restored(env, observation, history, prefix, "replay", replayed, ts, tools)


def _prefix_copy(step: Step) -> Step:
    return step.model_copy(
        update={"metadata": {**copy.deepcopy(step.metadata), "branch_prefix": True}}
    )


def _sandbox(env: Any) -> Any:
    """The environment's sandbox when it can snapshot and restore its workspace, else None."""
    sandbox = getattr(getattr(env, "unwrapped", env), "sandbox", None)
    if sandbox is not None and callable(getattr(sandbox, "snapshot", None)):
        return sandbox
    return None


# --- playing the continuations -------------------------------------------------------------------


class _Continuation(_Episode):
    """An episode that starts from a restored state instead of a reset."""

    def __init__(self, restored: Restored, policy: Any, spec: EpisodeSpec, trajectory: Trajectory):
        super().__init__(restored.env, policy, spec, trajectory)
        self.restored = restored

    def begin(self, on_step: Callable[[EpisodeSpec, Step], None] | None = None) -> None:
        restored = self.restored
        self.ts = restored.timestep
        env_task = getattr(self.env, "task", None)
        self.policy.reset(env_task if env_task is not None else self.spec.task)
        resume = getattr(self.policy, "resume", None)
        if callable(resume):
            resume(list(restored.history))
        self.observation = restored.observation
        self.tools = list(self.env.available_tools)
        self.state.history = list(restored.history)
        self._record([s.model_copy(deep=True) for s in restored.prefix], on_step)

    def out_of_turns(self, max_steps: int) -> bool:
        """Done, or ``max_steps`` actions of its own played (then truncated)."""
        own = len(self.state.history) - len(self.restored.history)
        if self.ts is None or self.ts.done:
            return True
        if own < max_steps:
            return False
        self.state.truncated = True
        self.state.last_info = {**self.state.last_info, "truncated_reason": "max_steps"}
        return True


class BranchSampler:
    """Plays continuations of ``trajectory`` from step ``step``, one after another: the first
    from a replay, the others from a snapshot of the sandbox when the environment has one, else
    each from its own replay. ``make_env()`` builds a fresh environment (without a step limit:
    ``max_steps`` bounds each continuation's own actions), ``make_policy(seed)`` a policy.
    ``on_step(spec, step)`` and ``should_stop()`` are as in :class:`Lockstep`; ``spec.episode``
    is the continuation's number. A :class:`ReplayMismatch` from the first replay propagates."""

    def __init__(
        self,
        trajectory: Trajectory,
        step: int,
        *,
        make_env: Callable[[], Any],
        task: Any,
        make_policy: Callable[[int], Any],
        max_steps: int = 30,
        environment: str = "",
        policy_name: str = "",
        model: str = "",
        on_step: Callable[[EpisodeSpec, Step], None] | None = None,
        should_stop: Callable[[], str | None] | None = None,
        use_snapshot: bool = True,
        metadata: Mapping[str, Any] | None = None,
    ):
        self.trajectory, self.step, self.task = trajectory, step, task
        self.make_env, self.make_policy = make_env, make_policy
        self.use_snapshot = use_snapshot
        self.metadata = dict(metadata or {})
        self.max_steps = max_steps
        self.record = {
            "environment": environment or trajectory.environment,
            "policy_name": policy_name,
            "model": model,
        }
        self.on_step, self.should_stop = on_step, should_stop
        self.env: Any = None
        self.restored: Restored | None = None
        self._snapshot: str | None = None
        self.methods: list[str] = []

    def prepare(self) -> Restored:
        """Restore the state once (replay), and snapshot the sandbox when there is one."""
        if self.restored is None:
            self.env = self.make_env()
            self.restored = restore(self.trajectory, self.step, env=self.env, task=self.task)
            sandbox = _sandbox(self.env) if self.use_snapshot else None
            if sandbox is not None:
                self._snapshot = sandbox.snapshot()
        return self.restored

    def _state(self, first: bool) -> Restored:
        restored = self.prepare()
        if first:
            return restored
        sandbox = _sandbox(self.env)
        if self._snapshot is not None and sandbox is not None:
            try:
                sandbox.restore(self._snapshot)
                return Restored(**{**restored.__dict__, "method": "snapshot", "replayed": 0})
            except SandboxError:
                pass  # the sandbox broke (a continuation killed it): replay again
        stop_env(self.env)
        self.restored, self._snapshot = None, None
        return self.prepare()

    def run_one(self, number: int, seed: int, *, first: bool = False) -> EpisodeResult:
        """Play continuation ``number`` with ``seed``."""
        restored = self._state(first)
        self.methods.append(restored.method)
        spec = EpisodeSpec(task=self.task, episode=number, seed=seed)
        trajectory = _continuation_record(self.trajectory, spec, self.record, self.metadata)
        trajectory.metadata.update(branch_step=self.step, restored_by=restored.method)
        episode = _Continuation(restored, self.make_policy(seed), spec, trajectory)
        try:
            episode.begin(self.on_step)
            while not episode.out_of_turns(self.max_steps):
                if not self._turn(episode):
                    break
        except _Propagate as wrapper:
            raise wrapper.__cause__ from None
        return episode.result()

    def _turn(self, episode: _Continuation) -> bool:
        """One decision and step; False when the continuation ended (stopped, or crashed)."""
        try:
            reason = self.should_stop() if self.should_stop is not None else None
        except StopEpisode as exc:
            episode.fail(exc)
            return False
        if reason:
            episode.stop(reason)
            return False
        started_at = datetime.now(UTC)
        try:
            decision = decide(episode.policy, *episode.request())
            episode.apply(
                decision, started_at=started_at, on_step=self.on_step, keep_decisions=False
            )
        except _Propagate:
            raise
        except Exception as exc:  # noqa: BLE001 - the continuation crashed; the others go on
            episode.fail(exc)
            return False
        return True

    def run(
        self,
        runs: Sequence[tuple[int, int]],
        on_result: Callable[[EpisodeResult], None] | None = None,
    ) -> list[EpisodeResult]:
        """Play the ``(number, seed)`` continuations in order; closes the environment."""
        results = []
        try:
            for position, (number, seed) in enumerate(runs):
                result = self.run_one(number, seed, first=position == 0)
                results.append(result)
                if on_result is not None:
                    on_result(result)
        finally:
            self.close()
        return results

    def close(self) -> None:
        if self.env is not None:
            stop_env(self.env)
            self.env = None


def _continuation_record(
    parent: Trajectory, spec: EpisodeSpec, record: Mapping[str, str], metadata: Mapping[str, Any]
) -> Trajectory:
    return Trajectory(
        task=parent.task.model_copy(),
        agent=record.get("agent") or "steplab",
        model=record.get("model", ""),
        policy=record.get("policy_name", ""),
        environment=record.get("environment") or parent.environment,
        metadata={**metadata, "continuation": spec.episode, "seed": spec.seed},
        source_format="steplab",
    )


# --- the value of the step and the pairs ---------------------------------------------------------


@dataclass(frozen=True)
class ValueEstimate:
    """The success rate of the continuations and its Wilson interval."""

    successes: int
    n: int  # continuations with a known outcome
    value: float | None  # None: no continuation has a known outcome
    low: float
    high: float
    confidence: float
    method: str = "wilson"

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def value_estimate(outcomes: Iterable[bool | None], confidence: float = 0.95) -> ValueEstimate:
    """The Monte-Carlo value of a state from its continuations' outcomes (None: unknown, left
    out), with the Wilson score interval at ``confidence``."""
    from trainer_core.evaluation.stats import wilson_interval

    known = [bool(o) for o in outcomes if o is not None]
    successes, n = sum(known), len(known)
    low, high = wilson_interval(successes, n, confidence)
    return ValueEstimate(successes, n, successes / n if n else None, low, high, confidence)


def _turn_key(step: Step) -> tuple:
    if step.kind == "tool":
        return ("tool", step.tool, _canonical(step.params))
    return ("message", step.role, step.text, _canonical(step.metadata.get("params") or {}))


def _canonical(value: Any) -> str:
    import json

    return json.dumps(value, sort_keys=True, default=str)


def first_divergence(a: Trajectory, b: Trajectory, *, start: int) -> int | None:
    """The index of the first agent turn at or after ``start`` where ``a`` and ``b`` act
    differently (one has a turn the other lacks counts); None when they act alike."""
    turns_a = [s for s in sorted(a.steps, key=lambda s: s.index) if s.index >= start]
    turns_b = [s for s in sorted(b.steps, key=lambda s: s.index) if s.index >= start]
    turns_a = [s for s in turns_a if _is_agent_turn(s)]
    turns_b = [s for s in turns_b if _is_agent_turn(s)]
    for x, y in zip(turns_a, turns_b, strict=False):
        if _turn_key(x) != _turn_key(y) or x.index != y.index:
            return min(x.index, y.index)
    if len(turns_a) != len(turns_b):
        longer = turns_a if len(turns_a) > len(turns_b) else turns_b
        return longer[min(len(turns_a), len(turns_b))].index
    return None


@dataclass(frozen=True)
class BranchPair:
    """A successful continuation (``chosen``, its position in the list) against a failed one,
    from the first step where they act differently."""

    chosen: int
    rejected: int
    divergent_step: int

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


def preference_pairs(
    continuations: Sequence[Trajectory], *, start: int, cap: int = MAX_PAIRS
) -> list[BranchPair]:
    """Every successful continuation against every failed one that acts differently (at most
    ``cap``, in order of the continuations). Unknown outcomes pair with nothing."""
    wins = [i for i, t in enumerate(continuations) if t.outcome.success is True]
    losses = [i for i, t in enumerate(continuations) if t.outcome.success is False]
    pairs = []
    for w in wins:
        for lo in losses:
            at = first_divergence(continuations[w], continuations[lo], start=start)
            if at is not None:
                pairs.append(BranchPair(w, lo, at))
            if len(pairs) >= cap:
                return pairs
    return pairs
