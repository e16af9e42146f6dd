"""Training throughput of Steplab's trainers against TRL's, on the same tiny model and data.

    OMP_NUM_THREADS=1 .venv/bin/python bench/train_throughput.py [--rounds 3] [--threads 1]

1. SFT tokens/s: ``trainer_core.training.sft.train`` and ``trl.SFTTrainer`` (with
   ``assistant_only_loss=True``, so both train on the same tokens) fine-tune the same tiny Llama
   (built here with ``trainer_core.training.tiny``, ~1M parameters, nothing downloaded) on the
   same rows — reference episodes of the ``steplab/arithmetic`` train split as conversational
   ``messages`` with the tools' system prompt — with the same batch size, steps, learning rate,
   fp32 on the CPU and the same torch thread count (TRL's ``bf16=True`` and
   ``gradient_checkpointing=True`` defaults are turned off: CPU bf16 autocast ran ~7x slower
   here, and ours recomputes nothing). Runs alternate (ours, TRL, ours, TRL...).
   Throughput is the non-padding tokens of steps 2..N over the time from the end of step 1 to the
   end of step N (set-up, tokenization and checkpoint writing excluded, for both); the table shows
   each run and the median, and the ratio ours / TRL.
2. GRPO seconds per step: ``trainer_core.training.grpo.train`` online in ``steplab/arithmetic``
   and ``trl.GRPOTrainer`` on the same prompts, the same group size, batch, completion length,
   temperature and learning rate, one turn per episode (TRL's trainer samples one completion per
   prompt; its reward function here parses the completion with our chat format and checks it
   with the arithmetic environment, the same reward ours gets). TRL generates with
   ``model.generate`` (``use_vllm=False``, the default); no vLLM and no hub download; fp32, no
   gradient checkpointing, ``beta=0``, as ours. Median seconds per step of steps 2..N,
   alternating runs.
3. Tokens forwarded for multi-turn trajectories: one sequence per trajectory with every
   assistant turn supervised (ours) against one sample per assistant turn (the prefix up to and
   with that turn), for the arithmetic reference episodes (2 turns) and for synthetic episodes of
   4 and 8 calculator turns, with the system prompt; counted with the tiny model's tokenizer, and
   timed for one forward + backward pass over the whole set each way.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TQDM_DISABLE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def sft_rows(n: int) -> list[dict]:
    from trainer_core.policies import chat_format
    from trainer_core.training.tiny import arithmetic_tools, reference_trajectories

    system = chat_format.system_prompt(arithmetic_tools())
    return [
        {"messages": chat_format.trajectory_to_messages(t, system=system)}
        for t in reference_trajectories("train", n)
    ]


# --------------------------------------------------------------------------- SFT


def ours_sft(model_dir: Path, data: Path, out: Path, steps: int, batch: int) -> tuple[float, int]:
    from trainer_core.training import sft

    result = sft.train(
        sft.SFTConfig(
            model_dir=str(model_dir),
            output_dir=str(out),
            dataset=str(data),
            max_steps=steps,
            batch_size=batch,
            learning_rate=1e-3,
            lr_schedule="constant",
            max_length=1024,
            device="cpu",
        )
    )
    timed = result.metrics_history[1:]  # steps 2..N
    seconds = sum(h["tokens"] / h["tokens_per_second"] for h in timed)
    return sum(h["tokens"] for h in timed) / seconds, steps


def trl_sft(model_dir: Path, rows: list, out: Path, steps: int, batch: int) -> tuple[float, int]:
    import transformers
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    marks: list[float] = []

    class Clock(transformers.TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            marks.append(time.perf_counter())

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    trainer = SFTTrainer(
        model=model,
        processing_class=tokenizer,
        train_dataset=Dataset.from_list(rows),
        args=SFTConfig(
            output_dir=str(out),
            assistant_only_loss=True,
            max_length=1024,
            per_device_train_batch_size=batch,
            max_steps=steps,
            learning_rate=1e-3,
            lr_scheduler_type="constant",
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            use_cpu=True,
            bf16=False,  # TRL's default is bf16 autocast; ours trains in fp32 here
            gradient_checkpointing=False,  # TRL's default recomputes activations; ours does not
            dataloader_num_workers=0,
            seed=0,
        ),
        callbacks=[Clock()],
    )
    trainer.train()
    tokens = [h["num_tokens"] for h in trainer.state.log_history if "num_tokens" in h]
    return (tokens[-1] - tokens[0]) / (marks[-1] - marks[0]), steps


# --------------------------------------------------------------------------- GRPO


def arithmetic_reward(prompts, completions, task_index, **kwargs) -> list[float]:
    """TRL reward function: the completion's action played in steplab/arithmetic."""
    from trainer_core.envs.registry import make
    from trainer_core.policies import chat_format
    from trainer_core.policies.base import Decision, play_step
    from trainer_core.tasks.suites.arithmetic import arithmetic_tasks

    tasks = arithmetic_tasks("train", n=max(task_index) + 1)
    out = []
    for completion, index in zip(completions, task_index, strict=True):
        text = completion[0]["content"] if isinstance(completion, list) else completion
        parsed = chat_format.parse_assistant(text)
        action = parsed if isinstance(parsed, dict) else None
        with make("steplab/arithmetic") as env:
            env.reset(task=tasks[index])
            step = play_step(env, Decision(action=action, error=None if action else str(parsed)))
        out.append(float(step.reward))
    return out


