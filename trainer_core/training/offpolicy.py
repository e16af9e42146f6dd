"""Off-policy correction for decoupled GRPO: the behaviour log-probs of a sampled sequence, the
per-token importance weights, and the staleness admission of groups.

Decoupled training (:mod:`trainer_core.training.decoupled`) learns from groups sampled by an
earlier policy version μ (the *behaviour* policy) while the trainer's weights at the start of the
update are π_old. Each token's loss is multiplied by the truncated importance weight ::

    w_t = min(exp(log π_old(a_t) − log μ(a_t)), C)

computed without gradient (detached), 1 on tokens the policy did not sample. ``C`` (the cap,
``importance_cap``) bounds the variance a very stale or unlucky token can add; ``C = None`` leaves
the weight uncapped.

Both log-probs come from :func:`sequence_logprobs` (defined in
:mod:`~trainer_core.training.episodes`, where samplers record them; exported here too): each
sequence alone (no padding),
teacher-forced, without gradient, fp32 logits divided by the sampling temperature. A sampler
that records its behaviour log-probs with it (``rollout_groups(..., record_behaviour=True)``) and
a trainer with the same weights on the same device get the same numbers to the bit, so every
weight is exactly 1 — the correction has no effect on-policy.

Staleness: a group sampled by version ``v`` and trained while the trainer is at version ``V`` has
staleness ``V − v``. :func:`admit` keeps every group within ``max_staleness`` and, for the older
ones, drops them (``mode="drop"``) or keeps them with the weight ``stale_weight ** (staleness −
max_staleness)`` (``mode="downweight"``) that multiplies each of their completions' loss.

Not to be confused with :func:`trainer_core.training.modelling.sequence_logprobs`, the sum of a
padded batch's label log-probs per sequence (DPO).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trainer_core.errors import ConfigError, InputError
from trainer_core.training.episodes import Group, sequence_logprobs
from trainer_core.training.modelling import IGNORE_INDEX

if TYPE_CHECKING:
    import torch

__all__ = [
    "STALE_MODES",
    "Admitted",
    "admit",
    "importance_weights",
    "offpolicy_batch",
    "sequence_logprobs",
    "staleness",
    "weight_metrics",
    "weight_stats",
]

#: What :func:`admit` does with a group older than the bound.
STALE_MODES: tuple[str, ...] = ("drop", "downweight")


def importance_weights(
    old_logps: torch.Tensor,
    behaviour_logps: torch.Tensor,
    mask: torch.Tensor,
    cap: float | None,
) -> torch.Tensor:
    """Per-token truncated importance weights, detached, shape of ``old_logps``::

        w_t = min(exp(log π_old(a_t) − log μ(a_t)), C)   where mask is 1,   1.0 elsewhere

    ``old_logps``: log π_old, the trainer's weights at the start of the update;
    ``behaviour_logps``: log μ, the distribution the tokens were sampled from; ``cap``: C (at
    least 1), None for no cap."""
    import torch

    if cap is not None and not cap >= 1.0:
        raise ConfigError(f"the importance weight cap C must be at least 1 (got {cap})")
    old, behaviour = old_logps.detach().float(), behaviour_logps.detach().float()
    on = mask.bool()
    diff = torch.where(on, old - behaviour, torch.zeros_like(old))
    weights = torch.exp(diff)
    if cap is not None:
        weights = weights.clamp(max=float(cap))
    return torch.where(on, weights, torch.ones_like(weights))


def staleness(group: Group, current_version: int) -> int:
    """``current_version − group.version``: how many versions behind the trainer the policy that
    sampled ``group`` is. InputError for a group without a version."""
    if group.version is None:
        raise InputError(
            f"group {group.id if group.id is not None else group.key!r} has no policy version: "
            "decoupled training needs the version that sampled each group"
        )
    return int(current_version) - int(group.version)


@dataclass
class Admitted:
    """What :func:`admit` made of a batch of groups: those kept (in the order given) with each
    one's loss weight, those dropped, and each kept group's staleness."""

    kept: list[Group] = field(default_factory=list)
    weights: list[float] = field(default_factory=list)
    dropped: list[Group] = field(default_factory=list)
    staleness: list[int] = field(default_factory=list)  # per kept group


def admit(
    groups: Sequence[Group],
    current_version: int,
    *,
    max_staleness: int,
    mode: str = "drop",
    stale_weight: float = 0.5,
) -> Admitted:
    """Split ``groups`` by staleness (:func:`staleness`): a group with staleness at most
    ``max_staleness`` is always kept with weight 1.0 (a group newer than the trainer, staleness
    below 0, too); an older one is dropped (``mode="drop"``) or kept with weight ``stale_weight
    ** (staleness − max_staleness)`` (``mode="downweight"``)."""
    if mode not in STALE_MODES:
        raise ConfigError(f"stale_groups must be one of {', '.join(STALE_MODES)} (got {mode!r})")
    if max_staleness < 0:
        raise ConfigError(f"max_staleness must be 0 or more (got {max_staleness})")
    out = Admitted()
    for group in groups:
        age = staleness(group, current_version)
        if age <= max_staleness:
            weight = 1.0
        elif mode == "drop":
            out.dropped.append(group)
            continue
        else:
            weight = float(stale_weight) ** (age - max_staleness)
        out.kept.append(group)
        out.weights.append(weight)
        out.staleness.append(age)
    return out


# --------------------------------------------------------------------------- a batch's weights


def offpolicy_batch(
    model: Any,
    pairs: Sequence[tuple[Group, float]],
    *,
    width: int,
    temperature: float,
    device: Any,
) -> dict[str, Any]:
    """The off-policy tensors of the completions of ``pairs`` ((group, loss weight) each; the
    completions in group order, as :func:`~trainer_core.training.grpo._group_batch` collates
    them), right-padded to ``width``: ``old`` (π_old, :func:`sequence_logprobs` of ``model`` now),
    ``behaviour`` (the recorded log μ), ``sampled`` (the tokens the policy sampled that carry
    loss: where the weights apply) and ``completion_weights`` (each completion's group weight).
    InputError for a completion without behaviour log-probs."""
    import torch

    old, behaviour, sampled, weights = [], [], [], []
    for group, weight in pairs:
        for c in group.completions:
            e = c.encoded
            if c.behaviour_logprobs is None:
                raise InputError(
                    f"group {group.id!r} (task {group.key}) has no behaviour log-probs: samplers "
                    "must record them (rollout_groups(..., record_behaviour=True))"
                )
            pad = [0.0] * (width - len(e.input_ids))
            old.append(sequence_logprobs(model, e.input_ids, e.labels, temperature) + pad)
            behaviour.append(list(c.behaviour_logprobs) + pad)
            own = [
                label != IGNORE_INDEX and s >= 0
                for label, s in zip(e.labels, e.step_ids, strict=True)
            ]
            sampled.append(own + [False] * len(pad))
            weights.append(weight)
    return {
        "old": torch.tensor(old, dtype=torch.float32, device=device),
        "behaviour": torch.tensor(behaviour, dtype=torch.float32, device=device),
        "sampled": torch.tensor(sampled, dtype=torch.bool, device=device),
        "completion_weights": torch.tensor(weights, dtype=torch.float32, device=device),
    }


def weight_stats(batch: Mapping[str, Any], cap: float) -> torch.Tensor:
    """The importance weights of an :func:`offpolicy_batch` over its sampled tokens, as float64
    ``[sum, count, clipped (raw ratio above the cap), min, max]`` on the CPU (min/max ±inf when
    there is no token). Several batches combine by summing the first three and taking the min
    and max of the others (:func:`weight_metrics`)."""
    import torch

    mask = batch["sampled"]
    weights = importance_weights(batch["old"], batch["behaviour"], mask, cap)[mask].double()
    if not len(weights):
        return torch.tensor([0.0, 0.0, 0.0, float("inf"), float("-inf")], dtype=torch.float64)
    raw = torch.exp((batch["old"] - batch["behaviour"])[mask].double())
    count = torch.tensor(float(len(weights)), dtype=torch.float64, device=weights.device)
    parts = [weights.sum(), count, (raw > cap).sum().double(), weights.min(), weights.max()]
    return torch.stack(parts).cpu()


def weight_metrics(rows: torch.Tensor) -> dict[str, float]:
    """Metrics from :func:`weight_stats` rows (one per micro-batch or process, ``(n, 5)``):
    ``importance_weight_mean``/``min``/``max`` and ``clipped_fraction`` (the share of sampled
    tokens whose ratio exceeded the cap); 1, 1, 1 and 0 without a sampled token."""
    rows = rows.double().cpu().reshape(-1, 5)
    total, count, clipped = (float(rows[:, i].sum()) for i in range(3))
    if count == 0:
        return {
            "importance_weight_mean": 1.0,
            "importance_weight_min": 1.0,
            "importance_weight_max": 1.0,
            "clipped_fraction": 0.0,
        }
    return {
        "importance_weight_mean": total / count,
        "importance_weight_min": float(rows[:, 3].min()),
        "importance_weight_max": float(rows[:, 4].max()),
        "clipped_fraction": clipped / count,
    }
