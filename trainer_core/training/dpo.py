"""Direct preference optimisation on agent trajectories: ``train(DPOConfig(...), on_progress)``.

Data
    JSONL rows in TRL's conversational preference format, as ``trainer_core.datasets`` exports
    them: ``{"prompt": [messages], "chosen": [messages], "rejected": [messages], "tools"?: [...]}``.
    ``prompt`` is the conversation both continuations share (system, the task, and any earlier
    turns); ``chosen`` and ``rejected`` are the two continuations (assistant turns with their tool
    calls, and the tool results between them). A row with ``tools`` and no system message gets
    ``chat_format.system_prompt(tools)``, the prompt the local-model policy uses.

Log-probabilities
    ``prompt + chosen`` and ``prompt + rejected`` are each tokenized with the one chat format
    (:func:`~trainer_core.training.data.encode_messages`); a continuation's log-prob is the sum
    over its tokens that carry loss. ``observation_masking`` (on by default): only the policy's own
    tokens carry loss (each assistant turn's content and ``<|im_end|>``), never a tool result or
    a role header inside the continuation; off: every token of the continuation does (TRL's
    completion mask). The prompt never does.

Losses
    ``sigmoid``, ``ipo``, ``hinge``, ``robust`` — TRL's definitions
    (:func:`~trainer_core.training.losses.dpo_loss`; IPO normalises by the continuation's count of
    tokens that carry loss, as TRL does).

Reference
    ``reference="model"``: a frozen copy of the initial model scores every batch (with LoRA, the
    base model with the adapters switched off: no second copy). ``"precomputed"``: the initial
    model scores every pair once before training; the values are cached in
    ``<output_dir>/reference_logps.json`` (keyed by the model, the data and the encoding) and
    reused by a resumed or repeated run, so no reference model stays in memory.

Batches, processes, checkpoints: as in :mod:`trainer_core.training.sft` — ``batch_size`` pairs
per micro-batch over all processes, ``grad_accum`` micro-batches per step, an order that is a
function of the seed and the position (exact resume), the loss of a step is the mean over its
pairs whatever the number of processes. Each step's line in ``<output_dir>/lineage.jsonl`` lists
the dataset rows of the pairs it trained on (:mod:`trainer_core.training.lineage`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer_core.errors import ConfigError, InputError
from trainer_core.progress import ProgressEvent
from trainer_core.training.config import TrainConfig, TrainResult, option
from trainer_core.training.data import (
    Encoded,
    batch_indices,
    collate,
    encode_messages,
    process_share,
    read_rows,
    to_device,
    with_tools_system,
)
from trainer_core.training.loop import Run, prepare_run, report, start_run
from trainer_core.training.losses import DPO_LOSS_TYPES, check_dpo_settings, dpo_loss
from trainer_core.training.modelling import (
    IGNORE_INDEX,
    compute_precision,
    load_seeded,
    sequence_logprobs,
    weights_dtype,
)

__all__ = [
    "DPOConfig",
    "Pair",
    "encode_continuation",
    "encode_pair",
    "encode_pairs",
    "frozen_reference",
    "pair_logprobs",
    "precompute_reference",
    "prompt_messages",
    "train",
]

REFERENCES = ("model", "precomputed")
CACHE_FILE = "reference_logps.json"


@dataclass
class DPOConfig(TrainConfig):
    """Direct preference optimisation (see :mod:`trainer_core.training.dpo`)."""

    batch_size: int = option(
        4,
        help="Preference pairs per micro-batch over all processes together (each of N processes "
        "takes batch_size / N of them).",
    )
    beta: float = option(
        0.1,
        help="How far the policy may move from the reference: higher keeps it closer. For ipo, "
        "the regularisation τ of the IPO paper.",
    )
    loss_type: str = option(
        "sigmoid",
        help="sigmoid (DPO), ipo, hinge (SLiC) or robust (robust DPO, with label_smoothing); "
        "TRL's definitions.",
    )
    label_smoothing: float = option(
        0.0,
        help="robust only: the probability that a preference label is flipped, in [0, 0.5).",
    )
    reference: str = option(
        "model",
        help="model: a frozen copy of the initial model scores each batch. precomputed: the "
        "initial model scores every pair once before training (cached in output_dir), so no "
        "reference model stays in memory.",
    )
    observation_masking: bool = option(
        True,
        help="Only the policy's own tokens (assistant turns) of chosen and rejected count in "
        "their log-probs; tool results inside them do not. Off: every token of the continuation "
        "counts.",
    )

    def validate(self) -> None:
        super().validate()
        if not self.dataset:
            raise ConfigError("DPOConfig: dataset is empty; give an exported DPO JSONL file")
        if self.loss_type not in DPO_LOSS_TYPES:
            raise ConfigError(
                f"DPOConfig: loss_type {self.loss_type!r} is not one of {', '.join(DPO_LOSS_TYPES)}"
            )
        if self.reference not in REFERENCES:
            raise ConfigError(
                f"DPOConfig: reference {self.reference!r} is not one of {', '.join(REFERENCES)}"
            )
        check_dpo_settings(self.beta, self.loss_type, self.label_smoothing)


@dataclass
class Pair:
    """One preference pair, encoded."""

    chosen: Encoded
    rejected: Encoded
    row: int
    ref_chosen: float | None = None  # precomputed reference log-probs
    ref_rejected: float | None = None


# --------------------------------------------------------------------------- data


def _messages(row: Mapping[str, Any], key: str, index: int) -> list[dict[str, Any]]:
    value = row.get(key)
    if not isinstance(value, list) or not value or not all(isinstance(m, Mapping) for m in value):
        keys = ", ".join(sorted(map(str, row))) or "none"
        raise InputError(
            f"row {index}: a DPO row needs '{key}' as a non-empty list of chat messages (TRL's "
            f"conversational preference format: prompt, chosen, rejected); it has keys {keys}"
        )
    return [dict(m) for m in value]


def prompt_messages(row: Mapping[str, Any], index: int) -> list[dict[str, Any]]:
    """The row's ``prompt`` messages, with ``system_prompt(tools)`` first when the row lists
    ``tools`` (a list, or the exporters' JSON text) and the prompt has no system message."""
    return with_tools_system(_messages(row, "prompt", index), row, index)


def encode_continuation(
    prompt: list[dict[str, Any]],
    continuation: list[dict[str, Any]],
    tokenizer: Any,
    *,
    max_length: int,
    observation_masking: bool,
) -> Encoded:
    """``prompt + continuation`` encoded; only the continuation's tokens carry loss (with
    ``observation_masking`` only the policy's own), and ``step_ids`` count the continuation's
    assistant turns from 0 (-1 elsewhere)."""
    from trainer_core.policies import chat_format

    encoded = encode_messages(prompt + continuation, tokenizer, max_length=max_length)
    start = len(chat_format.tokenize(prompt, tokenizer).input_ids)
    earlier = sum(1 for m in prompt if m.get("role") == "assistant")
    labels = encoded.labels if observation_masking else encoded.input_ids
    encoded.labels = [IGNORE_INDEX if i < start else t for i, t in enumerate(labels)]
    encoded.step_ids = [
        s - earlier if i >= start and s >= 0 else -1 for i, s in enumerate(encoded.step_ids)
    ]
    return encoded


def encode_pair(row: Mapping[str, Any], index: int, tokenizer: Any, config: DPOConfig) -> Pair:
    """A row as a :class:`Pair` (see the module docstring)."""
    prompt = prompt_messages(row, index)
    sides = [
        encode_continuation(
            prompt,
            _messages(row, key, index),
            tokenizer,
            max_length=config.max_length,
            observation_masking=config.observation_masking,
        )
        for key in ("chosen", "rejected")
    ]
    return Pair(chosen=sides[0], rejected=sides[1], row=index)


def encode_pairs(
    rows: Sequence[Mapping[str, Any]], tokenizer: Any, config: DPOConfig
) -> tuple[list[Pair], int]:
    """Rows → pairs; a pair whose chosen or rejected side has no token that carries loss (after
    truncation to ``max_length``) is dropped. Returns the pairs and how many were dropped."""
    pairs, dropped = [], 0
    for index, row in enumerate(rows):
        pair = encode_pair(row, index, tokenizer, config)
        if pair.chosen.num_label_tokens == 0 or pair.rejected.num_label_tokens == 0:
            dropped += 1
            continue
        pairs.append(pair)
    return pairs, dropped


def pair_logprobs(model: Any, pairs: Sequence[Pair], pad_id: int) -> tuple[Any, Any]:
    """Summed log-probs of the chosen and rejected continuations, each ``(pairs,)``, in one
    forward pass over ``[chosen..., rejected...]``."""
    device = next(model.parameters()).device
    batch = collate([p.chosen for p in pairs] + [p.rejected for p in pairs], pad_id)
    batch = to_device(batch, device)
    logps = sequence_logprobs(model, batch)
    return logps[: len(pairs)], logps[len(pairs) :]


def _label_counts(pairs: Sequence[Pair], side: str, device: Any) -> Any:
    import torch

    counts = [getattr(p, side).num_label_tokens for p in pairs]
    return torch.tensor(counts, dtype=torch.float32, device=device)


# --------------------------------------------------------------------------- reference


def _precision_key(config: DPOConfig) -> str:
    """The precision the reference log-probs were computed in, as the cache's fingerprint names
    it: the weights' dtype, and ``bf16-mixed`` for full fine-tuning in bf16 (fp32 weights
    computed under bf16 autocast; caches written before that was so hold fp32 values)."""
    precision = compute_precision(config)
    return precision if precision == "bf16-mixed" else weights_dtype(config)


def _fingerprint(config: DPOConfig, pairs: Sequence[Pair]) -> str:
    digest = hashlib.sha256()
    model_dir = Path(config.model_dir).expanduser().resolve()
    weights = sorted(model_dir.glob("*.safetensors")) + sorted(model_dir.glob("*.bin"))
    stamp = [(w.name, w.stat().st_size, w.stat().st_mtime_ns) for w in weights]
    digest.update(json.dumps([str(model_dir), stamp, _precision_key(config)]).encode())
    for p in pairs:
        for e in (p.chosen, p.rejected):
            digest.update(json.dumps([e.input_ids, e.labels]).encode())
    return digest.hexdigest()


def precompute_reference(
    model: Any,
    pairs: Sequence[Pair],
    pad_id: int,
    *,
    batch_size: int,
    cache: Path | None = None,
    fingerprint: str = "",
) -> bool:
    """Fill each pair's ``ref_chosen``/``ref_rejected`` with ``model``'s log-probs (no grad, eval
    mode), or from ``cache`` when it was written for the same ``fingerprint``; write the cache
    when one is named and it was computed. Returns whether the cache was used."""
    import torch

    if cache is not None and cache.is_file():
        try:
            data = json.loads(cache.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            data = {}
        values = data.get("logps")
        if data.get("fingerprint") == fingerprint and isinstance(values, list):
            if len(values) == len(pairs):
                for pair, (chosen, rejected) in zip(pairs, values, strict=True):
                    pair.ref_chosen, pair.ref_rejected = float(chosen), float(rejected)
                return True
    was_training = model.training
    model.eval()
    with torch.no_grad():
        for first in range(0, len(pairs), batch_size):
            chunk = pairs[first : first + batch_size]
            chosen, rejected = pair_logprobs(model, chunk, pad_id)
            for pair, c, r in zip(chunk, chosen.tolist(), rejected.tolist(), strict=True):
                pair.ref_chosen, pair.ref_rejected = c, r
    model.train(was_training)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "fingerprint": fingerprint,
            "logps": [[p.ref_chosen, p.ref_rejected] for p in pairs],
        }
        tmp = cache.with_suffix(".tmp")
        tmp.write_text(json.dumps(payload), encoding="utf-8")
        tmp.replace(cache)
    return False


def frozen_reference(model: Any) -> Any:
    """A frozen copy of ``model`` (eval mode, no grad) — for LoRA, None: the trained model with
    its adapters switched off is the reference."""
    if hasattr(model, "disable_adapter") and hasattr(model, "peft_config"):
        return None
    reference = copy.deepcopy(model)
    reference.eval()
    reference.requires_grad_(False)
    return reference


def _reference_logprobs(
    reference: Any, model: Any, pairs: Sequence[Pair], pad_id: int, accelerator: Any
) -> tuple[Any, Any]:
    import torch

    device = accelerator.device
    if pairs[0].ref_chosen is not None:
        chosen = torch.tensor([p.ref_chosen for p in pairs], device=device)
        rejected = torch.tensor([p.ref_rejected for p in pairs], device=device)
        return chosen, rejected
    # the policy's precision (bf16 autocast under mixed precision): equal weights, equal values
    with torch.no_grad(), accelerator.autocast():
        if reference is not None:
            return pair_logprobs(reference, pairs, pad_id)
        inner = accelerator.unwrap_model(model)
        with inner.disable_adapter():
            return pair_logprobs(inner, pairs, pad_id)


# --------------------------------------------------------------------------- training

#: What a step sums over its pairs (then divided by the step's number of pairs).
_SUMS = ("loss", "chosen_reward", "rejected_reward", "accuracy", "chosen_logp", "rejected_logp")


def _reference_for(
    config: DPOConfig, model: Any, pairs: Sequence[Pair], pad_id: int, accelerator: Any
) -> tuple[Any, str]:
    """The reference, made from the initial model before any checkpoint is loaded into it: the
    precomputed log-probs filled into ``pairs`` (returns None), or a frozen copy (None for LoRA:
    the adapters switched off). Returns it and a description for the progress log."""
    if config.reference == "precomputed":
        with accelerator.autocast():  # in the policy's precision, as a reference model would be
            cached = precompute_reference(
                model,
                pairs,
                pad_id,
                batch_size=max(1, config.batch_size),
                cache=Path(config.output_dir) / CACHE_FILE if accelerator.is_main_process else None,
                fingerprint=_fingerprint(config, pairs),
            )
        return None, "read from the cache" if cached else "computed"
    reference = frozen_reference(model)
    return reference, "a frozen copy of the initial model" if reference is not None else "LoRA off"


def _pair_losses(run: Run, reference: Any, mine: list[Pair]) -> tuple[Any, Any]:
    """The DPO losses of ``mine`` (one per pair) and their sums of :data:`_SUMS`."""
    import torch

    config, device, pad_id = run.config, run.accelerator.device, run.tokenizer.pad_token_id
    chosen, rejected = pair_logprobs(run.model, mine, pad_id)
    ref_chosen, ref_rejected = _reference_logprobs(
        reference, run.model, mine, pad_id, run.accelerator
    )
    losses, chosen_rewards, rejected_rewards = dpo_loss(
        chosen,
        rejected,
        ref_chosen,
        ref_rejected,
        beta=config.beta,
        loss_type=config.loss_type,
        label_smoothing=config.label_smoothing,
        chosen_lengths=_label_counts(mine, "chosen", device),
        rejected_lengths=_label_counts(mine, "rejected", device),
    )
    sums = torch.stack(
        [
            losses.detach().sum(),
            chosen_rewards.sum(),
            rejected_rewards.sum(),
            (chosen_rewards > rejected_rewards).float().sum(),
            chosen.detach().sum(),
            rejected.detach().sum(),
        ]
    )
    return losses, sums


def _backward(
    run: Run, reference: Any, pairs: Sequence[Pair], *, share: tuple[int, int, int], norm: int
) -> tuple[Any, list[list[int]]]:
    """Forward and backward passes over one optimizer step's micro-batches (this process's share
    of each; ``share`` is ``(world, rank, per_process)``; ``norm`` the step's number of pairs).
    Returns this process's sums of :data:`_SUMS` and the dataset rows of the pairs it trained
    on, per micro-batch."""
    import torch

    config = run.config
    world, rank, per_process = share
    sums = torch.zeros(len(_SUMS), device=run.accelerator.device)
    trained: list[list[int]] = []
    for m in range(config.grad_accum):
        index = run.step * config.grad_accum + m
        picked = batch_indices(len(pairs), config.batch_size, index, config.seed)
        mine = [pairs[i] for i in process_share(picked, rank, per_process)]
        trained.append([p.row for p in mine])
        with run.grad_sync(last=m == config.grad_accum - 1):
            losses, micro_sums = _pair_losses(run, reference, mine)
            # DDP averages over processes: scale to the gradient of the step's pair mean.
            run.accelerator.backward(losses.sum() * world / norm)
        sums += micro_sums
    return sums, trained


def _step_metrics(means: dict[str, float], **extra: float) -> dict[str, float]:
    """A step's logged metrics from the means of :data:`_SUMS` (TRL's names)."""
    return {
        "loss": means["loss"],
        "rewards/chosen": means["chosen_reward"],
        "rewards/rejected": means["rejected_reward"],
        "rewards/margin": means["chosen_reward"] - means["rejected_reward"],
        "rewards/accuracy": means["accuracy"],
        "logps/chosen": means["chosen_logp"],
        "logps/rejected": means["rejected_logp"],
        "logps/margin": means["chosen_logp"] - means["rejected_logp"],
        **extra,
    }


def train(
    config: DPOConfig, on_progress: Callable[[ProgressEvent], None] | None = None
) -> TrainResult:
    """Train ``config.model_dir`` on the preference pairs of ``config.dataset``; checkpoints go to
    ``config.output_dir``. Returns the final loss, the step count, the last checkpoint and the
    logged metrics (loss, implicit rewards, their margin and accuracy, the policy's log-probs of
    chosen and rejected and their margin)."""
    accelerator, world, rank, per_process = start_run(config)

    # 1. data and model
    rows = read_rows(config.dataset)
    model, tokenizer = load_seeded(config, accelerator)
    pairs, dropped = encode_pairs(rows, tokenizer, config)
    if not pairs:
        raise InputError(
            f"no pair in {config.dataset} has tokens that carry loss on both sides (after "
            f"truncation to max_length={config.max_length}); check the rows' chosen and rejected "
            "hold assistant turns"
        )

    # 2. the reference: the initial model, before any checkpoint is loaded into it
    reference, what = _reference_for(config, model, pairs, tokenizer.pad_token_id, accelerator)
    report(
        on_progress,
        step=0,
        total=config.max_steps,
        metrics={"pairs": len(pairs), "dropped": dropped},
        message=f"{len(rows)} rows → {len(pairs)} pairs ({dropped} without loss dropped); "
        f"reference: {what}",
    )
    run = prepare_run(config, accelerator, model, tokenizer, on_progress)
    run.last_dir = str(config.resume_from)  # resumed at max_steps: the result names it as given

    # 3. the loop: one optimizer step = grad_accum micro-batches over every process
    loss_value = float("nan")
    step_pairs = config.batch_size * config.grad_accum
    while not run.done:
        started = time.perf_counter()
        sums, trained = _backward(
            run, reference, pairs, share=(world, rank, per_process), norm=step_pairs
        )
        grad_norm, learning_rate = run.update()
        consumed = run.gather_ids(trained)
        totals = accelerator.reduce(sums, reduction="sum") / step_pairs
        means = dict(zip(_SUMS, totals.tolist(), strict=True))
        loss_value = means["loss"]
        metrics = _step_metrics(
            means,
            learning_rate=learning_rate,
            grad_norm=grad_norm,
            seconds=time.perf_counter() - started,
        )
        run.end_step(
            loss=loss_value,
            metrics=metrics,
            message=f"step {run.step}/{config.max_steps} loss {loss_value:.4f} margin "
            f"{metrics['rewards/margin']:.4f}",
            consumed=consumed,
        )

    return run.result(loss_value)
