"""The environment protocol, every wrapper, describe/rebuild, and the registry."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from trainer_core.envs import AgentEnv, TimeStep, ToolSpec, list_envs, make, register, spec
from trainer_core.envs.core import Action
from trainer_core.envs.registry import UnknownEnvironment, describe_stack, rebuild_stack
from trainer_core.envs.wrappers import (
    EpisodeStatistics,
    MaxSteps,
    Recorder,
    StepReward,
    Timeout,
    TruncateObservation,
)
from trainer_core.recording.schema import Trajectory

REPO = Path(__file__).resolve().parents[3]


class EchoEnv(AgentEnv):
    """echo(text) answers the text; sleep(seconds) sleeps; done() ends the episode."""

    domain = "generic"

    def __init__(self, greeting: str = "hello"):
        super().__init__()
        self.greeting = greeting
        self.interrupted = threading.Event()

    @property
    def available_tools(self):
        return [ToolSpec("echo", "echo text"), ToolSpec("sleep", "sleep"), ToolSpec("done", "end")]

    def _reset(self, *, task, seed):
        return TimeStep(observation=f"{self.greeting} (seed {seed})")

    def _step(self, action: Action) -> TimeStep:
        if action.tool == "echo":
            return TimeStep(observation=str(action.params.get("text", "")), reward=0.5)
        if action.tool == "sleep":
            deadline = time.monotonic() + float(action.params["seconds"])
            while time.monotonic() < deadline and not self.interrupted.is_set():
                time.sleep(0.01)
            return TimeStep(observation="woke up")
        if action.tool == "done":
            return TimeStep(
                observation="bye",
                reward=1.0,
                terminated=True,
                info={"outcome": {"success": True, "score": 1.0}},
            )
        return self.unknown_tool(action.tool)

    def interrupt(self) -> None:
        self.interrupted.set()


register("test/echo", EchoEnv, domain="generic", override=True)


def echo(text):
    return {"tool": "echo", "params": {"text": text}}


def test_timestep_is_frozen_and_done_means_terminated_or_truncated():
    ts = TimeStep(observation="x", info={"a": 1})
    with pytest.raises(AttributeError):
        ts.reward = 1.0
    with pytest.raises(TypeError):
        ts.info["b"] = 2
    assert not ts.done
    assert TimeStep("x", terminated=True).done and TimeStep("x", truncated=True).done


@pytest.mark.parametrize(
    ("action", "message"),
    [
        ("ls", "expected an object"),
        ({"params": {}}, "'tool' must be a non-empty string"),
        ({"tool": "echo", "params": [1]}, "'params' must be an object"),
        ({"tool": "echo", "args": {}}, "unknown field(s) args"),
        ({"tool": "echo", "thought": 3}, "'thought' must be a string"),
    ],
)
def test_badly_shaped_actions_get_an_observation_not_an_exception(action, message):
    with EchoEnv() as env:
        env.reset()
        ts = env.step(action)
    assert message in ts.observation
    assert ts.info["error"] == "invalid_action"
    assert not ts.done


def test_reset_takes_a_task_object_dict_or_prompt_and_unknown_tools_suggest_names():
    env = EchoEnv()
    env.reset(task="Say hi")
    assert env.task.prompt == "Say hi"
    env.reset(task={"id": "t1", "prompt": "Echo", "expected_answer": 3})
    assert env.task.id == "t1" and env.task.expected_answer == 3
    ts = env.step({"tool": "ecko", "params": {}})
    assert "Unknown tool 'ecko'" in ts.observation and "Did you mean echo" in ts.observation


def test_max_steps_truncates():
    env = MaxSteps(EchoEnv(), max_steps=3)
    env.reset()
    results = [env.step(echo(str(i))) for i in range(3)]
    assert [r.truncated for r in results] == [False, False, True]
    assert results[-1].info["truncated_reason"] == "max_steps"
    env.reset()
    assert not env.step(echo("again")).done, "reset starts the count again"


def test_timeout_really_interrupts_a_sleeping_step_in_the_main_thread():
    env = Timeout(EchoEnv(), step_seconds=0.3)
    env.reset()
    started = time.monotonic()
    ts = env.step({"tool": "sleep", "params": {"seconds": 30}})
    took = time.monotonic() - started
    assert took < 2.0, f"the step was not interrupted ({took:.1f}s)"
    assert ts.truncated and ts.info["timeout"] is True
    assert env.unwrapped.interrupted.is_set(), "the env is told to stop what it runs"


def test_timeout_interrupts_in_a_worker_thread_too():
    env = Timeout(EchoEnv(), step_seconds=0.3)
    env.reset()
    box = {}
    thread = threading.Thread(
        target=lambda: box.setdefault("ts", env.step({"tool": "sleep", "params": {"seconds": 30}}))
    )
    started = time.monotonic()
    thread.start()
    thread.join(5)
    assert time.monotonic() - started < 2.0
    assert box["ts"].truncated


def test_timeout_lets_fast_steps_through_and_enforces_an_episode_budget():
    env = Timeout(EchoEnv(), episode_seconds=0.5)
    env.reset()
    assert env.step(echo("quick")).observation == "quick"
    ts = env.step({"tool": "sleep", "params": {"seconds": 5}})
    assert ts.truncated and "episode" in ts.info["truncated_reason"]


def test_step_reward_from_the_history():
    def count_echoes(history, ts):
        return float(
            sum(1 for action, _ in history if action is not None and action.tool == "echo")
        )

    env = StepReward(EchoEnv(), fn=count_echoes)
    env.reset()
    assert [env.step(echo("a")).reward, env.step(echo("b")).reward] == [1.0, 2.0]
    added = StepReward(EchoEnv(), fn=lambda h, ts: 10.0, mode="add")
    added.reset()
    assert added.step(echo("a")).reward == 10.5


def test_episode_statistics_on_the_last_step():
    env = EpisodeStatistics(EchoEnv())
    env.reset()
    env.step(echo("a"))
    last = env.step({"tool": "done", "params": {}})
    assert last.info["episode"]["return"] == 1.5 and last.info["episode"]["length"] == 2
    assert list(env.returns) == [1.5]


def test_observation_truncation_keeps_head_and_tail():
    env = TruncateObservation(EchoEnv(), max_chars=200)
    env.reset()
    ts = env.step(echo("A" * 1000 + "THE-END"))
    assert len(ts.observation) <= 220
    assert ts.observation.startswith("AAAA") and ts.observation.endswith("THE-END")
    assert "characters truncated" in ts.observation
    assert ts.info["observation_chars"] == 1007


def test_recorder_produces_the_canonical_trajectory():
    finished = []
    env = Recorder(EchoEnv(), agent="scripted", model="none", on_episode=finished.append)
    env.reset(task={"id": "t-9", "prompt": "echo twice"}, seed=4)
    env.step({"tool": "echo", "params": {"text": "one"}, "thought": "first"})
    env.step("garbage")
    env.step({"tool": "done", "params": {}})
    traj = env.trajectory
    assert isinstance(traj, Trajectory) and finished == [traj]
    assert traj.task.id == "t-9" and traj.task.prompt == "echo twice"
    assert [s.tool for s in traj.steps] == ["echo", "invalid_action", "done"]
    assert traj.steps[0].thought == "first" and traj.steps[0].observation == "one"
    assert traj.steps[1].error == "invalid_action"
    assert traj.outcome.success is True and traj.outcome.terminated
    assert traj.metadata["seed"] == 4
    Trajectory.model_validate_json(traj.to_json())


def test_wrappers_compose_in_any_order_and_a_stack_can_be_described_and_rebuilt():
    env = make("test/echo", greeting="hi")
    env = TruncateObservation(Recorder(MaxSteps(env, max_steps=2), agent="x"), max_chars=150)
    env = StepReward(env, fn=constant_reward)
    description = describe_stack(env)
    assert description["env"] == {"id": "test/echo", "kwargs": {"greeting": "hi"}}
    assert [w["wrapper"].rsplit(":", 1)[1] for w in description["wrappers"]] == [
        "MaxSteps",
        "Recorder",
        "TruncateObservation",
        "StepReward",
    ]
    rebuilt = rebuild_stack(description)
    assert describe_stack(rebuilt) == description
    assert rebuilt.reset().observation == "hi (seed None)"
    assert rebuilt.step(echo("x")).reward == 0.25
    assert rebuilt.step(echo("y")).truncated


def constant_reward(history, ts):
    return 0.25


def test_registry_errors_name_the_closest_ids():
    with pytest.raises(UnknownEnvironment) as caught:
        make("steplab/arithmatic")
    assert "Did you mean 'steplab/arithmetic'" in str(caught.value)
    with pytest.raises(UnknownEnvironment, match="steplab/conversation"):
        spec("conversation")
    with pytest.raises(Exception, match="namespace/name"):
        register("no-namespace", EchoEnv)


def test_builtin_ids_are_registered_and_listed_by_domain():
    assert {
        "steplab/sandbox",
        "steplab/conversation",
        "steplab/engineering",
        "steplab/advisory",
        "steplab/discussion",
        "steplab/arithmetic",
    } <= set(list_envs())
    assert list_envs(domain="arithmetic") == ["steplab/arithmetic"]


def test_make_works_in_a_fresh_interpreter_without_heavy_imports():
    code = (
        "import sys\n"
        "from trainer_core.envs import make\n"
        "env = make('steplab/conversation')\n"
        "ts = env.reset(task='hi')\n"
        "print(type(env.unwrapped).__name__, ts.observation)\n"
        "heavy = [m for m in ('torch', 'transformers', 'datasets', 'django', 'celery') if m in sys.modules]\n"
        "print('heavy', heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout
    assert "DialogueEnv hi" in out
    assert "heavy []" in out
