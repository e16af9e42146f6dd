"""Supervised fine-tuning on agent trajectories: ``train(SFTConfig(...), on_progress)``.

Data
    JSONL rows in TRL's conversational format, as ``trainer_core.datasets`` exports them:
    ``{"messages": [...], "tools"?: [...], "step_rewards"?: [...], "difficulty"?: ...,
    "reward"?: ...}``. ``messages`` are OpenAI-style chat messages (assistant ``tool_calls``,
    ``tool`` results), rendered and tokenized with the one chat format
    (:func:`~trainer_core.policies.chat_format.tokenize`). A row with ``tools`` and no system
    message gets ``chat_format.system_prompt(tools)`` as its system message — the prompt the
    local-model policy uses — so the model is trained on what it will be prompted with.

One sequence per trajectory
    A multi-turn trajectory trains as one sequence with every assistant turn supervised: one
    forward pass per trajectory, not one sample per turn. Tokens after the last supervised one
    (the final observation) are dropped: they cannot change the loss of a causal model. A
    sequence longer than ``max_length`` keeps its first ``max_length`` tokens; when that cut
    loses tokens that carry loss the run says so once in its log ("N examples were cut to
    max_length …") and counts them (``truncated_examples`` in the metrics).

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

    Chunking (knowlyr-trainer's ``chunk_long_trajectories``, by a token budget of its own):
    with ``chunk_max_tokens > 0`` a trajectory longer than that many tokens (as trained, in the
    model's tokenizer) is split at step boundaries into chunks of at most that many tokens, each
    the prompt, ``chunk_overlap_steps`` earlier steps as context (no loss) and as many of its own
    steps as fit; every token is trained in one chunk only, and a single step too long for a
    chunk is cut there (logged and counted). ``chunk_max_steps > 0`` also caps a chunk's number
    of steps (the older way to chunk, by turn count). See :mod:`trainer_core.training.chunking`.

    Curriculum (knowlyr-trainer's ``CurriculumSampler``, deterministic): the sequences are
    ranked from easy to hard by ``curriculum_by`` — ``difficulty`` (the row's numeric
    ``difficulty``, else its number of assistant turns), ``length`` (the trajectory's tokens,
    shorter is easier) or ``reward`` (the row's ``reward``, higher is easier, as knowlyr counts
    a high reward as easy; then shorter first; rows without a reward last). Epoch 0 trains on
    the easiest ``curriculum_start_ratio`` of them, widened linearly to all of them by epoch
    ``curriculum_warmup_epochs`` (an epoch is one pass over the sequences it trains on); within
    an epoch the order is shuffled (:mod:`trainer_core.training.curriculum`).

Batches
    ``batch_size`` examples per micro-batch over all processes together, ``grad_accum``
    micro-batches per optimizer step. The order is a function of the seed and the position only
    (a seeded permutation per epoch, of the sequences the curriculum allows), so a resumed run
    sees the same batches as an uninterrupted one. The loss of a step is normalised by the
    step's total (weighted) number of supervised tokens, counted over all its micro-batches and
    processes, so gradients are the same whatever ``grad_accum`` and the number of processes.

Lineage
    Each optimizer step's line in ``<output_dir>/lineage.jsonl`` lists the examples it trained
    on over every process as ``"<row>#<chunk>"`` (:func:`lineage_id`; see
    :mod:`trainer_core.training.lineage`).

Processes
    ``train`` runs inside an ``accelerate.Accelerator``: the same code runs in one process or
    under ``accelerate launch`` (DDP; FSDP on GPUs), see ``docs/training.md``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainer_core.errors import ConfigError, InputError
from trainer_core.progress import ProgressEvent
from trainer_core.training.chunking import (
    Chunk,
    chunk_length,
    encode_chunk,
    plan_chunks,
    split_steps,
    turn_starts,
)
from trainer_core.training.config import TrainConfig, TrainResult, option
from trainer_core.training.curriculum import ExampleOrder, rank_easiest_first
from trainer_core.training.data import (
    Encoded,
    collate,
    process_share,
    read_rows,
    to_device,
    with_tools_system,
)
from trainer_core.training.loop import Run, prepare_run, start_run
from trainer_core.training.modelling import IGNORE_INDEX, load_seeded, token_logprobs

__all__ = [
    "CURRICULUM_BY",
    "DataStats",
    "Example",
    "SFTConfig",
    "build_examples",
    "curriculum_key",
    "data_notes",
    "example_order",
    "lineage_id",
    "row_messages",
    "step_weight",
    "train",
    "weighted_nll",
]

logger = logging.getLogger(__name__)

CURRICULUM_BY = ("difficulty", "length", "reward")


@dataclass
class SFTConfig(TrainConfig):
    """Supervised fine-tuning on multi-turn trajectories (see :mod:`trainer_core.training.sft`)."""

    @staticmethod
    def upgrade_options(data: Mapping[str, Any]) -> dict[str, Any]:
        """Options stored before chunks had context steps, as today's: a config that chunked
        by ``chunk_max_steps`` and names no ``chunk_overlap_steps`` keeps chunking without
        context (``chunk_overlap_steps: 0``), as it did."""
        data = dict(data)
        if "chunk_overlap_steps" not in data and data.get("chunk_max_steps"):
            data["chunk_overlap_steps"] = 0
        return data

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
    chunk_max_tokens: int = option(
        0,
        help="0: a trajectory is one sequence, cut at max_length when longer (counted in the "
        "log). Above 0 (at most max_length): a trajectory longer than this many tokens is split "
        "at step boundaries into chunks of at most this many tokens, each repeating the system "
        "and task prompt; a single step too long for a chunk is cut (counted in the log).",
    )
    chunk_overlap_steps: int = option(
        1,
        help="Steps before a chunk's own repeated at its start as context, so the model sees "
        "what led there; they carry no loss (each step is trained in one chunk only).",
    )
    chunk_max_steps: int = option(
        0,
        help="0: no limit. Above 0: a chunk holds at most this many assistant turns (splitting "
        "by turn count; works alone or with chunk_max_tokens).",
    )
    curriculum: bool = option(
        False,
        help="Train from easy to hard: the first epoch on the easiest curriculum_start_ratio of "
        "the sequences (by curriculum_by), widened to all of them over "
        "curriculum_warmup_epochs; shuffled within each epoch.",
    )
    curriculum_by: str = option(
        "difficulty",
        choices=CURRICULUM_BY,
        help="What makes a sequence easy: difficulty (the row's difficulty, else its number of "
        "steps; fewer is easier), length (its trajectory's tokens; fewer is easier) or reward "
        "(the row's reward; higher is easier, then shorter; rows without one come last).",
    )
    curriculum_start_ratio: float = option(
        0.3,
        help="The fraction of the sequences (the easiest) the first epoch trains on, in (0, 1].",
    )
    curriculum_warmup_epochs: int = option(
        1,
        help="Epochs over which the curriculum widens linearly from curriculum_start_ratio to "
        "every sequence (an epoch is one pass over the sequences it trains on).",
    )

    def validate(self) -> None:
        super().validate()
        if not self.dataset:
            raise ConfigError("SFTConfig: dataset is empty; give an exported SFT JSONL file")
        problems = []
        if not 0 <= self.min_step_weight <= 1:
            problems.append(f"min_step_weight must be in [0, 1] (got {self.min_step_weight})")
        for name in ("chunk_max_tokens", "chunk_overlap_steps", "chunk_max_steps"):
            if getattr(self, name) < 0:
                problems.append(f"{name} must be 0 or more (got {getattr(self, name)})")
        if self.chunk_max_tokens > self.max_length:
            problems.append(
                f"chunk_max_tokens ({self.chunk_max_tokens}) is above max_length "
                f"({self.max_length}): lower chunk_max_tokens or raise max_length"
            )
        if self.curriculum_by not in CURRICULUM_BY:
            problems.append(
                f"curriculum_by must be one of {', '.join(CURRICULUM_BY)} "
                f"(got {self.curriculum_by!r})"
            )
        if not 0 < self.curriculum_start_ratio <= 1:
            problems.append(
                f"curriculum_start_ratio must be in (0, 1] (got {self.curriculum_start_ratio})"
            )
        if self.curriculum_warmup_epochs < 1:
            problems.append(
                f"curriculum_warmup_epochs must be at least 1 (got {self.curriculum_warmup_epochs})"
            )
        if problems:
            raise ConfigError("SFTConfig: " + "; ".join(problems))


@dataclass
class Example:
    """One training sequence and where it came from."""

    encoded: Encoded
    difficulty: float  # the row's difficulty, else its number of assistant turns
    row: int  # index of the dataset row
    chunk: int = 0  # index of the chunk within the row (0 when not chunked)
    length: int = 0  # tokens of the row's whole trajectory as trained (before chunks and cuts)
    reward: float | None = None  # the row's reward (None: it has none)

    @property
    def weight_total(self) -> float:
        """Sum of the loss weights of the supervised tokens (the loss normaliser)."""
        e = self.encoded
        return sum(w for t, w in zip(e.labels, e.weights, strict=True) if t != IGNORE_INDEX)


@dataclass
class DataStats:
    """What :func:`build_examples` made of the rows."""

    rows: int = 0
    chunked_rows: int = 0  # rows split into more than one chunk
    dropped: int = 0  # sequences left out: nothing in them carries loss
    truncated: list[tuple[int, int]] = field(default_factory=list)  # (row, chunk) of cut ones
    truncated_tokens: int = 0  # tokens that carried loss, lost to those cuts
    limit: int = 0  # the length sequences are cut at (chunk_max_tokens, else max_length)
    without_reward: int = 0  # rows without a numeric reward


# --------------------------------------------------------------------------- rows


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


def _difficulty(row: Mapping[str, Any], messages: Sequence[Mapping[str, Any]]) -> float:
    value = row.get("difficulty")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return float(len(turn_starts(messages)))


def _reward(row: Mapping[str, Any]) -> float | None:
    value = row.get("reward")
    if isinstance(value, (int, float)) and not isinstance(value, bool) and value == value:
        return float(value)
    return None


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


# --------------------------------------------------------------------------- examples


def _row_examples(
    row: Mapping[str, Any], index: int, tokenizer: Any, config: SFTConfig, stats: DataStats
) -> list[Example]:
    """One row's examples: its chunks encoded, weighted and counted into ``stats``."""
    messages = row_messages(row, index)
    rewards = row.get("step_rewards")
    if rewards is not None and not isinstance(rewards, list):
        raise InputError(f"row {index}: 'step_rewards' must be a list (one per assistant turn)")
    try:
        prompt, steps = split_steps(messages, tokenizer)
    except InputError as exc:
        raise InputError(f"row {index}: {exc}") from None
    masking = config.observation_masking
    sizes = [len(s.ids) for s in steps]
    trained = [s.trained_length(masking) for s in steps]
    chunks = plan_chunks(
        len(prompt.ids),
        sizes,
        trained,
        max_tokens=config.chunk_max_tokens,
        max_steps=config.chunk_max_steps,
        overlap=config.chunk_overlap_steps,
    )
    reward = _reward(row)
    stats.rows += 1
    stats.chunked_rows += len(chunks) > 1
    stats.without_reward += reward is None
    whole = Chunk(0, 0, len(steps))
    about = dict(
        difficulty=_difficulty(row, messages),
        length=chunk_length(whole, len(prompt.ids), sizes, trained),
        reward=reward,
    )
    examples = []
    for number, chunk in enumerate(chunks):
        encoded, lost = encode_chunk(prompt, steps, chunk, masking=masking, limit=stats.limit)
        if lost:
            stats.truncated.append((index, number))
            stats.truncated_tokens += lost
        if config.step_weighted_loss and rewards is not None:
            mine = rewards[chunk.first : chunk.end]
            weights = [step_weight(r, config.min_step_weight) for r in mine]
            encoded.weights = [
                weights[s] if 0 <= s < len(weights) else 1.0 for s in encoded.step_ids
            ]
        example = Example(encoded, row=index, chunk=number, **about)
        if example.weight_total <= 0:
            stats.dropped += 1
            continue
        examples.append(example)
    return examples


