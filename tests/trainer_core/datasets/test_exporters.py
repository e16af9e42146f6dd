"""The exporters: SFT (messages, knowlyr), DPO, GRPO, PRM and benchmark rows, checked against the
one chat format and TRL's own dataset helpers."""

from __future__ import annotations

import json
import random

import pytest

from tests.trainer_core.policies.tiny_model import build_tiny_tokenizer
from trainer_core.datasets import (
    ExportItem,
    ExportStats,
    benchmark_records,
    content_key,
    dpo_records,
    grpo_groups,
    prm_records,
    sft_records,
)
from trainer_core.datasets.grpo import outcome_reward
from trainer_core.envs import make
from trainer_core.errors import ConfigError, InputError
from trainer_core.policies import chat_format as cf
from trainer_core.policies.scripted import ScriptedPolicy
from trainer_core.recording.schema import Outcome, Step, TaskRef, Trajectory
from trainer_core.rollouts.collect import collect
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks

PROMPT = "What is 2+3? Use the calculator tool, then submit the answer."


@pytest.fixture(scope="module")
def tools() -> list[dict]:
    return [t.as_dict() for t in make("steplab/arithmetic").available_tools]


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer()


@pytest.fixture(scope="module")
def trl_data_utils():
    import torch

    torch.set_num_threads(1)
    from trl import data_utils

    return data_utils


def trajectory(task_id="t1", prompt=PROMPT, steps=(), success=None) -> Trajectory:
    return Trajectory(
        task=TaskRef(id=task_id, prompt=prompt, domain="arithmetic"),
        steps=[Step(**s) for s in steps],
        outcome=Outcome(success=success),
        agent="steplab",
        model="tiny",
    )


CALC = {"tool": "calculator", "params": {"expression": "2+3"}, "thought": "Compute it."}
SUBMIT_OK = {
    "tool": "submit",
    "params": {"answer": "5"},
    "observation": "Submitted: '5' — correct.",
}
SUBMIT_BAD = {"tool": "submit", "params": {"answer": "6"}, "observation": "not correct."}


def good_bad(tools) -> tuple[ExportItem, ExportItem]:
    good = trajectory(
        steps=[{**CALC, "index": 0, "observation": "2+3 = 5"}, {**SUBMIT_OK, "index": 1}],
        success=True,
    )
    bad = trajectory(
        steps=[
            {"index": 0, "tool": "submit", "params": {"answer": "6"}, "observation": "wrong"},
        ],
        success=False,
    )
    return (
        ExportItem(1, good, step_ids=[11, 12], reward=1.0, step_rewards=[0.9, 0.8], tools=tools),
        ExportItem(2, bad, step_ids=[21], reward=0.0, step_rewards=[0.1], tools=tools),
    )


@pytest.fixture(scope="module")
def collected(tools) -> list[ExportItem]:
    """Real episodes: the scripted policy on tool arithmetic, with deliberate mistakes."""
    results = collect(
        "steplab/arithmetic",
        arithmetic_tasks("train", n=3),
        lambda seed: ScriptedPolicy(mistakes={"wrong_tool": 0.4, "wrong_answer": 0.4}, seed=seed),
        episodes_per_task=4,
        max_steps=6,
        seed=3,
    )
    items = []
    for number, result in enumerate(results, 1):
        steps = result.trajectory.steps
        items.append(
            ExportItem(
                trajectory_id=number,
                trajectory=result.trajectory,
                step_ids=[1000 * number + s.index for s in steps],
                reward=1.0 if result.trajectory.outcome.success else 0.0,
                step_rewards=[0.2 if s.error else 0.9 for s in steps],
                tools=tools,
                source={"reward_model": 3},
            )
        )
    return items


# ----------------------------------------------------------------------------- SFT


