"""FSDP with two CPU processes: accelerate's FSDP 2 path (``fsdp_on_cpu.py`` lets accelerate take
it on the CPU, see there) trains SFT with the losses, weights and lineage of one process; its
checkpoints hold the full model (loadable by the local policy, each weight once) and the full
optimizer state, so a run resumes exactly from them under FSDP and in one process; online GRPO
samples in lockstep when one process's episodes end turns before the other's (without it every
later forward pass of the other process waits forever); the decoupled trainer matches one
process; bf16 runs and saves fp32 weights; LoRA is refused (its checkpoints merge the adapters
into a whole model, which a sharded run does not have)."""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from trainer_core.policies import chat_format as cf  # noqa: E402
from trainer_core.policies.local_hf import LocalHFPolicy  # noqa: E402
from trainer_core.tasks.suites.arithmetic import arithmetic_tasks  # noqa: E402
from trainer_core.training import tiny  # noqa: E402
from trainer_core.training.decoupled import DecoupledConfig, train_decoupled  # noqa: E402
from trainer_core.training.episodes import rollout_groups  # noqa: E402
from trainer_core.training.lineage import read_lineage  # noqa: E402
from trainer_core.training.modelling import load_model_and_tokenizer  # noqa: E402
from trainer_core.training.sft import SFTConfig, train  # noqa: E402
from trainer_core.training.spool import FilePublisher, SpoolSource, spool_group  # noqa: E402

torch.set_num_threads(1)

ACCELERATE = Path(sys.executable).with_name("accelerate")
ROOT = Path(__file__).resolve().parents[3]


def launch(jobs_file: Path, cwd: Path) -> subprocess.Popen:
    """``accelerate launch`` of ``fsdp_on_cpu.py`` with FSDP 2 in two processes."""
    command = [
        str(ACCELERATE) if ACCELERATE.exists() else "accelerate",
        "launch",
        "--use_fsdp",
        "--fsdp_version",
        "2",
        "--fsdp_auto_wrap_policy",
        "TRANSFORMER_BASED_WRAP",
        "--fsdp_state_dict_type",
        "FULL_STATE_DICT",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        "0",
        str(Path(__file__).with_name("fsdp_on_cpu.py")),
        str(jobs_file),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
        start_new_session=True,  # its own process group: a hung launch is killed whole
    )


