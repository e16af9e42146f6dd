"""Reads for the training pages, the training job and the pipelines."""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from trainer_core.datasets.layout import find_split
from trainer_core.errors import ConfigError
from trainer_core.training.advantages import describe_estimator
from trainer_core.training.grpo import LEGACY_NOTE, GRPOConfig
from webapp.common.errors import ApplicationError
from webapp.datasets.models import DatasetSnapshot
from webapp.rollouts.models import Policy
from webapp.training import hooks
from webapp.training.models import Checkpoint, TrainingRun


def dataset_train_path(*, snapshot: DatasetSnapshot) -> str:
    """The training split of a dataset snapshot (the layout is trainer_core.datasets')."""
    if not snapshot.directory:
        raise ApplicationError(f"Dataset {snapshot.name!r} has no files yet (is its export done?).")
    try:
        return str(find_split(snapshot.directory, "train"))
    except ConfigError:
        raise ApplicationError(f"Dataset {snapshot.name!r} has no train split file.") from None


def run_list(*, limit: int = 200) -> QuerySet[TrainingRun]:
    return TrainingRun.objects.select_related("dataset", "job")[:limit]


def run_get(*, id: int) -> TrainingRun:
    """The run with its dataset and job; Http404 when there is none."""
    return get_object_or_404(TrainingRun.objects.select_related("dataset", "job"), pk=id)


def run_for_job(*, run_id: int | None) -> TrainingRun:
    """The run a training job trains (ApplicationError: deleted since launch)."""
    run = TrainingRun.objects.filter(pk=run_id).first()
    if run is None:
        raise ApplicationError(f"Training run {run_id} no longer exists.")
    return run


def run_detail(*, run: TrainingRun) -> dict[str, Any]:
    """What a run's page shows below it: its checkpoints, and the sections other apps add (the
    evaluation app's checkpoint curve)."""
    return {
        "checkpoints": run.checkpoints.select_related("policy"),
        "run_sections": hooks.run_sections(run),
        **estimator_of(config=run.config or {}, method=run.method),
    }


def estimator_of(*, config: dict[str, Any], method: str) -> dict[str, str]:
    """For a GRPO run (or a pipeline's GRPO stage): which advantage estimator its options name,
    and — for options stored before the estimators were corrected — the note that says so."""
    if method != "grpo":
        return {}
    upgraded = GRPOConfig.upgrade_options(config)
    advantage = upgraded.get("advantage", "outcome")
    out = {
        "estimator": describe_estimator(
            advantage,
            process_weight=float(upgraded.get("process_weight", 1.0)),
            scale=bool(upgraded.get("scale_rewards", True)),
        )
    }
    if "step_level_advantage" in config:
        out["estimator_note"] = LEGACY_NOTE.format(advantage=advantage)
    return out


def checkpoint_get(*, id: int) -> Checkpoint:
    return get_object_or_404(Checkpoint.objects.select_related("run"), pk=id)


def form_choices(*, data: Any) -> dict[str, Any]:
    """The dataset and checkpoint a training form names (by id; None when absent or unknown),
    and what it offers to choose from."""
    dataset = checkpoint = None
    if str(data.get("dataset", "")).isdigit():
        dataset = DatasetSnapshot.objects.filter(pk=int(data["dataset"])).first()
    if str(data.get("checkpoint", "")).isdigit():
        checkpoint = Checkpoint.objects.filter(pk=int(data["checkpoint"])).first()
    return {
        "dataset": dataset,
        "checkpoint": checkpoint,
        "datasets": DatasetSnapshot.objects.exclude(directory="")[:200],
        "checkpoints": Checkpoint.objects.select_related("run")[:200],
    }


def lineage(*, policy_id: int) -> dict[str, Any]:
    """policy → checkpoint → training run → dataset, back to the first base model."""
    policy = get_object_or_404(Policy, pk=policy_id)
    chain = []
    checkpoint = (
        Checkpoint.objects.select_related("run", "run__dataset").filter(policy=policy).first()
    )
    while checkpoint is not None:
        run = checkpoint.run
        chain.append({"checkpoint": checkpoint, "run": run, "dataset": run.dataset})
        checkpoint = run.base_checkpoint
    return {"policy": policy, "chain": chain}
