"""Decoupled GRPO: a streaming trainer that learns from groups sampled elsewhere, by earlier
policy versions: ``train_decoupled(DecoupledConfig(...), source, publisher, on_progress)``.

Samplers (any number, on any machine) play episodes with the newest *published* policy version
they have loaded, switching only between groups, and put each finished group — its token ids,
the behaviour log-probs of what was sampled (``rollout_groups(..., record_behaviour=True)``) and
the version that sampled it — into a store. The trainer (this module) consumes them:

Versions
    Version 0 is the start model (``model_dir``), published before the first step when nothing
    is yet. Every ``publish_every`` optimizer updates (and at the last step) the trainer writes a
    checkpoint (:class:`~trainer_core.training.checkpoint.Checkpointer`; the version it is
    published as in its ``trainer_state.json`` extra) and publishes it as the next version: the
    checkpoint directory *is* the version's weights. Versions are numbered 0, 1, 2, ... without
    gaps.

A step
    Take ``groups_per_step`` (``batch_size × grad_accum``) groups from the source in arrival
    order; admit them by staleness (current version − the group's version,
    :func:`~trainer_core.training.offpolicy.admit`): with ``stale_groups: drop`` groups older than
    ``max_staleness`` are dropped and more are taken until the step has its count, with
    ``downweight`` they are kept with the weight ``stale_weight ** (staleness − max_staleness)``.
    π_old of each completion (the weights at the start of the update) is computed with
    :func:`~trainer_core.training.offpolicy.sequence_logprobs`, the function samplers record
    their behaviour log-probs with; the loss is
    :func:`~trainer_core.training.losses.grpo_loss` against π_old with each policy token's loss
    multiplied by ``w_t = min(exp(log π_old − log μ), importance_cap)`` (detached). One optimizer
    update, then ``source.settle(step, version, consumed, dropped)``, then the checkpoint and
    publication when due.

Resume
    From the newest checkpoint of ``output_dir`` (or ``resume_from``): its version and dropped
    count come back from its extra, ``source.release_after(step)`` returns the groups of later
    steps (and those taken but never settled) to the ready ones, and a version checkpointed but
    not yet published is published. No group is trained twice in the resumed run's lineage and
    the version sequence has no gap.

``synchronous: true`` is the baseline that does not overlap: samplers sample a step's groups
only with the newest version and wait while the trainer trains (staleness 0; the trainer drops
any other group). :mod:`trainer_core.training.spool` is a file-based source and publisher.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from trainer_core.errors import ConfigError, SteplabError
from trainer_core.progress import ProgressEvent
from trainer_core.training.checkpoint import (
    TRAINER_STATE,
    Checkpointer,
    checkpoint_due,
    list_checkpoints,
)
from trainer_core.training.config import TrainResult, option
from trainer_core.training.data import process_share
from trainer_core.training.dpo import frozen_reference
from trainer_core.training.episodes import Group
from trainer_core.training.grpo import (
    GRPOConfig,
    _group_batch,
    _logprobs,
    _reference_logprobs,
    _step_metrics,
    _step_stats,
)
from trainer_core.training.loop import Run, prepare_run, report, start_run
from trainer_core.training.losses import grpo_loss
from trainer_core.training.modelling import IGNORE_INDEX, load_seeded
from trainer_core.training.offpolicy import (
    STALE_MODES,
    Admitted,
    admit,
    offpolicy_batch,
    weight_metrics,
    weight_stats,
)

__all__ = [
    "DecoupledConfig",
    "GroupSource",
    "GroupsTimeout",
    "Publisher",
    "train_decoupled",
]


class GroupsTimeout(SteplabError):
    """No group arrived within ``wait_seconds``: the samplers are not producing."""


@dataclass
class DecoupledConfig(GRPOConfig):
    """Decoupled GRPO (see :mod:`trainer_core.training.decoupled`): online only (``env_id``),
    groups from samplers, off-policy correction, a staleness bound and published versions."""

    max_staleness: int = option(
        2,
        help="The most versions a group may lag the trainer (staleness = current version − the "
        "version that sampled it); older groups are dropped or down-weighted (stale_groups). "
        "0: on-policy only.",
    )
    stale_groups: str = option(
        "drop",
        help="What happens to a group older than max_staleness: drop (not trained on, counted) "
        "or downweight (trained on with weight stale_weight ** (staleness − max_staleness)).",
        choices=STALE_MODES,
    )
    stale_weight: float = option(
        0.5, help="downweight only: the loss weight per version beyond max_staleness (0 to 1]."
    )
    importance_cap: float = option(
        2.0,
        help="C, the cap of the per-token importance weight min(exp(log π_old − log μ), C) "
        "that corrects for sampling by an earlier version (at least 1).",
    )
    publish_every: int = option(
        1,
        help="Optimizer updates per published version: a checkpoint is written and published "
        "for samplers every this many steps (and at the last).",
    )
    synchronous: bool = option(
        False,
        help="The baseline without overlap: samplers sample a step's groups only with the newest "
        "version and wait while the trainer trains (forces max_staleness 0).",
    )
    wait_seconds: float = option(
        900.0,
        help="How long the trainer waits for a group before failing (are the samplers running?).",
    )
    target_pass_rate: float = option(
        0.0,
        help="Curriculum: above 0, the samplers draw each group's task with a weight "
        "exp(-((p - target) / pass_rate_bandwidth)² / 2) of its measured pass rate p (the run's "
        "own episodes of the task, else every stored episode; a task never played weighs 1; "
        "docs/task-health.md), e.g. 0.5 for the tasks GRPO learns most from. 0: every task once "
        "per pass, in a seeded order.",
    )
    pass_rate_bandwidth: float = option(
        0.15,
        help="Curriculum: how far from target_pass_rate a task's pass rate may be and still be "
        "drawn often (one bandwidth away: weight 0.61; two: 0.14; the least is 0.02).",
    )

    def __post_init__(self) -> None:
        if self.synchronous:
            self.max_staleness = 0

    @property
    def groups_per_step(self) -> int:
        """Groups trained on per optimizer step: ``batch_size × grad_accum``."""
        return self.batch_size * self.grad_accum

    #: the samplers score every finished episode with the run's reward model, so the process and
    #: mixed estimators work here; a group without step scores is refused when it is taken
    scored_online = True

    def validate(self) -> None:
        if not self.online:
            raise ConfigError(
                "DecoupledConfig: env_id is required — decoupled training is online (samplers "
                "play episodes in the environment); for exported groups use grpo"
            )
        super().validate()
        problems = []
        if self.max_staleness < 0:
            problems.append(f"max_staleness must be 0 or more (got {self.max_staleness})")
        if self.stale_groups not in STALE_MODES:
            problems.append(
                f"stale_groups must be one of {', '.join(STALE_MODES)} (got {self.stale_groups!r})"
            )
        if not 0 < self.stale_weight <= 1:
            problems.append(f"stale_weight must be in (0, 1] (got {self.stale_weight})")
        if not self.importance_cap >= 1:
            problems.append(f"importance_cap must be at least 1 (got {self.importance_cap})")
        if self.publish_every < 1:
            problems.append(f"publish_every must be at least 1 (got {self.publish_every})")
        if not self.wait_seconds > 0:
            problems.append(f"wait_seconds must be above 0 (got {self.wait_seconds})")
        if not 0 <= self.target_pass_rate < 1:
            problems.append(
                f"target_pass_rate must be in [0, 1), 0 for none (got {self.target_pass_rate})"
            )
        if not self.pass_rate_bandwidth > 0:
            problems.append(f"pass_rate_bandwidth must be above 0 (got {self.pass_rate_bandwidth})")
        if self.save_every not in (0, self.publish_every):
            problems.append(
                "save_every: a decoupled run writes a checkpoint at each publication "
                "(publish_every); leave save_every 0"
            )
        if problems:
            raise ConfigError("DecoupledConfig: " + "; ".join(problems))


class GroupSource(Protocol):
    """Where the trainer takes groups from (the web app's database store, or
    :class:`~trainer_core.training.spool.SpoolSource`)."""

    def take(self, n: int, *, timeout: float) -> list[Group]:
        """Claim up to ``n`` of the oldest ready groups, in arrival order, each with its ``id``
        and ``version``; wait up to ``timeout`` seconds for ``n``, return those claimed by then."""
        ...

    def settle(self, step: int, version: int, consumed: list[Group], dropped: list[Group]) -> None:
        """Record that optimizer ``step`` (made at ``version``) trained on ``consumed`` and
        dropped ``dropped`` (all taken by the trainer)."""
        ...

    def release_after(self, step: int) -> int:
        """Resume from the checkpoint of ``step``: groups settled by later steps, and groups
        taken but never settled, become ready again. Returns how many."""
        ...


class Publisher(Protocol):
    """Where versions are published for samplers (the web app's database, or
    :class:`~trainer_core.training.spool.FilePublisher`)."""

    def publish(self, version: int, path: str, step: int) -> None:
        """``version`` (the model directory ``path``, made at optimizer ``step``) is live."""
        ...

    def latest(self) -> tuple[int, str] | None:
        """The newest published version and its path; None before version 0."""
        ...


# --------------------------------------------------------------------------- versions


@dataclass
class _State:
    """The trainer's version (the weights at the start of the next update) and groups dropped
    so far; both saved in every checkpoint's extra."""

    version: int = 0
    dropped_total: int = 0


