"""Supervised fine-tuning on agent trajectories: ``train(SFTConfig(...), on_progress)``.

Data
    JSONL rows in TRL's conversational format, as ``trainer_core.datasets`` exports them:
    ``{"messages": [...], "tools"?: [...], "step_rewards"?: [...], "difficulty"?: ...}``.
    ``messages`` are OpenAI-style chat messages (assistant ``tool_calls``, ``tool`` results),
    rendered and tokenized with the one chat format
    (:func:`~trainer_core.policies.chat_format.tokenize`). A row with ``tools`` and no system
    message gets ``chat_format.system_prompt(tools)`` as its system message — the prompt the
    local-model policy uses — so the model is trained on what it will be prompted with.

One sequence per trajectory
    A multi-turn trajectory trains as one sequence with every assistant turn supervised: one
    forward pass per trajectory, not one sample per turn. Tokens after the last supervised one
    (the final observation) are dropped: they cannot change the loss of a causal model.

The agent enhancements (each a config flag; off means off)
    ``observation_masking`` (on by default): only the policy's own tokens carry loss — every
    assistant turn's content and its ``<|im_end|>``; system, user and tool tokens do not. Off:
    every token after the first carries loss.

    ``step_weighted_loss``: assistant turn ``k``'s tokens weigh
    ``w_k = min_step_weight + (1 - min_step_weight) * clip(step_rewards[k], 0, 1)`` (a missing or
    null reward weighs 1; tokens outside assistant turns weigh 1). The loss is the weighted mean
    ``sum(w * nll) / sum(w)`` over the step's supervised tokens, so only the relative weights
    matter, and with ``min_step_weight > 0`` no turn's weight is ever 0 (a dataset whose rewards
    are all 0 still trains).

    ``chunk_max_steps`` (0: off): a trajectory with more assistant turns than this is split at
    turn boundaries into chunks of at most ``chunk_max_steps`` turns; each chunk keeps the
    messages before the first assistant turn (system and task prompt) and its own turns with
    their observations (and rewards).

    ``curriculum``: examples go from easy to hard — by the row's numeric ``difficulty`` when it
    has one, else by its number of assistant turns — instead of a shuffled order; ties are
    shuffled with the seed each epoch.

Batches
    ``batch_size`` examples per micro-batch over all processes together, ``grad_accum``
    micro-batches per optimizer step. The order is a function of the seed and the position only
    (a seeded permutation per epoch), so a resumed run sees the same batches as an uninterrupted
    one. The loss of a step is normalised by the step's total (weighted) number of supervised
    tokens, counted over all its micro-batches and processes, so gradients are the same whatever
    ``grad_accum`` and the number of processes.

Processes
    ``train`` runs inside an ``accelerate.Accelerator``: the same code runs in one process or
    under ``accelerate launch`` (DDP; FSDP on GPUs), see ``docs/training.md``.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainer_core.errors import ConfigError, InputError
from trainer_core.progress import ProgressEvent
from trainer_core.training.config import TrainConfig, TrainResult, option
from trainer_core.training.data import (
    Encoded,
    collate,
    encode_messages,
    process_share,
    read_rows,
    to_device,
    with_tools_system,
)
from trainer_core.training.loop import Run, prepare_run, report, start_run
from trainer_core.training.modelling import IGNORE_INDEX, load_seeded, token_logprobs

__all__ = [
    "Example",
    "SFTConfig",
    "build_examples",
    "chunk_trajectory",
    "example_order",
    "row_messages",
    "step_weight",
    "train",
    "weighted_nll",
]


@dataclass
class SFTConfig(TrainConfig):
    """Supervised fine-tuning on multi-turn trajectories (see :mod:`trainer_core.training.sft`)."""

    observation_masking: bool = option(
        True,
        help="Only the policy's own tokens (assistant turns) carry loss. Off: every token does, "
        "observations and prompts included.",
    )
    step_weighted_loss: bool = option(
        False,
        help="Weigh each assistant turn's tokens by its step reward: "
        "w = min_step_weight + (1 - min_step_weight) * clip(reward, 0, 1); a missing reward "
        "weighs 1.",
    )
    min_step_weight: float = option(
        0.1,
        help="The weight of a turn whose step reward is 0 (or below) under step_weighted_loss.",
    )
    chunk_max_steps: int = option(
        0,
        help="0: a trajectory is one sequence. Above 0: split longer trajectories at step "
        "boundaries into chunks of at most this many assistant turns, each with the system and "
        "task prompt.",
    )
    curriculum: bool = option(
        False,
        help="Train from easy to hard (by the row's difficulty, else its number of steps) "
        "instead of in a shuffled order.",
    )

    def validate(self) -> None:
        super().validate()
        if not self.dataset:
            raise ConfigError("SFTConfig: dataset is empty; give an exported SFT JSONL file")
        if not 0 <= self.min_step_weight <= 1:
            raise ConfigError(f"min_step_weight must be in [0, 1] (got {self.min_step_weight})")
        if self.chunk_max_steps < 0:
            raise ConfigError(f"chunk_max_steps must be 0 or more (got {self.chunk_max_steps})")


@dataclass
class Example:
    """One training sequence and where it came from."""

    encoded: Encoded
    difficulty: float
    row: int  # index of the dataset row
    chunk: int = 0  # index of the chunk within the row (0 when not chunked)

    @property
    def weight_total(self) -> float:
        """Sum of the loss weights of the supervised tokens (the loss normaliser)."""
        e = self.encoded
        return sum(w for t, w in zip(e.labels, e.weights, strict=True) if t != IGNORE_INDEX)


# --------------------------------------------------------------------------- data


def row_messages(row: Mapping[str, Any], index: int) -> list[dict[str, Any]]:
    """The row's chat messages, with ``system_prompt(tools)`` first when the row lists tools (a
    list, or the exporters' JSON text) and has no system message."""
    messages = row.get("messages")
    if not isinstance(messages, list) or not messages:
        keys = ", ".join(sorted(map(str, row))) or "none"
        raise InputError(
            f"row {index}: an SFT row needs a non-empty 'messages' list (TRL's conversational "
            f"format); it has keys {keys}. Export the dataset as SFT messages"
        )
    return with_tools_system(list(messages), row, index)


