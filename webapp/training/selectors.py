"""Reads for the training pages, the training job and the pipelines."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import QuerySet
from django.http import Http404
from django.shortcuts import get_object_or_404

from trainer_core.datasets.layout import find_split
from trainer_core.errors import ConfigError
from trainer_core.training.advantages import describe_estimator
from trainer_core.training.grpo import LEGACY_NOTE, GRPOConfig
from webapp.common.errors import ApplicationError
from webapp.common.paths import path_inside_roots
from webapp.datasets.models import DatasetSnapshot
from webapp.jobs.models import JobStatus
from webapp.jobs.names import Kinds
from webapp.jobs.selectors import job_get
from webapp.rollouts.models import Policy
from webapp.training import group_pages, hooks
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


def run_keyset(*, before_id: int | None, limit: int, method: str = "") -> list[TrainingRun]:
    """Up to ``limit`` training runs (of ``method``), newest (highest id) first, before
    ``before_id``."""
    runs = TrainingRun.objects.select_related("dataset", "job").order_by("-pk")
    if method:
        runs = runs.filter(method=method)
    if before_id is not None:
        runs = runs.filter(pk__lt=before_id)
    return list(runs[:limit])


def run_checkpoints(*, run: TrainingRun) -> list[Checkpoint]:
    """The run's checkpoints by step."""
    return list(run.checkpoints.order_by("step"))


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
        "step_curve": group_pages.step_curve(run=run),
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
    """The dataset, checkpoint and base model a training form names (by id; None when absent or
    unknown; the base model picked in the list, else the directory typed), and what it offers to
    choose from (the local models of :func:`base_model_choices`)."""
    dataset = checkpoint = None
    if str(data.get("dataset", "")).isdigit():
        dataset = DatasetSnapshot.objects.filter(pk=int(data["dataset"])).first()
    if str(data.get("checkpoint", "")).isdigit():
        checkpoint = Checkpoint.objects.filter(pk=int(data["checkpoint"])).first()
    picked = str(data.get("base_model_pick") or "").strip()
    base_model = picked or str(data.get("base_model") or "").strip()
    base_models = base_model_choices()
    return {
        "dataset": dataset,
        "checkpoint": checkpoint,
        "datasets": DatasetSnapshot.objects.exclude(directory="")[:200],
        "checkpoints": Checkpoint.objects.select_related("run")[:200],
        "base_model": base_model,
        "base_models": base_models,
        "base_model_listed": any(m["path"] == base_model for m in base_models),
        "tiny_name": tiny_model_free_name(),
    }


# --- local models: the base-model picker and tiny starter models ----------------------------------

MAX_MODEL_CHOICES = 200
MAX_SCANNED = 2000  # directory entries looked at per root
TINY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
TINY_DEFAULT_NAME = "tiny-starter"


def models_dir() -> Path:
    """Where Steplab keeps local models it makes: ``STEPLAB_DATA_DIR/models``."""
    return Path(settings.STEPLAB_DATA_DIR) / "models"


def _model_dir(path: str | Path) -> Path | None:
    """The real path of ``path`` when it is a model directory (it holds a config.json) inside the
    model roots; None otherwise (a link out of the roots included)."""
    try:
        real = path_inside_roots(
            path=str(path),
            roots=settings.STEPLAB_MODEL_ROOTS,
            what="model directory",
            setting="STEPLAB_MODEL_ROOTS",
        )
    except ApplicationError:
        return None
    return real if (real / "config.json").is_file() else None


def _child_dirs(root: Path) -> list[Path]:
    """The visible directories directly under ``root``, newest first (none if unreadable)."""
    found = []
    try:
        with os.scandir(root) as entries:
            for n, entry in enumerate(entries):
                if n >= MAX_SCANNED:
                    break
                if entry.name.startswith(".") or not entry.is_dir():
                    continue
                found.append((entry.stat().st_mtime, Path(entry.path)))
    except OSError:
        return []
    return [path for _, path in sorted(found, key=lambda item: -item[0])]


def base_model_choices() -> list[dict[str, str]]:
    """The local models a training run can start from, each listed once by its real path: the
    directories holding a config.json under ``STEPLAB_DATA_DIR/models`` (newest first) and
    directly under the other model roots (STEPLAB_MODEL_ROOTS), then the model directories of
    registered local policies (checkpoints registered as policies among them). Only directories
    inside the model roots are listed: those are the ones a run may read."""
    found: dict[str, dict[str, str]] = {}

    def add(path: str | Path, label: str, source: str) -> None:
        real = _model_dir(path)
        if real is not None and str(real) not in found and len(found) < MAX_MODEL_CHOICES:
            found[str(real)] = {"path": str(real), "label": label, "source": source}

    for directory in _child_dirs(models_dir()):
        add(directory, directory.name, "models")
    data_dir = Path(settings.STEPLAB_DATA_DIR).resolve()
    for root in settings.STEPLAB_MODEL_ROOTS:
        if Path(root).resolve() == data_dir:
            continue
        add(root, Path(root).name, "model root")
        for directory in _child_dirs(Path(root)):
            add(directory, directory.name, "model root")
    local = Policy.objects.filter(kind=Policy.Kind.LOCAL).order_by("-id")
    for name, model, parameters in local.values_list("name", "model", "parameters")[:500]:
        model_dir = (parameters or {}).get("model_dir") or model
        if model_dir:
            add(model_dir, f"{name} (policy)", "policy")
    return list(found.values())


def tiny_model_target(*, name: str) -> Path:
    """Where a tiny model named ``name`` lives (``STEPLAB_DATA_DIR/models/<name>``);
    ApplicationError for a name that is not a plain directory name."""
    name = str(name or "").strip()
    if not TINY_NAME.match(name):
        raise ApplicationError(
            f"Name the model with letters, digits, '.', '_' or '-' (at most 64, starting with a "
            f"letter or digit); {name!r} is not such a name."
        )
    return models_dir() / name


def tiny_model_free_name() -> str:
    """``tiny-starter``, or ``tiny-starter-2``, ``-3``… when that name is taken."""
    base = models_dir() / TINY_DEFAULT_NAME
    if not base.exists():
        return TINY_DEFAULT_NAME
    n = 2
    while (models_dir() / f"{TINY_DEFAULT_NAME}-{n}").exists():
        n += 1
    return f"{TINY_DEFAULT_NAME}-{n}"


def model_summary(*, path: str | Path) -> dict[str, Any]:
    """What a model directory holds, from its config.json: the architecture, its shape and the
    vocabulary size."""
    config = json.loads((Path(path) / "config.json").read_text(encoding="utf-8"))
    return {
        key: config.get(key)
        for key in ("model_type", "hidden_size", "num_hidden_layers", "vocab_size")
    }


def tiny_model_result(*, job_id: int) -> dict[str, Any]:
    """A tiny-model job as the training form shows it: ``tiny_job`` while it runs, then the model
    made (``tiny_created``, with the picker's models and the new one picked) or ``tiny_error``."""
    job = job_get(id=job_id)
    if job.kind != Kinds.CREATE_TINY_MODEL:
        raise Http404("Not a tiny-model job.")
    if not job.is_terminal:
        return {"tiny_job": job}
    if job.status != JobStatus.SUCCEEDED or not job.result.get("path"):
        return {"tiny_error": job.error or job.message}
    base_models = base_model_choices()
    path = str(job.result["path"])
    return {
        "tiny_created": job.result,
        "base_models": base_models,
        "base_model": path,
        "base_model_listed": any(m["path"] == path for m in base_models),
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