class _VersionCheckpointer(Checkpointer):
    """The run's checkpointer: a checkpoint is written only at a publication, so each one gets
    the version it is published as and the dropped count in its extra."""

    def __init__(self, output_dir: str | Path, *, accelerator: Any, state: _State):
        super().__init__(output_dir, accelerator=accelerator)
        self.state = state

    def save(
        self,
        step: int,
        model: Any,
        tokenizer: Any,
        optimizer: Any,
        scheduler: Any,
        config: Any,
        extra: Mapping[str, Any] | None = None,
    ) -> Path:
        extra = {
            **(extra or {}),
            "version": self.state.version + 1,
            "dropped_total": self.state.dropped_total,
        }
        return super().save(step, model, tokenizer, optimizer, scheduler, config, extra)


def _run_config(config: DecoupledConfig) -> DecoupledConfig:
    """The config the run trains with: checkpoints at publications only, and resumed from the
    newest checkpoint of ``output_dir`` when ``resume_from`` is not given (a decoupled run's
    published versions live there)."""
    if not isinstance(config, DecoupledConfig):
        raise ConfigError("train_decoupled needs a DecoupledConfig")
    config.validate()
    resume = config.resume_from
    if not resume and list_checkpoints(config.output_dir):
        resume = str(list_checkpoints(config.output_dir)[-1][1])
    return dataclasses.replace(config, save_every=config.publish_every, resume_from=resume)


