"""Chunking long trajectories by tokens (``chunk_max_tokens``) with a tiny model's tokenizer:
exact token boundaries, context steps shown without loss, every token that carries loss trained
exactly once across the chunks, and a step too long for any chunk cut and counted."""

from __future__ import annotations

import json

import pytest

from trainer_core.errors import ConfigError
from trainer_core.policies import chat_format as cf
from trainer_core.training import tiny
from trainer_core.training.chunking import (
    Chunk,
    chunk_length,
    plan_chunks,
    split_steps,
)
from trainer_core.training.modelling import IGNORE_INDEX, load_model_and_tokenizer
from trainer_core.training.sft import (
    SFTConfig,
    build_examples,
    data_notes,
    example_order,
)


def trajectory(observations: list[int], prompt: str = "What is 2 + 3?") -> list[dict]:
    """A trajectory whose step ``k`` observes a text of ``observations[k]`` words, so that steps
    have different lengths."""
    messages = [{"role": "system", "content": "Calc."}, {"role": "user", "content": prompt}]
    for k, words in enumerate(observations):
        call = {"function": {"name": "calculator", "arguments": json.dumps({"x": k})}}
        messages.append({"role": "assistant", "content": f"Step {k}.", "tool_calls": [call]})
        messages.append({"role": "tool", "content": " ".join(["seven"] * words)})
    return messages


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    model_dir = tiny.build_tiny_model(tmp_path_factory.mktemp("tiny"), hidden_size=16)
    return load_model_and_tokenizer(model_dir, device="cpu")[1]


def build(tokenizer, messages, **options):
    config = SFTConfig("m", "o", "d", max_length=4096, **options)
    return build_examples([{"messages": messages}], tokenizer, config)


def lengths(tokenizer, messages, masking=True):
    prompt, steps = split_steps(messages, tokenizer)
    return len(prompt.ids), [len(s.ids) for s in steps], [s.trained_length(masking) for s in steps]


def trained_positions(example, prompt: int, steps: list[int], chunk: Chunk) -> list[int]:
    """Where, in the whole trajectory's tokens, the example's supervised tokens are."""
    before = sum(steps[: chunk.context])  # the steps left out between the prompt and the context
    return [
        i if i < prompt else i + before
        for i, t in enumerate(example.encoded.labels)
        if t != IGNORE_INDEX
    ]


# --------------------------------------------------------------------------- the steps


def test_the_prompt_and_steps_are_the_whole_trajectory_token_for_token(tokenizer):
    messages = trajectory([3, 20, 1])
    prompt, steps = split_steps(messages, tokenizer)
    whole = cf.tokenize(messages, tokenizer)
    assert prompt.ids + [t for s in steps for t in s.ids] == whole.input_ids
    assert prompt.own + [m for s in steps for m in s.own] == whole.assistant_mask
    assert len(steps) == 3 and not any(prompt.own)
    for k, step in enumerate(steps):  # each step is its assistant turn and its observation
        assert step.ids == cf.tokenize(messages[2 + 2 * k : 4 + 2 * k], tokenizer).input_ids
        assert step.trained_length(True) == max(i for i, m in enumerate(step.own) if m) + 1
        assert step.trained_length(False) == len(step.ids)


# --------------------------------------------------------------------------- the plan


def test_plan_cuts_at_the_exact_token_budget():
    prompt, steps, trained = 10, [20, 30, 25, 40], [12, 22, 17, 32]
    whole = chunk_length(Chunk(0, 0, 4), prompt, steps, trained)
    assert whole == 10 + 20 + 30 + 25 + 32
    assert plan_chunks(prompt, steps, trained, max_tokens=whole) == [Chunk(0, 0, 4)]
    assert plan_chunks(prompt, steps, trained, max_tokens=0) == [Chunk(0, 0, 4)]  # off
    # Steps 0-1 end at 10 + 20 + 22 = 52 tokens: a budget of 52 holds both, 51 only step 0.
    assert plan_chunks(prompt, steps, trained, max_tokens=52)[0] == Chunk(0, 0, 2)
    assert plan_chunks(prompt, steps, trained, max_tokens=51)[0] == Chunk(0, 0, 1)
    # One context step: chunk 1 is the prompt, step 2 as context, then step 3.
    plan = plan_chunks(prompt, steps, trained, max_tokens=80, overlap=1)
    assert plan == [Chunk(0, 0, 3), Chunk(2, 3, 4)]  # 10+20+30+17 = 77; 10+25+32 = 67
    assert chunk_length(plan[0], prompt, steps, trained) == 77  # step 3 too: 117 > 80


