"""steplab/arithmetic and the conversation-like environments."""

from __future__ import annotations

import pytest

from trainer_core.envs import make
from trainer_core.envs.arithmetic import CalculatorError, evaluate
from trainer_core.errors import ConfigError
from trainer_core.tasks.suites.arithmetic import SPLITS, arithmetic_task, arithmetic_tasks


def play(env, task):
    ts = env.reset(task=task)
    for call in task.reference_solution:
        ts = env.step(call.model_dump())
    return ts


@pytest.mark.parametrize("split", ["train", "heldout"])
def test_every_reference_solution_passes_and_an_empty_submission_fails(split):
    env = make("steplab/arithmetic")
    for task in arithmetic_tasks(split, n=200):
        last = play(env, task)
        assert last.terminated and last.reward == 1.0, (task.id, last.observation)
        assert last.info["outcome"]["success"] is True
        env.reset(task=task)
        empty = env.step({"tool": "submit", "params": {}})
        assert (
            empty.terminated and empty.reward == 0.0 and empty.info["outcome"]["success"] is False
        )
        env.reset(task=task)
        wrong = env.step({"tool": "submit", "params": {"answer": str(task.expected_answer + 1)}})
        assert wrong.reward == 0.0


def test_tasks_are_deterministic_and_the_splits_are_disjoint():
    assert arithmetic_task(7) == arithmetic_task(7)
    train = arithmetic_tasks("train", n=500)
    heldout = arithmetic_tasks("heldout", n=500)
    assert not {t.id for t in train} & {t.id for t in heldout}
    assert not {t.metadata["expression"] for t in train} & {
        t.metadata["expression"] for t in heldout
    }
    lo, hi = SPLITS["train"][2:]
    for task in train:
        numbers = [int(x) for x in task.metadata["expression"].split() if x.isdigit()]
        assert all(lo <= n <= hi for n in numbers)
    with pytest.raises(ConfigError, match="not in the train split"):
        arithmetic_task(1_500_000, "train")


def test_the_wide_train_split_never_uses_a_held_out_number_but_covers_its_digit_pairs():
    wide = arithmetic_tasks("train_wide", n=2000)
    heldout = arithmetic_tasks("heldout", n=500)
    assert not {t.id for t in wide} & {t.id for t in heldout}
    numbers = [int(x) for t in wide for x in t.metadata["expression"].split() if x.isdigit()]
    assert all(2 <= n <= 49 or 100 <= n <= 499 for n in numbers)
    assert any(n >= 100 for n in numbers) and any(n <= 49 for n in numbers)
    seen_pairs = {s[i : i + 2] for s in map(str, numbers) for i in range(len(s) - 1)}
    for task in heldout:
        for x in task.metadata["expression"].split():
            if x.isdigit():
                assert x in seen_pairs  # 52 occurs in training inside 152, 252...
    # the train and held-out splits draw exactly as before (one range each)
    assert (
        arithmetic_task(7).metadata["expression"]
        == arithmetic_tasks("train", n=8)[7].metadata["expression"]
    )


def test_reset_with_a_seed_generates_the_seeds_task_and_aliases_work():
    env = make("steplab/arithmetic", split="heldout")
    ts = env.reset(seed=3)
    assert env.task.id == "arith-heldout-1000003" and env.task.prompt in ts.observation
    out = env.step({"tool": "calc", "params": {"expression": "2 * (3 + 4)"}})
    assert out.observation == "2 * (3 + 4) = 14" and out.info["tool"] == "calculator"


@pytest.mark.parametrize(
    "expression", ["__import__('os')", "2 ** 10000", "1/0", "a + 1", "x" * 300]
)
def test_the_calculator_refuses_anything_but_arithmetic(expression):
    with pytest.raises(CalculatorError):
        evaluate(expression)
    env = make("steplab/arithmetic")
    env.reset(seed=0)
    ts = env.step({"tool": "calculator", "params": {"expression": expression}})
    assert ts.observation.startswith("Error:") and not ts.done