def _checkpoint_version(path: Path) -> int | None:
    state = json.loads((path / TRAINER_STATE).read_text(encoding="utf-8"))
    version = (state.get("extra") or {}).get("version")
    return int(version) if version is not None else None


def _start_state(run: Run) -> _State:
    """The version and dropped count the run starts at: 0 and 0, or the resumed checkpoint's."""
    if not run.config.resume_from:
        return _State()
    if "version" not in run.resumed:
        raise ConfigError(
            f"{run.config.resume_from} is not a checkpoint of a decoupled run (its "
            f"{TRAINER_STATE} holds no version): resume from a decoupled run's output_dir"
        )
    return _State(int(run.resumed["version"]), int(run.resumed.get("dropped_total", 0)))


def _catch_up(run: Run, publisher: Publisher, version: int) -> None:
    """Publish what is missing up to ``version``: version 0 (the start model) when nothing is
    published, then the run's checkpoints of the versions after the publisher's newest (a
    checkpoint written just before the trainer stopped, not yet published)."""
    latest = publisher.latest()
    if latest is not None and latest[0] > version:
        raise ConfigError(
            f"version {latest[0]} is published but the checkpoint resumed from is version "
            f"{version}: resume from the newest checkpoint of {run.config.output_dir}"
        )
    if latest is None:
        publisher.publish(0, str(run.config.model_dir), 0)
        latest = (0, str(run.config.model_dir))
    for step, path in list_checkpoints(run.config.output_dir):
        found = _checkpoint_version(path)
        if found is not None and latest[0] < found <= version:
            publisher.publish(found, str(path), step)
            latest = (found, str(path))


# --------------------------------------------------------------------------- a step's groups


def _check_step_scores(config: DecoupledConfig, groups: list[Group]) -> None:
    """The process and mixed estimators need each completion's step scores: refuse a group whose
    sampler did not score it (the run has no reward model)."""
    if config.advantage == "outcome":
        return
    for group in groups:
        if any(all(r is None for r in c.step_rewards) for c in group.completions):
            raise ConfigError(
                f"advantage {config.advantage!r} needs the reward model's step scores, and group "
                f"{group.id} (task {group.key}) has a completion without any: give the run a "
                "reward model (its samplers score every episode with it) or use advantage: outcome"
            )


def _take_admitted(
    config: DecoupledConfig, source: GroupSource, version: int
) -> tuple[Admitted, float]:
    """Take and admit groups until the step has ``groups_per_step`` kept ones (arrival order).
    Returns the :class:`Admitted` groups and the seconds spent waiting for them."""
    need = config.groups_per_step
    out, waited = Admitted(), 0.0
    while len(out.kept) < need:
        started = time.perf_counter()
        got = source.take(need - len(out.kept), timeout=config.wait_seconds)
        waited += time.perf_counter() - started
        if not got:
            raise GroupsTimeout(
                f"no group arrived in {config.wait_seconds:g} s ({len(out.kept)} of {need} for "
                "this step): are the samplers running? Start samplers, or raise wait_seconds"
            )
        _check_step_scores(config, got)
        part = admit(
            got,
            version,
            max_staleness=config.max_staleness,
            mode=config.stale_groups,
            stale_weight=config.stale_weight,
        )
        out.kept += part.kept
        out.weights += part.weights
        out.staleness += part.staleness
        out.dropped += part.dropped
    return out, waited


