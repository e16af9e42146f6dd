"""The DPO and GRPO losses, as pure functions on tensors (TRL's definitions; tests check them
against TRL's own code on the same tensors).

DPO (:func:`dpo_loss`), on summed log-probs of each completion's policy tokens, with
``Δ = (log π(chosen) − log π_ref(chosen)) − (log π(rejected) − log π_ref(rejected))``:

========  ===============================================================================
sigmoid   ``−log σ(β Δ)`` (the DPO paper)
hinge     ``max(0, 1 − β Δ)`` (SLiC)
ipo       ``(Δ̄ − 1/(2β))²`` where Δ̄ uses each log-ratio divided by its completion's token count
          (TRL's length-normalised IPO; without lengths the plain sums are used)
robust    ``(−(1−ε) log σ(β Δ) + ε log σ(−β Δ)) / (1 − 2ε)``, ε = ``label_smoothing`` (the
          probability that a preference label is flipped, 0 ≤ ε < 0.5)
========  ===============================================================================

GRPO (:func:`grpo_loss`), per completion token, with the ratio ``r = exp(log π − log π_old)``
and the advantage ``A`` (per completion, or per token for step-level advantages)::

    loss_t = −min(r A, clip(r, 1 − ε_low, 1 + ε_high) A) + β KL_t,
    KL_t   = exp(log π_ref − log π) − (log π_ref − log π) − 1        (the k3 estimator)

Off-policy correction (decoupled GRPO, :mod:`trainer_core.training.offpolicy`): given the
behaviour log-probs ``log μ`` of the distribution the tokens were sampled from, each token's loss
(the clipped term and the KL term) is multiplied by the truncated importance weight
``w_t = min(exp(log π_old − log μ), C)``, detached (1 on tokens outside ``behaviour_mask``);
``completion_weights`` multiply each completion's token losses (stale groups down-weighted).
Without them the loss is TRL's, unchanged.

The loss is then reduced over the completion tokens (``completion_mask``) by the loss type:

=======  ==============================================================================
grpo     mean over each completion's tokens, then mean over completions
bnpo     mean over all completion tokens of the batch
dr_grpo  sum over all completion tokens / (completions × ``max_completion_length``)
dapo     sum over all completion tokens / ``num_items_in_batch`` (the token count of the whole
         accumulation window; default: this batch's)
=======  ==============================================================================

The advantages themselves come from :mod:`trainer_core.training.advantages` (the estimators).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainer_core.errors import ConfigError

if TYPE_CHECKING:
    import torch

__all__ = [
    "DPO_LOSS_TYPES",
    "GRPO_LOSS_TYPES",
    "dpo_loss",
    "grpo_loss",
]

DPO_LOSS_TYPES: tuple[str, ...] = ("sigmoid", "ipo", "hinge", "robust")
GRPO_LOSS_TYPES: tuple[str, ...] = ("grpo", "dr_grpo", "dapo", "bnpo")


def check_dpo_settings(beta: float, loss_type: str, label_smoothing: float) -> None:
    """Raise ConfigError for a DPO setting no loss accepts."""
    if loss_type not in DPO_LOSS_TYPES:
        raise ConfigError(
            f"unknown DPO loss type {loss_type!r}; use one of {', '.join(DPO_LOSS_TYPES)}"
        )
    if not beta > 0:
        raise ConfigError(f"beta must be above 0, not {beta!r}")
    if loss_type == "robust":
        if not 0.0 <= label_smoothing < 0.5:
            raise ConfigError(
                f"label_smoothing is the probability that a preference is flipped, in [0, 0.5); "
                f"got {label_smoothing!r}"
            )
    elif label_smoothing != 0.0:
        raise ConfigError(
            f"label_smoothing is used by the robust loss only; set it to 0 for {loss_type!r} "
            "or use loss_type='robust'"
        )


def dpo_loss(
    policy_chosen_logps: torch.Tensor,
    policy_rejected_logps: torch.Tensor,
    ref_chosen_logps: torch.Tensor,
    ref_rejected_logps: torch.Tensor,
    *,
    beta: float = 0.1,
    loss_type: str = "sigmoid",
    label_smoothing: float = 0.0,
    chosen_lengths: torch.Tensor | None = None,
    rejected_lengths: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-pair DPO losses and the implicit rewards ``β (log π − log π_ref)`` of the chosen and
    rejected completions (detached), each of shape ``(pairs,)``. The log-probs are sums over each
    completion's policy tokens; ``chosen_lengths``/``rejected_lengths`` (token counts) are used by
    ``ipo`` only (see the module docstring). Take ``losses.mean()`` as the batch loss."""
    import torch.nn.functional as F

    check_dpo_settings(beta, loss_type, label_smoothing)
    chosen_logratios = policy_chosen_logps - ref_chosen_logps
    rejected_logratios = policy_rejected_logps - ref_rejected_logps
    delta = chosen_logratios - rejected_logratios
    if loss_type == "sigmoid":
        losses = -F.logsigmoid(beta * delta)
    elif loss_type == "hinge":
        losses = (1 - beta * delta).relu()
    elif loss_type == "ipo":
        if (chosen_lengths is None) != (rejected_lengths is None):
            raise ConfigError("give both chosen_lengths and rejected_lengths, or neither")
        if chosen_lengths is not None and rejected_lengths is not None:
            delta = chosen_logratios / chosen_lengths.clamp(min=1.0) - (
                rejected_logratios / rejected_lengths.clamp(min=1.0)
            )
        losses = (delta - 1 / (2 * beta)) ** 2
    else:  # robust
        eps = label_smoothing
        clean = -(1 - eps) * F.logsigmoid(beta * delta)
        flipped = -eps * F.logsigmoid(-beta * delta)
        losses = (clean - flipped) / (1 - 2 * eps)
    return losses, beta * chosen_logratios.detach(), beta * rejected_logratios.detach()


