"""collect(): episodes recorded as trajectories, crashes isolated, streaming callbacks."""

from __future__ import annotations

import threading

import pytest

from trainer_core.errors import ConfigError, PolicyError
from trainer_core.policies.base import Decision, Usage
from trainer_core.policies.scripted import ScriptedPolicy
from trainer_core.rollouts.collect import (
    INVALID_OUTPUT_TOOL,
    Lockstep,
    collect,
    episode_specs,
    run_episode,
)
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks


def _tasks(n=2):
    return arithmetic_tasks("train", n=n)


def test_scripted_collect_records_every_episode_with_its_outcome():
    tasks = _tasks(2)
    streamed: list[tuple[str, int, int]] = []
    finished = []
    results = collect(
        "steplab/arithmetic",
        tasks,
        lambda seed: ScriptedPolicy(seed=seed),
        episodes_per_task=3,
        max_steps=6,
        on_step=lambda spec, step: streamed.append((spec.task_id, spec.episode, step.index)),
        on_episode=finished.append,
    )
    assert len(results) == 6 and len(finished) == 6
    assert [(r.spec.task_id, r.spec.episode) for r in results] == [
        (t.id, e) for t in tasks for e in range(3)
    ]
    for result in results:
        traj = result.trajectory
        assert result.error is None
        assert traj.outcome.success is True and traj.outcome.terminated is True
        assert traj.steps[-1].tool == "submit"
        assert [s.index for s in traj.steps] == list(range(len(traj.steps)))
        assert traj.environment == "steplab/arithmetic" and traj.task.prompt
        assert traj.metadata["seed"] == result.spec.seed
    assert len(streamed) == sum(len(r.trajectory.steps) for r in results)
    # seeds depend on the run seed, the task and the episode only
    again = episode_specs(tasks, episodes_per_task=3, seed=0)
    assert [s.seed for s in again] == [r.spec.seed for r in results]
    assert len({s.seed for s in again}) == 6
    assert [s.seed for s in episode_specs(tasks, episodes_per_task=3, seed=1)] != [
        s.seed for s in again
    ]


def test_wrong_answers_are_recorded_as_failures():
    results = collect(
        "steplab/arithmetic",
        _tasks(3),
        lambda seed: ScriptedPolicy(mistakes={"wrong_answer": 1.0}, seed=seed),
        max_steps=6,
    )
    assert [r.trajectory.outcome.success for r in results] == [False, False, False]
    assert all(r.error is None for r in results)


class _CrashOn:
    """A policy that raises PolicyError on one task (the API went away) and plays the rest."""

    name = "crashy"

    def __init__(self, bad_task: str):
        self.bad_task = bad_task
        self.inner = ScriptedPolicy()
        self.task = None

    def reset(self, task):
        self.task = task
        self.inner.reset(task)

    def act(self, observation, history, tools):
        if self.task.id == self.bad_task and len(history) == 1:
            raise PolicyError("the server answered 503 five times")
        return self.inner.act(observation, history, tools)


def test_a_crashing_episode_is_failed_with_its_error_and_the_others_go_on():
    tasks = _tasks(3)
    results = collect(
        "steplab/arithmetic", tasks, lambda seed: _CrashOn(tasks[1].id), max_steps=6, concurrency=2
    )
    by_task = {r.spec.task_id: r for r in results}
    crashed = by_task[tasks[1].id]
    assert crashed.failed and "503 five times" in crashed.error
    assert len(crashed.trajectory.steps) == 1  # the step before the crash is kept
    assert crashed.trajectory.outcome.metadata["error"] == crashed.error
    assert by_task[tasks[0].id].trajectory.outcome.success is True
    assert by_task[tasks[2].id].trajectory.outcome.success is True


class _Garbage:
    """Answers with unparseable output twice, then plays the reference."""

    name = "garbage"

    def __init__(self):
        self.inner = ScriptedPolicy()
        self.calls = 0

    def reset(self, task):
        self.inner.reset(task)
        self.calls = 0

    def act(self, observation, history, tools):
        self.calls += 1
        if self.calls <= 2:
            return Decision(
                action=None,
                error="invalid JSON in the arguments (line 1 column 9)",
                raw='{"expr": ',
                usage=Usage(tokens_in=10, tokens_out=3, cost=0.001),
            )
        return self.inner.act(observation, history, tools)


def test_malformed_output_becomes_an_observation_and_the_episode_goes_on():
    (result,) = collect("steplab/arithmetic", _tasks(1), _Garbage(), max_steps=8)
    steps = result.trajectory.steps
    assert [s.tool for s in steps[:2]] == [INVALID_OUTPUT_TOOL, INVALID_OUTPUT_TOOL]
    assert (
        "not a valid action" in steps[0].observation and "line 1 column 9" in steps[0].observation
    )
    assert steps[0].params == {"raw": '{"expr": '} and steps[0].error == "malformed_output"
    assert steps[0].metadata["raw"] == '{"expr": '
    # the shared chat format replays it as the model's own malformed turn
    from trainer_core.policies.chat_format import trajectory_to_messages

    messages = trajectory_to_messages(result.trajectory)
    assert messages[1] == {"role": "assistant", "content": '{"expr": '}
    assert "not a valid action" in messages[2]["content"]
    assert result.trajectory.outcome.success is True
    assert result.usage.tokens_in == 20 and result.trajectory.usage.cost_usd == pytest.approx(0.002)


