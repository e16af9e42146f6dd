"""Training runs: build the trainer's config from a form, preview it as YAML, launch it as a
job on the ``gpu`` queue (CPU where there is no GPU; the runner is in ``jobs.py``), record
checkpoints, register one as a Policy."""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from trainer_core.errors import ConfigError
from trainer_core.safeparse import load_json
from trainer_core.training.checkpoint import list_checkpoints
from trainer_core.training.config import config_from_dict, config_help, config_to_yaml
from trainer_core.training.methods import METHODS
from trainer_core.training.methods import config_class as trainer_config_class
from trainer_core.training.tiny import build_tiny_model
from webapp.common.errors import ApplicationError
from webapp.common.paths import path_inside_roots
from webapp.jobs.names import Kinds
from webapp.jobs.services import job_enqueue
from webapp.rollouts.models import Policy
from webapp.rollouts.services import policy_save
from webapp.training.models import Checkpoint, TrainingRun
from webapp.training.selectors import dataset_train_path, tiny_model_target

# fields the run fills in itself (not shown in the form)
MANAGED = ("model_dir", "output_dir", "dataset", "resume_from")


def config_class(*, method: str):
    """The trainer's config dataclass of ``method`` (ApplicationError for an unknown one)."""
    if method not in METHODS:
        raise ApplicationError(f"Unknown method {method!r}; use one of {', '.join(METHODS)}.")
    return trainer_config_class(method)


def form_fields(*, method: str) -> list[dict[str, Any]]:
    """The config's fields with their defaults and help text (the dataclass docstrings)."""
    cls = config_class(method=method)
    helps = config_help(cls)
    out = []
    for f in dataclasses.fields(cls):
        if f.name in MANAGED:
            continue
        default = (
            f.default
            if f.default is not dataclasses.MISSING
            else f.default_factory()
            if f.default_factory is not dataclasses.MISSING
            else ""
        )
        out.append(
            {
                "name": f.name,
                "default": default,
                "help": helps.get(f.name, ""),
                "type": f.type,
                "choices": f.metadata.get("choices"),
            }
        )
    return out


def _coerce(value: str, default: Any) -> Any:
    if isinstance(default, bool):
        return str(value).lower() in ("1", "true", "on", "yes")
    if isinstance(default, int):
        return int(value)
    if isinstance(default, float):
        return float(value)
    if isinstance(default, (list, tuple, dict)):
        return load_json(value) if value else default
    return value


def build_config(
    *, method: str, values: dict[str, Any], base_model: str, dataset_path: str, output_dir: str
):
    """The trainer's config from form values (strings) over the dataclass defaults."""
    data: dict[str, Any] = {}
    for field in form_fields(method=method):
        if field["name"] in values and values[field["name"]] not in (None, ""):
            try:
                data[field["name"]] = _coerce(values[field["name"]], field["default"])
            except (TypeError, ValueError) as exc:
                raise ApplicationError(f"{field['name']}: {exc}") from None
        elif isinstance(field["default"], bool) and field["name"] in values:
            data[field["name"]] = False
    data.update(model_dir=base_model, output_dir=output_dir, dataset=dataset_path)
    try:
        return config_from_dict(config_class(method=method), data)
    except ConfigError as exc:
        raise ApplicationError(f"Invalid training configuration: {exc}") from None


def config_problems(*, method: str, values: dict[str, Any]) -> list[dict[str, str]]:
    """Each value of a training config that :func:`build_config` would refuse, by its name
    (``config.<name>``): names that are not a form field of ``method`` (the run fills in
    ``model_dir``, ``output_dir``, ``dataset`` and ``resume_from`` itself), and values that do
    not parse or are not allowed — all of them, where :func:`build_config` stops at the first."""
    known = {field["name"] for field in form_fields(method=method)}
    problems = []
    checked = {}
    for name, value in values.items():
        if name not in known:
            why = (
                "is set by the run itself"
                if name in MANAGED
                else f"is not a {method.upper()} option (the options: {', '.join(sorted(known))})"
            )
            problems.append({"field": f"config.{name}", "problem": f"{name} {why}."})
            continue
        try:
            build_config(
                method=method, values={name: value}, base_model="-", dataset_path="", output_dir="-"
            )
        except ApplicationError as exc:
            problems.append({"field": f"config.{name}", "problem": exc.message})
        else:
            checked[name] = value
    if not problems:
        try:
            build_config(
                method=method, values=checked, base_model="-", dataset_path="", output_dir="-"
            )
        except ApplicationError as exc:
            problems.append({"field": "config", "problem": exc.message})
    return problems


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "run"


def base_model_dir(*, base_model: str = "", checkpoint: Checkpoint | None = None) -> str:
    """The base model's directory: an earlier checkpoint's, or a directory under the model
    roots (STEPLAB_MODEL_ROOTS and the data directory) that exists on this machine."""
    if checkpoint is not None:
        return checkpoint.path
    path = path_inside_roots(
        path=base_model,
        roots=settings.STEPLAB_MODEL_ROOTS,
        what="base model directory",
        setting="STEPLAB_MODEL_ROOTS",
    )
    if not path.is_dir():
        raise ApplicationError(
            f"The base model must be a local model directory; {base_model!r} is not a directory "
            "on this machine (nothing is downloaded: point at a directory with config.json, the "
            "weights and the tokenizer, or pick an earlier checkpoint)."
        )
    return str(path)