GRPO = dict(group=8, prompts=2, new_tokens=48, temperature=1.0, lr=1e-4)


def ours_grpo(model_dir: Path, out: Path, steps: int) -> list[float]:
    from trainer_core.training import grpo

    result = grpo.train(
        grpo.GRPOConfig(
            model_dir=str(model_dir),
            output_dir=str(out),
            env_id="steplab/arithmetic",
            num_tasks=64,
            group_size=GRPO["group"],
            batch_size=GRPO["prompts"],
            max_new_tokens=GRPO["new_tokens"],
            temperature=GRPO["temperature"],
            learning_rate=GRPO["lr"],
            max_episode_steps=1,
            max_length=1024,
            max_steps=steps,
            device="cpu",
        )
    )
    return [h["seconds"] for h in result.metrics_history[1:]]


def trl_grpo(model_dir: Path, out: Path, steps: int) -> list[float]:
    import transformers
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from trainer_core.policies import chat_format
    from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
    from trainer_core.training.tiny import arithmetic_tools

    system = chat_format.system_prompt(arithmetic_tools())
    rows = [
        {
            "prompt": [
                {"role": "system", "content": system},
                {"role": "user", "content": t.prompt},
            ],
            "task_index": i,
        }
        for i, t in enumerate(arithmetic_tasks("train", n=64))
    ]
    marks: list[float] = []

    class Clock(transformers.TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            marks.append(time.perf_counter())

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=arithmetic_reward,
        processing_class=tokenizer,
        train_dataset=Dataset.from_list(rows),
        args=GRPOConfig(
            output_dir=str(out),
            num_generations=GRPO["group"],
            per_device_train_batch_size=GRPO["group"] * GRPO["prompts"],
            max_completion_length=GRPO["new_tokens"],
            temperature=GRPO["temperature"],
            learning_rate=GRPO["lr"],
            max_steps=steps,
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            use_cpu=True,
            bf16=False,
            gradient_checkpointing=False,
            beta=0.0,
            seed=0,
        ),
        callbacks=[Clock()],
    )
    trainer.train()
    return [b - a for a, b in zip(marks, marks[1:], strict=False)]


# --------------------------------------------------------------------------- tokens forwarded


def synthetic_episode(task, turns: int) -> list[dict]:
    """``turns - 1`` calculator calls on the task's expression, then the submit."""
    from trainer_core.envs.arithmetic import evaluate
    from trainer_core.policies import chat_format
    from trainer_core.policies.base import Turn

    expression = task.metadata["expression"]
    value = evaluate(expression)
    history = [
        Turn(
            action={
                "tool": "calculator",
                "params": {"expression": expression},
                "thought": "Check.",
            },
            observation=f"{expression} = {value}",
        )
        for _ in range(turns - 1)
    ]
    history.append(
        Turn(
            action={"tool": "submit", "params": {"answer": str(value)}, "thought": ""},
            observation="ok",
        )
    )
    return chat_format.to_messages(prompt=task.prompt, history=history, system=SYSTEM[0])


SYSTEM: list[str] = [""]


