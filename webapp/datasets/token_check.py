"""The drift check and the token view of dataset rows (issue 21): reads and writes around
``trainer_core.training.drift`` and ``trainer_core.training.token_view``.

The recorded ids of a row's turns are its steps' ``metadata["metrics"]`` (``prompt_token_ids``,
``completion_token_ids``); a step of a trajectory sampled here without them is re-tokenised, one
of an imported (or live-pushed) log is not checkable. A check runs on the files an export wrote
(every split) when the export names a policy, and on the train split when a training run starts
(``webapp.training.jobs``); a mismatch blocks both (ApplicationError with the first difference).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from django.conf import settings

from trainer_core.datasets.layout import find_split, read_jsonl
from trainer_core.errors import ConfigError, SteplabError
from trainer_core.training import drift
from webapp.common.errors import ApplicationError
from webapp.common.paths import path_inside_roots
from webapp.datasets.models import DatasetSnapshot
from webapp.rollouts.models import Policy
from webapp.trajectories.models import Step, Trajectory

SPLITS = ("train", "validation", "test")
MAX_ROWS_CHECKED = 50_000
TOKENS_PER_PAGE = 1000


# --------------------------------------------------------------------------- reads


def recorded_ids(*, step_ids: list[Any]) -> dict[Any, Any]:
    """``{step id: TurnIds | RETOKENISE | NOT_CHECKABLE}`` for the stored steps among
    ``step_ids`` (ids that are not numbers, or not stored, are left out: not checkable)."""
    wanted = {s for s in step_ids if isinstance(s, int) and not isinstance(s, bool)}
    rows = Step.objects.filter(pk__in=wanted).values_list("pk", "metadata", "trajectory__source")
    return {
        pk: drift.step_ids(metadata, imported=source != Trajectory.Source.ROLLOUT)
        for pk, metadata, source in rows.iterator(chunk_size=500)
    }


def policy_tokenizer_dir(*, policy: Policy) -> str:
    """The tokenizer directory of a policy that samples tokens here (a local model, an
    inference server with ``tokenizer_dir``); ApplicationError for any other."""
    params = policy.parameters or {}
    if policy.kind == Policy.Kind.LOCAL:
        return str(params.get("model_dir") or policy.model)
    if policy.kind == Policy.Kind.INFERENCE_SERVER and params.get("tokenizer_dir"):
        return str(params["tokenizer_dir"])
    raise ApplicationError(
        f"Policy {policy.name!r} has no tokenizer here (a local model or an inference server "
        "with a tokenizer directory has one); choose one of those to check tokens for."
    )


def tokenizer_choices():
    """Policies whose tokenizer the token view and the check can use (a queryset)."""
    kinds = (Policy.Kind.LOCAL, Policy.Kind.INFERENCE_SERVER)
    return Policy.objects.filter(kind__in=kinds).order_by("name")


def _tokenizer(directory: str) -> Any:
    real = path_inside_roots(
        path=directory,
        roots=settings.STEPLAB_MODEL_ROOTS,
        what="tokenizer directory",
        setting="STEPLAB_MODEL_ROOTS",
    )
    try:
        return drift.load_tokenizer(real)
    except SteplabError as exc:
        raise ApplicationError(f"The tokenizer in {directory!r} cannot be loaded: {exc}") from None


def _split_rows(directory: str, split: str) -> list[dict[str, Any]]:
    try:
        path = find_split(directory, split)
    except ConfigError:
        return []
    return read_jsonl(path)


def _row(directory: str, split: str, index: int) -> dict[str, Any]:
    """Row ``index`` of a split, reading only up to it; Http404-like ApplicationError."""
    try:
        path = find_split(directory, split)
    except ConfigError:
        raise ApplicationError(f"This dataset has no {split} split.") from None
    with open(path, encoding="utf-8") as handle:
        lines = (line for line in handle if line.strip())
        line = next(itertools.islice(lines, index, None), None)
    if line is None:
        raise ApplicationError(f"The {split} split has no row {index}.")
    row = json.loads(line)
    if not isinstance(row, dict):
        raise ApplicationError(f"Row {index} of the {split} split is not an object.")
    return row


def row_tokens(
    *,
    snapshot: DatasetSnapshot,
    index: int,
    split: str = "train",
    policy_id: int | None = None,
    model_dir: str = "",
    start: int = 0,
) -> dict[str, Any]:
    """The token view of one row: its sequences as the trainer encodes them with the chosen
    policy's tokenizer, else ``model_dir``'s (a training run's base model, under the model
    roots), else the one the last check used; a page of ``TOKENS_PER_PAGE`` tokens from
    ``start``, and the row's drift check with that tokenizer."""
    from trainer_core.training.token_view import row_views

    if split not in SPLITS:
        raise ApplicationError(f"Unknown split {split!r}; use one of {', '.join(SPLITS)}.")
    files = snapshot.directory or str((snapshot.token_check or {}).get("directory") or "")
    if not files:
        raise ApplicationError("This dataset has no files yet (is its export done?).")
    policy = Policy.objects.filter(pk=policy_id).first() if policy_id is not None else None
    if policy is not None:
        directory = policy_tokenizer_dir(policy=policy)
    else:
        directory = model_dir or _checked_tokenizer(snapshot)
    if not directory:
        return {"needs_tokenizer": True, "choices": tokenizer_choices()[:200]}
    tokenizer = _tokenizer(directory)
    row = _row(files, split, index)
    try:
        views = row_views(row, index, tokenizer, start=max(0, start), limit=TOKENS_PER_PAGE)
        lookup = recorded_ids(step_ids=drift.row_step_ids(row))
        report = drift.check_conversations(
            drift.row_conversations(row, index, lookup, split=split),
            tokenizer,
            tokenizer_name=directory,
        )
    except SteplabError as exc:
        raise ApplicationError(f"Row {index} cannot be encoded: {exc}") from None
    return {
        "views": views,
        "check": report.to_dict(),
        "tokenizer": directory,
        "policy": policy,
        "choices": tokenizer_choices()[:200],
        "page": TOKENS_PER_PAGE,
    }


