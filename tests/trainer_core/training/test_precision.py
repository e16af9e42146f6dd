"""bf16 on the CPU: SFT, DPO, online GRPO and the decoupled trainer each train in bf16 (full
fine-tuning: fp32 weights computed under bf16 autocast; LoRA: the frozen base in bf16) with
finite losses; their checkpoints hold the dtypes docs/training.md says, reload in the local
policy and resume exactly; the reference models compute as the policy does (DPO's loss and
GRPO's KL start at their values for equal weights); a decoupled run's samplers that load its
versions in its precision get importance weights of exactly 1; FSDP on the CPU is refused with
what to do."""

from __future__ import annotations

import json
import math

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from trainer_core.errors import ConfigError  # noqa: E402
from trainer_core.policies import chat_format as cf  # noqa: E402
from trainer_core.policies.local_hf import LocalHFPolicy  # noqa: E402
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks  # noqa: E402
from trainer_core.training import dpo, grpo, sft, tiny  # noqa: E402
from trainer_core.training.checkpoint import find_checkpoint  # noqa: E402
from trainer_core.training.decoupled import DecoupledConfig, train_decoupled  # noqa: E402
from trainer_core.training.episodes import Group, rollout_groups  # noqa: E402
from trainer_core.training.modelling import compute_precision, make_accelerator  # noqa: E402
from trainer_core.training.spool import FilePublisher, SpoolSource, spool_group  # noqa: E402

torch.set_num_threads(1)

TASKS = arithmetic_tasks("train", n=4)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    return tmp_path_factory.mktemp("precision")


@pytest.fixture(scope="module")
def base(workdir):
    return str(tiny.build_tiny_model(workdir / "base", hidden_size=32, num_layers=2, seed=1))


@pytest.fixture(scope="module")
def data(workdir):
    """An SFT file (reference episodes) and a DPO file (the episode against a wrong guess)."""
    sft_rows, dpo_rows = [], []
    for t in tiny.reference_trajectories("train", 4):
        messages = cf.trajectory_to_messages(t, system="Calc.")
        sft_rows.append({"messages": messages})
        guess = [{"role": "assistant", "content": "The answer is 7."}]
        dpo_rows.append({"prompt": messages[:2], "chosen": messages[2:], "rejected": guess})
    paths = {"sft": workdir / "sft.jsonl", "dpo": workdir / "dpo.jsonl"}
    for name, rows in (("sft", sft_rows), ("dpo", dpo_rows)):
        paths[name].write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return {k: str(v) for k, v in paths.items()}


def online(**overrides):
    return dict(
        env_id="steplab/arithmetic",
        num_tasks=len(TASKS),
        group_size=2,
        temperature=0.7,
        max_new_tokens=12,
        max_episode_steps=2,
        system_prompt=False,
        **overrides,
    )


def config_for(method, base, data, out, **overrides):
    common = dict(
        model_dir=base,
        output_dir=str(out),
        max_steps=2,
        batch_size=2,
        learning_rate=1e-3,
        device="cpu",
        seed=1,
        dtype="bf16",
    )
    common.update({k: overrides.pop(k) for k in list(overrides) if k in common})
    if method == "sft":
        return sft.SFTConfig(dataset=data["sft"], **common, **overrides)
    if method == "dpo":
        return dpo.DPOConfig(dataset=data["dpo"], max_length=256, **common, **overrides)
    return grpo.GRPOConfig(**online(beta=0.04), **common, **overrides)


TRAINERS = {"sft": sft.train, "dpo": dpo.train, "grpo": grpo.train}