def build_examples(
    rows: Sequence[Mapping[str, Any]], tokenizer: Any, config: SFTConfig
) -> tuple[list[Example], DataStats]:
    """Rows → examples (chunked, encoded, masked, weighted as the config says), and what was
    made of the rows: chunks, sequences dropped because nothing in them carries loss, cuts."""
    stats = DataStats(limit=config.chunk_max_tokens or config.max_length)
    examples: list[Example] = []
    for index, row in enumerate(rows):
        examples += _row_examples(row, index, tokenizer, config, stats)
    return examples, stats


# --------------------------------------------------------------------------- order


def curriculum_key(example: Example, by: str) -> tuple:
    """An example's sort key under ``curriculum_by`` ``by`` (smaller is easier)."""
    if by == "length":
        return (example.length,)
    if by == "reward":
        return (example.reward is None, -(example.reward or 0.0), example.length)
    return (example.difficulty,)


def example_order(examples: Sequence[Example], config: SFTConfig) -> ExampleOrder:
    """Which example each position of the run trains on: a seeded shuffle per epoch, or with
    ``curriculum`` the pacing schedule over the examples ranked by ``curriculum_by``."""
    if not config.curriculum:
        return ExampleOrder(len(examples), seed=config.seed)
    if config.curriculum_by == "reward" and all(e.reward is None for e in examples):
        raise InputError(
            "curriculum_by is reward but no row has a numeric 'reward'; export the dataset with "
            "rewards, or use curriculum_by: length"
        )
    keys = [curriculum_key(e, config.curriculum_by) for e in examples]
    return ExampleOrder(
        len(examples),
        seed=config.seed,
        rank=rank_easiest_first(keys, seed=config.seed),
        start_ratio=config.curriculum_start_ratio,
        warmup_epochs=config.curriculum_warmup_epochs,
    )


