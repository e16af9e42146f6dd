"""Progress reporting: long trainer_core functions accept ``on_progress(ProgressEvent)``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ProgressEvent:
    """One report from long-running work.

    fraction: how much is done, 0..1 (None when unknown).
    message: a short human-readable line ("epoch 2/3").
    step: the x of the metrics point (a training step, an episode index).
    metrics: named numbers at ``step`` (loss, reward, accuracy...).
    log: lines for the job's log.
    """

    fraction: float | None = None
    message: str | None = None
    step: int | None = None
    metrics: dict[str, float] = field(default_factory=dict)
    log: tuple[str, ...] = ()


ProgressCallback = Callable[[ProgressEvent], None]


def no_progress(event: ProgressEvent) -> None:
    """The default callback: ignore reports."""
