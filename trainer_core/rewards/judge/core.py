"""The :class:`Judge`: an LLM scores each step of a trajectory on the model-evaluated rubrics.

**What is judged.** The agent's own turns: tool steps and assistant messages (a message is judged
on its text). User and system messages are context only (they show in the window).

**Long trajectories.** With more turns than ``max_judged_steps``, an evenly spaced sample that
always holds the first and the last turn is judged (:func:`sample_positions`); every other step
is ``interpolated=True`` with, per rubric, the linear interpolation between its nearest judged
neighbours (:func:`interpolate`; None when one of them has no score).

**Cost.** Calls run on ``concurrency`` threads (results in step order). The cache key is a
SHA-256 over :meth:`JudgeConfig.fingerprint` and the full prompt (so: the rubric definitions, the
task, the window and the step as the judge sees them); a hit makes no call and is counted in
``cache_hits``. Only answers that parsed to a scores object are cached. Tokens and cost come from
each call's usage (cost by :func:`trainer_core.policies.pricing.cost`, ``price_in`` /
``price_out`` winning over the table). ``should_stop()`` is asked before every call; once it
gives a reason, no further call is made and the steps not yet judged are unscored with that
reason as their ``error`` (calls already in flight on other threads still finish: a spend cap
can be overshot by at most ``concurrency - 1`` calls). ``on_call(usage)`` gets each call's usage
as it completes (serialised: never two at once).

**Failures.** No key: :meth:`Judge.check_ready` (run first by :meth:`Judge.judge_trajectory`)
raises PolicyError naming the variable. A call that still fails for a transient reason after the
SDK's retries leaves its step unscored with the error; three such failures in a row raise
PolicyError (the service is down). A refusal that no retry fixes (401, 403, 404, 400) raises
PolicyError at once: every other call would fail the same way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from trainer_core.errors import ConfigError, PolicyError
from trainer_core.recording.schema import as_trajectory, is_assistant_turn
from trainer_core.rewards.judge.cache import JudgeCache
from trainer_core.rewards.judge.client import JudgeClient
from trainer_core.rewards.judge.config import JudgeConfig, JudgeUsage, StepJudgement, sha256_json
from trainer_core.rewards.judge.parsing import (
    clip_inline,
    extract_json_object,
    parse_scores,
    rationale_text,
    score_value,
)
from trainer_core.rewards.judge.prompts import (
    RubricDef,
    answer_check_prompts,
    coerce_rubrics,
    step_system_prompt,
    step_user_prompt,
)

#: Transient failures in a row (after the SDK's own retries) that stop a trajectory's judging.
MAX_FAILURES_IN_A_ROW = 3


def sample_positions(n_steps: int, max_judged: int | None) -> list[int]:
    """The positions to judge: all of them, or ``max_judged`` evenly spaced ones that include
    the first and the last (rounded half up, exactly)."""
    if max_judged is None or n_steps <= max_judged:
        return list(range(n_steps))
    if max_judged < 2:
        raise ConfigError("max_judged_steps must be at least 2 (the first and the last step)")
    span, parts = n_steps - 1, max_judged - 1
    return sorted({(2 * i * span + parts) // (2 * parts) for i in range(max_judged)})


def interpolate(
    judged: Mapping[int, Mapping[str, float | None]], position: int, rubric_id: str
) -> float | None:
    """The linear interpolation at ``position`` between the nearest judged positions around it
    (None when either has no score for ``rubric_id``, or one side has no judged position)."""
    before = max((p for p in judged if p < position), default=None)
    after = min((p for p in judged if p > position), default=None)
    if before is None or after is None:
        return None
    a, b = judged[before].get(rubric_id), judged[after].get(rubric_id)
    if a is None or b is None:
        return None
    return a + (b - a) * (position - before) / (after - before)


class _Run:
    """The state one judge_trajectory call shares between its threads."""

    def __init__(
        self,
        should_stop: Callable[[], str | None] | None,
        on_call: Callable[[JudgeUsage], None] | None,
    ) -> None:
        self.should_stop = should_stop
        self.on_call = on_call
        self.usage = JudgeUsage()
        self.lock = threading.Lock()
        self.stop_reason: str | None = None
        self.fatal: BaseException | None = None
        self.failures_in_a_row = 0

    def may_call(self) -> str | None:
        """None when a call may start; else why not (asks should_stop)."""
        with self.lock:
            if self.fatal is not None:
                return "not judged: judging stopped after an error"
            if self.stop_reason is None and self.should_stop is not None:
                reason = self.should_stop()
                if reason:
                    self.stop_reason = str(reason)
            return self.stop_reason

    def record(self, call: JudgeUsage, *, failed: bool) -> None:
        with self.lock:
            self.usage = self.usage + call
            self.failures_in_a_row = self.failures_in_a_row + 1 if failed else 0
            if self.on_call is not None:
                self.on_call(call)

    def hit(self) -> None:
        with self.lock:
            self.usage.cache_hits += 1


class Judge:
    """Scores steps with an LLM (see the module docstring)."""

    def __init__(self, config: JudgeConfig, cache: JudgeCache | None = None) -> None:
        if isinstance(config, Mapping):
            config = JudgeConfig.from_dict(config)
        if not isinstance(config, JudgeConfig):
            raise ConfigError(f"Judge needs a JudgeConfig, not {type(config).__name__}")
        self.config = config
        self.cache = cache
        self._client = JudgeClient(config)  # checks the settings; no key read, no network

    def __repr__(self) -> str:
        c = self.config
        return f"Judge(kind={c.kind!r}, model={c.model!r}, base_url={c.base_url!r})"

    def check_ready(self) -> None:
        """Raise PolicyError naming the environment variable when the API key is missing; makes
        no call."""
        self._client._api_key()

    # --- prompts and keys -------------------------------------------------------------------

    def step_prompt(
        self, trajectory: Any, index: int, rubrics: Iterable[Any], task_prompt: str | None = None
    ) -> tuple[str, str]:
        """(system, user) of the call that judges the step at position ``index`` (no network)."""
        traj = as_trajectory(trajectory)
        defs = coerce_rubrics(rubrics)
        prompt = traj.task.prompt if task_prompt is None else task_prompt
        return self._prompts(traj.steps, index, defs, prompt)

    def _prompts(
        self, steps: Sequence[Any], position: int, rubrics: Sequence[RubricDef], task_prompt: str
    ) -> tuple[str, str]:
        return (
            step_system_prompt(rubrics),
            step_user_prompt(steps, position, self.config.window, rubrics, task_prompt or ""),
        )

    def _key(self, system: str, user: str) -> str:
        return sha256_json({"judge": self.config.fingerprint(), "system": system, "user": user})

    def cache_key(
        self, trajectory: Any, index: int, rubrics: Iterable[Any], task_prompt: str | None
    ) -> str:
        """The cache key of the step at position ``index``: a SHA-256 over the judge's
        fingerprint and the prompt, which holds the rubric definitions, the task, the window and
        the step as the judge sees them."""
        return self._key(*self.step_prompt(trajectory, index, rubrics, task_prompt))

    # --- judging ----------------------------------------------------------------------------

    def judge_trajectory(
        self,
        trajectory: Any,
        rubrics: Iterable[Any],
        *,
        task_prompt: str | None = None,
        should_stop: Callable[[], str | None] | None = None,
        on_call: Callable[[JudgeUsage], None] | None = None,
    ) -> tuple[list[StepJudgement], JudgeUsage]:
        """Judge every turn of the agent's own (or a sample; see the module docstring): one
        StepJudgement per tool step and assistant message, in step order, and what it cost.
        User and system messages are context, never judged."""
        traj = as_trajectory(trajectory)
        defs = coerce_rubrics(rubrics)
        self.check_ready()
        steps = list(traj.steps)
        prompt = traj.task.prompt if task_prompt is None else task_prompt
        turns = [p for p, step in enumerate(steps) if is_assistant_turn(step)]
        chosen = [turns[i] for i in sample_positions(len(turns), self.config.max_judged_steps)]
        run = _Run(should_stop, on_call)
        results: dict[int, StepJudgement] = {}
        if chosen:
            self._client.client()  # made once, before the threads share it

        def work(position: int) -> StepJudgement:
            try:
                return self._judge_step(steps, position, defs, prompt, run)
            except BaseException as exc:
                with run.lock:
                    if run.fatal is None:
                        run.fatal = exc
                raise

        workers = min(self.config.concurrency, len(chosen))
        if workers <= 1:
            for position in chosen:
                results[position] = work(position)
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="llm-judge") as pool:
                futures = {p: pool.submit(work, p) for p in chosen}
                for position, future in futures.items():
                    if future.exception() is None:
                        results[position] = future.result()
            if run.fatal is not None:
                raise run.fatal

        judged = {p: results[p].scores for p in chosen}
        judgements = []
        for position in turns:
            if position in results:
                judgements.append(results[position])
            else:
                judgements.append(self._interpolated(steps, position, judged, defs))
        return judgements, run.usage

    def _interpolated(
        self,
        steps: Sequence[Any],
        position: int,
        judged: Mapping[int, Mapping[str, float | None]],
        rubrics: Sequence[RubricDef],
    ) -> StepJudgement:
        before = max(p for p in judged if p < position)
        after = min(p for p in judged if p > position)
        scores = {r.id: interpolate(judged, position, r.id) for r in rubrics}
        missing = [rid for rid, value in scores.items() if value is None]
        error = (
            f"not interpolated for {', '.join(missing)}: step {steps[before].index} or "
            f"{steps[after].index} has no score"
            if missing
            else None
        )
        return StepJudgement(
            index=steps[position].index,
            scores=scores,
            rationale=(
                f"not judged (sampled trajectory): interpolated between steps "
                f"{steps[before].index} and {steps[after].index}"
            ),
            interpolated=True,
            error=error,
        )

    def _judge_step(
        self,
        steps: Sequence[Any],
        position: int,
        rubrics: Sequence[RubricDef],
        task_prompt: str,
        run: _Run,
    ) -> StepJudgement:
        index = steps[position].index
        ids = [r.id for r in rubrics]
        system, user = self._prompts(steps, position, rubrics, task_prompt)
        key = self._key(system, user)
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None and isinstance(hit.get("scores"), dict):
                run.hit()
                return StepJudgement(
                    index=index,
                    scores={rid: _cached_score(hit["scores"].get(rid)) for rid in ids},
                    rationale=str(hit.get("rationale") or ""),
                    cached=True,
                    error=hit.get("error"),
                )
        reason = run.may_call()
        if reason is not None:
            return StepJudgement(index, {rid: None for rid in ids}, "", error=reason)
        try:
            reply = self._client.complete(system, user)
        except PolicyError as exc:
            run.record(JudgeUsage(calls=1), failed=True)
            if not getattr(exc, "transient", False):
                raise
            with run.lock:
                in_a_row = run.failures_in_a_row
            if in_a_row >= MAX_FAILURES_IN_A_ROW:
                raise PolicyError(
                    f"{exc} (the judge failed {in_a_row} calls in a row after retries; judging "
                    "stopped — answers already cached are kept, so a re-run costs nothing for them)"
                ) from None
            return StepJudgement(index, {rid: None for rid in ids}, "", error=str(exc))
        run.record(
            JudgeUsage(
                calls=1, tokens_in=reply.tokens_in, tokens_out=reply.tokens_out, cost=reply.cost
            ),
            failed=False,
        )
        scores, rationale, error, parseable = parse_scores(reply.text, ids, cut_off=reply.cut_off)
        if parseable and self.cache is not None:
            self.cache.set(key, {"scores": scores, "rationale": rationale, "error": error})
        return StepJudgement(index, scores, rationale, error=error)

    # --- the outcome checker ----------------------------------------------------------------

    def compare_answer(
        self, *, question: str, reference: Any, answer: str
    ) -> tuple[bool, float, str, JudgeUsage]:
        """Does ``answer`` match ``reference`` for ``question``? (correct, score 0..1,
        rationale, usage). A verdict that cannot be read raises PolicyError."""
        self.check_ready()
        system, user = answer_check_prompts(question=question, reference=reference, answer=answer)
        try:
            reply = self._client.complete(system, user)
        except PolicyError as exc:
            raise PolicyError(f"the llm_judge checker could not get a verdict: {exc}") from None
        usage = JudgeUsage(
            calls=1, tokens_in=reply.tokens_in, tokens_out=reply.tokens_out, cost=reply.cost
        )
        found = extract_json_object(reply.text, required_key="correct")
        correct = found.value.get("correct") if found else None
        if not isinstance(correct, bool):
            raise PolicyError(
                f"{self._client.name}: the llm_judge checker could not read the judge's verdict "
                f"(no JSON 'correct': true/false) in {clip_inline(reply.text)!r}; the outcome "
                "is left undecided rather than guessed — check the judge model, or raise "
                "max_tokens"
            )
        score, _ = score_value(found.value.get("score"))
        if score is None:
            score = 1.0 if correct else 0.0
        return correct, score, rationale_text(found.value), usage


def _cached_score(value: Any) -> float | None:
    """A score read back from the cache, checked again (None when it is not a 0..1 number)."""
    score, _ = score_value(value)
    return score
