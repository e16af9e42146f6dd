"""Off-policy correction for decoupled GRPO: the importance weights against hand-computed
values, the staleness admission, the behaviour log-probs recorded by samplers (exactly the
trainer's π_old when the weights are equal) and the groups' JSON form."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from trainer_core.errors import ConfigError, InputError  # noqa: E402
from trainer_core.policies.local_hf import LocalHFPolicy  # noqa: E402
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks  # noqa: E402
from trainer_core.training.data import Encoded  # noqa: E402
from trainer_core.training.decoupled import DecoupledConfig  # noqa: E402
from trainer_core.training.episodes import Completion, Group, rollout_groups  # noqa: E402
from trainer_core.training.losses import grpo_loss  # noqa: E402
from trainer_core.training.modelling import (  # noqa: E402
    IGNORE_INDEX,
    load_model_and_tokenizer,
    load_seeded,
    make_accelerator,
)
from trainer_core.training.offpolicy import (  # noqa: E402
    admit,
    importance_weights,
    sequence_logprobs,
    staleness,
)
from trainer_core.training.tiny import build_tiny_model  # noqa: E402

torch.set_num_threads(1)

TASKS = arithmetic_tasks("train", n=3)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return str(
        build_tiny_model(
            tmp_path_factory.mktemp("offpolicy") / "base", hidden_size=48, num_layers=2, seed=1
        )
    )


def config(model_dir, **overrides):
    values = dict(
        model_dir=model_dir,
        output_dir="unused",
        env_id="steplab/arithmetic",
        group_size=3,
        temperature=0.7,
        max_new_tokens=12,
        max_episode_steps=2,
        system_prompt=False,
        device="cpu",
    )
    values.update(overrides)
    return DecoupledConfig(**values)


@pytest.fixture(scope="module")
def sampled(base):
    """Groups sampled at temperature 0.7 by the start model, behaviour log-probs recorded."""
    model, tokenizer = load_model_and_tokenizer(base, device="cpu")
    return rollout_groups(model, tokenizer, TASKS, config(base), seed=5, record_behaviour=True)


# --------------------------------------------------------------------------- the weights


def test_importance_weights_match_hand_computed_values():
    old = torch.tensor([[-1.0, -2.0, -0.5, -3.0], [-0.2, -4.0, -1.0, -1.0]], requires_grad=True)
    behaviour = torch.tensor([[-1.5, -1.0, -0.5, -5.0], [-1.2, -4.0, -0.9, -9.0]])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 1, 0]])
    w = importance_weights(old, behaviour, mask, cap=2.0)
    expected = [
        math.exp(0.5), math.exp(-1.0), 1.0, 1.0,  # e^0.5 = 1.6487 < C; off the mask: 1
        2.0, 1.0, math.exp(-0.1), 1.0,  # e^1 = 2.718 capped at C = 2
    ]  # fmt: skip
    assert w.flatten().tolist() == pytest.approx(expected, abs=1e-6)
    assert not w.requires_grad  # detached
    assert importance_weights(old, behaviour, mask, cap=None)[1, 0].item() == pytest.approx(math.e)
    with pytest.raises(ConfigError, match="at least 1"):
        importance_weights(old, behaviour, mask, cap=0.5)


def test_the_weights_multiply_each_tokens_loss_and_its_gradient():
    """bnpo, one update per batch (ratio 1): loss = mean over tokens of −A·w, and the gradient of
    each token's log-prob is −A·w / tokens — the weight is a constant (detached)."""
    logps = torch.tensor([[-1.0, -2.0, -0.5]], requires_grad=True)
    behaviour = torch.tensor([[-1.5, -1.0, -0.5]])
    advantages = torch.tensor([2.0])
    mask = torch.ones(1, 3)
    loss = grpo_loss(
        logps,
        None,
        None,
        advantages,
        mask,
        loss_type="bnpo",
        behaviour_per_token_logps=behaviour,
        importance_cap=2.0,
    )
    w = [math.exp(0.5), math.exp(-1.0), 1.0]
    assert loss.item() == pytest.approx(-2.0 * sum(w) / 3, abs=1e-6)
    loss.backward()
    assert logps.grad[0].tolist() == pytest.approx([-2.0 * x / 3 for x in w], abs=1e-6)


