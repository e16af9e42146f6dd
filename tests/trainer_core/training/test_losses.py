"""Our DPO and GRPO losses against TRL's own code on the same fixed tensors.

TRL computes its losses inside ``DPOTrainer._compute_loss`` and ``GRPOTrainer._compute_loss``
(TRL 1.16). We call those methods on an instance built with ``object.__new__`` and only the
attributes they read, with a stand-in model whose outputs are the fixed per-token log-probs and a
single-process stand-in for accelerate's ``Accelerator`` (gather/reduce are identities). The loss
formulas are TRL's, run by TRL.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
trl = pytest.importorskip("trl")

from trainer_core.errors import ConfigError  # noqa: E402
from trainer_core.training.losses import (  # noqa: E402
    DPO_LOSS_TYPES,
    GRPO_LOSS_TYPES,
    dpo_loss,
    grpo_loss,
)

torch.set_num_threads(1)

TOL = 1e-6


class OneProcess:
    """accelerate.Accelerator as TRL's loss code uses it, for one process on the CPU."""

    device = torch.device("cpu")
    num_processes = 1
    sync_gradients = True
    is_main_process = True

    def gather(self, x):
        return x

    gather_for_metrics = gather

    def reduce(self, x, reduction="sum"):
        return x

    def autocast(self):
        return contextlib.nullcontext()

    def unwrap_model(self, model):
        return model


class FixedLogps:
    """A model whose forward returns fixed per-token log-probs (TRL's fused-head outputs)."""

    training = True

    def __init__(self, log_probs):
        self.log_probs = log_probs

    def __call__(self, **kwargs):
        lp = self.log_probs
        return SimpleNamespace(
            log_probs=lp,
            entropy=torch.zeros_like(lp),
            mean_logits=torch.zeros_like(lp),
            is_top1=torch.zeros_like(lp, dtype=torch.bool),
        )


# --------------------------------------------------------------------------- DPO


def dpo_fixture(seed=0, pairs=4, length=9):
    """Per-token policy log-probs for [chosen..., rejected...] with completion masks of varying
    lengths, and reference sequence log-probs."""
    g = torch.Generator().manual_seed(seed)
    rows = 2 * pairs
    completion_mask = torch.zeros(rows, length, dtype=torch.long)
    for r in range(rows):
        start = 2 + r % 3
        end = length - (r % 2)
        completion_mask[r, start:end] = 1
    shift = completion_mask[:, 1:]
    per_token = -torch.rand(rows, length - 1, generator=g, dtype=torch.float64) * 3 * shift
    ref = per_token.sum(1) + torch.randn(rows, generator=g, dtype=torch.float64) * 2
    return per_token, completion_mask, ref


def trl_dpo(loss_type, beta, label_smoothing, per_token, completion_mask, ref):
    from trl.trainer.dpo_trainer import DPOTrainer

    t = object.__new__(DPOTrainer)
    t.accelerator = OneProcess()
    t.model = FixedLogps(per_token)
    t.aux_loss_enabled = False
    t.ld_alpha = None
    t.precompute_ref_logps = True
    t.f_divergence_type = "reverse_kl"
    t.loss_types = [loss_type]
    t.loss_weights = [1.0]
    t.beta = beta
    t.label_smoothing = label_smoothing
    t.use_weighting = False
    t._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    t._total_train_tokens = 0
    t._tp_size = 1
    rows, length = completion_mask.shape
    ref_chosen, ref_rejected = ref.chunk(2)
    inputs = {
        "input_ids": torch.arange(rows * length).reshape(rows, length) % 50,
        "attention_mask": torch.ones(rows, length, dtype=torch.long),
        "completion_mask": completion_mask,
        "ref_chosen_logps": ref_chosen,
        "ref_rejected_logps": ref_rejected,
    }
    loss = t._compute_loss(t.model, inputs, return_outputs=False)
    return loss, t._metrics["train"]


@pytest.mark.parametrize("loss_type", DPO_LOSS_TYPES)
@pytest.mark.parametrize("beta", [0.1, 0.5])
def test_dpo_loss_equals_trl(loss_type, beta):
    label_smoothing = 0.2 if loss_type == "robust" else 0.0
    per_token, completion_mask, ref = dpo_fixture(seed=int(beta * 10))
    expected, metrics = trl_dpo(loss_type, beta, label_smoothing, per_token, completion_mask, ref)

    logps = per_token.sum(1)
    chosen, rejected = logps.chunk(2)
    ref_chosen, ref_rejected = ref.chunk(2)
    lengths = completion_mask.sum(1).to(torch.float64)
    chosen_len, rejected_len = lengths.chunk(2)
    losses, chosen_rewards, rejected_rewards = dpo_loss(
        chosen,
        rejected,
        ref_chosen,
        ref_rejected,
        beta=beta,
        loss_type=loss_type,
        label_smoothing=label_smoothing,
        chosen_lengths=chosen_len,
        rejected_lengths=rejected_len,
    )
    assert abs(float(losses.mean()) - float(expected)) < TOL
    assert float(expected) > 0  # a real value, not a degenerate zero
    assert abs(float(chosen_rewards.mean()) - metrics["rewards/chosen"][-1]) < TOL
    assert abs(float(rejected_rewards.mean()) - metrics["rewards/rejected"][-1]) < TOL