def test_the_oldest_context_steps_give_way():
    prompt, steps, trained = 10, [20, 30, 25, 40], [12, 22, 17, 32]
    # Chunk 1 would show steps 0-1 before step 2: 10+20+30+17 = 77 > 70; step 1 alone fits (57).
    # Chunk 2 would show steps 1-2 before step 3: 97 > 70; step 2 alone fits (67).
    assert plan_chunks(prompt, steps, trained, max_tokens=70, overlap=2) == [
        Chunk(0, 0, 2),
        Chunk(1, 2, 3),
        Chunk(2, 3, 4),
    ]


def test_a_step_too_long_for_the_budget_stands_alone():
    prompt, steps, trained = 10, [20, 90, 25, 40], [12, 82, 17, 32]
    plan = plan_chunks(prompt, steps, trained, max_tokens=60, overlap=2)
    # Step 1 fits nowhere (10 + 82 = 92): a chunk of its own, no context, cut when encoded; no
    # later chunk can show it; step 3 cannot show step 2 either (10 + 25 + 32 = 67 > 60).
    assert plan == [Chunk(0, 0, 1), Chunk(1, 1, 2), Chunk(2, 2, 3), Chunk(3, 3, 4)]
    assert [chunk_length(c, prompt, steps, trained) for c in plan] == [22, 92, 27, 42]
    roomy = plan_chunks(prompt, steps, trained, max_tokens=100, overlap=2)
    assert roomy == [Chunk(0, 0, 1), Chunk(1, 1, 2), Chunk(2, 2, 4)]  # 10 + 25 + 32 = 67


def test_max_steps_caps_chunks_with_or_without_a_token_budget():
    prompt, steps, trained = 5, [10] * 5, [8] * 5
    assert plan_chunks(prompt, steps, trained, max_tokens=0, max_steps=2) == [
        Chunk(0, 0, 2),
        Chunk(2, 2, 4),
        Chunk(4, 4, 5),
    ]
    assert plan_chunks(prompt, steps, trained, max_tokens=0, max_steps=2, overlap=1) == [
        Chunk(0, 0, 2),
        Chunk(1, 2, 4),
        Chunk(3, 4, 5),
    ]
    # 5 + 10 + 8 = 23 tokens hold 2 steps; the step cap of 3 does not bind.
    assert plan_chunks(prompt, steps, trained, max_tokens=23, max_steps=3) == [
        Chunk(0, 0, 2),
        Chunk(2, 2, 4),
        Chunk(4, 4, 5),
    ]
    assert plan_chunks(7, [], [], max_tokens=5) == [Chunk(0, 0, 0)]  # no steps: the prompt


# --------------------------------------------------------------------------- the examples