def test_equal_behaviour_and_old_log_probs_change_nothing():
    g = torch.Generator().manual_seed(0)
    logps = torch.randn(3, 5, generator=g, requires_grad=True)
    old = (logps + 0.05 * torch.randn(3, 5, generator=g)).detach()
    advantages = torch.randn(3, generator=g)
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 1, 1, 1, 0]])
    for loss_type in ("grpo", "bnpo", "dr_grpo", "dapo"):
        plain = grpo_loss(logps, old, None, advantages, mask, loss_type=loss_type)
        corrected = grpo_loss(
            logps,
            old,
            None,
            advantages,
            mask,
            loss_type=loss_type,
            behaviour_per_token_logps=old.clone(),
            importance_cap=2.0,
        )
        assert torch.equal(plain, corrected), loss_type
    assert torch.equal(importance_weights(old, old.clone(), mask, 2.0), torch.ones(3, 5))


def test_completion_weights_scale_each_completions_loss():
    logps = torch.zeros(2, 2, requires_grad=True)
    mask = torch.ones(2, 2)
    advantages = torch.tensor([1.0, -3.0])
    loss = grpo_loss(
        logps, None, None, advantages, mask, completion_weights=torch.tensor([1.0, 0.25])
    )
    assert loss.item() == pytest.approx((-1.0 * 1.0 + 3.0 * 0.25) / 2)


# --------------------------------------------------------------------------- staleness


def versioned(*versions):
    return [Group(completions=[], key=f"t{i}", version=v, id=i) for i, v in enumerate(versions)]


def test_admission_drops_exactly_the_groups_older_than_the_bound():
    groups = versioned(5, 4, 3, 2, 1, 0, 6)
    out = admit(groups, 5, max_staleness=2, mode="drop")
    assert [g.id for g in out.kept] == [0, 1, 2, 6]  # staleness 0, 1, 2 and a newer group
    assert [g.id for g in out.dropped] == [3, 4, 5]  # staleness 3, 4, 5
    assert out.weights == [1.0, 1.0, 1.0, 1.0]
    assert out.staleness == [0, 1, 2, -1]
    on_policy = admit(groups, 5, max_staleness=0, mode="drop")
    assert [g.id for g in on_policy.kept] == [0, 6] and len(on_policy.dropped) == 5


def test_downweighting_keeps_stale_groups_with_a_weight_per_extra_version():
    out = admit(
        versioned(5, 4, 3, 2, 1, 0), 5, max_staleness=2, mode="downweight", stale_weight=0.5
    )
    assert out.dropped == [] and [g.id for g in out.kept] == [0, 1, 2, 3, 4, 5]
    assert out.weights == [1.0, 1.0, 1.0, 0.5, 0.25, 0.125]


def test_admission_refuses_what_it_cannot_age():
    with pytest.raises(InputError, match="no policy version"):
        staleness(Group(completions=[], key="t"), 3)
    with pytest.raises(ConfigError, match="stale_groups"):
        admit(versioned(1), 1, max_staleness=1, mode="keep")


# --------------------------------------------------------------------------- behaviour log-probs


def test_sequence_logprobs_are_the_tempered_log_softmax_of_each_labelled_token(base):
    model, _ = load_model_and_tokenizer(base, device="cpu")
    ids = list(range(5, 25))
    labels = [IGNORE_INDEX] * 8 + ids[8:15] + [IGNORE_INDEX] * 5
    got = sequence_logprobs(model, ids, labels, 0.7)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].float() / 0.7
    full = logits.log_softmax(-1)
    expected = [0.0] + [
        float(full[t - 1, ids[t]]) if labels[t] != IGNORE_INDEX else 0.0 for t in range(1, len(ids))
    ]
    assert got == pytest.approx(expected, abs=1e-5)
    assert model.training  # the model's mode is given back