def _micro_batch(
    examples: Sequence[Example], order: ExampleOrder, index: int, size: int
) -> list[Example]:
    """Micro-batch ``index`` of the run: positions ``index*size .. (index+1)*size - 1``."""
    return [examples[order.at(p)] for p in range(index * size, (index + 1) * size)]


def data_notes(
    config: SFTConfig, stats: DataStats, examples: Sequence[Example], order: ExampleOrder
) -> list[str]:
    """The run's log lines about its data, written once at its start: what the rows became,
    the sequences cut (and what to do about it), the curriculum's schedule."""
    lines = [
        f"{stats.rows} rows → {len(examples)} sequences ({stats.chunked_rows} rows chunked, "
        f"{stats.dropped} sequences without loss dropped)"
    ]
    if stats.truncated:
        chunked = config.chunk_max_tokens or config.chunk_max_steps
        where = ", ".join(
            f"row {r} chunk {c}" if chunked else f"row {r}" for r, c in stats.truncated[:10]
        )
        if len(stats.truncated) > 10:
            where += f" and {len(stats.truncated) - 10} more"
        if config.chunk_max_tokens:
            what = "chunk_max_tokens"
            fix = "each holds a step too long for any chunk; raise chunk_max_tokens and max_length"
        else:
            what, fix = "max_length", "raise max_length, or split them with chunk_max_tokens"
        count = len(stats.truncated)
        lines.append(
            f"{count} {'example was' if count == 1 else 'examples were'} cut to {what} "
            f"({stats.limit} tokens), losing {stats.truncated_tokens} tokens that carry loss: "
            f"{where} ({fix})"
        )
    if config.curriculum:
        lines.append(_curriculum_note(config, stats, order))
    return lines