def _turn_starts(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    return [i for i, m in enumerate(messages) if m.get("role") == "assistant"]


def chunk_trajectory(
    messages: Sequence[Mapping[str, Any]], rewards: Sequence[Any] | None, max_steps: int
) -> list[tuple[list[dict[str, Any]], list[Any] | None]]:
    """Split at assistant-turn boundaries into chunks of at most ``max_steps`` turns, each being
    the messages before the first assistant turn plus its own turns (an assistant message and
    the observations after it) and their rewards. ``max_steps <= 0``: one chunk, unchanged."""
    starts = _turn_starts(messages)
    if max_steps <= 0 or len(starts) <= max_steps:
        return [(list(messages), None if rewards is None else list(rewards))]
    prefix = list(messages[: starts[0]])
    bounds = [*starts, len(messages)]
    chunks = []
    for first in range(0, len(starts), max_steps):
        last = min(first + max_steps, len(starts))
        body = list(messages[bounds[first] : bounds[last]])
        part = None if rewards is None else list(rewards[first:last])
        chunks.append((prefix + body, part))
    return chunks


def step_weight(reward: Any, min_weight: float) -> float:
    """A turn's loss weight from its step reward (see the module docstring)."""
    if reward is None or isinstance(reward, bool):
        return 1.0
    try:
        value = float(reward)
    except (TypeError, ValueError):
        return 1.0
    if value != value:  # NaN: unscored
        return 1.0
    return min_weight + (1.0 - min_weight) * min(1.0, max(0.0, value))


def _difficulty(row: Mapping[str, Any], messages: Sequence[Mapping[str, Any]]) -> float:
    value = row.get("difficulty")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return float(len(_turn_starts(messages)))


def _trim(encoded: Encoded) -> None:
    """Drop the tokens after the last supervised one (a causal model's loss is the same without
    them: the final observation of a trajectory costs compute and teaches nothing)."""
    last = max((i for i, t in enumerate(encoded.labels) if t != IGNORE_INDEX), default=-1)
    for name in ("input_ids", "labels", "step_ids", "weights"):
        setattr(encoded, name, getattr(encoded, name)[: last + 1])


def build_examples(
    rows: Sequence[Mapping[str, Any]], tokenizer: Any, config: SFTConfig
) -> tuple[list[Example], int]:
    """Rows → examples (chunked, encoded, masked, weighted as the config says). Returns the
    examples and how many sequences were dropped because nothing in them carries loss."""
    examples: list[Example] = []
    dropped = 0
    for index, row in enumerate(rows):
        messages = row_messages(row, index)
        rewards = row.get("step_rewards")
        if rewards is not None and not isinstance(rewards, list):
            raise InputError(f"row {index}: 'step_rewards' must be a list (one per assistant turn)")
        difficulty = _difficulty(row, messages)
        for number, (chunk, chunk_rewards) in enumerate(
            chunk_trajectory(messages, rewards, config.chunk_max_steps)
        ):
            encoded = encode_messages(chunk, tokenizer, max_length=config.max_length)
            if not config.observation_masking:
                encoded.labels = [IGNORE_INDEX, *encoded.input_ids[1:]]
            if config.step_weighted_loss and chunk_rewards is not None:
                weights = [step_weight(r, config.min_step_weight) for r in chunk_rewards]
                encoded.weights = [
                    weights[s] if 0 <= s < len(weights) else 1.0 for s in encoded.step_ids
                ]
            _trim(encoded)
            example = Example(encoded, difficulty, index, number)
            if example.weight_total <= 0:
                dropped += 1
                continue
            examples.append(example)
    return examples, dropped


def example_order(
    examples: Sequence[Example], *, seed: int, epoch: int, curriculum: bool
) -> list[int]:
    """The order of the examples in ``epoch``: a seeded shuffle, or easy to hard (ties shuffled)."""
    rng = random.Random(seed * 1_000_003 + epoch)
    order = list(range(len(examples)))
    rng.shuffle(order)
    if curriculum:
        order.sort(key=lambda i: examples[i].difficulty)  # stable: ties keep the shuffle
    return order


class _Stream:
    """Micro-batch ``i`` of the run: positions ``i*size .. (i+1)*size`` of the concatenated
    epoch orders (a function of the seed and ``i`` only)."""

    def __init__(self, examples: Sequence[Example], config: SFTConfig):
        self.examples, self.config = examples, config
        self._orders: dict[int, list[int]] = {}

    def micro_batch(self, i: int) -> list[Example]:
        n, size = len(self.examples), self.config.batch_size
        out = []
        for position in range(i * size, (i + 1) * size):
            epoch = position // n
            if epoch not in self._orders:
                self._orders = {
                    epoch: example_order(
                        self.examples,
                        seed=self.config.seed,
                        epoch=epoch,
                        curriculum=self.config.curriculum,
                    )
                }
            out.append(self.examples[self._orders[epoch][position % n]])
        return out


# --------------------------------------------------------------------------- the loss


def weighted_nll(logprobs: Any, batch: Mapping[str, Any]) -> Any:
    """``sum(w * -log p)`` over the supervised tokens of the batch (a scalar); ``logprobs`` is
    (B, T) aligned with the labels (:func:`~.modelling.token_logprobs`)."""
    mask = (batch["labels"] != IGNORE_INDEX).to(logprobs.dtype)  # (B, T)
    return -(logprobs * batch["weights"] * mask).sum()


# --------------------------------------------------------------------------- training


def _backward(
    run: Run, micro: list[list[Example]], *, share: tuple[int, int, int], normaliser: float
) -> Any:
    """Forward and backward passes over one optimizer step's micro-batches (this process's share
    of each; ``share`` is ``(world, rank, per_process)``). Returns this process's summed weighted
    NLL, detached."""
    import torch

    world, rank, per_process = share
    device, pad_id = run.accelerator.device, run.tokenizer.pad_token_id
    loss_sum = torch.zeros((), device=device)
    for m, batch_examples in enumerate(micro):
        mine = process_share(batch_examples, rank, per_process)
        batch = to_device(collate([e.encoded for e in mine], pad_id), device)
        with run.grad_sync(last=m == len(micro) - 1):
            nll = weighted_nll(token_logprobs(run.model, batch), batch)
            # DDP averages gradients over processes: scale so the result is the gradient
            # of the step's mean over all its supervised tokens.
            run.accelerator.backward(nll * world / normaliser)
        loss_sum += nll.detach()
    return loss_sum


def train(
    config: SFTConfig, on_progress: Callable[[ProgressEvent], None] | None = None
) -> TrainResult:
    """Fine-tune ``config.model_dir`` on ``config.dataset``; checkpoints go to
    ``config.output_dir``. Returns the final loss, the step count, the last checkpoint and the
    logged metrics."""
    accelerator, world, rank, per_process = start_run(config)

    # 1. data
    rows = read_rows(config.dataset)
    model, tokenizer = load_seeded(config, accelerator)
    examples, dropped = build_examples(rows, tokenizer, config)
    if not examples:
        raise InputError(
            f"no example in {config.dataset} has a token that carries loss (after truncation to "
            f"max_length={config.max_length}); check the rows have assistant turns"
        )
    stream = _Stream(examples, config)
    report(
        on_progress,
        step=0,
        total=config.max_steps,
        metrics={"examples": len(examples), "dropped": dropped},
        message=f"{len(rows)} rows → {len(examples)} sequences ({dropped} without loss dropped)",
    )

    # 2. model, optimizer, schedule (and the state to resume from)
    run = prepare_run(config, accelerator, model, tokenizer, on_progress)
    loss_value = float(run.resumed.get("loss", float("nan")))

    # 3. the loop: one optimizer step = grad_accum micro-batches over every process
    while not run.done:
        started = time.perf_counter()
        first = run.step * config.grad_accum
        micro = [stream.micro_batch(first + m) for m in range(config.grad_accum)]
        normaliser = sum(e.weight_total for batch in micro for e in batch)
        tokens = sum(len(e.encoded) for batch in micro for e in batch)
        loss_sum = _backward(run, micro, share=(world, rank, per_process), normaliser=normaliser)
        grad_norm, learning_rate = run.update()
        loss_value = float(accelerator.reduce(loss_sum, reduction="sum")) / normaliser
        seconds = time.perf_counter() - started
        run.end_step(
            loss=loss_value,
            metrics={
                "loss": loss_value,
                "learning_rate": learning_rate,
                "grad_norm": grad_norm,
                "tokens": tokens,
                "tokens_per_second": tokens / seconds if seconds > 0 else 0.0,
            },
            message=f"step {run.step}/{config.max_steps} loss {loss_value:.4f}",
        )

    return run.result(loss_value)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m trainer_core.training.sft CONFIG.yaml [key=value ...]``; under
    ``accelerate launch ... -m trainer_core.training.sft CONFIG.yaml`` for several processes.
    The main process prints the result as JSON."""
    import argparse
    import json
    import os
    import sys

    from trainer_core.training.config import config_from_dict, config_from_yaml, config_to_yaml

    parser = argparse.ArgumentParser(prog="python -m trainer_core.training.sft")
    parser.add_argument("config", help="an SFTConfig as YAML")
    parser.add_argument("overrides", nargs="*", help="key=value pairs that replace options")
    args = parser.parse_args(argv)
    with open(args.config, encoding="utf-8") as fh:
        config = config_from_yaml(SFTConfig, fh.read())
    if args.overrides:
        import yaml

        data = yaml.safe_load(config_to_yaml(config))
        for item in args.overrides:
            key, sep, value = item.partition("=")
            if not sep:
                parser.error(f"override {item!r} is not key=value")
            data[key] = value
        config = config_from_dict(SFTConfig, data)

    # The launcher's rank (accelerate's state must not be created before train() creates it).
    main_process = os.environ.get("RANK", "0") == "0"

    def log(event: ProgressEvent) -> None:
        if event.message and main_process:
            sys.stderr.write(event.message + "\n")

    result = train(config, on_progress=log)
    if main_process:
        sys.stdout.write(json.dumps(dataclasses.asdict(result)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