def forwarded(model_dir: Path, n: int) -> list[tuple]:
    import torch

    from trainer_core.policies import chat_format
    from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
    from trainer_core.training.data import collate, encode_messages
    from trainer_core.training.modelling import load_model_and_tokenizer
    from trainer_core.training.tiny import arithmetic_tools

    SYSTEM[0] = chat_format.system_prompt(arithmetic_tools())
    model, tokenizer = load_model_and_tokenizer(model_dir, device="cpu")
    tasks = arithmetic_tasks("train", n=n)
    rows = []
    for turns in (2, 4, 8):
        conversations = [synthetic_episode(t, turns) for t in tasks]
        whole = [encode_messages(m, tokenizer, max_length=4096) for m in conversations]
        per_turn = []
        for m in conversations:
            for i, message in enumerate(m):
                if message["role"] == "assistant":
                    e = encode_messages(m[: i + 1], tokenizer, max_length=4096)
                    # only this turn carries loss: the earlier turns are context
                    last = max(e.step_ids)
                    e.labels = [
                        t if s == last else -100 for t, s in zip(e.labels, e.step_ids, strict=True)
                    ]
                    per_turn.append(e)
        times = []
        for batch_set in (whole, per_turn):
            started = time.perf_counter()
            for first in range(0, len(batch_set), 8):
                batch = collate(batch_set[first : first + 8], tokenizer.pad_token_id)
                out = model(
                    input_ids=batch["input_ids"],
                    attention_mask=batch["attention_mask"],
                    labels=batch["labels"],
                )
                out.loss.backward()
            model.zero_grad(set_to_none=True)
            times.append(time.perf_counter() - started)
        supervised_whole = sum(e.num_label_tokens for e in whole)
        supervised_turns = sum(e.num_label_tokens for e in per_turn)
        assert supervised_whole == supervised_turns, (supervised_whole, supervised_turns)
        rows.append(
            (
                turns,
                len(whole),
                sum(len(e) for e in whole),
                len(per_turn),
                sum(len(e) for e in per_turn),
                supervised_whole,
                times[0],
                times[1],
            )
        )
        torch.manual_seed(0)
    return rows


# --------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternating runs of each trainer")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (both trainers)")
    parser.add_argument("--sft-steps", type=int, default=20)
    parser.add_argument("--sft-batch", type=int, default=8)
    parser.add_argument("--grpo-steps", type=int, default=6)
    parser.add_argument("--episodes", type=int, default=64, help="SFT rows / trajectories")
    parser.add_argument("--skip", nargs="*", default=[], choices=["sft", "grpo", "tokens"])
    args = parser.parse_args()

    import torch
    import transformers
    import trl

    from trainer_core.training.tiny import build_tiny_model, count_parameters

    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()
    work = Path(tempfile.mkdtemp(prefix="steplab-bench-train-"))
    model_dir = build_tiny_model(work / "model")
    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir)
    print(
        f"tiny Llama: {count_parameters(model) / 1e6:.2f}M parameters; torch {torch.__version__}, "
        f"transformers {transformers.__version__}, trl {trl.__version__}; "
        f"{args.threads} thread(s), CPU"
    )
    del model

    if "sft" not in args.skip:
        rows = sft_rows(args.episodes)
        data = work / "sft.jsonl"
        data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        ours, theirs = [], []
        for r in range(args.rounds):
            ours.append(
                ours_sft(model_dir, data, work / f"ours-{r}", args.sft_steps, args.sft_batch)[0]
            )
            theirs.append(
                trl_sft(model_dir, rows, work / f"trl-{r}", args.sft_steps, args.sft_batch)[0]
            )
        a, b = statistics.median(ours), statistics.median(theirs)
        print(f"\nSFT tokens/s ({args.sft_steps} steps x {args.sft_batch} episodes, steps 2..N)")
        print("  ours: " + ", ".join(f"{x:,.0f}" for x in ours) + f"  median {a:,.0f}")
        print("  TRL:  " + ", ".join(f"{x:,.0f}" for x in theirs) + f"  median {b:,.0f}")
        print(f"  ratio ours / TRL: {a / b:.2f}")

    if "grpo" not in args.skip:
        ours, theirs = [], []
        for r in range(args.rounds):
            ours += ours_grpo(model_dir, work / f"grpo-ours-{r}", args.grpo_steps)
            theirs += trl_grpo(model_dir, work / f"grpo-trl-{r}", args.grpo_steps)
        a, b = statistics.median(ours), statistics.median(theirs)
        print(
            f"\nGRPO seconds per step ({GRPO['prompts']} prompts x {GRPO['group']} completions, "
            f"<= {GRPO['new_tokens']} new tokens, one turn; steps 2..N of {args.rounds} runs)"
        )
        print(f"  ours: median {a:.2f} s  (min {min(ours):.2f}, max {max(ours):.2f})")
        print(f"  TRL:  median {b:.2f} s  (min {min(theirs):.2f}, max {max(theirs):.2f})")
        print(f"  ratio TRL / ours (speed-up): {b / a:.2f}")

    if "tokens" not in args.skip:
        print("\nTokens forwarded per epoch: one sequence per trajectory vs one sample per turn")
        print(
            f"  {'turns':>5} {'trajs':>5} {'tokens (one seq)':>16} {'samples':>7} "
            f"{'tokens (per turn)':>17} {'x':>5} {'supervised':>10} {'fwd+bwd s':>15}"
        )
        for turns, n, whole, samples, per_turn, supervised, t1, t2 in forwarded(
            model_dir, min(args.episodes, 32)
        ):
            print(
                f"  {turns:>5} {n:>5} {whole:>16,} {samples:>7} {per_turn:>17,} "
                f"{per_turn / whole:>5.2f} {supervised:>10,} {t1:>6.2f} vs {t2:>6.2f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
