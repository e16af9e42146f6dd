"""Multi-process SFT: ``accelerate launch --multi_gpu --num_processes 2`` on a machine without a GPU
(two processes joined by gloo DDP on the CPU) runs two SFT steps whose losses, weights and
lineage (both processes' examples) match the single-process run of the same config.

``accelerate launch --cpu --num_processes 2`` would start ONE process: accelerate 1.x starts several
CPU processes only through mpirun (``--mpirun_hostfile``; accelerate issue #2741). ``--multi_gpu``
starts them with torch.distributed.run, and the trainer's Accelerator(cpu=True) joins them with
gloo (see docs/training.md)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from trainer_core.policies import chat_format as cf  # noqa: E402
from trainer_core.training import tiny  # noqa: E402
from trainer_core.training.checkpoint import find_checkpoint  # noqa: E402
from trainer_core.training.config import config_to_yaml  # noqa: E402
from trainer_core.training.lineage import read_lineage  # noqa: E402
from trainer_core.training.sft import SFTConfig, train  # noqa: E402

torch.set_num_threads(1)

ACCELERATE = Path(sys.executable).with_name("accelerate")


@pytest.mark.slow
@pytest.mark.skipif(
    not ACCELERATE.exists() and not shutil.which("accelerate"),
    reason="the accelerate command is not installed",
)
def test_two_processes_under_accelerate_launch_match_one(tmp_path):
    model_dir = tiny.build_tiny_model(tmp_path / "model", hidden_size=32, num_layers=2)
    data = tmp_path / "train.jsonl"
    with data.open("w") as fh:
        for t in tiny.reference_trajectories("train", 8):
            fh.write(json.dumps({"messages": cf.trajectory_to_messages(t, system="Calc.")}) + "\n")
    config = SFTConfig(
        model_dir=str(model_dir),
        output_dir=str(tmp_path / "one"),
        dataset=str(data),
        max_steps=2,
        batch_size=4,
        grad_accum=2,  # micro-batches without gradient sync (no_sync), then with
        learning_rate=1e-2,
        device="cpu",
        seed=3,
    )
    (tmp_path / "run.yaml").write_text(config_to_yaml(config))

    command = [
        str(ACCELERATE) if ACCELERATE.exists() else "accelerate",
        "launch",
        "--multi_gpu",
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
        "-m",
        "trainer_core.training.sft",
        str(tmp_path / "run.yaml"),
        f"output_dir={tmp_path / 'two'}",
    ]
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "PYTHONPATH": str(Path(__file__).resolve().parents[3]),
    }
    launched = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path
    )
    one = train(config)  # the single-process run, while the two processes start
    out, err = launched.communicate(timeout=120)
    assert launched.returncode == 0, err[-3000:]
    two = json.loads(out.strip().splitlines()[-1])

    assert [m["step"] for m in two["metrics_history"]] == [1, 2]
    for a, b in zip(one.metrics_history, two["metrics_history"], strict=True):
        assert b["loss"] == pytest.approx(a["loss"], abs=1e-5), (a, b)
        assert b["tokens"] == a["tokens"]
    from safetensors.torch import load_file

    weights_one = load_file(str(find_checkpoint(tmp_path / "one") / "model.safetensors"))
    weights_two = load_file(str(find_checkpoint(tmp_path / "two") / "model.safetensors"))
    assert weights_one.keys() == weights_two.keys()
    for name, value in weights_one.items():
        assert torch.allclose(value, weights_two[name], atol=1e-5), name
    state = json.loads((find_checkpoint(tmp_path / "two") / "trainer_state.json").read_text())
    assert state["world_size"] == 2
    assert (find_checkpoint(tmp_path / "two") / "rng_state_1.pt").is_file()
    # the lineage lists both processes' examples (2 of each micro-batch's 4), in the one-process order
    lineage = read_lineage(tmp_path / "two")
    assert lineage == read_lineage(tmp_path / "one")
    assert [e["step"] for e in lineage] == [1, 2]
    assert all(len(e["consumed"]) == 8 for e in lineage)
