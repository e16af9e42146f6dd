"""The DPO trainer on a tiny model (random weights, tokenizer trained on the spot) and
preference pairs of tool-arithmetic episodes: the chosen continuation calls the calculator and
submits the right answer, the rejected one submits a wrong answer at once."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from trainer_core.errors import ConfigError, InputError  # noqa: E402
from trainer_core.policies import chat_format as cf  # noqa: E402
from trainer_core.policies.base import Turn  # noqa: E402
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks  # noqa: E402
from trainer_core.training import dpo  # noqa: E402
from trainer_core.training.data import batch_indices  # noqa: E402
from trainer_core.training.lineage import read_lineage  # noqa: E402
from trainer_core.training.modelling import IGNORE_INDEX, load_model_and_tokenizer  # noqa: E402
from trainer_core.training.tiny import build_tiny_model  # noqa: E402

torch.set_num_threads(1)


def preference_row(task):
    expression = task.metadata["expression"]
    answer = str(task.expected_answer)
    good = [
        Turn(
            action={
                "tool": "calculator",
                "params": {"expression": expression},
                "thought": "Compute it with the calculator.",
            },
            observation=f"{expression} = {answer}",
        ),
        Turn(
            action={"tool": "submit", "params": {"answer": answer}, "thought": ""},
            observation=f"Submitted: {answer!r} — correct.",
        ),
    ]
    wrong = str(int(answer) + 7)
    bad = [
        Turn(
            action={"tool": "submit", "params": {"answer": wrong}, "thought": "Guess."},
            observation=f"Submitted: {wrong!r} — not correct.",
        )
    ]
    chosen = cf.to_messages(prompt=task.prompt, history=good)
    rejected = cf.to_messages(prompt=task.prompt, history=bad)
    return {"prompt": chosen[:1], "chosen": chosen[1:], "rejected": rejected[1:]}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return str(build_tiny_model(tmp_path_factory.mktemp("dpo") / "model", hidden_size=64))


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    path = tmp_path_factory.mktemp("dpo-data") / "pairs.jsonl"
    rows = [preference_row(t) for t in arithmetic_tasks("train", n=8)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def config(model_dir, dataset, out, **overrides):
    values = dict(
        model_dir=model_dir,
        output_dir=str(out),
        dataset=dataset,
        max_steps=2,
        batch_size=4,
        learning_rate=3e-3,
        lr_schedule="constant",
        max_length=256,
        device="cpu",
        seed=0,
    )
    values.update(overrides)
    return dpo.DPOConfig(**values)


def margins(model_path, cfg, rows):
    model, tokenizer = load_model_and_tokenizer(model_path, device="cpu")
    pairs, _ = dpo.encode_pairs(rows, tokenizer, cfg)
    with torch.no_grad():
        chosen, rejected = dpo.pair_logprobs(model, pairs, tokenizer.pad_token_id)
    return float((chosen - rejected).mean())


def test_observation_masking_keeps_tool_results_out_of_the_logprobs(model_dir, dataset, tmp_path):
    rows = [json.loads(line) for line in open(dataset, encoding="utf-8")]
    _, tokenizer = load_model_and_tokenizer(model_dir, device="cpu")
    on = dpo.encode_pair(rows[0], 0, tokenizer, config(model_dir, dataset, tmp_path))
    off = dpo.encode_pair(
        rows[0], 0, tokenizer, config(model_dir, dataset, tmp_path, observation_masking=False)
    )
    prompt_len = len(cf.tokenize(rows[0]["prompt"], tokenizer).input_ids)
    full = cf.tokenize(rows[0]["prompt"] + rows[0]["chosen"], tokenizer)
    # on: exactly the assistant tokens of the continuation
    expected = [
        t if m and i >= prompt_len else IGNORE_INDEX
        for i, (t, m) in enumerate(zip(full.input_ids, full.assistant_mask, strict=True))
    ]
    assert on.chosen.labels == expected
    observation = rows[0]["chosen"][1]["content"]
    assert observation.endswith("= " + str(arithmetic_tasks("train", n=1)[0].expected_answer))
    # off: every continuation token, the tool result included; the prompt never
    assert off.chosen.labels[:prompt_len] == [IGNORE_INDEX] * prompt_len
    assert off.chosen.labels[prompt_len:] == full.input_ids[prompt_len:]
    assert on.chosen.num_label_tokens < off.chosen.num_label_tokens
    text_on = tokenizer.decode([t for t in on.chosen.labels if t != IGNORE_INDEX])
    text_off = tokenizer.decode([t for t in off.chosen.labels if t != IGNORE_INDEX])
    assert observation not in text_on
    assert observation in text_off


def test_dpo_raises_the_chosen_rejected_margin(model_dir, dataset, tmp_path):
    cfg = config(model_dir, dataset, tmp_path / "run", max_steps=8)
    events = []
    result = dpo.train(cfg, on_progress=events.append)
    rows = [json.loads(line) for line in open(dataset, encoding="utf-8")]
    before = margins(model_dir, cfg, rows)
    after = margins(result.checkpoint_dir, cfg, rows)
    assert after > before + 1.0, (before, after)
    history = result.metrics_history
    assert history[0]["loss"] == pytest.approx(math.log(2), abs=1e-5)  # policy == reference
    assert history[-1]["loss"] < history[0]["loss"]
    assert history[-1]["rewards/margin"] > 0
    assert history[-1]["logps/margin"] > history[0]["logps/margin"]
    assert events[-1].fraction == 1.0 and "loss" in events[-1].metrics


@pytest.mark.parametrize(
    ("loss_type", "first_loss"),
    [
        ("sigmoid", math.log(2)),
        ("hinge", 1.0),
        ("ipo", (1 / (2 * 0.1)) ** 2),
        ("robust", math.log(2)),
    ],
)
def test_each_loss_type_trains(model_dir, dataset, tmp_path, loss_type, first_loss):
    smoothing = 0.1 if loss_type == "robust" else 0.0
    cfg = config(
        model_dir, dataset, tmp_path, loss_type=loss_type, label_smoothing=smoothing, max_steps=3
    )
    result = dpo.train(cfg)
    losses = [h["loss"] for h in result.metrics_history]
    # at the first step the policy is the reference: Δ = 0 and the loss has its closed form
    assert losses[0] == pytest.approx(first_loss, rel=1e-5)
    assert losses[-1] < losses[0]
    assert result.metrics_history[-1]["rewards/margin"] > 0


def test_precomputed_reference_equals_the_frozen_model_and_is_cached(model_dir, dataset, tmp_path):
    frozen = dpo.train(config(model_dir, dataset, tmp_path / "a", max_steps=3))
    events = []
    first = dpo.train(
        config(model_dir, dataset, tmp_path / "b", max_steps=3, reference="precomputed"),
        on_progress=events.append,
    )
    assert "reference: computed" in events[0].message
    assert (tmp_path / "b" / dpo.CACHE_FILE).is_file()
    for a, b in zip(frozen.metrics_history, first.metrics_history, strict=True):
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-5)
    events.clear()
    again = dpo.train(
        config(model_dir, dataset, tmp_path / "b", max_steps=3, reference="precomputed"),
        on_progress=events.append,
    )
    assert "reference: read from the cache" in events[0].message
    assert again.final_loss == pytest.approx(first.final_loss, abs=1e-6)


def test_resume_gives_the_same_next_losses(model_dir, dataset, tmp_path):
    """A run resumed from step 2 computes the same losses as one that never stopped, and its
    lineage lists each step's pairs (their dataset rows) once, as that run's does."""
    whole = dpo.train(config(model_dir, dataset, tmp_path / "whole", max_steps=4))
    dpo.train(config(model_dir, dataset, tmp_path / "part", max_steps=4, save_every=2))
    resumed = dpo.train(
        config(
            model_dir,
            dataset,
            tmp_path / "resumed",
            max_steps=4,
            resume_from=str(tmp_path / "part" / "checkpoint-2"),
        )
    )
    assert resumed.steps == 4
    tail = [h["loss"] for h in whole.metrics_history[2:]]
    assert [h["loss"] for h in resumed.metrics_history] == pytest.approx(tail, abs=1e-5)

    # a first row without a rejected continuation is dropped: lineage names rows, not positions
    rows = [json.loads(line) for line in open(dataset, encoding="utf-8")]
    rows[0]["rejected"] = [{"role": "user", "content": "no assistant turn"}]
    gappy = tmp_path / "gappy.jsonl"
    gappy.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    dpo.train(config(model_dir, str(gappy), tmp_path / "gappy", max_steps=2, grad_accum=2))
    expected = [
        [1 + i for m in (0, 1) for i in batch_indices(7, 4, 2 * step + m, 0)] for step in (0, 1)
    ]
    assert read_lineage(tmp_path / "gappy") == [
        {"step": 1, "consumed": expected[0], "dropped": []},
        {"step": 2, "consumed": expected[1], "dropped": []},
    ]
    lineage = read_lineage(tmp_path / "whole")
    assert [e["consumed"] for e in lineage] == [batch_indices(8, 4, s, 0) for s in range(4)]
    assert read_lineage(tmp_path / "resumed") == read_lineage(tmp_path / "part") == lineage


def test_config_and_data_errors(model_dir, dataset, tmp_path):
    with pytest.raises(ConfigError, match="loss_type"):
        config(model_dir, dataset, tmp_path, loss_type="kto").validate()
    with pytest.raises(ConfigError, match="reference"):
        config(model_dir, dataset, tmp_path, reference="none").validate()
    with pytest.raises(ConfigError, match="robust"):
        config(model_dir, dataset, tmp_path, label_smoothing=0.1).validate()
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"}]}) + "\n")
    with pytest.raises(InputError, match="prompt"):
        dpo.train(config(model_dir, str(bad), tmp_path / "bad"))
    from trainer_core.training.config import config_help

    helps = config_help(dpo.DPOConfig)
    assert all(helps.values()) and "pairs per micro-batch" in helps["batch_size"]


def test_lora_reference_is_the_base_with_adapters_off(model_dir, dataset, tmp_path):
    """With LoRA no copy of the model is kept: the reference is the model with its adapters
    switched off, which at the start is the policy itself (loss ln 2), and training moves the
    policy away from it."""
    result = dpo.train(config(model_dir, dataset, tmp_path, lora_r=4, lora_alpha=8, max_steps=4))
    losses = [h["loss"] for h in result.metrics_history]
    assert losses[0] == pytest.approx(math.log(2), abs=1e-5)
    assert losses[-1] < losses[0]
    assert result.metrics_history[-1]["rewards/margin"] > 0


def test_a_tools_column_gives_the_policys_system_prompt(model_dir, dataset, tmp_path):
    """The exporters' ``tools`` column (JSON text) becomes ``system_prompt(tools)`` when the
    prompt has no system message, as the local-model policy is prompted."""
    from trainer_core.training.tiny import arithmetic_tools

    tools = arithmetic_tools()
    row = preference_row(arithmetic_tasks("train", n=1)[0])
    schemas = [{"type": "function", "function": t.as_dict()} for t in tools]
    with_tools = {**row, "tools": json.dumps(schemas)}
    _, tokenizer = load_model_and_tokenizer(model_dir, device="cpu")
    cfg = config(model_dir, dataset, tmp_path)
    pair = dpo.encode_pair(with_tools, 0, tokenizer, cfg)
    system = [{"role": "system", "content": cf.system_prompt(tools)}]
    expected = cf.tokenize(system + row["prompt"] + row["chosen"], tokenizer).input_ids
    assert pair.chosen.input_ids == expected[: cfg.max_length]
    assert dpo.encode_pair(row, 0, tokenizer, cfg).chosen.input_ids != pair.chosen.input_ids