def _share(admitted: Admitted | None, accelerator: Any) -> Admitted:
    """The main process's admitted groups on every process (they travel as JSON-safe dicts)."""
    if accelerator.num_processes == 1:
        assert admitted is not None
        return admitted
    from accelerate.utils import broadcast_object_list

    payload = [None]
    if accelerator.is_main_process:
        assert admitted is not None
        payload = [
            {
                "kept": [g.to_dict() for g in admitted.kept],
                "weights": admitted.weights,
                "staleness": admitted.staleness,
                "dropped": [g.to_dict() for g in admitted.dropped],
            }
        ]
    data = broadcast_object_list(payload, from_process=0)[0]
    return Admitted(
        kept=[Group.from_dict(g) for g in data["kept"]],
        weights=list(data["weights"]),
        dropped=[Group.from_dict(g) for g in data["dropped"]],
        staleness=list(data["staleness"]),
    )


def _micro_batches(
    config: DecoupledConfig, admitted: Admitted, rank: int, per_process: int
) -> list[list[tuple[Group, float]]]:
    """This process's (group, weight) pairs of each micro-batch: ``batch_size`` consecutive kept
    groups per micro-batch, ``per_process`` of them each process's."""
    pairs = list(zip(admitted.kept, admitted.weights, strict=True))
    size = config.batch_size
    return [
        process_share(pairs[m * size : (m + 1) * size], rank, per_process)
        for m in range(config.grad_accum)
    ]


# --------------------------------------------------------------------------- the loss


def _micro_loss(run: Run, reference: Any, batch: dict, off: dict, items: float) -> Any:
    """The decoupled GRPO loss of one micro-batch, its share of the step's loss."""
    config = run.config
    logps = _logprobs(run.model, batch, config.temperature)
    ref = None
    if config.beta > 0:
        ref = _reference_logprobs(reference, run.model, batch, config, run.accelerator)
    loss = grpo_loss(
        logps,
        off["old"],
        ref,
        batch["advantages"],
        batch["labels"] != IGNORE_INDEX,
        loss_type=config.loss_type,
        beta=config.beta,
        epsilon_low=config.epsilon,
        epsilon_high=config.epsilon_high,
        max_completion_length=config.max_length,
        num_items_in_batch=items,
        behaviour_per_token_logps=off["behaviour"],
        importance_cap=config.importance_cap,
        behaviour_mask=off["sampled"],
        completion_weights=off["completion_weights"],
    )
    if config.loss_type != "dapo":  # dapo is already a share of the whole step
        loss = loss / config.grad_accum
    return loss


def _backward(
    run: Run, reference: Any, micro: list[list[tuple[Group, float]]], items: float
) -> tuple[Any, Any]:
    """π_old, forward and backward over this process's micro-batches. Returns the summed loss
    (detached) and the importance weight statistics of each micro-batch
    (:func:`~trainer_core.training.offpolicy.weight_stats` rows)."""
    import torch

    config, accelerator = run.config, run.accelerator
    loss_sum = torch.zeros((), device=accelerator.device)
    rows = []
    for m, pairs in enumerate(micro):
        groups = [g for g, _ in pairs]
        batch = _group_batch(groups, config, run.tokenizer.pad_token_id, accelerator.device)
        off = offpolicy_batch(
            run.model,
            pairs,
            width=batch["input_ids"].size(1),
            temperature=config.temperature,
            device=accelerator.device,
        )
        rows.append(weight_stats(off, config.importance_cap))
        with run.grad_sync(last=m == config.grad_accum - 1):
            loss = _micro_loss(run, reference, batch, off, items)
            accelerator.backward(loss)
        loss_sum += loss.detach()
    return loss_sum, torch.stack(rows)


def _weight_metrics(rows: Any, accelerator: Any) -> dict[str, float]:
    """The step's importance weight metrics over every process's micro-batches."""
    return weight_metrics(accelerator.gather(rows.to(accelerator.device)))


# --------------------------------------------------------------------------- training


@dataclass
class _Step:
    """What one optimizer step took, trained and measured, for its metrics and message."""

    admitted: Admitted
    waited: float
    loss: float
    metrics: dict[str, float]