def test_sft_rows_are_the_chat_format_messages_with_ids_and_step_rewards(
    collected, tools, tokenizer, trl_data_utils
):
    stats = ExportStats()
    rows = list(sft_records(collected, stats=stats))
    assert stats.rows == len(rows) == len(collected) and not stats.skipped
    system = cf.system_prompt(tools)
    for item, row in zip(collected, rows, strict=True):
        assert row["messages"] == cf.trajectory_to_messages(item.trajectory, system=system)
        assistant = [m for m in row["messages"] if m["role"] == "assistant"]
        n = len(item.trajectory.steps)
        assert len(assistant) == n == row["difficulty"] == len(row["step_ids"])
        assert row["step_ids"] == [1000 * item.trajectory_id + i for i in range(n)]
        assert row["step_rewards"] == item.step_rewards
        assert row["trajectory_id"] == item.trajectory_id
        assert row["reward"] == item.reward and row["task_id"] == item.trajectory.task.id
        assert json.loads(row["source"]) == {"reward_model": 3}
        # TRL: conversational, and its chat-template path renders exactly our text
        assert trl_data_utils.is_conversational(row)
        tools_arg = json.loads(row["tools"])
        text = trl_data_utils.maybe_apply_chat_template(row, tokenizer, tools=tools_arg)["text"]
        assert text == cf.render(row["messages"])
    assert json.loads(rows[0]["tools"]) == [
        {"type": "function", "function": {k: t[k] for k in ("name", "description", "parameters")}}
        for t in tools
    ]
    assert any(m.get("tool_calls") for m in rows[0]["messages"])


def test_sft_aligns_ids_and_rewards_with_steps_listed_out_of_order(tools):
    steps = [{**SUBMIT_OK, "index": 1}, {**CALC, "index": 0, "observation": "5"}]
    item = ExportItem(
        "t-9", trajectory(steps=steps), step_ids=["s-b", "s-a"], step_rewards=[0.3, None]
    )
    (row,) = sft_records([item])
    assert row["step_ids"] == ["s-a", "s-b"]
    assert row["step_rewards"] == [None, 0.3]
    calls = [m["tool_calls"][0]["function"]["name"] for m in row["messages"] if "tool_calls" in m]
    assert calls == ["calculator", "submit"]
    assert row["tools"] is None and row["messages"][0]["role"] == "user"  # no tools, no system
    # default step ids are the step indexes; system "" means none, a given one is used verbatim
    (row,) = sft_records([ExportItem(5, trajectory(steps=steps), tools=tools, system="")])
    assert row["step_ids"] == [0, 1] and row["messages"][0]["role"] == "user"
    assert row["tools"] is not None
    (row,) = sft_records([ExportItem(5, trajectory(steps=steps), system="Be brief.")])
    assert row["messages"][0] == {"role": "system", "content": "Be brief."}
    (row,) = sft_records([item], include_step_rewards=False)
    assert "step_rewards" not in row


def test_sft_leaves_out_empty_trajectories_and_rejects_misaligned_input():
    stats = ExportStats()
    assert list(sft_records([ExportItem(1, trajectory())], stats=stats)) == []
    assert stats.as_dict() == {"rows": 0, "skipped": {"no_steps": 1}}
    steps = [{**CALC, "index": 0}]
    with pytest.raises(InputError, match="one entry per step"):
        list(sft_records([ExportItem(1, trajectory(steps=steps), step_rewards=[0.1, 0.2])]))
    with pytest.raises(InputError, match="0..1"):
        list(prm_records([ExportItem(1, trajectory(steps=steps), step_labels=[2.0])]))
    with pytest.raises(ConfigError, match="unknown SFT format"):
        list(sft_records([], fmt="alpaca"))


