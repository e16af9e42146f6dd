"""The phases every trainer's ``train()`` shares, in the order it runs them: :func:`start_run`
(validate, the accelerator, the batch split); :func:`prepare_run` (optimizer, schedule,
checkpointer, resume, the lineage file) which returns the :class:`Run`; then per optimizer step
:meth:`Run.grad_sync` around each micro-batch's backward pass, :meth:`Run.update` (the optimizer
step), :meth:`Run.gather_ids` (what every process trained on) and :meth:`Run.end_step` (lineage,
checkpoint, log, report); and :meth:`Run.result` at the end. What differs between methods — data,
forward pass, loss, metrics — stays in each ``train()``.

:func:`make_optimizer_and_scheduler`: AdamW over the trainable parameters and a warmup +
``lr_schedule`` schedule (stepped once per optimizer step by the trainer, never by accelerate, so
the schedule does not depend on the number of processes).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainer_core.errors import ConfigError
from trainer_core.progress import ProgressEvent
from trainer_core.training.checkpoint import Checkpointer, checkpoint_due, find_checkpoint
from trainer_core.training.config import TrainConfig, TrainResult
from trainer_core.training.lineage import LineageId, append_step, start_lineage
from trainer_core.training.modelling import make_accelerator, require_torch

__all__ = [
    "Run",
    "make_optimizer_and_scheduler",
    "prepare_run",
    "report",
    "start_run",
]


def start_run(config: TrainConfig) -> tuple[Any, int, int, int]:
    """What every trainer does first: validate ``config``, make its accelerator, and split
    ``batch_size`` over the processes. Returns ``(accelerator, world, rank, per_process)``."""
    config.validate()
    accelerator = make_accelerator(config)
    world, rank = accelerator.num_processes, accelerator.process_index
    if config.batch_size % world:
        raise ConfigError(
            f"batch_size {config.batch_size} does not split over {world} processes; use a "
            "multiple of the number of processes"
        )
    return accelerator, world, rank, config.batch_size // world


def make_optimizer_and_scheduler(model: Any, config: TrainConfig, total_steps: int) -> tuple:
    """AdamW over the parameters that require grad, and a LambdaLR: linear warmup over
    ``config.warmup_steps``, then ``config.lr_schedule`` until ``total_steps``."""
    torch = require_torch()
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise ConfigError("the model has no trainable parameters")
    optimizer = torch.optim.AdamW(
        params,
        lr=config.learning_rate,
        weight_decay=config.weight_decay,
        betas=(config.adam_beta1, config.adam_beta2),
    )
    warmup, total, schedule = config.warmup_steps, max(1, total_steps), config.lr_schedule

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / (warmup + 1)
        if schedule == "constant":
            return 1.0
        progress = min(1.0, (step - warmup) / max(1, total - warmup))
        if schedule == "linear":
            return max(0.0, 1.0 - progress)
        return 0.5 * (1.0 + math.cos(math.pi * progress))

    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    return optimizer, scheduler


@dataclass
class Run:
    """A training run's moving parts from :func:`prepare_run` to :meth:`result`: what a
    checkpoint saves, the optimizer step reached, the last checkpoint written and the metrics
    logged so far."""

    config: TrainConfig
    accelerator: Any
    model: Any  # prepared by the accelerator (DDP/FSDP-wrapped under a launch)
    tokenizer: Any
    optimizer: Any  # prepared by the accelerator
    scheduler: Any  # not prepared: stepped once per optimizer step, whatever the process count
    checkpointer: Checkpointer
    on_progress: Callable[[ProgressEvent], None] | None = None
    step: int = 0
    resumed: dict[str, Any] = field(default_factory=dict)  # the extra of the checkpoint resumed
    last_dir: str = ""  # the last checkpoint written ("" before the first)
    history: list[dict[str, Any]] = field(default_factory=list)  # one entry per logged step

    @property
    def done(self) -> bool:
        """Whether the run has reached ``max_steps``."""
        return self.step >= self.config.max_steps

    def grad_sync(self, *, last: bool) -> Any:
        """The context of a micro-batch's backward pass: processes synchronise gradients only on
        the ``last`` micro-batch of an optimizer step (``accelerator.no_sync`` on the others)."""
        return contextlib.nullcontext() if last else self.accelerator.no_sync(self.model)

    def update(self) -> tuple[float, float]:
        """One optimizer step: clip the gradient norm (``max_grad_norm > 0``), step the optimizer
        and the schedule, clear the gradients, count the step. Returns the gradient norm before
        clipping (NaN when not clipped) and the learning rate the step used."""
        config, model = self.config, self.model
        grad_norm = float("nan")
        if config.max_grad_norm > 0:
            grad_norm = float(
                self.accelerator.clip_grad_norm_(model.parameters(), config.max_grad_norm)
            )
        learning_rate = self.scheduler.get_last_lr()[0]
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.step += 1
        return grad_norm, learning_rate

    def gather_ids(self, per_micro_batch: Sequence[Sequence[LineageId]]) -> list[LineageId]:
        """The ids of what the step trained on over every process, in training order: micro-batch
        by micro-batch, within one process by process. ``per_micro_batch``: this process's ids
        of each of the step's micro-batches. Every process must call it (a collective under
        several processes); each gets the whole list."""
        shares = [list(ids) for ids in per_micro_batch]
        if self.accelerator.num_processes == 1:
            return [i for ids in shares for i in ids]
        from accelerate.utils import gather_object

        everyone = gather_object([shares])  # one entry per process, in process order
        most = max(len(process) for process in everyone)
        return [
            i for m in range(most) for process in everyone if m < len(process) for i in process[m]
        ]

    def end_step(
        self,
        *,
        loss: float,
        metrics: Mapping[str, float],
        message: str,
        consumed: Sequence[LineageId],
        dropped: Sequence[LineageId] = (),
    ) -> None:
        """Close the optimizer step just taken (:meth:`update`); every process calls it.

        First the step's lineage line (the main process appends ``{"step", "consumed",
        "dropped"}`` to ``<output_dir>/lineage.jsonl``, :mod:`~trainer_core.training.lineage`):
        ``consumed`` the ids of the rows or groups the step trained on and ``dropped`` those it
        took and left out, each over EVERY process (the main process's values are written;
        where each process knows only its own share, pass :meth:`gather_ids`'s result). Then the
        step's checkpoint when it is due (:func:`checkpoint_due`; the loss kept as its extra).
        Then, every ``log_every`` steps and at the last, ``{"step": step, **metrics}`` goes to
        the history and to :func:`report`. Lineage before the checkpoint, so every checkpoint's
        steps are in the file; checkpoint before the report, so a callback that stops the run
        (a cancel) keeps this step."""
        config, step = self.config, self.step
        if self.accelerator.is_main_process:
            append_step(config.output_dir, step, consumed, dropped)
        if checkpoint_due(config, step):
            path = self.checkpointer.save(
                step,
                self.model,
                self.tokenizer,
                self.optimizer,
                self.scheduler,
                config,
                {"loss": loss},
            )
            self.last_dir = str(path)
        if step % config.log_every == 0 or step == config.max_steps:
            self.history.append({"step": step, **metrics})
            report(
                self.on_progress,
                step=step,
                total=config.max_steps,
                metrics=metrics,
                message=message,
            )

    def result(self, loss: float) -> TrainResult:
        """The run's result; a run resumed from a checkpoint already at ``max_steps`` saved
        nothing new, and its checkpoint is that one."""
        last_dir = self.last_dir or str(find_checkpoint(self.config.resume_from))
        return TrainResult(
            final_loss=loss, steps=self.step, checkpoint_dir=last_dir, metrics_history=self.history
        )


def prepare_run(
    config: TrainConfig,
    accelerator: Any,
    model: Any,
    tokenizer: Any,
    on_progress: Callable[[ProgressEvent], None] | None = None,
) -> Run:
    """The optimizer and schedule of ``model`` for ``config.max_steps`` steps, the model and the
    optimizer prepared by ``accelerator``, the checkpointer, and the state of
    ``config.resume_from`` restored when it is set (weights, optimizer, schedule, random state,
    step); the lineage file made that of a run starting at the step reached
    (:func:`~trainer_core.training.lineage.start_lineage`, by the main process); the model in
    train mode."""
    optimizer, scheduler = make_optimizer_and_scheduler(model, config, config.max_steps)
    model, optimizer = accelerator.prepare(model, optimizer)
    checkpointer = Checkpointer(config.output_dir, accelerator=accelerator)
    run = Run(
        config, accelerator, model, tokenizer, optimizer, scheduler, checkpointer, on_progress
    )
    if config.resume_from:
        run.step, run.resumed = checkpointer.load(config.resume_from, model, optimizer, scheduler)
    if accelerator.is_main_process:
        source = find_checkpoint(config.resume_from).parent if config.resume_from else None
        start_lineage(config.output_dir, run.step, source=source)
    model.train()
    return run


def report(
    on_progress: Callable[[ProgressEvent], None] | None,
    *,
    step: int,
    total: int,
    metrics: Mapping[str, float],
    message: str,
) -> None:
    """Send a ProgressEvent (fraction step/total, the metrics at ``step``) if there is a callback."""
    if on_progress is None:
        return
    on_progress(
        ProgressEvent(
            fraction=min(1.0, step / total) if total else None,
            message=message,
            step=step,
            metrics={k: float(v) for k, v in metrics.items()},
            log=(message,) if message else (),
        )
    )