def test_dpo_loss_rejects_bad_settings():
    z = torch.zeros(2)
    with pytest.raises(ConfigError, match="unknown DPO loss type"):
        dpo_loss(z, z, z, z, loss_type="kto")
    with pytest.raises(ConfigError, match="robust loss only"):
        dpo_loss(z, z, z, z, loss_type="sigmoid", label_smoothing=0.1)
    with pytest.raises(ConfigError, match=r"\[0, 0.5\)"):
        dpo_loss(z, z, z, z, loss_type="robust", label_smoothing=0.5)
    with pytest.raises(ConfigError, match="beta"):
        dpo_loss(z, z, z, z, beta=0.0)


def test_dpo_loss_prefers_chosen():
    """The sigmoid loss falls as the chosen completion gains probability over the rejected."""
    ref = torch.zeros(1)
    low = dpo_loss(torch.tensor([-1.0]), torch.tensor([-5.0]), ref, ref)[0]
    high = dpo_loss(torch.tensor([-5.0]), torch.tensor([-1.0]), ref, ref)[0]
    assert float(low) < float(high)


# --------------------------------------------------------------------------- GRPO


def grpo_fixture(seed=0, batch=6, prompt=3, length=7, per_token_adv=False):
    g = torch.Generator().manual_seed(seed)
    mask = torch.zeros(batch, length, dtype=torch.long)
    for r in range(batch):
        mask[r, : length - r % 4] = 1
    logps = -torch.rand(batch, length, generator=g, dtype=torch.float64) * 2
    old = logps + torch.randn(batch, length, generator=g, dtype=torch.float64) * 0.3
    ref = logps + torch.randn(batch, length, generator=g, dtype=torch.float64) * 0.2
    shape = (batch, length) if per_token_adv else (batch,)
    advantages = torch.randn(*shape, generator=g, dtype=torch.float64)
    return logps, old, ref, advantages, mask, prompt


def trl_grpo(loss_type, beta, eps_low, eps_high, logps, old, ref, advantages, mask, prompt):
    from trl.trainer.grpo_trainer import GRPOTrainer

    batch, length = mask.shape
    t = object.__new__(GRPOTrainer)
    t.accelerator = OneProcess()
    t.model = FixedLogps(torch.cat([torch.zeros(batch, prompt, dtype=logps.dtype), logps], 1))
    t.aux_loss_enabled = False
    t.top_entropy_quantile = 1.0
    t.off_policy_mask_threshold = None
    t.importance_sampling_level = "token"
    t.loss_type = loss_type
    t.beta = beta
    t.epsilon_low = eps_low
    t.epsilon_high = eps_high
    t.use_vllm = False
    t.vllm_importance_sampling_correction = False
    t.max_completion_length = length + 5
    t.current_gradient_accumulation_steps = 1
    t._entropy_bonus_enabled = False
    t._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    t.args = SimpleNamespace(use_bias_correction_kl=False, delta=None, steps_per_generation=1)
    inputs = {
        "prompt_ids": torch.ones(batch, prompt, dtype=torch.long),
        "prompt_mask": torch.ones(batch, prompt, dtype=torch.long),
        "completion_ids": torch.ones(batch, length, dtype=torch.long),
        "completion_mask": mask,
        "advantages": advantages,
        "old_per_token_logps": old,
        "ref_per_token_logps": ref,
        "num_items_in_batch": mask.sum().to(torch.float64),
    }
    return t._compute_loss(t.model, inputs), t.max_completion_length


@pytest.mark.parametrize("loss_type", GRPO_LOSS_TYPES)
@pytest.mark.parametrize("beta", [0.0, 0.04])
@pytest.mark.parametrize("per_token_adv", [False, True])
def test_grpo_loss_equals_trl(loss_type, beta, per_token_adv):
    logps, old, ref, advantages, mask, prompt = grpo_fixture(seed=3, per_token_adv=per_token_adv)
    eps_low, eps_high = 0.2, 0.28
    expected, max_len = trl_grpo(
        loss_type, beta, eps_low, eps_high, logps, old, ref, advantages, mask, prompt
    )
    ours = grpo_loss(
        logps,
        old,
        ref,
        advantages,
        mask,
        loss_type=loss_type,
        beta=beta,
        epsilon_low=eps_low,
        epsilon_high=eps_high,
        max_completion_length=max_len,
    )
    assert abs(float(ours) - float(expected)) < TOL
    assert abs(float(expected)) > 1e-3


