"""Exports of trajectories with message steps (schema 1.1): SFT, DPO and PRM rows train on the
dialogue exactly as the one chat format renders it — every user, assistant and system turn in
its place — with one step id, reward and label per assistant turn (tool calls and replies), and
the training encoder's assistant turns are those same turns."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.trainer_core.policies.tiny_model import build_tiny_tokenizer
from trainer_core.datasets import ExportItem, dpo_records, prm_records, sft_records
from trainer_core.policies import chat_format as cf
from trainer_core.recording.importers import import_path
from trainer_core.recording.schema import Step, Trajectory
from trainer_core.training.data import encode_messages

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "agent_logs"


def _chat() -> Trajectory:
    (t,) = import_path(FIXTURES / "openai_chat_conversation.json")[0].trajectories
    return t


def _tau() -> Trajectory:
    (t,) = import_path(FIXTURES / "tau_bench_hat136.json")[0].trajectories
    return t


def _turns(t: Trajectory) -> list[Step]:
    return [s for s in t.steps if s.kind == "tool" or s.role == "assistant"]


def _item(t: Trajectory, trajectory_id=1) -> ExportItem:
    rewards = [
        None if s.kind == "message" and s.role != "assistant" else s.index / 10 for s in t.steps
    ]
    return ExportItem(
        trajectory_id=trajectory_id,
        trajectory=t,
        step_ids=[100 + s.index for s in t.steps],
        step_rewards=rewards,
        step_labels=[0.0 if r is None else 1.0 for r in rewards],
        reward=1.0,
    )


def test_the_chat_format_renders_the_dialogue_in_place():
    t = _chat()
    messages = cf.trajectory_to_messages(t)
    roles = [m["role"] for m in messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool"] + [
        "assistant",
        "tool",
        "assistant",
    ]
    assert messages[0]["content"] == t.steps[0].text  # the trajectory's own system prompt
    assert messages[-1]["content"] == t.steps[-1].text  # the final reply, in its place
    given = cf.trajectory_to_messages(t, system="You are terse.")
    assert given[0] == {"role": "system", "content": "You are terse."} and given[1:] == messages[1:]
    # an assistant message's reasoning is its thought, before its text (like before a call)
    reply = Step(index=0, kind="message", role="assistant", text="Yes.", thought="Checked.")
    assert cf.trajectory_to_messages(t.model_copy(update={"steps": [reply]}))[-1] == {
        "role": "assistant",
        "content": "Checked.\nYes.",
    }
    # a trajectory without message steps renders as it always did
    tools_only = t.model_copy(update={"steps": t.tool_steps})
    assert cf.trajectory_to_messages(tools_only) == cf.to_messages(
        prompt=t.task.prompt, history=[cf.step_to_turn(s) for s in t.tool_steps]
    )


def test_sft_rows_train_on_every_turn_with_one_reward_per_assistant_turn():
    t = _tau()
    (row,) = sft_records([_item(t)])
    assert row["messages"] == cf.trajectory_to_messages(t)
    turns = _turns(t)
    assert row["step_ids"] == [100 + s.index for s in turns]
    assert row["step_rewards"] == [s.index / 10 for s in turns]
    assert row["difficulty"] == len(turns)
    assistants = [m for m in row["messages"] if m["role"] == "assistant"]
    assert len(assistants) == len(turns)
    replies = [s.text for s in turns if s.kind == "message"]
    assert replies and all(any(m["content"] == r for m in assistants) for r in replies)
    users = [m["content"] for m in row["messages"] if m["role"] == "user"]
    assert users == [s.text for s in t.steps if s.role == "user"]
    # training sees the same turns: the k-th run of the policy's tokens is assistant turn k
    encoded = encode_messages(row["messages"], build_tiny_tokenizer(), max_length=100_000)
    assert max(encoded.step_ids) + 1 == len(row["step_rewards"])
    (knowlyr,) = sft_records([_item(t)], fmt="knowlyr")
    assert f'respond({{"content": "{replies[0][:20]}' in knowlyr["response"]


def test_dpo_rows_split_two_dialogues_after_their_common_opening():
    t = _tau()
    worse = t.model_copy(deep=True)
    worse.steps[-1].text = "I cannot help with that."
    (row,) = dpo_records([(_item(t, 1), _item(worse, 2), {"method": "test"})])
    whole = cf.trajectory_to_messages(t)
    n = len(row["prompt"])
    assert [m["role"] for m in row["prompt"]] == ["system", "user"]
    assert row["prompt"] + row["chosen"] == whole
    assert row["rejected"][-1]["content"] == "I cannot help with that."
    assert row["chosen_step_ids"] == [100 + s.index for s in _turns(t)]
    assert whole[:n] == cf.trajectory_to_messages(worse)[:n]


def test_prm_completions_end_at_each_assistant_turn():
    t = _tau()
    (row,) = prm_records([_item(t)], label_source="human", threshold=0.5)
    turns = _turns(t)
    assert len(row["completions"]) == len(row["labels"]) == len(turns)
    whole = cf.render(cf.trajectory_to_messages(t))
    joined = row["prompt"] + "".join(c + "\n" for c in row["completions"])
    assert whole.startswith(joined) and joined.endswith("<|im_end|>\n")
    assert all(c.split("<|im_start|>")[-1].startswith("assistant\n") for c in row["completions"])
    # a user's reply between two turns opens the next completion
    second_user = next(s.text for s in t.steps[2:] if s.role == "user")
    assert any(second_user in c for c in row["completions"])


@pytest.mark.parametrize("name", ["openai_chat_conversation.json", "tau_bench_hat136.json"])
def test_every_assistant_message_is_one_turn(name):
    (t,) = import_path(FIXTURES / name)[0].trajectories
    messages = cf.trajectory_to_messages(t)
    assert sum(m["role"] == "assistant" for m in messages) == len(_turns(t))
