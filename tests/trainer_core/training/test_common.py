"""What the trainers share: configs and their help, encoding and masks, log-probs, the optimizer
schedule, checkpoints (on a tiny model built here; nothing is downloaded)."""

from __future__ import annotations

import dataclasses
import random

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from trainer_core.errors import ConfigError, PolicyError  # noqa: E402
from trainer_core.policies import chat_format as cf  # noqa: E402
from trainer_core.progress import ProgressEvent  # noqa: E402
from trainer_core.training import checkpoint  # noqa: E402
from trainer_core.training.checkpoint import Checkpointer, find_checkpoint  # noqa: E402
from trainer_core.training.config import (  # noqa: E402
    TrainConfig,
    config_from_dict,
    config_from_yaml,
    config_help,
    config_to_yaml,
)
from trainer_core.training.data import collate, encode_messages  # noqa: E402
from trainer_core.training.loop import make_optimizer_and_scheduler, report  # noqa: E402
from trainer_core.training.modelling import (  # noqa: E402
    IGNORE_INDEX,
    load_model_and_tokenizer,
    sequence_logprobs,
    set_seed,
    token_logprobs,
)
from trainer_core.training.sft import SFTConfig  # noqa: E402
from trainer_core.training.tiny import build_tiny_model  # noqa: E402

torch.set_num_threads(1)