def preview(*, method: str, values: dict[str, Any], base_model: str, dataset=None) -> str:
    config = build_config(
        method=method,
        values=values,
        base_model=base_model or "(base model)",
        dataset_path=dataset_train_path(snapshot=dataset)
        if dataset is not None and dataset.directory
        else "",
        output_dir=str(Path(settings.STEPLAB_DATA_DIR) / "training" / "<run>"),
    )
    return config_to_yaml(config)


def training_launch(
    *,
    method: str,
    dataset=None,
    base_model: str = "",
    checkpoint: Checkpoint | None = None,
    values: dict[str, Any] | None = None,
    name: str = "",
    user=None,
    parent_job=None,
) -> TrainingRun:
    model_dir = base_model_dir(base_model=base_model, checkpoint=checkpoint)
    if method in ("sft", "dpo") and dataset is None:
        raise ApplicationError(f"{method.upper()} needs a dataset snapshot.")
    data_path = dataset_train_path(snapshot=dataset) if dataset is not None else ""
    with transaction.atomic():
        run = TrainingRun.objects.create(
            name=name,
            method=method,
            dataset=dataset,
            base_model=model_dir,
            base_checkpoint=checkpoint,
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        output = Path(settings.STEPLAB_DATA_DIR) / "training" / f"{run.pk}-{_slug(name or method)}"
        config = build_config(
            method=method,
            values=values or {},
            base_model=model_dir,
            dataset_path=data_path,
            output_dir=str(output),
        )
        run.config = dataclasses.asdict(config)
        run.config_yaml = config_to_yaml(config)
        run.output_dir = str(output)
        run.job = job_enqueue(
            kind=Kinds.TRAIN, params={"run_id": run.pk}, user=user, parent=parent_job,
            message="Waiting for a gpu-queue worker.",
        )  # fmt: skip
        run.save()
    return run


def training_run_token_check(*, run: TrainingRun, check: dict[str, Any]) -> None:
    """Record the drift check the run started with (``result["token_check"]``, kept when the
    run's summary is recorded)."""
    run.result = {**(run.result or {}), "token_check": check}
    run.save(update_fields=["result"])


def training_run_record(*, run: TrainingRun, summary: dict[str, Any]) -> list[Checkpoint]:
    """A finished run: its result summary, and a Checkpoint row per complete checkpoint it
    wrote (the layout is trainer_core.training.checkpoint's)."""
    kept = {k: v for k, v in (run.result or {}).items() if k == "token_check"}
    run.result = {**kept, **summary}
    run.save(update_fields=["result"])
    made = []
    for step, path in list_checkpoints(run.output_dir):
        checkpoint, _ = Checkpoint.objects.get_or_create(
            run=run, step=step, defaults={"path": str(path), "metrics": summary}
        )
        made.append(checkpoint)
    return made


def checkpoint_register(*, checkpoint: Checkpoint, name: str = "", user=None):
    """A local-model Policy that plays this checkpoint (collect jobs can use it at once)."""
    if checkpoint.policy_id:
        return checkpoint.policy
    run = checkpoint.run
    name = name or f"{run.method}-run{run.pk}-step{checkpoint.step}"
    if Policy.objects.filter(name=name).exists():
        name = f"{name}-{checkpoint.pk}"
    policy = policy_save(
        name=name,
        kind="local",
        model=checkpoint.path,
        parameters={"model_dir": checkpoint.path, "temperature": 0.0},
        description=f"Checkpoint step {checkpoint.step} of training run {run.pk} ({run.method}).",
        user=user,
    )
    checkpoint.policy = policy
    checkpoint.save(update_fields=["policy"])
    return policy


# --- tiny starter models ---------------------------------------------------------------------------


def tiny_model_launch(*, name: str, seed: int = 0, user=None):
    """A job (default queue) that builds a tiny starter model in ``STEPLAB_DATA_DIR/models/<name>``:
    a tokenizer trained here and a random-weight Llama of about 1M parameters, a few seconds on a
    CPU. The name is checked now, so a taken or malformed one is refused before any job runs."""
    target = tiny_model_target(name=name)
    if target.exists():
        raise ApplicationError(
            f"A model named {target.name!r} exists already ({target}): pick it in the base-model "
            "list, or choose another name."
        )
    return job_enqueue(
        kind=Kinds.CREATE_TINY_MODEL, params={"name": target.name, "seed": int(seed)}, user=user,
        message="Waiting for a worker to build the model.",
    )  # fmt: skip


def tiny_model_build(*, name: str, seed: int = 0, exist_ok: bool = False) -> Path:
    """Build the tiny model named ``name`` (``trainer_core.training.tiny.build_tiny_model``) and
    return its directory. It is written in a hidden directory beside its place and moved there
    when complete, so a half-written model is never listed or picked. ``exist_ok``: a complete
    model of that name counts as built (a job delivered again); otherwise a taken name is refused.
    """
    target = tiny_model_target(name=name)
    if target.exists():
        if exist_ok and (target / "config.json").is_file():
            return target
        raise ApplicationError(
            f"A model named {target.name!r} exists already ({target}); choose another name."
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".building-{target.name}-", dir=target.parent))
    try:
        build_tiny_model(staging, seed=seed)
        try:
            os.rename(staging, target)
        except OSError:
            raise ApplicationError(
                f"A model named {target.name!r} appeared while this one was built; choose "
                "another name."
            ) from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
