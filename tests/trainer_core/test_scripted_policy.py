"""ScriptedPolicy: plays reference solutions, injects each mistake kind on purpose with the
documented effect, reproducibly, and every episode ends."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from trainer_core.envs import make
from trainer_core.errors import ConfigError
from trainer_core.policies.scripted import (
    MISTAKE_KINDS,
    ScriptedPolicy,
    run_episode,
    wrong_answer_text,
)
from trainer_core.tasks.model import Task, ToolCall
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
from trainer_core.tasks.suites.dialogue import dialogue_suites

ARITHMETIC = arithmetic_tasks("train", 50)
DIALOGUE = [task for suite in dialogue_suites() for task in suite.tasks]
ALL_TASKS = ARITHMETIC + DIALOGUE
REPO = Path(__file__).resolve().parents[2]
USAGE = {"tokens_in": 0, "tokens_out": 0, "cost": 0.0, "latency": 0.0}


def _play(task, policy, **kwargs):
    return run_episode(make(task.environment), policy, task, **kwargs)


def _summary(steps):
    return [(action, ts.observation, ts.reward, ts.done) for action, ts in steps]


def _task_named(task_id):
    return next(task for task in ALL_TASKS if task.id == task_id)


# --------------------------------------------------------------------------------------------
# no mistakes / wrong answers
# --------------------------------------------------------------------------------------------


def test_without_mistakes_every_task_is_solved_in_the_reference_steps():
    policy = ScriptedPolicy()
    for task in ALL_TASKS:
        steps, last = _play(task, policy)
        assert last.terminated and last.reward == 1.0, (task.id, last.observation)
        assert last.info["outcome"]["success"] is True
        assert len(steps) == task.reference_steps
        assert [a["tool"] for a, _ in steps] == [c.tool for c in task.reference_solution]
        assert policy.mistakes_made == []
        assert policy.last_usage == USAGE


def test_wrong_answers_fail_every_task_and_are_recorded():
    policy = ScriptedPolicy(mistakes={"wrong_answer": 1.0})
    for task in ALL_TASKS:
        steps, last = _play(task, policy)
        assert last.terminated and last.reward == 0.0, (task.id, last.observation)
        assert last.info["outcome"]["success"] is False
        assert len(steps) == task.reference_steps
        [mistake] = policy.mistakes_made
        assert mistake["kind"] == "wrong_answer"
        assert mistake["step"] == len(steps)
        assert mistake["action"] == steps[-1][0]


def test_wrong_answer_text_changes_numbers_and_strings():
    assert wrong_answer_text("<answer>47</answer>") == "<answer>48</answer>"
    assert (
        wrong_answer_text("So 5 + 5. <answer> 12.5 </answer>") == "So 5 + 5. <answer>13.5</answer>"
    )
    assert wrong_answer_text("<answer>-23</answer>") == "<answer>-22</answer>"
    assert wrong_answer_text("<answer>Zurich</answer>") == "<answer>Zurich (guess)</answer>"
    assert wrong_answer_text("-3") == "-2"
    assert wrong_answer_text("south") == "south (guess)"


# --------------------------------------------------------------------------------------------
# each mistake kind
# --------------------------------------------------------------------------------------------

TWO_LOOKUPS = "conversation-02"  # query_stats, query_stats, respond


def test_wrong_tool_gives_unknown_tool_then_the_right_call():
    task = _task_named(TWO_LOOKUPS)
    policy = ScriptedPolicy(mistakes={"wrong_tool": 1.0})
    steps, last = _play(task, policy)
    assert last.terminated and last.reward == 1.0
    assert len(steps) == 2 * task.reference_steps
    assert [m["kind"] for m in policy.mistakes_made] == ["wrong_tool"] * 3
    for mistake in policy.mistakes_made:
        action, ts = steps[mistake["step"] - 1]
        assert action == mistake["action"] and action["tool"].endswith("_v2")
        assert ts.observation.startswith("Unknown tool") and ts.info["error"] == "unknown_tool"
        assert steps[mistake["step"]][0]["tool"] == mistake["tool"]


def test_bad_params_gives_invalid_parameters_then_the_right_call():
    task = _task_named(TWO_LOOKUPS)
    policy = ScriptedPolicy(mistakes={"bad_params": 1.0})
    steps, last = _play(task, policy)
    assert last.terminated and last.reward == 1.0
    assert [m["kind"] for m in policy.mistakes_made] == ["bad_params"] * 3
    for mistake in policy.mistakes_made:
        action, ts = steps[mistake["step"] - 1]
        assert action["params"] == {}
        assert ts.observation.startswith("Invalid parameters")
        assert ts.info["error"] == "invalid_params" and not ts.done
    # arithmetic: submit has no required parameter, so only the calculator call goes wrong
    arith = ARITHMETIC[0]
    steps, last = _play(arith, ScriptedPolicy(mistakes={"bad_params": 1.0}))
    assert last.reward == 1.0 and len(steps) == 3
    assert "missing 'expression'" in steps[0][1].observation


def test_skip_step_drops_the_lookups_but_never_the_answer():
    task = _task_named(TWO_LOOKUPS)
    policy = ScriptedPolicy(mistakes={"skip_step": 1.0})
    steps, last = _play(task, policy)
    assert [a["tool"] for a, _ in steps] == ["respond"]
    assert last.terminated and last.reward == 1.0  # the scripted answer needs no observation
    assert [(m["kind"], m["reference_index"]) for m in policy.mistakes_made] == [
        ("skip_step", 0),
        ("skip_step", 1),
    ]
    assert all(m["action"] is None for m in policy.mistakes_made)


def test_repeat_step_sends_the_previous_call_again():
    task = _task_named(TWO_LOOKUPS)
    policy = ScriptedPolicy(mistakes={"repeat_step": 1.0})
    steps, last = _play(task, policy)
    assert last.terminated and last.reward == 1.0
    tools = [a["tool"] for a, _ in steps]
    assert tools == ["query_stats", "query_stats", "query_stats", "query_stats", "respond"]
    assert steps[0][0] == steps[1][0] and steps[0][1].observation == steps[1][1].observation
    assert steps[2][0] == steps[3][0] and steps[2][1].observation == steps[3][1].observation
    assert steps[0][0] != steps[2][0]
    assert [(m["kind"], m["step"]) for m in policy.mistakes_made] == [
        ("repeat_step", 2),
        ("repeat_step", 4),
    ]


def test_every_mistake_at_once_still_ends_every_episode():
    policy = ScriptedPolicy(mistakes=dict.fromkeys(MISTAKE_KINDS, 1.0))
    for task in ALL_TASKS:
        steps, last = _play(task, policy)
        assert last.terminated, (task.id, last.observation)
        assert last.reward == 0.0
        kinds = {m["kind"] for m in policy.mistakes_made}
        assert {"wrong_tool", "wrong_answer"} <= kinds


@pytest.mark.parametrize("seed", range(5))
def test_random_mistakes_never_raise_and_episodes_end(seed):
    policy = ScriptedPolicy(mistakes=dict.fromkeys(MISTAKE_KINDS, 0.3), seed=seed)
    for task in ALL_TASKS:
        steps, last = _play(task, policy)
        assert last.done and len(steps) <= 50
        answer_changed = any(m["kind"] == "wrong_answer" for m in policy.mistakes_made)
        assert last.info["outcome"]["success"] is (not answer_changed), task.id
        for mistake in policy.mistakes_made:
            assert mistake["kind"] in MISTAKE_KINDS
            assert 1 <= mistake["step"] <= len(steps) + 1


# --------------------------------------------------------------------------------------------
# coding tasks: the answer is the work, so a wrong answer is a wrong fix
# --------------------------------------------------------------------------------------------

#: the mistakes of the builtin ``scripted-noisy`` policy (webapp/rollouts/services.py)
NOISY = {"wrong_tool": 0.15, "bad_params": 0.1, "repeat_step": 0.1, "wrong_answer": 0.3}


def _coding_tasks():
    from trainer_core.tasks.suites.coding import coding_tasks

    return coding_tasks()


def _one_per_kind(tasks):
    kinds: dict[str, Task] = {}
    for task in tasks:
        kinds.setdefault(task.metadata["kind"], task)
    return list(kinds.values())


def _is_write(call) -> bool:
    return "new_string" in call["params"] or "content" in call["params"]


def test_a_wrong_answer_on_a_coding_task_plays_its_wrong_patch_and_the_tests_fail():
    policy = ScriptedPolicy(mistakes={"wrong_answer": 1.0})
    env = make("steplab/sandbox")
    try:
        for task in _one_per_kind(_coding_tasks()):
            steps, last = run_episode(env, policy, task)
            assert last.terminated and last.info["outcome"]["success"] is False, task.id
            reference = [c.model_dump(exclude_none=True) for c in task.reference_solution]
            first_write = next(n for n, c in enumerate(reference) if _is_write(c))
            patch = task.metadata["wrong_patch"]
            played = [{"tool": a["tool"], "params": a["params"]} for a, _ in steps]
            expected = [{"tool": c["tool"], "params": c["params"]} for c in reference]
            wanted = expected[:first_write] + [
                {"tool": c["tool"], "params": c.get("params", {})} for c in patch
            ]
            assert played == wanted, task.id
            fixes = [c for c in expected if _is_write(c)]
            wrong = [n for n, c in enumerate(played) if _is_write(c) and c not in fixes]
            assert wrong, task.id
            assert [(m["kind"], m["step"] - 1) for m in policy.mistakes_made] == [
                ("wrong_answer", n) for n in wrong
            ]
            assert all(m["action"] == steps[m["step"] - 1][0] for m in policy.mistakes_made)
    finally:
        env.close()


def test_a_coding_task_without_a_wrong_patch_gets_its_fix_on_a_file_that_does_not_exist():
    task = _coding_tasks()[0]
    task = task.model_copy(update={"metadata": {**task.metadata, "wrong_patch": []}})
    policy = ScriptedPolicy(mistakes={"wrong_answer": 1.0})
    env = make("steplab/sandbox")
    try:
        steps, last = run_episode(env, policy, task)
    finally:
        env.close()
    tools = [a["tool"] for a, _ in steps]
    assert tools == ["read_file", "edit_file", "bash", "submit"]
    edit, ts = steps[1]
    assert edit["params"]["file_path"] == "pager/pages_old.py" and ts.info["error"]
    assert last.info["outcome"]["success"] is False
    [mistake] = policy.mistakes_made
    assert mistake["kind"] == "wrong_answer" and mistake["step"] == 2


@pytest.mark.slow
def test_scripted_noisy_breaks_about_a_third_of_the_coding_episodes_and_only_by_wrong_fixes():
    tasks = _coding_tasks()
    env = make("steplab/sandbox")
    broken = 0
    try:
        for seed in (0, 1):
            policy = ScriptedPolicy(mistakes=NOISY, seed=seed)
            for task in tasks:
                _, last = run_episode(env, policy, task)
                wrong_fix = any(m["kind"] == "wrong_answer" for m in policy.mistakes_made)
                assert last.info["outcome"]["success"] is (not wrong_fix), (seed, task.id)
                broken += wrong_fix
    finally:
        env.close()
    assert 0.2 <= broken / (2 * len(tasks)) <= 0.45, broken


# --------------------------------------------------------------------------------------------
# reproducibility, the end of the reference, the API
# --------------------------------------------------------------------------------------------


def _run_all(seed):
    policy = ScriptedPolicy(mistakes=dict.fromkeys(MISTAKE_KINDS, 0.25), seed=seed)
    runs = []
    for task in DIALOGUE + ARITHMETIC[:10]:
        steps, last = _play(task, policy)
        runs.append((_summary(steps), last.reward, [dict(m) for m in policy.mistakes_made]))
    return runs


def test_the_same_seed_gives_the_same_episodes():
    assert _run_all(3) == _run_all(3)
    assert _run_all(3) != _run_all(4)
    task = _task_named("advisory-08")
    one = _play(task, ScriptedPolicy({"wrong_tool": 0.5, "repeat_step": 0.5}, seed=11))
    two = _play(task, ScriptedPolicy({"wrong_tool": 0.5, "repeat_step": 0.5}, seed=11))
    assert _summary(one[0]) == _summary(two[0])


def test_when_the_reference_is_exhausted_the_policy_ends_the_episode():
    no_answer = Task(
        id="t",
        prompt="What is 2 + 2?",
        domain="arithmetic",
        expected_answer=4,
        reference_solution=[ToolCall(tool="calculator", params={"expression": "2 + 2"})],
    )
    steps, last = run_episode(make("steplab/arithmetic"), ScriptedPolicy(), no_answer)
    assert [a["tool"] for a, _ in steps] == ["calculator", "submit"]
    assert steps[-1][0]["params"] == {} and last.terminated and last.reward == 0.0

    lookup_only = DIALOGUE[0].model_copy(
        update={"reference_solution": DIALOGUE[0].reference_solution[:-1]}
    )
    steps, last = run_episode(make("steplab/conversation"), ScriptedPolicy(), lookup_only)
    assert steps[-1][0] == {
        "tool": "respond",
        "params": {"message": ""},
        "thought": steps[-1][0]["thought"],
    }
    assert last.terminated and last.info["outcome"]["success"] is False


def test_run_episode_truncates_at_max_steps():
    task = _task_named(TWO_LOOKUPS)
    steps, last = _play(task, ScriptedPolicy(mistakes={"wrong_tool": 1.0}), max_steps=3)
    assert len(steps) == 3 and last.truncated and not last.terminated
    assert last.info["truncated_reason"] == "max_steps" and steps[-1][1] is last


def test_actions_have_the_documented_shape():
    policy = ScriptedPolicy()
    env = make("steplab/advisory")
    task = _task_named("advisory-08")
    ts = env.reset(task=task)
    policy.reset(task)
    action = policy.act(ts.observation, [], env.available_tools)
    assert set(action) == {"tool", "params", "thought"}
    assert action["tool"] == "knowledge_base" and isinstance(action["thought"], str)
    assert policy.last_usage == USAGE
    # the policy hands out copies: changing an action does not change the next episode
    action["params"]["query"] = "changed"
    steps, _ = run_episode(env, policy, task)
    assert steps[0][0]["params"]["query"] == task.reference_solution[0].params["query"]


@pytest.mark.parametrize(
    "mistakes", [{"typo": 0.5}, {"wrong_tool": 1.5}, {"wrong_tool": -0.1}, {"bad_params": "x"}]
)
def test_bad_mistake_settings_are_refused(mistakes):
    with pytest.raises(ConfigError):
        ScriptedPolicy(mistakes=mistakes)


def test_importing_the_policy_and_the_suites_stays_light():
    code = (
        "import sys, trainer_core.policies.scripted, trainer_core.tasks.suites.dialogue; "
        "heavy = {'django', 'celery', 'torch', 'webapp', 'workers'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