def test_knowlyr_records_match_knowlyr_hub_export_sft(tmp_path):
    """knowlyr-hub's own ``DatasetExporter.export_sft`` (the package, not a copy), given the same
    trajectory in the hub's form, writes the same instruction, input, response, task id, reward
    and metadata as our knowlyr format. The hub takes each step's action as text already
    rendered: it gets knowlyr's rendering of the calls, written out here (``tool(<params as
    JSON>)``, the bare name without params, the raw output of a step that was not an action)."""
    from trajectoryhub.exporter import DatasetExporter

    steps = [
        {**CALC, "index": 0, "observation": "2+3 = 5"},
        {
            "index": 1,
            "tool": "",
            "thought": "",
            "error": "malformed_output",
            "observation": "Invalid output: no tool call.",
            "metadata": {"raw": "the answer is 5"},
        },
        {"index": 2, "tool": "finish", "params": {}, "observation": ""},
    ]
    traj = trajectory(steps=steps)
    traj.metadata["repo"] = "/src/calc"
    (row,) = sft_records([ExportItem(4, traj, reward=0.5)], fmt="knowlyr")

    hub_steps = [
        {"thought": "Compute it.", "action": 'calculator({"expression": "2+3"})',
         "observation": "2+3 = 5"},
        {"thought": "", "action": "the answer is 5", "observation": "Invalid output: no tool call."},
        {"thought": "", "action": "finish", "observation": ""},
    ]  # fmt: skip
    hub_trajectory = {
        "task_id": "t1",
        "agent_framework": "steplab",
        "agent_model": "tiny",
        "steps": hub_steps,
        "total_steps": 3,
        "success": True,  # the hub exports successful trajectories only
        "reward": 0.5,
        "metadata": {"task_description": PROMPT, "repo": "/src/calc"},
    }
    source, written = tmp_path / "trajectories.jsonl", tmp_path / "sft.jsonl"
    source.write_text(json.dumps(hub_trajectory) + "\n")
    result = DatasetExporter(str(source)).export_sft(str(written))
    assert result.success and result.total_records == 1, result.error
    (hub_row,) = [json.loads(line) for line in written.read_text().splitlines()]
    assert set(hub_row) == {"instruction", "input", "response", "task_id", "reward", "metadata"}
    assert {key: row[key] for key in hub_row} == hub_row
    assert json.loads(row["input"]) == {"repo": "/src/calc", "base_commit": "", "test_command": ""}
    assert (row["trajectory_id"], row["step_ids"], row["reward"]) == (4, [0, 1, 2], 0.5)
    assert "messages" not in row


# ----------------------------------------------------------------------------- DPO


def test_dpo_rows_are_trl_conversational_preferences(tools, tokenizer, trl_data_utils):
    good, bad = good_bad(tools)
    stats = ExportStats()
    (row,) = dpo_records([(good, bad, {"method": "outside_in", "margin": 0.75})], stats=stats)
    full_good = cf.trajectory_to_messages(good.trajectory, system=cf.system_prompt(tools))
    full_bad = cf.trajectory_to_messages(bad.trajectory, system=cf.system_prompt(tools))
    assert row["prompt"] == full_good[:2] and [m["role"] for m in row["prompt"]] == [
        "system",
        "user",
    ]
    assert row["prompt"] + row["chosen"] == full_good
    assert row["prompt"] + row["rejected"] == full_bad
    assert (row["chosen_trajectory_id"], row["rejected_trajectory_id"]) == (1, 2)
    assert (row["chosen_step_ids"], row["rejected_step_ids"]) == ([11, 12], [21])
    assert row["margin"] == 0.75 and json.loads(row["source"]) == {"method": "outside_in"}
    assert (row["chosen_reward"], row["rejected_reward"]) == (1.0, 0.0)
    # TRL: explicit conversational prompt kept as is; extract_prompt finds the same split
    assert trl_data_utils.is_conversational(row)
    assert trl_data_utils.maybe_extract_prompt(row) is row
    implicit = {"chosen": full_good, "rejected": full_bad}
    assert trl_data_utils.extract_prompt(implicit) == {
        k: row[k] for k in ("prompt", "chosen", "rejected")
    }
    text = trl_data_utils.maybe_apply_chat_template(
        {k: row[k] for k in ("prompt", "chosen", "rejected")}, tokenizer
    )
    assert text["prompt"] == cf.render(row["prompt"], add_generation_prompt=True)
    assert text["prompt"] + text["chosen"] == cf.render(full_good)
    assert text["prompt"] + text["rejected"] == cf.render(full_bad)
    # no margin given: the reward difference
    (row,) = dpo_records([(good, bad, None)])
    assert row["margin"] == 1.0 and row["source"] == "{}"
    assert stats.rows == 1


