"""``steplab demo``: the whole loop on the primary suite, through the app's jobs and database, at
several training seeds, reported as the learning protocol asks (``docs/evaluation.md``).

It builds one tiny model locally (random weights from the suite's ``model_seed``, a tokenizer
trained on the spot — nothing is downloaded): it stands for the pretrained checkpoint a user
fine-tunes, the same for every training seed, as in fine-tuning studies (a *training seed* fixes
the data order, the sampling and GRPO's groups, not the starting weights). It registers the model
as a local-model policy and launches one pipeline per training seed on the suite's *train*
split, evaluated on its *test* split (the same tasks for every seed and stage):

- baseline: the untrained model, evaluated once, in the last seed's pipeline (the first starts
  with the reference episodes at once): it is one policy decoding greedily, so every seed's
  evaluation of it would play the same episodes;
- iteration 1: collect reference trajectories of a small number of train tasks (the scripted
  policy) → score → SFT dataset → SFT → register → evaluate;
- iteration 2: collect G samples per train task from the SFT policy at temperature 1 → score
  with the rule layer (no oracle) → GRPO groups → GRPO from the SFT checkpoint → register →
  evaluate.

The recipe of each suite (:data:`SUITES`: data sizes, steps, learning rates, estimator) was
chosen on the *validation* split only — ``steplab demo --split validation`` re-runs that
choice — and the test split is what the demo reports: per seed and pooled, Wilson intervals,
and exact McNemar tests pooled over (seed, task) pairs, Holm-corrected
(:mod:`trainer_core.evaluation.protocol`).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings

from trainer_core.evaluation.protocol import ProtocolReport, protocol_report
from trainer_core.tasks.model import Task
from trainer_core.training.tiny import build_tiny_model
from webapp.common.errors import ApplicationError
from webapp.evaluation import selectors
from webapp.evaluation.services import pipeline_launch
from webapp.rewards.selectors import latest_uncalibrated_version
from webapp.rewards.services import reward_model_create, rubrics_seed
from webapp.rollouts.models import Policy
from webapp.rollouts.services import policies_seed_builtin
from webapp.tasks.selectors import task_set_find
from webapp.tasks.services import task_set_import


def _arithmetic_tasks(split: str, n: int) -> list[Task]:
    from trainer_core.tasks.suites.arithmetic import arithmetic_tasks

    return arithmetic_tasks(split, n=n)


@dataclass(frozen=True)
class DemoSuite:
    """One suite the demo can run: its splits, its tasks, how its tiny model is built and
    prompted, and its pipeline (the recipe chosen on validation)."""

    name: str
    domain: str
    splits: dict[str, str]  # protocol split (train, validation, test) -> the generator's split
    tasks: Callable[[str, int], list[Task]]
    system: str
    max_new_tokens: int
    pipeline: dict[str, Any]
    estimator_why: str
    train_tasks: int = 0  # tasks of the train split loaded (0: what the pipeline collects)
    # the protocol's train side, drawn like validation and test: GRPO practises there (its
    # collect stage names this task set), no reference of them is ever learned
    practice_split: str = ""
    practice_tasks: int = 0
    model: dict[str, Any] = field(default_factory=dict)
    corpus: Callable[[], list[str]] | None = None
    # the base model's weights: one model for every training seed (it stands for a pretrained
    # checkpoint; see the module docstring)
    model_seed: int = 0

    @property
    def practice_set_name(self) -> str:
        return f"{self.name}-demo-{self.practice_split}-{self.practice_tasks}"

    def pipeline_yaml(self, seed: int, *, baseline: bool = True) -> str:
        """The pipeline config of training seed ``seed`` (it seeds collection, datasets and
        every training run); ``baseline=False`` leaves out the base model's evaluation (another
        seed's pipeline makes it)."""
        config = copy.deepcopy(self.pipeline)
        config["seed"] = seed
        config["baseline"] = bool(config.get("baseline", True) and baseline)
        for iteration in config["iterations"]:
            iteration["train"].setdefault("values", {})["seed"] = seed
            if self.practice_split and iteration["collect"].get("policy") == "current":
                iteration["collect"]["task_set"] = self.practice_set_name
        return yaml.safe_dump(config, sort_keys=False)