def test_bad_parameters_are_explained():
    env = make("steplab/arithmetic")
    env.reset(seed=0)
    assert "missing 'expression'" in env.step({"tool": "calculator", "params": {}}).observation
    assert (
        "'expression' must be a string"
        in env.step({"tool": "calculator", "params": {"expression": 5}}).observation
    )
    assert (
        "unknown 'expr'"
        in env.step({"tool": "calculator", "params": {"expression": "1", "expr": 2}}).observation
    )


def test_the_step_limit_truncates_a_looping_agent():
    env = make("steplab/arithmetic")
    env.reset(seed=1)
    results = [env.step({"tool": "calculator", "params": {"expression": "1+1"}}) for _ in range(6)]
    assert results[-1].truncated and not any(r.done for r in results[:-1])


KB_TASK = {
    "id": "conv-1",
    "prompt": "How many seats does the Aurora hall have?",
    "expected_answer": 240,
    "checker": "number",
    "metadata": {
        "knowledge_base": [
            {"title": "Aurora hall", "text": "The Aurora hall seats 240 people."},
            {"title": "Boreal room", "text": "Seats 12."},
        ],
        "stats": {"bookings aurora 2025": 311, "bookings boreal 2025": 95},
    },
}


@pytest.mark.parametrize(
    "env_id",
    ["steplab/conversation", "steplab/advisory", "steplab/discussion", "steplab/engineering"],
)
def test_dialogue_envs_look_things_up_and_check_the_answer(env_id):
    env = make(env_id)
    env.reset(task=KB_TASK)
    tools = env.unwrapped.tool_names()
    if "knowledge_base" in tools:
        found = env.step({"tool": "knowledge_base", "params": {"query": "aurora seats"}})
        assert "seats 240" in found.observation
    right = env.step({"tool": "respond", "params": {"message": "It seats 240."}})
    # "auto" extraction takes the last line; the number checker reads 240 from it
    assert right.terminated
    env.reset(task=KB_TASK)
    wrong = env.step({"tool": "respond", "params": {"message": "<answer>12</answer>"}})
    assert wrong.terminated and wrong.reward == 0.0


def test_conversation_stats_tool_and_answer_tag():
    env = make("steplab/conversation")
    env.reset(task=KB_TASK)
    stats = env.step({"tool": "query_stats", "params": {"query": "bookings aurora"}})
    assert "bookings aurora 2025: 311" in stats.observation
    done = env.step({"tool": "respond", "params": {"message": "<answer>240</answer>"}})
    assert done.reward == 1.0 and done.info["outcome"]["success"] is True


def test_engineering_runs_bash_and_git_over_the_task_files():
    from tests.trainer_core.sandboxes import require_isolation

    require_isolation()
    env = make("steplab/engineering")
    try:
        env.reset(
            task={
                "id": "eng",
                "prompt": "Which port?",
                "files": {"conf/app.ini": "port = 8443\n"},
                "expected_answer": 8443,
                "checker": "number",
            }
        )
        ts = env.step({"tool": "bash", "params": {"command": "grep -h port conf/app.ini"}})
        assert ts.observation.startswith("port = 8443") and ts.info["exit_code"] == 0
        ts = env.step({"tool": "git", "params": {"args": ["--version"]}})
        assert "git version" in ts.observation
        knowledge = env.step({"tool": "knowledge_base", "params": {"query": "passwords"}})
        assert "No knowledge-base entry" in knowledge.observation
    finally:
        env.close()


def test_search_matches_plurals():
    from trainer_core.envs.dialogue import _search

    docs = [
        {"title": "Password rules", "text": "A password has 12 characters."},
        {"title": "Other", "text": "none"},
    ]
    assert _search(docs, "passwords length")[0]["title"] == "Password rules"