def _curriculum_note(config: SFTConfig, stats: DataStats, order: ExampleOrder) -> str:
    warmup = config.curriculum_warmup_epochs
    full_step = order.warmup_positions() // (config.batch_size * config.grad_accum) + 1
    line = (
        f"curriculum by {config.curriculum_by}: epoch 0 trains on the easiest {order.size(0)} "
        f"of {order.n} sequences, widening to all of them from epoch {warmup} (step {full_step})"
    )
    if full_step > config.max_steps:
        line += (
            f"; this run ends at step {config.max_steps}, before every sequence is trained on: "
            "lower curriculum_warmup_epochs or raise max_steps"
        )
    if config.curriculum_by == "reward" and stats.without_reward:
        line += f"; {stats.without_reward} rows without a reward come last"
    return line


# --------------------------------------------------------------------------- the loss


def weighted_nll(logprobs: Any, batch: Mapping[str, Any]) -> Any:
    """``sum(w * -log p)`` over the supervised tokens of the batch (a scalar); ``logprobs`` is
    (B, T) aligned with the labels (:func:`~.modelling.token_logprobs`)."""
    mask = (batch["labels"] != IGNORE_INDEX).to(logprobs.dtype)  # (B, T)
    return -(logprobs * batch["weights"] * mask).sum()


# --------------------------------------------------------------------------- training


def lineage_id(example: Example) -> str:
    """The example's id in the run's lineage: ``"<row>#<chunk>"`` (``"12#0"``)."""
    return f"{example.row}#{example.chunk}"


def _backward(
    run: Run, micro: list[list[Example]], *, share: tuple[int, int, int], normaliser: float
) -> tuple[Any, list[list[str]]]:
    """Forward and backward passes over one optimizer step's micro-batches (this process's share
    of each; ``share`` is ``(world, rank, per_process)``). Returns this process's summed weighted
    NLL, detached, and the :func:`lineage_id` of the examples it trained on, per micro-batch."""
    import torch

    world, rank, per_process = share
    device, pad_id = run.accelerator.device, run.tokenizer.pad_token_id
    loss_sum = torch.zeros((), device=device)
    trained: list[list[str]] = []
    for m, batch_examples in enumerate(micro):
        mine = process_share(batch_examples, rank, per_process)
        trained.append([lineage_id(e) for e in mine])
        batch = to_device(collate([e.encoded for e in mine], pad_id), device)
        with run.grad_sync(last=m == len(micro) - 1):
            nll = weighted_nll(token_logprobs(run.model, batch), batch)
            # DDP averages gradients over processes: scale so the result is the gradient
            # of the step's mean over all its supervised tokens.
            run.accelerator.backward(nll * world / normaliser)
        loss_sum += nll.detach()
    return loss_sum, trained