ARITHMETIC_PIPELINE: dict[str, Any] = {
    "baseline": True,
    "seed": 0,
    "evaluate": {"samples_per_task": 1, "max_steps": 3, "concurrency": 1, "seed": 0},
    "iterations": [
        {
            # the reference trajectories are the same for every seed: played once, then reused
            "collect": {
                "policy": "scripted",
                "episodes_per_task": 1,
                "max_steps": 4,
                "reuse": True,
            },
            "dataset": {"kind": "sft", "outcome": "success"},
            "train": {
                "method": "sft",
                "values": {
                    "max_steps": 900,
                    "batch_size": 8,
                    "learning_rate": 0.002,
                    "adam_beta2": 0.95,
                    "warmup_steps": 20,
                    "lr_schedule": "cosine",
                    "max_length": 256,
                    "log_every": 10,
                },
            },
        },
        {
            "collect": {
                "policy": "current",
                "episodes_per_task": 8,
                "max_steps": 3,
                "temperature": 1.0,
            },
            "dataset": {"kind": "grpo"},
            "train": {
                "method": "grpo",
                "values": {
                    "max_steps": 16,
                    "batch_size": 8,
                    "learning_rate": 0.00005,
                    "beta": 0.0,
                    "advantage": "outcome",
                    "max_length": 256,
                    "log_every": 1,
                },
            },
        },
    ],
}

SUITES: dict[str, DemoSuite] = {
    "arithmetic": DemoSuite(
        name="arithmetic",
        domain="arithmetic",
        splits={"train": "train_wide", "validation": "validation", "test": "test"},
        tasks=_arithmetic_tasks,
        system="Use the calculator, then submit the answer.",
        max_new_tokens=64,  # a tool call is ~40 tokens; an untrained model babbles
        pipeline=ARITHMETIC_PIPELINE,
        estimator_why=(
            "outcome, chosen on validation: at equal compute the mixed estimator (outcome + the "
            "rule layer's process advantage) did no better (seed 0: 81% vs 80%); on arithmetic "
            "a wrong answer is one bad submit at the end, which the outcome already names"
        ),
        train_tasks=3600,
        practice_split="practice",
        practice_tasks=64,
    ),
}
PRIMARY_SUITE = "arithmetic"
SEEDS = (0, 1, 2)
TEST_TASKS = 300  # the fixed test split of each learning suite
DEMO_EVAL_TASKS = 100  # the demo's default: its first 100 tasks (the whole split: --eval-tasks 300)

#: kept for the pipeline form's starting text: the primary suite's pipeline at seed 0
DEFAULT_PIPELINE_YAML = SUITES[PRIMARY_SUITE].pipeline_yaml(0)


def demo_suite(name: str) -> DemoSuite:
    if name not in SUITES:
        raise ApplicationError(f"The demo has no suite {name!r}; use {', '.join(SUITES)}.")
    return SUITES[name]


def _task_set(name: str, tasks: Sequence[Task], description: str):
    existing = task_set_find(name=name)
    if existing is not None and existing.tasks.count() == len(tasks):
        return existing
    if existing is not None:
        raise ApplicationError(
            f"Task set {name!r} exists with {existing.tasks.count()} tasks, not {len(tasks)}; "
            "rename or delete it, or run the demo with the same sizes."
        )
    text = "\n".join(t.model_dump_json(exclude_none=True) for t in tasks)
    task_set, _ = task_set_import(text=text, name=name, fmt="jsonl", description=description)
    return task_set


def base_policy(suite: DemoSuite) -> Policy:
    """The suite's untrained tiny model as a local policy (built once, from ``model_seed``)."""
    seed = suite.model_seed
    model_dir = Path(settings.STEPLAB_DATA_DIR) / "models" / f"tiny-{suite.name}-seed{seed}"
    if not (model_dir / "config.json").exists():
        corpus = suite.corpus() if suite.corpus else None
        build_tiny_model(model_dir, seed=seed, corpus=corpus, **suite.model)
    policy, _ = Policy.objects.update_or_create(
        name=f"tiny-{suite.name}-base-seed{seed}",
        defaults={
            "kind": "local",
            "model": str(model_dir),
            "parameters": {
                "model_dir": str(model_dir),
                "temperature": 0.0,
                "device": "cpu",
                "max_new_tokens": suite.max_new_tokens,
                # a model trained on its tools needs no tool listing: prompts ~4x shorter
                "system": suite.system,
                "list_tools": False,
            },
            "description": f"An untrained tiny Llama built locally (steplab demo, {suite.name}, "
            f"seed {seed}).",
        },
    )
    return policy


