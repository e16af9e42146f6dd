"""The learning ablation of process rewards, as pipelines of the app (one per arm and training
seed), so that each arm can be re-run from the browser (its config is a preset of the pipeline
form) and the benchmark (``bench/learning_ablation.py``) reads the results from the database.

Every arm starts like the demo of its suite (:mod:`webapp.evaluation.demo`): SFT on a small
number of reference trajectories, then one GRPO iteration on G samples per train task drawn
from the SFT policy — the same samples in every arm (same policy, same collect seed), the same
steps and compute. Only the advantage differs:

``outcome``
    GRPO's outcome advantage (no step scores).
``process``
    the outcome advantage plus ``process_weight`` × DeepSeekMath's process advantage of the rule
    layer's step scores (``advantage: mixed``) — no oracle: the rules read the trajectory only.
``calibrated``
    the same, after calibrating the rule layer's rubrics through the real calibration path
    (queue → labels → fit → apply → new version) with labels from the simulated annotator on
    those train-split trajectories (``calibrate:`` block of the iteration).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import yaml

from trainer_core import safeparse
from trainer_core.evaluation.protocol import protocol_report
from webapp.calibration.selectors import reference_truth, truth_auroc
from webapp.common.errors import ApplicationError
from webapp.evaluation import selectors
from webapp.evaluation.demo import (
    PRIMARY_SUITE,
    SEEDS,
    TEST_TASKS,
    base_policy,
    demo_setup,
    demo_suite,
    launch_sharing_references,
)
from webapp.evaluation.services import pipeline_launch
from webapp.trajectories.selectors import collected_ids

ARMS = ("outcome", "process", "calibrated")
PROCESS_WEIGHT = 1.0
ANNOTATOR_ERROR_RATE = 0.1
CALIBRATION_TRAJECTORIES = 100


def arm_config(suite: str, arm: str, seed: int = 0) -> str:
    """The pipeline YAML of ``arm`` at training seed ``seed``."""
    if arm not in ARMS:
        raise ApplicationError(f"Unknown ablation arm {arm!r}; use {', '.join(ARMS)}.")
    config = safeparse.load_yaml(demo_suite(suite).pipeline_yaml(seed))
    grpo = config["iterations"][-1]
    values = grpo["train"]["values"]
    if arm == "outcome":
        values["advantage"] = "outcome"
        values.pop("process_weight", None)
    else:
        values["advantage"] = "mixed"
        values["process_weight"] = PROCESS_WEIGHT
    if arm == "calibrated":
        grpo["calibrate"] = {
            "annotator": "simulated",
            "error_rate": ANNOTATOR_ERROR_RATE,
            "trajectories": CALIBRATION_TRAJECTORIES,
            "seed": seed,
        }
    return yaml.safe_dump(config, sort_keys=False)


def presets() -> dict[str, tuple[str, str]]:
    """The pipeline form's presets: key → (label, YAML)."""
    from webapp.evaluation.demo import SUITES

    out = {
        f"demo-{name}": (f"demo recipe ({name})", suite.pipeline_yaml(0))
        for name, suite in SUITES.items()
    }
    for name in SUITES:
        for arm in ARMS:
            out[f"ablation-{name}-{arm}"] = (
                f"ablation arm {arm} ({name})",
                arm_config(name, arm, 0),
            )
    return out


def ablation_launch(
    *,
    suite: str = PRIMARY_SUITE,
    arms: Sequence[str] = ARMS,
    seeds: Sequence[int] = SEEDS,
    split: str = "test",
    eval_tasks: int = TEST_TASKS,
    name: str = "",
    overrides: dict[str, Any] | None = None,
    user=None,
) -> dict[str, list]:
    """One pipeline per arm and seed (``<name>-<arm>-seed<k>``): {arm: pipelines in seed order}.
    ``overrides``: pipeline config fields to replace in every arm (the quick mode's sizes)."""
    spec = demo_suite(suite)
    train, evaluation, reward_model = demo_setup(suite=spec, split=split, eval_tasks=eval_tasks)
    name = name or f"ablation-{spec.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    runs = [(arm, seed) for arm in arms for seed in seeds]

    def launch(n: int, _key: int):
        arm, seed = runs[n]
        config = safeparse.load_yaml(arm_config(suite, arm, seed))
        _override(config, overrides or {})
        config["baseline"] = n == len(runs) - 1  # one base model: evaluated once, last
        return pipeline_launch(
            name=f"{name}-{arm}-seed{seed}",
            base_policy=base_policy(spec),
            train_task_set=train,
            eval_task_set=evaluation,
            reward_model=reward_model,
            config=yaml.safe_dump(config, sort_keys=False),
            user=user,
        )

    # the reference trajectories are played once, by the first pipeline; the others reuse them
    launched = launch_sharing_references(list(range(len(runs))), launch)
    out: dict[str, list] = {}
    for (arm, _seed), pipeline in zip(runs, launched, strict=True):
        out.setdefault(arm, []).append(pipeline)
    return out