def _report_data(
    on_progress: Callable[[ProgressEvent], None] | None,
    config: SFTConfig,
    stats: DataStats,
    examples: Sequence[Example],
    order: ExampleOrder,
) -> None:
    """Say once, at step 0, what the data became: in the run's log and as metrics."""
    notes = data_notes(config, stats, examples, order)
    for line in notes:
        logger.info(line)
    if on_progress is not None:
        metrics = {
            "examples": len(examples),
            "dropped": stats.dropped,
            "chunked_rows": stats.chunked_rows,
            "truncated_examples": len(stats.truncated),
            "truncated_tokens": stats.truncated_tokens,
        }
        on_progress(
            ProgressEvent(
                fraction=0.0,
                message=notes[0],
                step=0,
                metrics={k: float(v) for k, v in metrics.items()},
                log=tuple(notes),
            )
        )


def train(
    config: SFTConfig, on_progress: Callable[[ProgressEvent], None] | None = None
) -> TrainResult:
    """Fine-tune ``config.model_dir`` on ``config.dataset``; checkpoints go to
    ``config.output_dir``. Returns the final loss, the step count, the last checkpoint and the
    logged metrics."""
    accelerator, world, rank, per_process = start_run(config)

    # 1. data: rows → (chunked) sequences, and the order the run sees them in
    rows = read_rows(config.dataset)
    model, tokenizer = load_seeded(config, accelerator)
    examples, stats = build_examples(rows, tokenizer, config)
    if not examples:
        raise InputError(
            f"no example in {config.dataset} has a token that carries loss (after truncation to "
            f"{stats.limit} tokens); check the rows have assistant turns"
        )
    order = example_order(examples, config)
    _report_data(on_progress, config, stats, examples, order)

    # 2. model, optimizer, schedule (and the state to resume from)
    run = prepare_run(config, accelerator, model, tokenizer, on_progress)
    loss_value = float(run.resumed.get("loss", float("nan")))

    # 3. the loop: one optimizer step = grad_accum micro-batches over every process
    size = config.batch_size
    while not run.done:
        started = time.perf_counter()
        first = run.step * config.grad_accum
        micro = [_micro_batch(examples, order, first + m, size) for m in range(config.grad_accum)]
        normaliser = sum(e.weight_total for batch in micro for e in batch)
        tokens = sum(len(e.encoded) for batch in micro for e in batch)
        loss_sum, trained = _backward(
            run, micro, share=(world, rank, per_process), normaliser=normaliser
        )
        grad_norm, learning_rate = run.update()
        consumed = run.gather_ids(trained)
        loss_value = float(accelerator.reduce(loss_sum, reduction="sum")) / normaliser
        seconds = time.perf_counter() - started
        metrics = {
            "loss": loss_value,
            "learning_rate": learning_rate,
            "grad_norm": grad_norm,
            "tokens": tokens,
            "tokens_per_second": tokens / seconds if seconds > 0 else 0.0,
            "truncated_examples": len(stats.truncated),
        }
        if config.curriculum:  # the fraction of the sequences the step's last example came from
            epoch, _ = order.locate((first + config.grad_accum) * size - 1)
            metrics["curriculum_ratio"] = order.ratio(epoch)
        message = f"step {run.step}/{config.max_steps} loss {loss_value:.4f}"
        run.end_step(loss=loss_value, metrics=metrics, message=message, consumed=consumed)

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
        from trainer_core import safeparse

        data = safeparse.load_yaml(config_to_yaml(config))
        for item in args.overrides:
            key, sep, value = item.partition("=")
            if not sep:
                parser.error(f"override {item!r} is not key=value")
            data[key] = value
        config = config_from_dict(SFTConfig, data)

    # The launcher's rank (accelerate's state must not be created before train() creates it).
    main_process = os.environ.get("RANK", "0") == "0"

    def log(event: ProgressEvent) -> None:
        if main_process:
            for line in event.log or ((event.message,) if event.message else ()):
                sys.stderr.write(line + "\n")

    result = train(config, on_progress=log)
    if main_process:
        sys.stdout.write(json.dumps(dataclasses.asdict(result)) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
