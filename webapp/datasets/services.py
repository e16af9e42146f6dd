"""Dataset snapshots: create one (its export job writes the files through
``trainer_core.datasets``, the one writer of every dataset file) and record what was written."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from webapp.common.errors import ApplicationError
from webapp.datasets.models import DatasetSnapshot
from webapp.datasets.selectors import dpo_pairs, label_snapshot
from webapp.datasets.token_check import policy_tokenizer_dir
from webapp.jobs.names import Kinds
from webapp.jobs.services import job_enqueue


def snapshot_create(
    *,
    name: str,
    kind: str,
    query: dict[str, Any] | None = None,
    reward_model=None,
    label_source: str = DatasetSnapshot.LabelSource.MODEL,
    seed: int = 0,
    build_pairs: dict[str, Any] | None = None,
    token_policy=None,
    user=None,
    parent_job=None,
) -> DatasetSnapshot:
    """A snapshot and its export job. ``build_pairs`` (DPO from reward-model scores):
    ``{"method": "outside_in" | "adjacent", "min_margin": float}``, the export job first builds
    preference pairs among the selected trajectories from the version's totals. A DPO snapshot
    with no pair to export and no ``build_pairs`` is refused, saying how to get pairs.
    ``token_policy``: export for this policy's tokenizer — the job runs the drift check
    (``token_check``) on the files and a mismatch fails the export."""
    if kind not in DatasetSnapshot.Kind.values:
        raise ApplicationError(f"Unknown dataset kind {kind!r}.")
    if DatasetSnapshot.objects.filter(name=name).exists():
        raise ApplicationError(f"A dataset named {name!r} exists already; choose another name.")
    query = dict(query or {})
    if kind in ("dpo", "grpo") or (kind == "prm" and label_source == "model"):
        if reward_model is None and not (kind == "dpo" and label_source == "human"):
            raise ApplicationError(
                f"A {kind} dataset needs the reward-model version that scores it."
            )
    if kind == "bench" and not query.get("task_set"):
        raise ApplicationError("A benchmark dataset needs a task set.")
    build_pairs = _pair_options(build_pairs, kind=kind, label_source=label_source)
    if kind == "dpo" and build_pairs is None:
        _require_pairs(reward_model=reward_model, label_source=label_source)
    if token_policy is not None:
        if kind not in ("sft", "dpo", "grpo"):
            raise ApplicationError(
                "The drift check reads chat rows (SFT messages, DPO or GRPO): export this kind "
                "without “Check tokens for policy”."
            )
        policy_tokenizer_dir(policy=token_policy)  # refused now when it has no tokenizer
    with transaction.atomic():
        snapshot = DatasetSnapshot.objects.create(
            name=name,
            kind=kind,
            query=query,
            reward_model=reward_model,
            label_source=label_source,
            seed=seed,
            created_by=user if getattr(user, "is_authenticated", False) else None,
        )
        params: dict[str, Any] = {"snapshot_id": snapshot.pk}
        if build_pairs is not None:
            params["build_pairs"] = build_pairs
        if token_policy is not None:
            params["token_policy"] = token_policy.pk
        snapshot.job = job_enqueue(
            kind=Kinds.EXPORT_DATASET, params=params, user=user, parent=parent_job,
            message="Waiting for a worker to export the dataset.",
        )  # fmt: skip
        snapshot.save(update_fields=["job"])
    return snapshot


PAIR_METHODS = ("outside_in", "adjacent")


def _pair_options(options, *, kind: str, label_source: str) -> dict[str, Any] | None:
    """``build_pairs`` checked: a method that makes pairs, a margin that is a number ≥ 0."""
    if not options:
        return None
    if kind != "dpo" or label_source != DatasetSnapshot.LabelSource.MODEL:
        raise ApplicationError(
            "Preference pairs are built from reward-model scores for a DPO dataset: choose kind "
            "DPO with labels from reward-model scores, or untick “Build preference pairs first”."
        )
    method = options.get("method") or "outside_in"
    if method not in PAIR_METHODS:
        raise ApplicationError(f"Pair method {method!r}: use one of {', '.join(PAIR_METHODS)}.")
    raw = options.get("min_margin")
    try:
        margin = 0.1 if raw in (None, "") else float(raw)
    except (TypeError, ValueError):
        raise ApplicationError("The minimum margin must be a number.") from None
    if not margin >= 0:  # NaN too
        raise ApplicationError("The minimum margin must be a number ≥ 0.")
    return {"method": method, "min_margin": margin}


def _require_pairs(*, reward_model, label_source: str) -> None:
    """A DPO export without building pairs needs pairs to exist (ApplicationError saying how to
    get them: this form's checkbox, the pairs page, the CLI, or pairwise annotation)."""
    reward_model_id = reward_model.pk if reward_model is not None else None
    if dpo_pairs(reward_model_id=reward_model_id, label_source=label_source).exists():
        return
    if label_source == DatasetSnapshot.LabelSource.HUMAN:
        raise ApplicationError(
            "There are no human preference pairs yet: they come from pairwise annotation "
            "queues. Label pairs there first, or export from reward-model scores with “Build "
            "preference pairs first”.",
            extra={"hint": "pairs"},
        )
    raise ApplicationError(
        f"Reward-model version {reward_model.label} has no preference pairs yet, and a DPO "
        "dataset exports pairs. Tick “Build preference pairs first” to build them from this "
        "version's totals in the export job, or build them on the Preference pairs page "
        f"(`steplab preferences --version {reward_model.pk}`).",
        extra={"hint": "pairs"},
    )


def snapshot_record_files(*, snapshot: DatasetSnapshot, files, selected: dict[str, int]) -> None:
    """Record what the export wrote: the directory, the counts per split, every file with its
    hash and size, and the human labels at this moment (provenance)."""
    snapshot.directory = str(files.directory)
    snapshot.counts = {**files.counts, "duplicates": files.duplicates, **selected}
    snapshot.files = {
        name: {
            "path": str(path.relative_to(files.directory)),
            "sha256": files.sha256.get(name, ""),
            "bytes": path.stat().st_size,
        }
        for name, path in sorted(files.files.items())
    }
    snapshot.label_snapshot = label_snapshot()
    snapshot.save(update_fields=["directory", "counts", "files", "label_snapshot"])