def check_grpo_settings(
    loss_type: str, beta: float, epsilon_low: float, epsilon_high: float
) -> None:
    """Raise ConfigError for a GRPO setting the loss does not accept."""
    if loss_type not in GRPO_LOSS_TYPES:
        raise ConfigError(
            f"unknown GRPO loss type {loss_type!r}; use one of {', '.join(GRPO_LOSS_TYPES)}"
        )
    if not beta >= 0:
        raise ConfigError(f"beta (the KL coefficient) must be 0 or more, not {beta!r}")
    if not 0 <= epsilon_low < 1 or not epsilon_high >= 0:
        raise ConfigError(
            f"the clip range needs 0 ≤ epsilon_low < 1 and epsilon_high ≥ 0; got "
            f"{epsilon_low!r} and {epsilon_high!r}"
        )


def grpo_loss(
    per_token_logps: torch.Tensor,
    old_per_token_logps: torch.Tensor | None,
    ref_per_token_logps: torch.Tensor | None,
    advantages: torch.Tensor,
    completion_mask: torch.Tensor,
    *,
    loss_type: str = "grpo",
    beta: float = 0.0,
    epsilon_low: float = 0.2,
    epsilon_high: float = 0.2,
    max_completion_length: int | None = None,
    num_items_in_batch: torch.Tensor | float | None = None,
    behaviour_per_token_logps: torch.Tensor | None = None,
    importance_cap: float | None = None,
    behaviour_mask: torch.Tensor | None = None,
    completion_weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """The GRPO loss of a batch (see the module docstring). Tensors are ``(completions, tokens)``
    (the log-prob of each completion token under the policy being trained, the policy that sampled
    it, the reference); ``advantages`` is ``(completions,)`` or per token ``(completions, tokens)``;
    ``completion_mask`` is 1 on the tokens that carry loss. ``old_per_token_logps`` None: the
    sampling policy is the current one (one update per batch), the ratio is 1 with the gradient of
    the policy's. ``ref_per_token_logps`` is needed when ``beta > 0``. ``max_completion_length``
    (dr_grpo) defaults to the token dimension; ``num_items_in_batch`` (dapo) to the mask's sum.

    Off-policy (see the module docstring): ``behaviour_per_token_logps`` (``(completions,
    tokens)``, log μ) turns on the importance weights against π_old (``old_per_token_logps``, else
    the policy's own log-probs detached), capped at ``importance_cap`` (C ≥ 1; None: no cap), on
    the tokens of ``behaviour_mask`` (default ``completion_mask``; give the tokens the policy
    sampled when others carry loss too); ``completion_weights`` ``(completions,)`` multiply each
    completion's token losses."""
    import torch

    check_grpo_settings(loss_type, beta, epsilon_low, epsilon_high)
    mask = completion_mask.to(per_token_logps.dtype)
    if old_per_token_logps is None:
        old_per_token_logps = per_token_logps.detach()
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1)
    ratio = torch.exp(per_token_logps - old_per_token_logps)
    clipped = torch.clamp(ratio, 1 - epsilon_low, 1 + epsilon_high)
    per_token_loss = -torch.min(ratio * advantages, clipped * advantages)
    if beta != 0.0:
        if ref_per_token_logps is None:
            raise ConfigError("a KL term (beta > 0) needs the reference log-probs")
        diff = ref_per_token_logps - per_token_logps
        per_token_loss = per_token_loss + beta * (torch.exp(diff) - diff - 1)
    if behaviour_per_token_logps is not None:
        from trainer_core.training.offpolicy import importance_weights

        weights = importance_weights(
            old_per_token_logps,
            behaviour_per_token_logps,
            completion_mask if behaviour_mask is None else behaviour_mask,
            importance_cap,
        )
        per_token_loss = per_token_loss * weights.to(per_token_loss.dtype)
    if completion_weights is not None:
        per_token_loss = per_token_loss * completion_weights.to(per_token_loss.dtype).unsqueeze(1)
    masked = per_token_loss * mask
    if loss_type == "grpo":
        return (masked.sum(-1) / mask.sum(-1).clamp(min=1.0)).mean()
    if loss_type == "bnpo":
        return masked.sum() / mask.sum().clamp(min=1.0)
    if loss_type == "dr_grpo":
        length = per_token_loss.size(1) if max_completion_length is None else max_completion_length
        return masked.sum() / (per_token_loss.size(0) * length)
    # dapo
    count = mask.sum() if num_items_in_batch is None else num_items_in_batch
    count = torch.as_tensor(count, dtype=per_token_loss.dtype, device=per_token_loss.device)
    return masked.sum() / count.clamp(min=1.0)