def _checked_tokenizer(snapshot: DatasetSnapshot) -> str:
    return str((snapshot.token_check or {}).get("tokenizer") or "")


def dataset_check(*, directory: str, tokenizer_dir: str, splits=SPLITS) -> drift.DriftReport:
    """The drift check of the rows in ``splits`` of a dataset directory (at most
    ``MAX_ROWS_CHECKED`` rows; a note says when more were left out). ``splits`` of one name
    reads that split of a directory or the file ``directory`` itself (a trainer's dataset)."""
    tokenizer = _tokenizer(tokenizer_dir)
    named = len(splits) > 1  # an export's splits are named in the report; a trainer's file not
    parts, total = [], 0
    for split in splits:
        rows = _split_rows(directory, split)
        parts.append((split, rows[: max(0, MAX_ROWS_CHECKED - total)]))
        total += len(rows)

    def lookup(ids):
        return recorded_ids(step_ids=ids)

    conversations = (
        conversation
        for split, rows in parts
        for conversation in drift.dataset_conversations(rows, lookup, split=split if named else "")
    )
    report = drift.check_conversations(conversations, tokenizer, tokenizer_name=tokenizer_dir)
    if total > MAX_ROWS_CHECKED:
        report.notes.append(f"checked the first {MAX_ROWS_CHECKED} of {total} rows")
    return report


# --------------------------------------------------------------------------- writes


def snapshot_token_check(
    *, snapshot: DatasetSnapshot, directory: str, policy: Policy
) -> dict[str, Any]:
    """Check an export's files for ``policy``'s tokenizer and record the result on the snapshot;
    ApplicationError with the first difference when they do not match (the export is
    blocked: its files are not recorded)."""
    tokenizer_dir = policy_tokenizer_dir(policy=policy)
    report = dataset_check(directory=directory, tokenizer_dir=tokenizer_dir)
    result = {
        **report.to_dict(),
        "policy": policy.name,
        "policy_id": policy.pk,
        "directory": directory,  # a blocked export's rows stay viewable (its files unrecorded)
    }
    snapshot.token_check = result
    snapshot.save(update_fields=["token_check"])
    if report.blocks:
        raise ApplicationError(f"Export blocked for policy {policy.name!r}. {report.summary()}")
    return result


def policy_for_check(*, policy_id: Any) -> Policy | None:
    """The policy an export checks tokens for (None when none was asked)."""
    if policy_id in (None, ""):
        return None
    policy = Policy.objects.filter(pk=policy_id).first()
    if policy is None:
        raise ApplicationError(f"Policy {policy_id} no longer exists.")
    return policy


def training_token_check(*, data_path: str, model_dir: str) -> dict[str, Any]:
    """The drift check a training run starts with: the file the trainer reads (a split file or
    a dataset directory's train split) against the base model's tokenizer, as a dict
    (``status`` "mismatch" blocks the run)."""
    if not Path(data_path).exists():
        return {}
    try:
        report = dataset_check(directory=data_path, tokenizer_dir=model_dir, splits=("train",))
    except SteplabError as exc:  # rows no trainer of chat rows reads: the trainer says why
        return {"status": "not_checkable", "summary": f"Not checkable: {exc}"}
    return report.to_dict()