@pytest.mark.parametrize("overlap", [0, 1, 2])
def test_every_policy_token_is_trained_exactly_once_and_context_carries_no_loss(tokenizer, overlap):
    messages = trajectory([2, 15, 4, 30, 1, 6])
    prompt, steps, trained = lengths(tokenizer, messages)
    budget = prompt + sum(steps[:2]) + trained[2]  # the first chunk holds steps 0-2 exactly
    items, stats = build(tokenizer, messages, chunk_max_tokens=budget, chunk_overlap_steps=overlap)
    plan = plan_chunks(prompt, steps, trained, max_tokens=budget, overlap=overlap)
    assert len(items) == len(plan) > 1 and stats.chunked_rows == 1 and not stats.truncated
    assert plan[0] == Chunk(0, 0, 3) and len(items[0].encoded) == budget
    whole = cf.tokenize(messages, tokenizer)
    seen = []
    for example, chunk in zip(items, plan, strict=True):
        assert len(example.encoded) == chunk_length(chunk, prompt, steps, trained) <= budget
        # the sequence: the prompt, then the context and own steps, as in the whole trajectory
        start = prompt + sum(steps[: chunk.context])
        shown = whole.input_ids[:prompt] + whole.input_ids[start:]
        assert example.encoded.input_ids == shown[: len(example.encoded)]
        if chunk.context > max(0, chunk.first - overlap):  # a context step gave way: no room
            wider = Chunk(chunk.context - 1, chunk.first, chunk.first + 1)
            assert chunk_length(wider, prompt, steps, trained) > budget
        context_end = prompt + sum(steps[chunk.context : chunk.first])
        assert set(example.encoded.labels[:context_end]) == {IGNORE_INDEX}
        seen += trained_positions(example, prompt, steps, chunk)
    assert seen == [i for i, m in enumerate(whole.assistant_mask) if m]  # each exactly once


def test_without_observation_masking_every_token_is_trained_once_too(tokenizer):
    messages = trajectory([2, 15, 4, 30])
    prompt, steps, trained = lengths(tokenizer, messages, masking=False)
    budget = prompt + max(steps[0] + steps[1], *steps)  # every step fits with the prompt
    items, _ = build(
        tokenizer,
        messages,
        chunk_max_tokens=budget,
        chunk_overlap_steps=1,
        observation_masking=False,
    )
    plan = plan_chunks(prompt, steps, trained, max_tokens=budget, overlap=1)
    assert len(items) == len(plan) > 1
    seen = []
    for example, chunk in zip(items, plan, strict=True):
        seen += trained_positions(example, prompt, steps, chunk)
    assert seen == list(range(1, prompt + sum(steps)))  # every token after the first, once


def test_a_step_too_long_for_a_chunk_is_cut_and_counted(tokenizer):
    messages = trajectory([2, 3, 1, 2])
    messages[4]["content"] = "Step 1. " + "seven " * 120  # step 1's own text is long
    prompt, steps, trained = lengths(tokenizer, messages)
    budget = prompt + trained[1] - 10  # step 1 cannot fit, even alone
    items, stats = build(tokenizer, messages, chunk_max_tokens=budget, chunk_overlap_steps=1)
    plan = plan_chunks(prompt, steps, trained, max_tokens=budget, overlap=1)
    assert plan[:2] == [Chunk(0, 0, 1), Chunk(1, 1, 2)] and len(items) == len(plan)
    assert [(e.chunk, len(e.encoded)) for e in items][1] == (1, budget)
    assert all(len(e.encoded) < budget for e in items if e.chunk != 1)
    assert stats.truncated == [(0, 1)] and stats.truncated_tokens == 10
    assert not any(set(e.encoded.labels[: prompt + 1]) - {IGNORE_INDEX} for e in items)
    whole = cf.tokenize(messages, tokenizer)
    policy = sum(whole.assistant_mask)
    assert sum(e.encoded.num_label_tokens for e in items) == policy - 10
    config = SFTConfig("m", "o", "d", max_length=4096, chunk_max_tokens=budget)
    assert data_notes(config, stats, items, example_order(items, config))[1] == (
        f"1 example was cut to chunk_max_tokens ({budget} tokens), losing 10 tokens that carry "
        "loss: row 0 chunk 1 (each holds a step too long for any chunk; raise chunk_max_tokens "
        "and max_length)"
    )


def test_chunk_max_tokens_is_checked_against_max_length():
    with pytest.raises(ConfigError, match=r"chunk_max_tokens \(600\) is above max_length \(512\)"):
        SFTConfig("m", "o", "d", chunk_max_tokens=600).validate()
    with pytest.raises(ConfigError, match="chunk_overlap_steps must be 0 or more"):
        SFTConfig("m", "o", "d", chunk_overlap_steps=-1).validate()
    SFTConfig("m", "o", "d", chunk_max_tokens=512).validate()