def _train_step(
    run: Run, reference: Any, source: GroupSource, state: _State, per_process: int
) -> _Step:
    """Take and admit the step's groups (main process), train on them once, settle them."""
    config, accelerator = run.config, run.accelerator
    started = time.perf_counter()
    admitted, waited = None, 0.0
    if accelerator.is_main_process:
        admitted, waited = _take_admitted(config, source, state.version)
    admitted = _share(admitted, accelerator)
    micro = _micro_batches(config, admitted, accelerator.process_index, per_process)
    stats = _step_stats([[g for g, _ in pairs] for pairs in micro], accelerator)
    world = accelerator.num_processes
    loss_sum, weight_rows = _backward(run, reference, micro, items=float(stats[0]) / world)
    grad_norm, learning_rate = run.update()
    loss = float(accelerator.reduce(loss_sum, reduction="mean"))
    if accelerator.is_main_process:
        source.settle(run.step, state.version, admitted.kept, admitted.dropped)
    state.dropped_total += len(admitted.dropped)
    ages = admitted.staleness or [0]
    metrics = _step_metrics(
        stats,
        loss=loss,
        online=True,
        learning_rate=learning_rate,
        grad_norm=grad_norm,
        seconds=time.perf_counter() - started,
        wait_seconds=waited,
    )
    metrics.update(
        version=float(state.version),
        staleness_mean=sum(ages) / len(ages),
        staleness_max=float(max(ages)),
        dropped=float(len(admitted.dropped)),
        dropped_total=float(state.dropped_total),
        groups=float(len(admitted.kept)),
        **_weight_metrics(weight_rows, accelerator),
    )
    return _Step(admitted, waited, loss, metrics)


def _message(run: Run, step: _Step, published: int | None) -> str:
    m = step.metrics
    text = (
        f"step {run.step}/{run.config.max_steps} loss {step.loss:.4f} reward {m['reward']:.3f} "
        f"version {int(m['version'])} staleness {m['staleness_mean']:.2f} (max "
        f"{int(m['staleness_max'])}) dropped {int(m['dropped'])} (total {int(m['dropped_total'])}) "
        f"weights {m['importance_weight_min']:.3f}..{m['importance_weight_max']:.3f}"
    )
    return text + (f"; published version {published}" if published is not None else "")


def train_decoupled(
    config: DecoupledConfig,
    source: GroupSource,
    publisher: Publisher,
    on_progress: Callable[[ProgressEvent], None] | None = None,
) -> TrainResult:
    """Train ``config.model_dir`` with decoupled GRPO on the groups of ``source``, publishing
    versions through ``publisher`` (see the module docstring); checkpoints (= versions) go to
    ``config.output_dir``, and a run with checkpoints there resumes from the newest. Returns the
    final loss, the step count, the last checkpoint and the logged metrics: loss, reward,
    success_rate, version, staleness_mean/max, dropped (this step), dropped_total,
    importance_weight_mean/min/max, clipped_fraction, groups, seconds, wait_seconds (and the
    learning rate, gradient norm and token counts)."""
    config = _run_config(config)
    accelerator, _world, _rank, per_process = start_run(config)
    model, tokenizer = load_seeded(config, accelerator)
    reference = frozen_reference(model) if config.beta > 0 else None
    run = prepare_run(config, accelerator, model, tokenizer, on_progress)
    run.last_dir = str(config.resume_from)  # resumed at max_steps: the result names it
    state = _start_state(run)
    run.checkpointer = _VersionCheckpointer(config.output_dir, accelerator=accelerator, state=state)
    released = 0
    if accelerator.is_main_process:
        released = source.release_after(run.step)
        _catch_up(run, publisher, state.version)
    start = "resumed at step" if config.resume_from else "starting at step"
    report(
        on_progress,
        step=run.step,
        total=config.max_steps,
        metrics={},
        message=f"decoupled GRPO {start} {run.step}, version {state.version} "
        f"({released} groups released for retraining); {config.groups_per_step} groups per step",
    )

    loss = float("nan")
    while not run.done:
        step = _train_step(run, reference, source, state, per_process)
        loss = step.loss
        publish = checkpoint_due(config, run.step)
        run.end_step(
            loss=loss,
            metrics=step.metrics,
            message=_message(run, step, state.version + 1 if publish else None),
            consumed=[g.id for g in step.admitted.kept],
            dropped=[g.id for g in step.admitted.dropped],
        )
        if publish:  # end_step wrote the checkpoint of version + 1
            state.version += 1
            if accelerator.is_main_process:
                publisher.publish(state.version, run.last_dir, run.step)
    return run.result(loss)