def test_grpo_loss_on_policy_gradient_is_the_policy_gradient():
    """With no old log-probs (one update per batch) the ratio is 1 and the gradient of the loss
    with respect to a token's log-prob is −A / (completion tokens) for the grpo loss."""
    logps = torch.tensor([[-1.0, -2.0, -0.5]], requires_grad=True)
    mask = torch.tensor([[1, 1, 0]])
    loss = grpo_loss(logps, None, None, torch.tensor([2.0]), mask)
    loss.backward()
    assert float(loss.detach()) == pytest.approx(-2.0)
    assert logps.grad[0].tolist() == pytest.approx([-1.0, -1.0, 0.0])


def test_grpo_loss_needs_reference_for_kl():
    z = torch.zeros(1, 2)
    with pytest.raises(ConfigError, match="reference"):
        grpo_loss(z, None, None, torch.zeros(1), torch.ones(1, 2), beta=0.1)
    with pytest.raises(ConfigError, match="unknown GRPO loss type"):
        grpo_loss(z, None, None, torch.zeros(1), torch.ones(1, 2), loss_type="ppo")


# --------------------------------------------------------------------------- advantages


def test_the_outcome_estimator_equals_trls_formula_via_trl_nanstd():
    """GRPO's outcome advantage is TRL's ``(r - mean) / (nanstd + eps)`` per group; TRL adds
    1e-4 to the std, we add 1e-8 (so that scaling the rewards changes nothing): they agree to
    1e-3 on these rewards, and exactly without the division (Dr. GRPO)."""
    from trl.trainer.utils import nanstd

    from trainer_core.training.advantages import outcome_advantages

    rewards = torch.tensor([1.0, 0.0, 0.5, 0.5, 0.2, 0.9, 0.9, 0.1])
    grouped = rewards.view(-1, 4)
    mean = grouped.mean(1).repeat_interleave(4)
    std = nanstd(grouped, dim=1).repeat_interleave(4)
    expected = (rewards - mean) / (std + 1e-4)
    ours = [a for group in grouped.tolist() for a in outcome_advantages(group)]
    assert ours == pytest.approx(expected.tolist(), abs=1e-3)
    plain = [a for group in grouped.tolist() for a in outcome_advantages(group, scale=False)]
    assert plain == pytest.approx((rewards - mean).tolist(), abs=TOL)


# --------------------------------------------------------------------------- assistant mask


def conversational_fixtures():
    from tests.trainer_core.policies.tiny_model import TOOLS
    from trainer_core.policies import chat_format as cf
    from trainer_core.policies.base import Turn

    system = cf.system_prompt(TOOLS)
    calc = {"tool": "calculator", "params": {"expression": "12*4"}, "thought": "Multiply."}
    submit = {"tool": "submit", "params": {"answer": "48"}, "thought": ""}
    one = cf.to_messages(
        prompt="What is 12*4? Use the calculator tool, then submit the answer.",
        history=[Turn(action=calc, observation="12*4 = 48"), Turn(action=submit, observation="ok")],
        system=system,
    )
    malformed = cf.to_messages(
        prompt="What is 2+3?",
        history=[
            Turn(action=None, observation="Your last output was not a valid action.", raw="hm, 5?"),
            Turn(action={**calc, "params": {"expression": "2+3"}}, observation="2+3 = 5"),
        ],
    )
    several_calls = [
        {"role": "user", "content": "  add both"},
        {
            "role": "assistant",
            "content": "Two calls.",
            "tool_calls": [
                {"type": "function", "function": {"name": "calculator", "arguments": '{"x": 1}'}},
                {"type": "function", "function": {"name": "submit", "arguments": '{"a": 2}'}},
            ],
        },
        {"role": "tool", "content": "done"},
        {"role": "assistant", "content": "Finished."},
    ]
    return [one, malformed, several_calls]


def test_our_loss_mask_equals_trl_assistant_mask(tmp_path):
    """TRL's SFTTrainer with ``assistant_only_loss=True`` on conversational data (it masks with
    ``return_assistant_tokens_mask`` and the chat template's ``{% generation %}`` markers) puts
    labels on exactly the tokens of ``chat_format.tokenize``'s assistant mask."""
    pytest.importorskip("datasets")
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    from tests.trainer_core.policies.tiny_model import build_tiny_model
    from trainer_core.policies import chat_format as cf

    path = build_tiny_model(tmp_path / "model")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    conversations = conversational_fixtures()
    trainer = SFTTrainer(
        model=model,
        processing_class=tokenizer,
        train_dataset=Dataset.from_list([{"messages": m} for m in conversations]),
        args=SFTConfig(
            output_dir=str(tmp_path / "out"),
            assistant_only_loss=True,
            max_length=None,
            report_to=[],
            use_cpu=True,
        ),
    )
    rows = trainer.train_dataset
    assert len(rows) == len(conversations)
    for row, messages in zip(rows, conversations, strict=True):
        ours = cf.tokenize(messages, tokenizer)
        assert row["input_ids"] == ours.input_ids
        assert row["labels"] == ours.labels()
        assert 0 < sum(ours.assistant_mask) < len(ours)