CONVERSATION = [
    {"role": "system", "content": "Use the tools."},
    {"role": "user", "content": "What is 2 + 3?"},
    {
        "role": "assistant",
        "content": "Compute it.",
        "tool_calls": [
            {
                "id": "call_0",
                "type": "function",
                "function": {"name": "calculator", "arguments": '{"expression": "2 + 3"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_0", "name": "calculator", "content": "2 + 3 = 5"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": "submit", "arguments": {"answer": "5"}}}],
    },
    {"role": "tool", "content": "Submitted: '5' — correct."},
]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), hidden_size=32, num_layers=2)


@pytest.fixture(scope="module")
def loaded(model_dir):
    return load_model_and_tokenizer(model_dir, device="cpu")


# --------------------------------------------------------------------------- configs


@pytest.mark.parametrize("cls", [TrainConfig, SFTConfig])
def test_every_field_has_help_text(cls):
    helps = config_help(cls)
    assert list(helps) == [f.name for f in dataclasses.fields(cls)]
    assert all(len(text) > 10 for text in helps.values()), helps


@dataclasses.dataclass
class DocstringConfig(TrainConfig):
    beta: float = 0.1
    """KL coefficient, documented as an attribute docstring."""


def test_help_is_read_from_attribute_docstrings_too():
    helps = config_help(DocstringConfig)
    assert helps["beta"] == "KL coefficient, documented as an attribute docstring."
    assert helps["seed"] == config_help(TrainConfig)["seed"]


def test_config_from_dict_coerces_form_values_and_names_unknown_keys():
    config = config_from_dict(
        SFTConfig,
        {
            "model_dir": "m",
            "output_dir": "o",
            "max_steps": "7",
            "learning_rate": "1e-3",
            "curriculum": "true",
            "seed": 3.0,
        },
    )
    assert (config.max_steps, config.learning_rate, config.curriculum, config.seed) == (
        7,
        1e-3,
        True,
        3,
    )
    with pytest.raises(ConfigError, match="unknown option.*bogus, lr"):
        config_from_dict(SFTConfig, {"model_dir": "m", "output_dir": "o", "lr": 1, "bogus": 2})
    with pytest.raises(ConfigError, match="needs model_dir, output_dir"):
        config_from_dict(SFTConfig, {})
    with pytest.raises(ConfigError, match="max_steps must be a whole number"):
        config_from_dict(SFTConfig, {"model_dir": "m", "output_dir": "o", "max_steps": "many"})
    with pytest.raises(ConfigError, match="curriculum must be true or false"):
        config_from_dict(SFTConfig, {"model_dir": "m", "output_dir": "o", "curriculum": "maybe"})


def test_yaml_round_trip():
    config = SFTConfig(model_dir="m", output_dir="o", lora_r=4, dtype="bf16", chunk_max_steps=3)
    text = config_to_yaml(config)
    assert "chunk_max_steps: 3" in text
    assert config_from_yaml(SFTConfig, text) == config
    with pytest.raises(ConfigError, match="not valid YAML"):
        config_from_yaml(SFTConfig, "model_dir: [")


def test_validate_names_each_problem():
    config = SFTConfig(model_dir="m", output_dir="o", dataset="d", max_steps=0, dtype="fp16")
    with pytest.raises(ConfigError, match="max_steps must be at least 1.*dtype 'fp16'"):
        config.validate()
    SFTConfig(model_dir="m", output_dir="o", dataset="d").validate()


# --------------------------------------------------------------------------- encoding


def test_encode_labels_exactly_the_policys_tokens_and_numbers_the_turns(loaded):
    _, tokenizer = loaded
    encoded = encode_messages(CONVERSATION, tokenizer, max_length=4096)
    reference = cf.tokenize(CONVERSATION, tokenizer)
    assert encoded.input_ids == reference.input_ids
    assert encoded.labels == reference.labels()
    turns = [
        tokenizer.decode(
            [t for t, s in zip(encoded.input_ids, encoded.step_ids, strict=True) if s == k]
        )
        for k in (0, 1)
    ]
    assert turns[0] == (
        'Compute it.\n<tool_call>{"name": "calculator", "arguments": {"expression": "2 + 3"}}'
        "</tool_call><|im_end|>"
    )
    assert turns[1] == (
        '<tool_call>{"name": "submit", "arguments": {"answer": "5"}}</tool_call><|im_end|>'
    )
    assert set(encoded.step_ids) == {-1, 0, 1}
    assert all(
        (s >= 0) == (lab != IGNORE_INDEX)
        for s, lab in zip(encoded.step_ids, encoded.labels, strict=True)
    )
    assert encoded.weights == [1.0] * len(encoded)


def test_encode_truncates_on_the_right(loaded):
    _, tokenizer = loaded
    full = encode_messages(CONVERSATION, tokenizer, max_length=4096)
    cut = encode_messages(CONVERSATION, tokenizer, max_length=40)
    assert len(cut) == 40
    assert cut.input_ids == full.input_ids[:40]
    assert cut.labels == full.labels[:40]
    assert cut.step_ids == full.step_ids[:40]


def test_collate_pads_on_the_right(loaded):
    _, tokenizer = loaded
    a = encode_messages(CONVERSATION, tokenizer, max_length=4096)
    b = encode_messages(CONVERSATION[:3], tokenizer, max_length=4096)
    batch = collate([a, b], pad_id=tokenizer.pad_token_id)
    width = len(a)
    assert {k: tuple(v.shape) for k, v in batch.items()} == {
        k: (2, width) for k in ("input_ids", "attention_mask", "labels", "weights", "step_ids")
    }
    assert batch["input_ids"][1, len(b) :].eq(tokenizer.pad_token_id).all()
    assert batch["attention_mask"][1].sum() == len(b)
    assert batch["labels"][1, len(b) :].eq(IGNORE_INDEX).all()
    assert batch["weights"][1, len(b) :].eq(0).all()
    assert batch["input_ids"][1, : len(b)].tolist() == b.input_ids


def test_token_logprobs_agree_with_the_models_own_loss(loaded):
    model, tokenizer = loaded
    a = encode_messages(CONVERSATION, tokenizer, max_length=4096)
    b = encode_messages(CONVERSATION[:3], tokenizer, max_length=4096)
    batch = collate([a, b], pad_id=tokenizer.pad_token_id)
    with torch.no_grad():
        logp = token_logprobs(model, batch)
        assert logp.shape == batch["labels"].shape
        assert logp[batch["labels"] == IGNORE_INDEX].eq(0).all()
        for row, item in enumerate((a, b)):
            ids = torch.tensor([item.input_ids])
            loss = model(input_ids=ids, labels=torch.tensor([item.labels])).loss  # mean NLL
            mine = -logp[row].sum() / (item.num_label_tokens)
            assert float(mine) == pytest.approx(float(loss), abs=1e-5)
        assert torch.allclose(sequence_logprobs(model, batch), logp.sum(-1))


# --------------------------------------------------------------------------- models


def test_a_bad_model_directory_says_what_is_missing(tmp_path):
    with pytest.raises(PolicyError, match="does not exist"):
        load_model_and_tokenizer(tmp_path / "nope")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(PolicyError, match="weights"):
        load_model_and_tokenizer(tmp_path)


def test_lora_trains_only_the_adapters(model_dir):
    model, _ = load_model_and_tokenizer(model_dir, device="cpu", lora_r=4, lora_alpha=8)
    trainable = [n for n, p in model.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n for n in trainable)
    assert any("q_proj" in n for n in trainable) and any("down_proj" in n for n in trainable)


def test_schedule_warms_up_then_decays(loaded):
    model, _ = loaded
    config = TrainConfig(model_dir="m", output_dir="o", learning_rate=1.0, warmup_steps=3)
    optimizer, scheduler = make_optimizer_and_scheduler(model, config, total_steps=13)
    rates = []
    for _ in range(13):
        rates.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    assert rates[:4] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert rates[4] == pytest.approx(0.9) and rates[-1] == pytest.approx(0.1)


def test_report_sends_a_progress_event():
    events = []
    report(events.append, step=3, total=12, metrics={"loss": 1}, message="step 3/12")
    assert events == [
        ProgressEvent(
            fraction=0.25, message="step 3/12", step=3, metrics={"loss": 1.0}, log=("step 3/12",)
        )
    ]
    report(None, step=1, total=1, metrics={}, message="")  # no callback: nothing happens


# --------------------------------------------------------------------------- checkpoints


def _one_step(model, optimizer, scheduler, batch):
    loss = -token_logprobs(model, batch).sum()
    loss.backward()
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()


def test_checkpoint_restores_weights_optimizer_schedule_and_random_state(model_dir, tmp_path):
    set_seed(0)
    model, tokenizer = load_model_and_tokenizer(model_dir, device="cpu")
    config = TrainConfig(
        model_dir=str(model_dir), output_dir=str(tmp_path), learning_rate=1e-2, warmup_steps=2
    )
    optimizer, scheduler = make_optimizer_and_scheduler(model, config, total_steps=10)
    batch = collate(
        [encode_messages(CONVERSATION, tokenizer, max_length=4096)], tokenizer.pad_token_id
    )
    _one_step(model, optimizer, scheduler, batch)
    path = Checkpointer(tmp_path).save(
        3, model, tokenizer, optimizer, scheduler, config, {"loss": 1.5}
    )
    expected_draws = (random.random(), torch.rand(3))
    weights = {k: v.clone() for k, v in model.state_dict().items()}

    _one_step(model, optimizer, scheduler, batch)  # move everything on
    assert not torch.equal(model.state_dict()["model.norm.weight"], weights["model.norm.weight"])

    fresh, _ = load_model_and_tokenizer(model_dir, device="cpu")
    opt2, sched2 = make_optimizer_and_scheduler(fresh, config, total_steps=10)
    step, extra = Checkpointer(tmp_path).load(tmp_path, fresh, opt2, sched2)
    assert (step, extra) == (3, {"loss": 1.5})
    assert find_checkpoint(tmp_path) == path
    for key, value in fresh.state_dict().items():
        assert torch.equal(value, weights[key]), key
    assert sched2.get_last_lr() == pytest.approx([1e-2 * 2 / 3])
    state = opt2.state_dict()["state"]
    assert len(state) == len(list(fresh.parameters())) and all(
        s["step"] == 1 for s in state.values()
    )
    assert (random.random(), torch.rand(3).tolist()) == (
        expected_draws[0],
        expected_draws[1].tolist(),
    )
    # The checkpoint is a model directory of its own: config, weights, tokenizer, the run's config.
    again, _ = load_model_and_tokenizer(path, device="cpu")
    assert torch.equal(again.state_dict()["model.norm.weight"], weights["model.norm.weight"])
    assert config_from_yaml(TrainConfig, (path / checkpoint.CONFIG_FILE).read_text()) == config


def test_an_incomplete_checkpoint_is_refused(tmp_path):
    (tmp_path / "checkpoint-5").mkdir()
    with pytest.raises(ConfigError, match="no complete checkpoint"):
        find_checkpoint(tmp_path)