def _override(config: dict[str, Any], overrides: dict[str, Any]) -> None:
    """Apply ``{"iterations.1.collect.num_tasks": 32, ...}`` style overrides in place."""
    for path, value in overrides.items():
        node: Any = config
        keys = path.split(".")
        for key in keys[:-1]:
            node = node[int(key)] if isinstance(node, list) else node.setdefault(key, {})
        last = keys[-1]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value


def _outcomes_by_arm(pipelines: dict[str, list]) -> tuple[dict, dict, list[str]]:
    """({arm: {seed: GRPO outcomes}}, {seed: {arm: SFT outcomes}}, notes)."""
    grpo: dict[str, dict[int, dict[str, bool]]] = {}
    sft: dict[int, dict[str, dict[str, bool]]] = {}
    notes: list[str] = []
    for arm, runs in pipelines.items():
        for pipeline in runs:
            seed = int(pipeline.config.get("seed", 0))
            stages = dict(selectors.pipeline_outcomes(pipeline=pipeline))
            if "SFT" in stages:
                sft.setdefault(seed, {})[arm] = stages["SFT"]
            if "GRPO" in stages:
                grpo.setdefault(arm, {})[seed] = stages["GRPO"]
            else:
                notes.append(f"{pipeline.name}: no GRPO evaluation (see its page)")
    for seed, by_arm in sorted(sft.items()):
        first = next(iter(by_arm.values()))
        if any(outcomes != first for outcomes in by_arm.values()):
            notes.append(
                f"seed {seed}: the arms' SFT policies did not solve the same tasks (training is "
                "not bit-for-bit repeatable here); the SFT row is the first arm's"
            )
    return grpo, sft, notes


def ablation_report(*, pipelines: dict[str, list], suite: str, split: str = "test") -> list[str]:
    """The ablation's table as text lines: the SFT start and each arm per seed and pooled, the
    pooled McNemar tests (SFT → each arm, then arm against arm; Holm over all of them) and each
    arm's step AUROC against the simulated annotator's truth."""
    grpo, sft, notes = _outcomes_by_arm(pipelines)
    seeds = sorted(sft)
    arms = [arm for arm in pipelines if sorted(grpo.get(arm, {})) == seeds]
    if not seeds or not arms:
        raise ApplicationError("No arm finished at every seed: " + "; ".join(notes))
    stages = {"SFT": {seed: next(iter(sft[seed].values())) for seed in seeds}}
    stages.update({arm: grpo[arm] for arm in arms})
    pairs = [("SFT", arm) for arm in arms]
    pairs += [(a, b) for i, a in enumerate(arms) for b in arms[i + 1 :]]
    report = protocol_report(
        stages, suite=f"{suite} ({split} split)", pairs=pairs, common_tasks=True
    )
    lines = report.lines()
    lines.append("step AUROC of the step totals the arm trained on, against the simulated truth:")
    for arm in arms:
        for pipeline in pipelines[arm]:
            lines.append(
                f"  {arm:<11} seed {pipeline.config.get('seed', 0)}: {arm_auroc(pipeline)}"
            )
    lines += [f"note: {n}" for n in notes]
    return lines


def arm_auroc(pipeline) -> str:
    """The AUROC of the step totals the pipeline's last GRPO iteration trained on (its reward-
    model version, calibrated or not) against the simulated annotator's truth, over that
    iteration's collected samples."""
    iteration = len(pipeline.config.get("iterations", []))
    collect = selectors.pipeline_stage(pipeline=pipeline, iteration=iteration, name="collect")
    if collect is None or collect.collect_run_id is None:
        return "not collected"
    ids = collected_ids(collect_run_id=collect.collect_run_id)
    version = selectors.current_reward_model(pipeline=pipeline, iteration=iteration)
    measured = truth_auroc(reward_model=version, labels=reference_truth(trajectory_ids=ids))
    value = "n/a" if measured["auroc"] is None else f"{measured['auroc']:.3f}"
    return (
        f"{value} (reward model {version.label}; {measured['good']} good, "
        f"{measured['bad']} bad steps)"
    )