def test_max_steps_truncates_and_should_stop_ends_early():
    (result,) = collect(
        "steplab/arithmetic",
        _tasks(1),
        ScriptedPolicy(mistakes={"wrong_tool": 1.0}),
        max_steps=2,
    )
    assert len(result.trajectory.steps) == 2
    outcome = result.trajectory.outcome
    assert outcome.truncated and not outcome.terminated
    assert outcome.metadata["truncated_reason"] == "max_steps"

    stop = threading.Event()

    def on_step(spec, step):
        stop.set()

    (stopped,) = collect(
        "steplab/arithmetic",
        _tasks(1),
        ScriptedPolicy(),
        max_steps=6,
        on_step=on_step,
        should_stop=lambda: "spend cap reached" if stop.is_set() else None,
    )
    assert stopped.stopped == "spend cap reached" and len(stopped.trajectory.steps) == 1
    assert stopped.trajectory.outcome.success is False


def test_an_exception_from_on_step_propagates():
    class Cancelled(Exception):
        pass

    def on_step(spec, step):
        raise Cancelled("job cancelled")

    with pytest.raises(Cancelled):
        collect("steplab/arithmetic", _tasks(1), ScriptedPolicy(), on_step=on_step)


def test_one_policy_object_cannot_run_concurrently():
    with pytest.raises(ConfigError, match="policy factory"):
        collect("steplab/arithmetic", _tasks(2), ScriptedPolicy(), concurrency=2)


# ----------------------------------------------------------------------------- lockstep


def _strip(trajectory):
    """A trajectory without what depends on the clock."""
    data = trajectory.model_dump(mode="json")
    data["usage"].pop("duration", None)
    for step in data["steps"]:
        step.pop("started_at", None)
        step.pop("duration", None)
        step["metadata"].pop("policy_latency", None)
    return data


def test_lockstep_plays_episodes_together_as_each_plays_alone():
    """Episodes joining a lockstep between turns (a crash in one of them, a wrong answer in
    another) end with exactly the trajectories run_episode records for each alone."""
    from trainer_core.envs import make

    tasks = _tasks(5)
    specs = episode_specs(tasks, episodes_per_task=1, seed=3)

    def policy(spec):
        if spec.task_id == tasks[1].id:
            return _CrashOn(tasks[1].id)
        return ScriptedPolicy({"wrong_answer": 0.5}, seed=spec.seed)

    alone = {
        s.task_id: run_episode(make("steplab/arithmetic"), policy(s), s, max_steps=6) for s in specs
    }
    streamed = []
    lockstep = Lockstep(max_steps=6, on_step=lambda spec, step: streamed.append(spec.task_id))
    together, waiting = {}, list(specs)
    while waiting or lockstep.live:
        while waiting and lockstep.live < 3:  # a batch of 3, refilled as episodes end
            spec = waiting.pop(0)
            result = lockstep.add(make("steplab/arithmetic"), policy(spec), spec)
            assert result is None
        for result in lockstep.turn():
            together[result.spec.task_id] = result
    assert set(together) == set(alone)
    for task_id, result in together.items():
        assert result.error == alone[task_id].error
        assert _strip(result.trajectory) == _strip(alone[task_id].trajectory)
    assert together[tasks[1].id].failed
    assert sum(not r.trajectory.outcome.success for r in together.values()) >= 2
    assert len(streamed) == sum(len(r.trajectory.steps) for r in together.values())


def test_lockstep_decodes_local_policies_in_one_batch(tmp_path):
    """Local-model episodes in a lockstep: one batched decode per turn, and the same
    trajectories (sampled at temperature 1, each from its own seeded stream) as alone."""
    from tests.trainer_core.policies.tiny_model import build_tiny_model
    from trainer_core.envs import make
    from trainer_core.policies.local_hf import LocalHFPolicy

    model_dir = build_tiny_model(tmp_path / "model", seed=2)
    specs = episode_specs(_tasks(4), episodes_per_task=1, seed=9)

    class Counting(LocalHFPolicy):
        batches: list[int] = []

        @classmethod
        def act_together(cls, policies, requests):
            cls.batches.append(len(policies))
            return super().act_together(policies, requests)

    def policy(spec, cls=LocalHFPolicy):
        return cls(model_dir, temperature=1.0, max_new_tokens=12, seed=spec.seed)

    alone = [run_episode(make("steplab/arithmetic"), policy(s), s, max_steps=2) for s in specs]
    lockstep = Lockstep(max_steps=2)
    for spec in specs:
        assert lockstep.add(make("steplab/arithmetic"), policy(spec, Counting), spec) is None
    together = lockstep.turn() + lockstep.turn()
    assert lockstep.live == 0 and Counting.batches == [4, 4]
    by_task = {r.spec.task_id: r for r in together}
    for result in alone:
        assert _strip(by_task[result.spec.task_id].trajectory) == _strip(result.trajectory)
        assert result.trajectory.outcome.metadata["truncated_reason"] == "max_steps"