def check_checkpoint(path, config):
    """The dtypes docs/training.md gives: full fine-tuning saves its fp32 weights; LoRA saves the
    merged model in bf16 (the base's dtype) and the adapter in fp32. The local policy loads it in
    the run's precision."""
    from safetensors.torch import load_file

    path = find_checkpoint(path)
    saved = {v.dtype for v in load_file(str(path / "model.safetensors")).values()}
    recorded = json.loads((path / "config.json").read_text())["dtype"]
    if config.lora_r:
        assert saved == {torch.bfloat16} and recorded == "bfloat16"
        adapter = load_file(str(path / "adapter" / "adapter_model.safetensors"))
        assert {v.dtype for v in adapter.values()} == {torch.float32}
    else:
        assert saved == {torch.float32} and recorded == "float32"
    precision = compute_precision(config)
    policy = LocalHFPolicy(path, device="cpu", precision=precision, max_new_tokens=3, seed=0)
    expected = torch.bfloat16 if precision == "bf16" else torch.float32
    assert next(policy.model.parameters()).dtype == expected
    assert policy.generate_ids([[1, 2, 3]])[0].token_ids


@pytest.mark.parametrize("lora_r", [0, 4])
@pytest.mark.parametrize("method", ["sft", "dpo", "grpo"])
def test_each_trainer_trains_saves_and_resumes_in_bf16(method, lora_r, base, data, workdir):
    out = workdir / f"{method}-{lora_r}"
    config = config_for(method, base, data, out, lora_r=lora_r, save_every=1)
    result = TRAINERS[method](config)
    losses = [h["loss"] for h in result.metrics_history]
    assert result.steps == 2 and all(math.isfinite(x) for x in losses)
    check_checkpoint(result.checkpoint_dir, config)
    if method == "dpo":  # the reference computes as the policy: equal weights, loss log 2
        assert losses[0] == pytest.approx(math.log(2), abs=1e-6)
    if method == "grpo" and result.metrics_history[0]["reward"] == 0.0:
        assert losses[0] == 0.0  # no advantage, and a KL of exactly 0 to the equal reference

    resumed = TRAINERS[method](
        config_for(
            method, base, data, workdir / f"{method}-{lora_r}-r", lora_r=lora_r,
            resume_from=str(out / "checkpoint-1"),
        )
    )  # fmt: skip
    assert [h["step"] for h in resumed.metrics_history] == [2]
    assert resumed.final_loss == pytest.approx(result.final_loss, abs=1e-6)


def test_full_fine_tuning_in_bf16_computes_in_bf16(base, data, workdir):
    """The same step in fp32 and bf16: close, not equal (the forward passes run under bf16
    autocast); DPO's precomputed reference too starts at log 2."""
    losses = {}
    for dtype in ("fp32", "bf16"):
        cfg = config_for("sft", base, data, workdir / f"sft-{dtype}", dtype=dtype, max_steps=1)
        losses[dtype] = sft.train(cfg).final_loss
    assert losses["bf16"] != losses["fp32"]
    assert losses["bf16"] == pytest.approx(losses["fp32"], rel=1e-2)
    cfg = config_for("dpo", base, data, workdir / "dpo-pre", reference="precomputed", max_steps=1)
    assert dpo.train(cfg).final_loss == pytest.approx(math.log(2), abs=1e-6)


def sample(model_dir, config, version, *, precision, seed):
    """The 4 tasks' groups sampled by ``model_dir`` loaded as a decoupled sampler loads a
    version, rewards 1 and 0 in each group."""
    policy = LocalHFPolicy(model_dir, device="cpu", precision=precision)
    groups = rollout_groups(
        policy.model, policy.tokenizer, TASKS, config, seed=seed, record_behaviour=True
    )
    for group in groups:
        group.version = version
        for c, reward in zip(group.completions, (1.0, 0.0), strict=True):
            c.reward = reward
    return groups


