"""The drift check (issue 21) with a real byte-level BPE tokenizer built here: it blocks a
conversation whose chat template changed between sampling and training and one where a BPE
merge crosses the prompt/completion boundary, it passes the built-in loop (collect with a local
tiny policy, export, train), and a log without ids is not checkable."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

from tests.trainer_core.policies.tiny_model import (  # noqa: E402
    build_tiny_model,
    build_tiny_tokenizer,
    default_corpus,
    train_tiny_model,
)
from trainer_core.policies import chat_format as cf  # noqa: E402
from trainer_core.training import drift  # noqa: E402

PROMPT = "What is 2+3? Use the calculator tool, then submit the answer."
THOUGHT = "Compute it with the calculator."


def call(name: str, **arguments) -> dict:
    return {"function": {"name": name, "arguments": json.dumps(arguments)}}


MESSAGES = [
    {"role": "user", "content": PROMPT},
    {"role": "assistant", "content": THOUGHT, "tool_calls": [call("calculator", expression="2+3")]},
    {"role": "tool", "content": "5"},
    {"role": "assistant", "content": "", "tool_calls": [call("submit", answer="5")]},
]


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer()


def sampled(messages, tokenizer):
    """What a sampler that prompted with ``messages`` recorded, per assistant turn."""
    encoded = cf.tokenize(messages, tokenizer)
    return [
        drift.TurnIds(encoded.input_ids[:s], encoded.input_ids[s:e])
        for s, e in drift.turn_spans(encoded.assistant_mask)
    ]


def check(turns, tokenizer, messages=MESSAGES):
    return drift.check_conversations([drift.Conversation("row 0", messages, turns)], tokenizer)


def test_recorded_ids_equal_to_the_trainers_pass(tokenizer):
    report = check(sampled(MESSAGES, tokenizer), tokenizer)
    assert report.status == "passed" and not report.blocks
    assert (report.recorded, report.retokenised, report.not_checkable) == (2, 0, 0)


def test_a_cut_turn_passes_and_completions_tokenised_otherwise_are_reported(tokenizer):
    turns = sampled(MESSAGES, tokenizer)
    turns[1] = drift.TurnIds(turns[1].prompt, turns[1].completion[:-1])  # no <|im_end|>
    report = check(turns, tokenizer)
    assert report.status == "passed" and report.cut == 1 and report.completions_differ == 0
    assert "cut at max_new_tokens" in report.summary()
    # the model sampled "C" + "ompute ..." where the trainer encodes "Comp...": the same text
    first = turns[0]
    content = tokenizer.encode(THOUGHT, add_special_tokens=False)
    split = tokenizer.encode("C", add_special_tokens=False) + tokenizer.encode(
        THOUGHT[1:], add_special_tokens=False
    )
    turns[0] = drift.TurnIds(first.prompt, split + first.completion[len(content) :])
    report = check(turns, tokenizer)
    assert report.status == "passed" and not report.blocks and report.completions_differ == 1
    found = report.first_completion
    assert (found.kind, found.part, found.turn) == ("non_canonical", "completion", 0)
    assert found.position == len(first.prompt) and "the same text in other tokens" in (
        report.summary()
    )
    again = drift.DriftReport.from_dict(report.to_dict())
    assert again.first_completion == found


def test_a_later_turns_history_is_held_to_what_was_sampled(tokenizer):
    encoded = cf.tokenize(MESSAGES, tokenizer)
    ids = encoded.input_ids
    (s0, e0), (s1, e1) = drift.turn_spans(encoded.assistant_mask)
    content = tokenizer.encode(THOUGHT, add_special_tokens=False)
    split = tokenizer.encode("C", add_special_tokens=False) + tokenizer.encode(
        THOUGHT[1:], add_special_tokens=False
    )
    raw = split + ids[s0 + len(content) : e0]  # turn 0 as sampled: other tokens, same text
    # a sampler that kept turn 0's sampled ids in its history: that difference is turn 0's
    kept = [drift.TurnIds(ids[:s0], raw), drift.TurnIds(ids[:s0] + raw + ids[e0:s1], ids[s1:e1])]
    report = check(kept, tokenizer)
    assert report.status == "passed" and report.completions_differ == 1
    # a sampler whose history dropped turn 0's thought (as some templates strip reasoning)
    # conditioned turn 1 on another context than the trainer's: that blocks, inside turn 0
    stripped = [MESSAGES[0], {**MESSAGES[1], "content": ""}, *MESSAGES[2:]]
    other = sampled(stripped, tokenizer)[1]
    report = check([drift.TurnIds(ids[:s0], ids[s0:e0]), other], tokenizer)
    assert report.status == "mismatch" and (report.first.turn, report.first.part) == (1, "prompt")
    assert s0 <= report.first.position < e0


def test_a_template_changed_between_sampling_and_training_blocks(tokenizer):
    # sampling prompted with a system message the exported rows lost
    sampling = [{"role": "system", "content": "You are a careful agent."}, *MESSAGES]
    report = check(sampled(sampling, tokenizer), tokenizer)
    assert report.status == "mismatch" and report.blocks
    first = report.first
    assert (first.where, first.turn, first.position, first.part) == ("row 0", 0, 1, "prompt")
    assert first.before_text == cf.IM_START
    assert first.expected_text.startswith("user") and first.got_text.startswith("system")
    assert "turn 0, token 1" in report.summary()


def test_a_bpe_merge_across_the_prompt_completion_boundary_blocks(tokenizer):
    encoded = cf.tokenize(MESSAGES, tokenizer)
    (start, end), second = drift.turn_spans(encoded.assistant_mask)
    ids = encoded.input_ids
    # the sampler's prompt ended with a prefill "C" that the model continued with "ompute ...";
    # the trainer encodes the assistant content as one piece, where "Comp..." merges
    prefill = tokenizer.encode("C", add_special_tokens=False)
    rest = tokenizer.encode(THOUGHT[1:], add_special_tokens=False)
    content = tokenizer.encode(THOUGHT, add_special_tokens=False)
    assert prefill + rest != content  # the merge crosses the boundary
    completion = rest + ids[start + len(content) : end]
    turns = [drift.TurnIds(ids[:start] + prefill, completion), sampled(MESSAGES, tokenizer)[1]]
    report = check(turns, tokenizer)
    assert report.status == "mismatch"
    first = report.first
    assert (first.turn, first.position, first.part) == (0, start, "prompt")
    assert first.expected[0] == content[0] and first.got[0] == prefill[0]
    assert first.got_text.startswith("C") and THOUGHT.startswith(first.expected_text[:4])
    assert first.before_text.endswith("assistant\n")


def test_retokenising_catches_a_tokenizer_whose_own_template_differs(tokenizer):
    report = check([drift.RETOKENISE, drift.RETOKENISE], tokenizer)
    assert report.status == "passed" and report.retokenised == 2
    other = build_tiny_tokenizer()
    other.chat_template = (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}: {{ m['content'] }}<|im_end|>\n"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    report = check([drift.RETOKENISE, drift.RETOKENISE], other)
    assert report.status == "mismatch" and report.first.source == "retokenised"
    assert report.first.part == "prompt"


def test_imported_logs_without_ids_are_not_checkable(tokenizer):
    assert drift.step_ids({"metrics": {"cost_usd": 0.1}}, imported=True) is drift.NOT_CHECKABLE
    assert drift.step_ids({}, imported=False) is drift.RETOKENISE
    report = check([drift.NOT_CHECKABLE, drift.NOT_CHECKABLE], tokenizer)
    assert report.status == "not_checkable" and not report.blocks
    assert report.not_checkable == 2 and report.summary().startswith("Not checkable")
    again = drift.DriftReport.from_dict(report.to_dict())
    assert again.status == "not_checkable" and again.not_checkable == 2


def test_a_sampler_with_another_tokenizer_blocks_a_run(tokenizer):
    assert drift.check_tokenizers(MESSAGES, tokenizer, build_tiny_tokenizer()).status == "passed"
    other = build_tiny_tokenizer(["The quick brown fox jumps over the lazy dog.", PROMPT])
    report = drift.check_tokenizers(MESSAGES, tokenizer, other, where="the sampler's tokenizer")
    assert report.status == "mismatch" and report.first.where == "the sampler's tokenizer"


def test_dpo_and_grpo_rows_check_each_side_by_its_step_ids(tokenizer):
    prompt, chosen = MESSAGES[:1], MESSAGES[1:]
    turns = sampled(MESSAGES, tokenizer)
    drifted = sampled([{"role": "system", "content": "Be brief."}, *MESSAGES], tokenizer)
    lookup = {1: turns[0], 2: turns[1], 3: drifted[0]}
    dpo = {"prompt": prompt, "chosen": chosen, "rejected": chosen,
           "chosen_step_ids": [1, 2], "rejected_step_ids": [3, 2]}  # fmt: skip
    report = drift.check_conversations(drift.row_conversations(dpo, 4, lookup), tokenizer)
    assert report.status == "mismatch" and report.first.where == "row 4 rejected"
    assert report.first.part == "prompt" and report.recorded == 3
    grpo = {"prompt": prompt, "completions": [chosen, chosen], "rewards": [1, 0],
            "step_ids": [[1, 2], [7, 8]]}  # fmt: skip
    report = drift.check_conversations(drift.row_conversations(grpo, 0, lookup), tokenizer)
    assert report.status == "passed" and (report.recorded, report.not_checkable) == (2, 2)


def test_the_built_in_loop_passes(tmp_path):
    """Collect with a local tiny policy (ids recorded at sampling), export SFT rows, check them
    against the tokenizer the trainer loads, and train on them."""
    from trainer_core.datasets.items import ExportItem
    from trainer_core.datasets.sft import sft_records
    from trainer_core.envs.registry import make
    from trainer_core.policies.local_hf import LocalHFPolicy
    from trainer_core.policies.scripted import ScriptedPolicy
    from trainer_core.rollouts.collect import collect
    from trainer_core.tasks.suites.arithmetic import arithmetic_task
    from trainer_core.training.sft import SFTConfig, train

    task = arithmetic_task(0)
    with make("steplab/arithmetic") as env:
        tools = list(env.available_tools)
    # a model fine-tuned on its tools is prompted with the instructions only; the export is
    # given the same system prompt (as a pipeline does)
    system = cf.DEFAULT_INSTRUCTIONS
    reference = collect("steplab/arithmetic", [task], ScriptedPolicy())[0].trajectory
    item = ExportItem(trajectory_id=1, trajectory=reference, tools=tools, system=system)
    messages = next(iter(sft_records([item])))["messages"]
    corpus = [*default_corpus(), cf.render(messages)]
    path = build_tiny_model(tmp_path / "m", corpus=corpus, hidden_size=32)
    train_tiny_model(path, [messages], steps=80, lr=2e-2)  # canonical token sequences
    policy = LocalHFPolicy(
        path, temperature=0.0, return_logprobs=True, max_new_tokens=96, list_tools=False
    )
    trajectory = collect("steplab/arithmetic", [task], policy, max_steps=3)[0].trajectory
    assert trajectory.outcome.success  # the taught model plays the episode
    assert all("prompt_token_ids" in s.metadata.get("metrics", {}) for s in trajectory.steps)
    item = ExportItem(trajectory_id=2, trajectory=trajectory, tools=tools, system=system)
    rows = list(sft_records([item]))
    lookup = {s.index: drift.step_ids(s.metadata, imported=False) for s in trajectory.steps}
    report = drift.check_conversations(
        drift.dataset_conversations(rows, lambda ids: lookup), drift.load_tokenizer(path)
    )
    assert report.status == "passed", report.summary()
    assert report.recorded == len(trajectory.steps) >= 1
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    result = train(SFTConfig(str(path), str(tmp_path / "out"), str(data), max_steps=1))
    assert result.steps == 1