def test_dpo_refuses_pairs_of_different_prompts_and_skips_identical_sides(tools):
    good, bad = good_bad(tools)
    other = ExportItem(
        3,
        trajectory(task_id="t2", prompt="What is 9*9?", steps=[{**CALC, "index": 0}]),
        tools=tools,
    )
    with pytest.raises(InputError, match="different prompts"):
        list(dpo_records([(good, other, {})]))
    with pytest.raises(InputError, match="triple"):
        list(dpo_records([(good, bad)]))
    twin = ExportItem(9, good.trajectory, tools=tools)
    stats = ExportStats()
    assert (
        list(
            dpo_records(
                [(good, twin, {}), (good, ExportItem(4, trajectory(), tools=tools), {})],
                stats=stats,
            )
        )
        == []
    )
    assert stats.skipped == {"identical": 1, "no_steps": 1}


# ----------------------------------------------------------------------------- GRPO


def test_grpo_groups_by_task_with_rewards_and_ids(collected, trl_data_utils):
    stats = ExportStats()
    groups = list(grpo_groups(collected, stats=stats))
    assert [g["task_id"] for g in groups] == sorted({i.trajectory.task.id for i in collected})
    by_id = {i.trajectory_id: i for i in collected}
    for group in groups:
        assert trl_data_utils.is_conversational(group)
        assert len(group["completions"]) == len(group["rewards"]) == 4
        assert group["trajectory_ids"] == sorted(group["trajectory_ids"])
        for tid, completion, reward, step_ids, step_rewards in zip(
            group["trajectory_ids"],
            group["completions"],
            group["rewards"],
            group["step_ids"],
            group["step_rewards"],
            strict=True,
        ):
            item = by_id[tid]
            assert item.trajectory.task.id == group["task_id"]
            assert group["prompt"] + completion == cf.trajectory_to_messages(
                item.trajectory, system=cf.system_prompt(item.tools)
            )
            assert reward == item.reward and step_ids == item.step_ids
            assert step_rewards == item.step_rewards
    assert len({r for g in groups for r in g["rewards"]}) == 2  # the mistakes made some fail
    for group in groups:  # each trajectory's own outcome, beside the reward model's totals
        assert group["outcome_rewards"] == [
            1.0 if item.trajectory.outcome.success else 0.0
            for item in sorted(collected, key=lambda i: i.trajectory_id)
            if item.trajectory_id in group["trajectory_ids"]
        ]
    # the same groups whatever the order of the trajectories
    shuffled = list(collected)
    random.Random(1).shuffle(shuffled)
    assert list(grpo_groups(shuffled)) == groups


def test_grpo_cuts_large_groups_and_counts_what_it_leaves_out(collected):
    items = [
        ExportItem(i.trajectory_id, i.trajectory, reward=None if n == 0 else i.reward)
        for n, i in enumerate(collected)
    ]
    stats = ExportStats()
    groups = list(grpo_groups(items, min_group=2, max_group=2, stats=stats))
    # 3 tasks × 4 episodes, one without reward: 2+2, 2+2, and 2+1 (the 1 is left out)
    assert sorted(len(g["rewards"]) for g in groups) == [2, 2, 2, 2, 2]
    assert stats.skipped == {"missing_reward": 1, "small_group": 1, "small_group_trajectories": 1}
    groups = list(grpo_groups(items, min_group=4, max_group=8))
    assert [len(g["rewards"]) for g in groups] == [4, 4]
    with pytest.raises(ConfigError, match="at least 2"):
        list(grpo_groups(items, min_group=1))
    with pytest.raises(ConfigError, match="max_group"):
        list(grpo_groups(items, min_group=4, max_group=3))


# ----------------------------------------------------------------------------- PRM


def test_prm_rows_label_steps_from_model_scores(collected):
    stats = ExportStats()
    rows = list(prm_records(collected, threshold=0.5, stats=stats))
    assert len(rows) == len(collected) == stats.rows
    for item, row in zip(collected, rows, strict=True):
        assert row["labels"] == [r >= 0.5 for r in item.step_rewards]
        assert all(isinstance(label, bool) for label in row["labels"])
        assert len(row["completions"]) == len(row["labels"]) == len(row["step_ids"])
        assert row["step_ids"] == item.step_ids and row["trajectory_id"] == item.trajectory_id
        messages = cf.trajectory_to_messages(item.trajectory, system=cf.system_prompt(item.tools))
        # joined with TRL's default step separator, the texts are the rendered conversation up
        # to the last action (its observation is not shown to the label)
        joined = row["prompt"] + "".join(c + "\n" for c in row["completions"])
        assert joined == cf.render(messages[:-1])
        assert row["completions"][0].startswith("<|im_start|>assistant\n")
    assert any(not all(r["labels"]) for r in rows) and any(all(r["labels"]) for r in rows)