def finish(launched: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """The launch's output; a launch still running after ``timeout`` seconds (processes waiting
    for each other's collectives) is killed with its processes and fails the test."""
    try:
        return launched.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(launched.pid, signal.SIGKILL)
        out, err = launched.communicate()
        pytest.fail(f"the FSDP processes did not finish in {timeout:g} s: {err[-3000:]}")


def weights(checkpoint: str | Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(Path(checkpoint) / "model.safetensors"))


def assert_same_weights(a: dict, b: dict, atol: float) -> None:
    assert a.keys() == b.keys()  # a tied weight is saved once, as one process saves it
    for name, value in a.items():
        assert torch.allclose(value, b[name], atol=atol), name


def decoupled_spools(model_dir: str, tmp: Path) -> tuple[Path, Path]:
    """Two identical spools of 4 groups sampled by the start model (version 0), rewards 1 and 0."""
    model, tokenizer = load_model_and_tokenizer(model_dir, device="cpu")
    config = DecoupledConfig(**decoupled_options(model_dir, tmp / "unused"))
    groups = rollout_groups(
        model, tokenizer, arithmetic_tasks("train", n=4), config, seed=3, record_behaviour=True
    )
    spools = (tmp / "spool-two", tmp / "spool-one")
    for group in groups:
        group.version = 0
        for c, reward in zip(group.completions, (1.0, 0.0), strict=True):
            c.reward = reward
        for spool in spools:
            spool_group(spool, group)
    return spools


def decoupled_options(model_dir: str, out: Path) -> dict:
    return dict(
        model_dir=model_dir,
        output_dir=str(out),
        env_id="steplab/arithmetic",
        group_size=2,
        batch_size=2,
        max_steps=2,
        max_staleness=1,
        learning_rate=1e-3,
        temperature=0.7,
        max_new_tokens=12,
        max_episode_steps=2,
        system_prompt=False,
        device="cpu",
        seed=1,
        wait_seconds=30.0,
    )


def lockstep_tasks(path: Path) -> Path:
    """Two tasks, one per process: at max_length 200 the long prompt leaves room for one turn,
    the short one for two, so one process's episodes end a turn before the other's."""
    first, second = arithmetic_tasks("train", n=2)
    long = first.model_copy(update={"id": "long", "prompt": first.prompt + " Take care." * 12})
    short = second.model_copy(update={"id": "short"})
    path.write_text(long.model_dump_json() + "\n" + short.model_dump_json() + "\n")
    return path


def sft_options(tmp: Path, model_dir: str) -> dict:
    data = tmp / "train.jsonl"
    with data.open("w") as fh:
        for t in tiny.reference_trajectories("train", 8):
            fh.write(json.dumps({"messages": cf.trajectory_to_messages(t, system="Calc.")}) + "\n")
    return dict(
        model_dir=model_dir,
        dataset=str(data),
        max_steps=2,
        batch_size=4,
        grad_accum=2,  # micro-batches without gradient reduction, then with
        learning_rate=1e-2,
        save_every=1,
        device="cpu",
        seed=3,
    )


def grpo_options(tmp: Path, model_dir: str) -> dict:
    return dict(
        model_dir=model_dir,
        output_dir=str(tmp / "grpo"),
        env_id="steplab/arithmetic",
        tasks=str(lockstep_tasks(tmp / "tasks.jsonl")),
        num_tasks=0,
        group_size=2,
        batch_size=2,
        max_steps=2,
        temperature=0.7,
        max_new_tokens=12,
        max_episode_steps=3,
        max_length=200,
        system_prompt=False,
        device="cpu",
        seed=1,
    )


def fsdp_jobs(tmp: Path, model_dir: str, sft: dict, spool: Path) -> list[dict]:
    """What the two FSDP processes run, in order."""
    return [
        {"name": "sft", "kind": "sft", "config": {**sft, "output_dir": str(tmp / "two")}},
        {
            "name": "resumed",
            "kind": "sft",
            "config": {
                **sft,
                "output_dir": str(tmp / "two-resumed"),
                "resume_from": str(tmp / "two" / "checkpoint-1"),
            },
        },
        {"name": "grpo", "kind": "grpo", "config": grpo_options(tmp, model_dir)},
        {
            "name": "decoupled",
            "kind": "decoupled",
            "config": decoupled_options(model_dir, tmp / "decoupled-two"),
            "spool": str(spool),
            "versions": str(tmp / "versions-two"),
        },
        {
            "name": "bf16",
            "kind": "sft",
            "config": {**sft, "output_dir": str(tmp / "bf16"), "dtype": "bf16"},
        },
        {"name": "lora", "kind": "sft", "config": {**sft, "output_dir": "lora", "lora_r": 4}},
    ]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """The jobs of :func:`fsdp_jobs` in two FSDP processes and, meanwhile, SFT and the decoupled
    trainer in this one."""
    if not ACCELERATE.exists() and not shutil.which("accelerate"):
        pytest.skip("the accelerate command is not installed")
    tmp = tmp_path_factory.mktemp("fsdp")
    model_dir = str(tiny.build_tiny_model(tmp / "model", hidden_size=32, num_layers=2))
    sft = sft_options(tmp, model_dir)
    spool_two, spool_one = decoupled_spools(model_dir, tmp)
    (tmp / "jobs.json").write_text(json.dumps(fsdp_jobs(tmp, model_dir, sft, spool_two)))
    launched = launch(tmp / "jobs.json", tmp)
    one = train(SFTConfig(**sft, output_dir=str(tmp / "one")))
    decoupled_one = train_decoupled(
        DecoupledConfig(**decoupled_options(model_dir, tmp / "decoupled-one")),
        SpoolSource(spool_one),
        FilePublisher(tmp / "versions-one"),
    )
    out, err = finish(launched, timeout=240)
    assert launched.returncode == 0, err[-3000:]
    lines = {line["name"]: line for line in map(json.loads, out.strip().splitlines())}
    return {
        "tmp": tmp,
        "sft_options": sft,
        "one": one,
        "decoupled_one": decoupled_one,
        "lora_error": lines.pop("lora")["error"],
        **{name: line["result"] for name, line in lines.items()},
    }


@pytest.mark.slow
def test_sft_in_two_fsdp_processes_matches_one(runs):
    one, two = runs["one"], runs["sft"]
    assert [m["step"] for m in two["metrics_history"]] == [1, 2]
    for a, b in zip(one.metrics_history, two["metrics_history"], strict=True):
        assert b["loss"] == pytest.approx(a["loss"], abs=1e-5), (a, b)
        assert b["grad_norm"] == pytest.approx(a["grad_norm"], abs=1e-4), (a, b)
        assert b["tokens"] == a["tokens"]
    assert_same_weights(weights(one.checkpoint_dir), weights(two["checkpoint_dir"]), atol=1e-5)
    assert read_lineage(runs["tmp"] / "two") == read_lineage(runs["tmp"] / "one")
    state = json.loads((Path(two["checkpoint_dir"]) / "trainer_state.json").read_text())
    assert state["world_size"] == 2
    # the checkpoint is a whole model the local policy loads
    policy = LocalHFPolicy(two["checkpoint_dir"], device="cpu", temperature=0.0, max_new_tokens=3)
    assert len(policy.generate_ids([[1, 2, 3]])[0].token_ids) >= 1


@pytest.mark.slow
def test_an_fsdp_checkpoint_resumes_exactly_under_fsdp_and_in_one_process(runs):
    two, resumed, tmp = runs["sft"], runs["resumed"], runs["tmp"]
    assert [m["step"] for m in resumed["metrics_history"]] == [2]
    assert resumed["final_loss"] == pytest.approx(two["final_loss"], abs=1e-6)
    assert_same_weights(
        weights(two["checkpoint_dir"]), weights(resumed["checkpoint_dir"]), atol=1e-6
    )
    # in one process: the optimizer state is keyed by parameter name, loaded all the same
    single = train(
        SFTConfig(
            **runs["sft_options"],
            output_dir=str(tmp / "one-from-two"),
            resume_from=str(tmp / "two" / "checkpoint-1"),
        )
    )
    assert single.final_loss == pytest.approx(runs["one"].final_loss, abs=1e-5)
    assert_same_weights(
        weights(runs["one"].checkpoint_dir), weights(single.checkpoint_dir), atol=1e-5
    )


@pytest.mark.slow
def test_online_grpo_processes_sample_in_lockstep(runs):
    """One process's episodes end a turn before the other's; it keeps taking part in the other's
    forward passes (without that, the other waits for it forever)."""
    online = runs["grpo"]
    assert online["steps"] == 2
    assert all(math.isfinite(m["loss"]) for m in online["metrics_history"])
    assert [len(e["consumed"]) for e in read_lineage(runs["tmp"] / "grpo")] == [2, 2]


@pytest.mark.slow
def test_the_decoupled_trainer_under_fsdp_matches_one_process(runs):
    decoupled = runs["decoupled"]
    for a, b in zip(
        runs["decoupled_one"].metrics_history, decoupled["metrics_history"], strict=True
    ):
        assert b["loss"] == pytest.approx(a["loss"], abs=1e-5), (a, b)
        assert b["importance_weight_max"] == pytest.approx(a["importance_weight_max"], abs=1e-5)
    assert decoupled["metrics_history"][0]["importance_weight_min"] == 1.0
    versions = FilePublisher(runs["tmp"] / "versions-two").versions()
    assert [v["version"] for v in versions] == [0, 1, 2]


@pytest.mark.slow
def test_bf16_under_fsdp_saves_fp32_weights_and_lora_is_refused(runs):
    bf16 = runs["bf16"]
    assert all(math.isfinite(m["loss"]) for m in bf16["metrics_history"])
    assert {v.dtype for v in weights(bf16["checkpoint_dir"]).values()} == {torch.float32}
    assert "LoRA under FSDP is not supported" in runs["lora_error"]