def demo_setup(*, suite: DemoSuite, split: str = "test", eval_tasks: int = DEMO_EVAL_TASKS):
    """The demo's train and evaluation task sets and reward model (made once, reused after)."""
    if split not in ("validation", "test"):
        raise ApplicationError("The demo evaluates on the validation or the test split.")
    policies_seed_builtin()  # the scripted policy plays the reference trajectories
    train_split, eval_split = suite.splits["train"], suite.splits[split]
    n_train = suite.train_tasks
    train = _task_set(
        f"{suite.name}-demo-{train_split}-{n_train}",
        suite.tasks(train_split, n_train),
        f"{suite.name}, {train_split} split (the protocol's train), {n_train} tasks (demo).",
    )
    evaluation = _task_set(
        f"{suite.name}-demo-{split}-{eval_tasks}",
        suite.tasks(eval_split, eval_tasks),
        f"{suite.name}, {split} split, its first {eval_tasks} tasks (steplab demo).",
    )
    if suite.practice_split:
        _task_set(
            suite.practice_set_name,
            suite.tasks(suite.practice_split, suite.practice_tasks),
            f"{suite.name}, {suite.practice_split} split (the protocol's train side, drawn like "
            f"validation and test), {suite.practice_tasks} tasks: GRPO practises on them.",
        )
    rubrics_seed(domain=suite.domain)
    reward_model = latest_uncalibrated_version(domain=suite.domain)
    if reward_model is None:
        reward_model = reward_model_create(domain=suite.domain, note="rules only (steplab demo)")
    return train, evaluation, reward_model


def demo_launch(
    *,
    suite: str = PRIMARY_SUITE,
    seeds: Sequence[int] = SEEDS,
    split: str = "test",
    eval_tasks: int = DEMO_EVAL_TASKS,
    name: str = "",
    config: Any = None,
    user=None,
    reference_wait: float = 600.0,
) -> list:
    """One pipeline per training seed (``<name>-seed<k>``), all from the same base model, whose
    baseline evaluation the last one makes; returns them in seed order."""
    spec = demo_suite(suite)
    train, evaluation, reward_model = demo_setup(suite=spec, split=split, eval_tasks=eval_tasks)
    name = name or f"demo-{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}"

    def launch(n: int, seed: int):
        return pipeline_launch(
            name=f"{name}-seed{seed}",
            base_policy=base_policy(spec),
            train_task_set=train,
            eval_task_set=evaluation,
            reward_model=reward_model,
            config=config
            if config is not None
            else spec.pipeline_yaml(seed, baseline=n == len(seeds) - 1),
            user=user,
        )

    return launch_sharing_references(list(seeds), launch, wait=reference_wait)


def launch_sharing_references(
    seeds: list[int], launch: Callable[[int, int], Any], *, wait: float = 600.0
) -> list:
    """Launch ``launch(0, seeds[0])``; when its first iteration collects with ``reuse`` (the
    reference trajectories, the same for every seed), wait until that collect has ended (at most
    ``wait`` seconds), so that the other seeds' pipelines, launched then, reuse it instead of
    playing the same episodes again."""
    first = launch(0, seeds[0])
    iterations = first.config.get("iterations") or [{}]
    if len(seeds) > 1 and (iterations[0].get("collect") or {}).get("reuse") and wait > 0:
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline and not selectors.pipeline_stage_ended(
            pipeline=first, iteration=1, name="collect"
        ):
            time.sleep(1.0)
    return [first] + [launch(n, seed) for n, seed in enumerate(seeds) if n > 0]


def demo_report(*, pipelines: Sequence[Any], suite: str, split: str = "test") -> ProtocolReport:
    """The protocol table of the demo's pipelines (one per seed, ``pipeline.config["seed"]``)."""
    results: dict[str, dict[int, dict[str, bool]]] = {}
    bases: dict[int, int] = {}  # seed -> the base policy evaluated
    for pipeline in pipelines:
        seed = int(pipeline.config.get("seed", 0))
        bases[seed] = pipeline.base_policy_id
        for label, solved in selectors.pipeline_outcomes(pipeline=pipeline):
            results.setdefault(label, {})[seed] = solved
    notes = []
    base = results.get("base", {})
    if base and len(base) < len(pipelines):
        # one evaluation of a base model stands for every seed that starts from that model
        by_policy = {bases[seed]: solved for seed, solved in base.items()}
        for seed, policy_id in bases.items():
            if seed not in base and policy_id in by_policy:
                base[seed] = by_policy[policy_id]
        notes.append(
            "base: one evaluation of the base model, the same for every training seed (one "
            "policy decoding greedily plays the same episodes whatever the seed)"
        )
    # the base model first, then the stages in the order the pipelines trained them
    order = sorted(results, key=lambda label: label != "base")
    complete = {k: results[k] for k in order if len(results[k]) == len(pipelines)}
    if not complete:
        raise ApplicationError("No evaluation of the demo's pipelines finished.")
    report = protocol_report(complete, suite=f"{suite} ({split} split)", common_tasks=True)
    report.notes.extend(notes)
    return report