def test_prm_rows_from_human_labels_keep_the_labelled_prefix():
    steps = [
        {**CALC, "index": 0, "observation": "5"},
        {**SUBMIT_BAD, "index": 1},
        {**SUBMIT_OK, "index": 2},
    ]
    items = [
        ExportItem(1, trajectory(steps=steps), step_ids=[7, 8, 9], step_labels=[1.0, 0.0, None]),
        ExportItem(2, trajectory(steps=steps), step_labels=[None, 1.0, 1.0]),
        ExportItem(3, trajectory(steps=steps), step_rewards=[0.9, 0.9, 0.9]),
    ]
    stats = ExportStats()
    (row,) = prm_records(items, label_source="human", threshold=0.5, stats=stats)
    assert row["labels"] == [True, False] and row["step_ids"] == [7, 8]
    assert row["label_source"] == "human"
    assert row["completions"][1].startswith("<|im_start|>tool\n5<|im_end|>\n<|im_start|>assistant")
    assert '"answer": "6"' in row["completions"][1] and "not correct" not in row["completions"][1]
    assert stats.skipped == {"cut_steps": 1, "unlabelled": 2}
    (row,) = prm_records(items[2:], label_source="model", threshold=0.95)
    assert row["labels"] == [False, False, False]
    with pytest.raises(ConfigError, match="label source"):
        list(prm_records(items, label_source="judge"))


# ----------------------------------------------------------------------------- benchmark, keys


def test_benchmark_records_keep_the_answer_exactly():
    tasks = arithmetic_tasks("heldout", n=3)
    rows = list(
        benchmark_records(
            [*tasks, {"id": "q1", "prompt": "Capital of France?", "expected_answer": "Paris"}]
        )
    )
    assert [r["task_id"] for r in rows] == [t.id for t in tasks] + ["q1"]
    for task, row in zip(tasks, rows, strict=False):
        assert json.loads(row["expected_answer"]) == task.expected_answer
        assert (row["prompt"], row["environment"], row["checker"]) == (
            task.prompt,
            "steplab/arithmetic",
            "number",
        )
        assert row["domain"] == "arithmetic" and row["task_set"] == "arithmetic-heldout"
    assert json.loads(rows[-1]["expected_answer"]) == "Paris"


def test_content_key_hashes_what_is_trained_on_only(tools):
    good, bad = good_bad(tools)
    (a,) = sft_records([good])
    (b,) = sft_records([ExportItem(99, good.trajectory, step_ids=[1, 2], reward=0.1, tools=tools)])
    (c,) = sft_records([bad])
    assert content_key(a) == content_key(b) != content_key(c)
    assert content_key({"messages": [{"role": "user", "content": "x"}]}) != content_key(
        {"messages": [{"role": "user", "content": "y"}]}
    )


def test_an_episode_cut_off_before_it_answered_has_outcome_reward_zero(collected):
    """Else its group's outcome rewards would be unknown and GRPO's outcome estimator would
    silently train on the rule layer's totals."""
    item = collected[0]
    unknown = {"success": None, "score": None, "partial_credit": None}

    def with_outcome(**update):
        trajectory = item.trajectory.model_copy(deep=True)
        trajectory.outcome = trajectory.outcome.model_copy(update={**unknown, **update})
        return trajectory

    cut = with_outcome(truncated=True)
    assert outcome_reward(cut) == 0.0
    assert outcome_reward(with_outcome(truncated=False)) is None  # an imported log: unknown
    items = [
        ExportItem(i.trajectory_id, cut if i is item else i.trajectory, reward=i.reward)
        for i in collected
    ]
    (row,) = [g for g in grpo_groups(items) if item.trajectory_id in g["trajectory_ids"]]
    assert row["outcome_rewards"][row["trajectory_ids"].index(item.trajectory_id)] == 0.0
