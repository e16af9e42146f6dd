"""The first proof of learning: SFT of a tiny model on tool arithmetic, judged on held-out tasks.

Reference episodes of the ``steplab/arithmetic`` train split (operands 2-49), played by the
scripted policy, are rendered in the chat format with a short system prompt and used to train a
~1.1M-parameter Llama built on the spot (random weights, tokenizer trained here) with the SFT
trainer. Greedy decoding on the held-out split (other seeds, operands 50-99) then gives:

- exact actions: at each step of a held-out reference episode, with the reference history before
  it, the generated tool call equals the reference's (tool and arguments);
- success: whole episodes played in the environment end with the right answer.

    OMP_NUM_THREADS=1 python bench/learnability.py [--steps 450] [--train-episodes 3600]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=450)
    parser.add_argument("--train-episodes", type=int, default=3600)
    parser.add_argument("--eval-episodes", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--learning-rate", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    started = time.perf_counter()
    import torch

    torch.set_num_threads(args.threads)
    from trainer_core.training.tiny import learnability

    def progress(event):
        if event.step and event.step % 50 == 0:
            print(f"  {event.message}  ({time.perf_counter() - started:.0f} s)", flush=True)

    with tempfile.TemporaryDirectory() as workdir:
        r = learnability(
            workdir,
            train_episodes=args.train_episodes,
            eval_episodes=args.eval_episodes,
            max_steps=args.steps,
            batch_size=args.batch_size,
            learning_rate=args.learning_rate,
            seed=args.seed,
            on_progress=progress,
        )
    total = time.perf_counter() - started
    b, a = r["before"], r["after"]
    print()
    print(f"model: {r['parameters']:,} parameters (tiny Llama, random init, tokenizer built here)")
    print(
        f"SFT: {r['train_episodes']} train-split reference episodes, {r['steps']} steps "
        f"x {args.batch_size} sequences, final loss {r['final_loss']:.4f}"
    )
    print(f"held-out: {a['actions']} actions in {a['episodes']} episodes (operands 50-99)")
    print(f"{'':24}{'before':>10}{'after':>10}")
    print(f"{'exact actions':24}{b['exact_actions']:>10.1%}{a['exact_actions']:>10.1%}")
    for tool in a["by_tool"]:
        label = f"  {tool} calls"
        print(f"{label:24}{b['by_tool'][tool]:>10.1%}{a['by_tool'][tool]:>10.1%}")
    print(f"{'episode success':24}{b['success']:>10.1%}{a['success']:>10.1%}")
    print(
        f"time: {total:.0f} s in all (setup and evaluation before {r['setup_seconds']:.0f} s, "
        f"training {r['train_seconds']:.0f} s), {args.threads} thread(s)"
    )


if __name__ == "__main__":
    main()