def test_at_temperature_07_equal_weights_give_importance_weights_of_exactly_one(base, sampled):
    """The sampler recorded its behaviour log-probs; the trainer loads the same weights its own
    way and computes π_old: every sampled token's log-probs are equal (==) and every weight 1."""
    cfg = config(base)
    accelerator = make_accelerator(cfg)
    model, _ = load_seeded(cfg, accelerator)
    model = accelerator.prepare(model)
    tokens = 0
    for group in sampled:
        for c in group.completions:
            e = c.encoded
            old = sequence_logprobs(model, e.input_ids, e.labels, cfg.temperature)
            own = [s >= 0 for s in e.step_ids]
            assert [o for o, k in zip(old, own, strict=True) if k] == [
                b for b, k in zip(c.behaviour_logprobs, own, strict=True) if k
            ]
            assert all(b == 0.0 for b, k in zip(c.behaviour_logprobs, own, strict=True) if not k)
            w = importance_weights(
                torch.tensor([old]),
                torch.tensor([c.behaviour_logprobs]),
                torch.tensor([own]),
                cfg.importance_cap,
            )
            assert bool((w == 1.0).all())
            tokens += sum(own)
    assert tokens > 50


def test_a_generator_samples_the_episodes_and_gives_its_log_probs(base, sampled):
    """The model's own LocalHFPolicy as a generator (as an inference server backend is used):
    the same seeded episodes, and behaviour log-probs from its sampling step equal to the
    recomputed ones up to floating-point error."""
    model, tokenizer = load_model_and_tokenizer(base, device="cpu")
    cfg = config(base)
    generator = LocalHFPolicy.from_model(
        model, tokenizer, temperature=0.7, max_new_tokens=12, seed=5, return_logprobs=True
    )
    groups = rollout_groups(
        None, tokenizer, TASKS, cfg, seed=5, record_behaviour=True, generator=generator
    )
    for mine, theirs in zip(groups, sampled, strict=True):
        for a, b in zip(mine.completions, theirs.completions, strict=True):
            assert a.encoded.input_ids == b.encoded.input_ids
            assert a.behaviour_logprobs == pytest.approx(b.behaviour_logprobs, abs=1e-4)
    truncating = LocalHFPolicy.from_model(model, tokenizer, top_p=0.9, return_logprobs=True)
    with pytest.raises(ConfigError, match="top_p"):
        rollout_groups(None, tokenizer, TASKS, cfg, seed=5, generator=truncating)
    silent = LocalHFPolicy.from_model(model, tokenizer, temperature=0.7)
    with pytest.raises(ConfigError, match="log-probs"):
        rollout_groups(None, tokenizer, TASKS, cfg, seed=5, record_behaviour=True, generator=silent)


def test_groups_round_trip_through_json(sampled):
    for group in sampled:
        group.version, group.id = 3, 17
        again = Group.from_dict(json.loads(json.dumps(group.to_dict())))
        assert again == group
        assert all(
            c.turns and {"text", "action", "observation"} <= set(c.turns[0])
            for c in again.completions
        )
    bad = sampled[0].to_dict()
    bad["completions"][0]["labels"] = bad["completions"][0]["labels"][:-1]
    with pytest.raises(InputError, match="one entry per token"):
        Group.from_dict(bad)
    with pytest.raises(InputError, match="list of completions"):
        Group.from_dict({"key": "x"})


def test_without_the_new_arguments_no_behaviour_is_recorded(base):
    model, tokenizer = load_model_and_tokenizer(base, device="cpu")
    groups = rollout_groups(model, tokenizer, TASKS[:1], config(base), seed=5)
    assert all(c.behaviour_logprobs is None for c in groups[0].completions)
    one = Completion(Encoded([1, 2], [IGNORE_INDEX, 2], [-1, 0], [1.0, 1.0]), 1.0, [None])
    assert one.behaviour_logprobs is None and one.turns is None