@pytest.mark.parametrize("lora_r", [0, 4])
def test_decoupled_bf16_samplers_in_the_runs_precision_give_weights_of_1(lora_r, base, workdir):
    out, spool = workdir / f"dec-{lora_r}", workdir / f"dec-{lora_r}-spool"
    options = dict(
        model_dir=base,
        output_dir=str(out),
        batch_size=4,
        max_staleness=0,
        learning_rate=1e-3,
        device="cpu",
        seed=1,
        wait_seconds=30.0,
        dtype="bf16",
        lora_r=lora_r,
        **online(),
    )
    config = DecoupledConfig(max_steps=1, **options)
    precision = compute_precision(config)
    for group in sample(base, config, 0, precision=precision, seed=3):
        spool_group(spool, group)
    source, publisher = SpoolSource(spool), FilePublisher(workdir / f"dec-{lora_r}-versions")
    first = train_decoupled(config, source, publisher)
    row = first.metrics_history[0]
    assert math.isfinite(row["loss"])
    assert row["importance_weight_min"] == row["importance_weight_max"] == 1.0
    check_checkpoint(first.checkpoint_dir, config)

    # version 1 (the checkpoint) sampled by a sampler and trained on at version 1
    version, path = publisher.latest()
    assert version == 1
    for group in sample(path, config, 1, precision=precision, seed=4):
        spool_group(spool, group)
    second = train_decoupled(DecoupledConfig(max_steps=2, **options), source, publisher)
    row = second.metrics_history[-1]
    assert row["version"] == 1 and math.isfinite(row["loss"])
    if lora_r == 0:  # fp32 weights saved and autocast as the trainer does: the same numbers
        assert row["importance_weight_min"] == row["importance_weight_max"] == 1.0
    else:  # the merged bf16 model is not the base plus fp32 adapters: close to 1, capped
        assert 0.5 < row["importance_weight_min"] <= row["importance_weight_max"] <= 2.0


def test_a_sampler_in_fp32_does_not_match_a_bf16_trainer(base, workdir):
    """Why samplers load a run's versions in its precision: fp32 log-probs of the same weights
    are not the bf16 trainer's, so on-policy weights would not be 1."""
    options = dict(model_dir=base, output_dir=str(workdir / "mismatch"), batch_size=4)
    config = DecoupledConfig(
        max_steps=1, device="cpu", seed=1, dtype="bf16", wait_seconds=30.0, **options, **online()
    )
    spool = workdir / "mismatch-spool"
    for group in sample(base, config, 0, precision="fp32", seed=3):
        spool_group(spool, Group.from_dict(group.to_dict()))
    result = train_decoupled(config, SpoolSource(spool), FilePublisher(workdir / "mismatch-v"))
    row = result.metrics_history[0]
    assert row["importance_weight_min"] < 1.0 < row["importance_weight_max"]


def test_a_policy_refuses_an_unknown_precision(base):
    with pytest.raises(ConfigError, match="precision 'fp16' is not one of"):
        LocalHFPolicy(base, precision="fp16")


@pytest.mark.parametrize("version", ["1", "2"])
def test_fsdp_on_the_cpu_is_refused_with_what_to_do(version, base, monkeypatch):
    """accelerate 1.x shards only on GPUs: on the CPU FSDP 1 cannot start and FSDP 2 would train
    with DDP without a word; both are refused, naming the way out."""
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    monkeypatch.setenv("FSDP_VERSION", version)
    config = sft.SFTConfig(model_dir=base, output_dir="o", dataset="d", device="cpu")
    with pytest.raises(ConfigError, match="shards models only on GPUs.*without --use_fsdp"):
        make_accelerator(config)
    monkeypatch.delenv("ACCELERATE_USE_FSDP")
    assert make_accelerator(config).distributed_type.value == "NO"


def test_compute_precision_names_how_a_run_computes(base, data):
    """``compute_precision`` names how a run computes, in the local policy's terms."""
    names = {
        (dtype, lora): compute_precision(
            config_for("sft", base, data, "o", dtype=dtype, lora_r=lora)
        )
        for dtype in ("fp32", "bf16")
        for lora in (0, 4)
    }
    assert names == {
        ("fp32", 0): "fp32",
        ("fp32", 4): "fp32",
        ("bf16", 0): "bf16-mixed",
        ("bf16", 4): "bf16",
    }
