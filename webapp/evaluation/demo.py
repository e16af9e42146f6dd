"""``steplab demo``: the whole loop on tool arithmetic, through the app's jobs and database.

It builds a tiny model locally (random weights, a tokenizer trained on the spot — nothing is
downloaded), registers it as a local-model policy, loads a train task set (the ``train_wide`` split: operands
2-49 or 100-499) and a held-out one (the ``heldout`` split: other seeds, operands 50-99 — values
never seen in training, made of digit pairs that were), and launches a pipeline:

- baseline: the untrained model on the held-out tasks;
- iteration 1: collect reference trajectories (the scripted policy) → score → SFT dataset of the
  successful ones → SFT → register → evaluate;
- iteration 2: collect G samples per task from the SFT policy at temperature 1 → score → GRPO
  groups → GRPO from the SFT checkpoint → register → evaluate.

Every evaluation plays the same held-out tasks with the same seeds, so the pipeline page and
the held-out leaderboard compare base → SFT → GRPO with paired tests.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.conf import settings

from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
from trainer_core.training.tiny import build_tiny_model
from webapp.common.errors import ApplicationError
from webapp.evaluation.services import pipeline_launch
from webapp.rewards.selectors import latest_version
from webapp.rewards.services import reward_model_create, rubrics_seed
from webapp.rollouts.models import Policy
from webapp.rollouts.services import policies_seed_builtin
from webapp.tasks.selectors import task_set_find
from webapp.tasks.services import task_set_import

DEFAULT_PIPELINE_YAML = """\
baseline: true
seed: 0
evaluate:
  samples_per_task: 1
  max_steps: 3
  concurrency: 2
  seed: 0
iterations:
- collect:
    policy: scripted
    episodes_per_task: 1
    max_steps: 4
  dataset:
    kind: sft
    outcome: success
  train:
    method: sft
    values:
      max_steps: 900
      batch_size: 8
      learning_rate: 0.002
      adam_beta2: 0.95
      warmup_steps: 20
      lr_schedule: cosine
      max_length: 256
      log_every: 10
- collect:
    policy: current
    episodes_per_task: 4
    max_steps: 3
    temperature: 1.0
    num_tasks: 128
  dataset:
    kind: grpo
  train:
    method: grpo
    values:
      max_steps: 16
      batch_size: 8
      learning_rate: 0.00005
      beta: 0.0
      # GRPO's outcome estimator: on arithmetic the rule layer scores right and wrong steps
      # alike, so a process reward would add nothing here
      advantage: outcome
      max_length: 256
      log_every: 1
"""

TRAIN_TASKS = 3600
DEMO_SYSTEM = "Use the calculator, then submit the answer."
HELDOUT_TASKS = 100


def _tasks_jsonl(split: str, n: int, start: int | None = None) -> str:
    tasks = arithmetic_tasks(split, n=n, start=start)
    return "\n".join(t.model_dump_json(exclude_none=True) for t in tasks)


def _task_set(name: str, split: str, n: int, start: int | None = None):
    existing = task_set_find(name=name)
    if existing is not None and existing.tasks.count() == n:
        return existing
    if existing is not None:
        raise ApplicationError(
            f"Task set {name!r} exists with {existing.tasks.count()} tasks, not {n}; rename or "
            "delete it, or run the demo with the same sizes."
        )
    task_set, _ = task_set_import(
        text=_tasks_jsonl(split, n, start),
        name=name,
        fmt="jsonl",
        description=f"Tool arithmetic, {split} split, {n} tasks (steplab demo).",
    )
    return task_set


def demo_setup(
    *, train_tasks: int = TRAIN_TASKS, heldout_tasks: int = HELDOUT_TASKS, seed: int = 0
):
    """The demo's base policy, task sets and reward model (made once, reused after)."""
    policies_seed_builtin()  # the scripted policy plays the reference trajectories
    model_dir = Path(settings.STEPLAB_DATA_DIR) / "models" / f"tiny-arithmetic-seed{seed}"
    if not (model_dir / "config.json").exists():
        build_tiny_model(model_dir, seed=seed)
    policy, _ = Policy.objects.update_or_create(
        name=f"tiny-base-seed{seed}",
        defaults={
            "kind": "local",
            "model": str(model_dir),
            "parameters": {
                "model_dir": str(model_dir),
                "temperature": 0.0,
                "device": "cpu",
                "max_new_tokens": 64,  # a tool call is ~40 tokens; an untrained model babbles
                # a model trained on its two tools needs no tool listing: prompts ~4x shorter
                "system": DEMO_SYSTEM,
                "list_tools": False,
            },
            "description": "An untrained ~1M-parameter Llama built locally (steplab demo).",
        },
    )
    train = _task_set(f"arithmetic-demo-train-{train_tasks}", "train_wide", train_tasks)
    heldout = _task_set(f"arithmetic-demo-heldout-{heldout_tasks}", "heldout", heldout_tasks)
    rubrics_seed(domain="arithmetic")
    reward_model = latest_version(domain="arithmetic")
    if reward_model is None:
        reward_model = reward_model_create(domain="arithmetic", note="rules only (steplab demo)")
    return policy, train, heldout, reward_model


def demo_launch(*, name: str = "", config: Any = None, seed: int = 0, user=None, **sizes):
    policy, train, heldout, reward_model = demo_setup(seed=seed, **sizes)
    return pipeline_launch(
        name=name or f"demo-{time.strftime('%Y%m%d-%H%M%S')}",
        base_policy=policy,
        train_task_set=train,
        eval_task_set=heldout,
        reward_model=reward_model,
        config=config if config is not None else DEFAULT_PIPELINE_YAML,
        user=user,
    )
