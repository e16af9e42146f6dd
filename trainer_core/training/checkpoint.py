"""The checkpoint layout, in one place: writing, finding and restoring the checkpoints of a
training run. Trainers, the web app (recording a run's checkpoints) and resume all ask this module.

:class:`Checkpointer` writes ``<output_dir>/checkpoint-<step>/``: a loadable model directory
(``config.json``, weights, tokenizer — for LoRA the merged model, with the adapter under
``adapter/``), ``optimizer.pt``, ``scheduler.pt``, ``rng_state_<rank>.pt`` (Python, NumPy and
torch random states of each process), ``train_config.yaml`` and ``trainer_state.json`` (step,
extra, written last: a checkpoint without it is incomplete). Loading it back restores all of
these, so a resumed run continues exactly as if it had not stopped (its batches are a function of
the seed and the step, see the trainers).

Under FSDP (the model sharded over the processes) every process takes part in gathering the full
weights and the full optimizer state, which the main process writes in the same files; loading
gives each process its shard of them (:mod:`torch.distributed.checkpoint.state_dict`). The
optimizer state of an FSDP run is then keyed by parameter name (``optimizer.pt`` of any other run
by parameter index), and either kind loads into a run with or without FSDP, at any number of
processes.

:func:`list_checkpoints` lists the complete checkpoints of an output directory by step,
:func:`find_checkpoint` picks the one to resume from, :func:`checkpoint_due` says which steps
are saved.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainer_core.errors import ConfigError
from trainer_core.training.config import TrainConfig, config_to_yaml
from trainer_core.training.modelling import is_peft_model, require_torch, unwrap

__all__ = [
    "CHECKPOINT_PREFIX",
    "CONFIG_FILE",
    "TRAINER_STATE",
    "Checkpointer",
    "checkpoint_due",
    "checkpoint_path",
    "find_checkpoint",
    "is_sharded",
    "list_checkpoints",
]

#: A checkpoint is the directory ``<output_dir>/<CHECKPOINT_PREFIX><step>``.
CHECKPOINT_PREFIX = "checkpoint-"
#: Written last into a checkpoint: a directory without it is incomplete.
TRAINER_STATE = "trainer_state.json"
#: The run's config, as YAML, in every checkpoint.
CONFIG_FILE = "train_config.yaml"


# --------------------------------------------------------------------------- the layout


def checkpoint_path(output_dir: str | Path, step: int) -> Path:
    """The directory of the checkpoint of ``step``: ``<output_dir>/checkpoint-<step>``."""
    return Path(output_dir) / f"{CHECKPOINT_PREFIX}{step}"


def list_checkpoints(output_dir: str | Path) -> list[tuple[int, Path]]:
    """The complete ``checkpoint-<step>`` directories in ``output_dir`` as ``(step, path)``,
    sorted by step (empty when there is none, or no such directory)."""
    found = []
    root = Path(output_dir)
    if root.is_dir():
        for child in root.glob(f"{CHECKPOINT_PREFIX}*"):
            suffix = child.name.removeprefix(CHECKPOINT_PREFIX)
            if suffix.isdigit() and (child / TRAINER_STATE).is_file():
                found.append((int(suffix), child))
    return sorted(found)


def find_checkpoint(path: str | Path) -> Path:
    """``path`` if it is a complete checkpoint, else the latest complete ``checkpoint-<step>``
    inside it; ConfigError when there is none."""
    p = Path(path).expanduser()
    if (p / TRAINER_STATE).is_file():
        return p
    found = list_checkpoints(p)
    if not found:
        raise ConfigError(
            f"no complete checkpoint at {str(p)!r}: give a checkpoint-<step> directory written "
            f"by a Steplab trainer (it holds {TRAINER_STATE}) or the output_dir that holds them"
        )
    return found[-1][1]


def checkpoint_due(config: TrainConfig, step: int) -> bool:
    """Whether ``step`` is saved: every ``save_every`` steps and the last one. Trainers save
    before they report the step, so a callback that stops the run (a cancel) keeps it."""
    return step == config.max_steps or bool(config.save_every and step % config.save_every == 0)


# --------------------------------------------------------------------------- random state


def _rng_state() -> dict[str, Any]:
    import numpy as np

    torch = require_torch()
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: Mapping[str, Any]) -> None:
    import numpy as np

    torch = require_torch()
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


# --------------------------------------------------------------------------- saving and loading


class Checkpointer:
    """Writes and restores ``<output_dir>/checkpoint-<step>/`` (see the module docstring).

    With an ``accelerator`` (several processes), every process calls :meth:`save` and
    :meth:`load`: the main process writes the model, optimizer and scheduler, each process its
    own random state, and the processes wait for each other around it.
    """

    def __init__(self, output_dir: str | Path, *, accelerator: Any = None):
        self.output_dir = Path(output_dir)
        self.accelerator = accelerator

    @property
    def _rank(self) -> int:
        return self.accelerator.process_index if self.accelerator is not None else 0

    @property
    def _main(self) -> bool:
        return self.accelerator is None or self.accelerator.is_main_process

    def _wait(self) -> None:
        if self.accelerator is not None:
            self.accelerator.wait_for_everyone()

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
        """Write ``checkpoint-<step>`` (``trainer_state.json`` with ``step`` and ``extra`` last);
        returns its path."""
        torch = require_torch()
        path = checkpoint_path(self.output_dir, step)
        self._wait()
        if self._main:
            path.mkdir(parents=True, exist_ok=True)
            (path / TRAINER_STATE).unlink(missing_ok=True)
        self._wait()
        torch.save(_rng_state(), path / f"rng_state_{self._rank}.pt")
        inner = unwrap(model, self.accelerator)
        # collectives under FSDP: every process gathers, the main process gets the full states
        state_dict = self.accelerator.get_state_dict(model) if self.accelerator else None
        optimizer_state = _optimizer_state(model, optimizer, self.accelerator)
        if state_dict and is_sharded(self.accelerator):
            state_dict = _without_aliases(state_dict, inner)
        if self._main:
            if is_peft_model(inner):
                inner.save_pretrained(path / "adapter")
                merged = copy.deepcopy(inner).merge_and_unload()
                merged.save_pretrained(path)
                del merged
            else:
                inner.save_pretrained(path, state_dict=state_dict)
            tokenizer.save_pretrained(path)
            torch.save(optimizer_state, path / "optimizer.pt")
            torch.save(scheduler.state_dict(), path / "scheduler.pt")
            if config is not None:
                (path / CONFIG_FILE).write_text(config_to_yaml(config), encoding="utf-8")
            world = self.accelerator.num_processes if self.accelerator is not None else 1
            state = {"step": step, "world_size": world, "extra": dict(extra or {})}
            (path / TRAINER_STATE).write_text(json.dumps(state, indent=2), encoding="utf-8")
        self._wait()
        return path

    def load(
        self, path: str | Path, model: Any, optimizer: Any = None, scheduler: Any = None
    ) -> tuple[int, dict[str, Any]]:
        """Restore the weights into ``model`` (the trainable ones: the adapter for LoRA), the
        optimizer and scheduler states and this process's random state. Returns (step, extra)."""
        torch = require_torch()
        path = find_checkpoint(path)
        state = json.loads((path / TRAINER_STATE).read_text(encoding="utf-8"))
        inner = unwrap(model, self.accelerator)
        if is_peft_model(inner):
            from peft import set_peft_model_state_dict
            from safetensors.torch import load_file

            adapter = path / "adapter" / "adapter_model.safetensors"
            if not adapter.is_file():
                raise ConfigError(
                    f"{path} holds no LoRA adapter (adapter/); it was written by a run without "
                    "LoRA: resume with lora_r=0, or start a new LoRA run from it as model_dir"
                )
            set_peft_model_state_dict(inner, load_file(str(adapter)))
        else:
            if (path / "adapter").is_dir():
                raise ConfigError(
                    f"{path} was written by a LoRA run; resume it with the same lora_r"
                )
            _load_weights(inner, path, sharded=is_sharded(self.accelerator))
        device = next(inner.parameters()).device
        if optimizer is not None:
            _load_optimizer(
                torch.load(path / "optimizer.pt", map_location=device, weights_only=False),
                inner,
                optimizer,
                sharded=is_sharded(self.accelerator),
            )
        if scheduler is not None:
            scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=False))
        rng = path / f"rng_state_{self._rank}.pt"
        if not rng.is_file():
            rng = path / "rng_state_0.pt"
        _set_rng_state(torch.load(rng, weights_only=False))
        return int(state["step"]), dict(state.get("extra") or {})


def is_sharded(accelerator: Any) -> bool:
    """Whether ``accelerator`` shards the model over its processes (FSDP): its weights and
    optimizer state are then gathered to be saved and split again when loaded."""
    if accelerator is None:
        return False
    from accelerate.utils import DistributedType

    return accelerator.distributed_type == DistributedType.FSDP


def _without_aliases(state_dict: dict[str, Any], model: Any) -> dict[str, Any]:
    """``state_dict`` with each parameter shared by several names (tied embeddings) kept under
    its first name only, as ``save_pretrained`` writes an unsharded model: a gathered state dict
    holds a separate copy per name, which it cannot recognise as tied."""
    seen: set[int] = set()
    aliases = set()
    for name, param in model.named_parameters(remove_duplicate=False):
        if id(param) in seen:
            aliases.add(name)
        seen.add(id(param))
    return {k: v for k, v in state_dict.items() if k not in aliases}


def _optimizer_state(model: Any, optimizer: Any, accelerator: Any) -> dict[str, Any]:
    """What ``optimizer.pt`` holds: ``optimizer.state_dict()``, or under FSDP the full state
    keyed by parameter name, gathered from every process (each must call this; the main process
    gets it, the others an empty dict)."""
    if not is_sharded(accelerator):
        return optimizer.state_dict()
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        get_optimizer_state_dict,
    )

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    return get_optimizer_state_dict(model, optimizer, options=options)


def _by_name(state: dict[str, Any], model: Any) -> dict[str, Any]:
    """An ``optimizer.state_dict()`` (parameters by index) keyed by parameter name instead, as
    torch's distributed state dicts are: the optimizer's parameters are the model's trainable
    ones in order (:func:`~trainer_core.training.loop.make_optimizer_and_scheduler`)."""
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    groups = [{**g, "params": [names[i] for i in g["params"]]} for g in state["param_groups"]]
    return {"state": {names[i]: v for i, v in state["state"].items()}, "param_groups": groups}


def _load_optimizer(state: dict[str, Any], model: Any, optimizer: Any, *, sharded: bool) -> None:
    """Restore an ``optimizer.pt`` of either kind (by index; by name, written under FSDP) into
    ``optimizer``: under FSDP each process keeps its shard of the full state."""
    by_name = any(isinstance(k, str) for k in state.get("state", {})) or any(
        isinstance(p, str) for g in state.get("param_groups", []) for p in g.get("params", [])
    )
    if not sharded and not by_name:
        optimizer.load_state_dict(state)
        return
    from torch.distributed.checkpoint.state_dict import (
        StateDictOptions,
        set_optimizer_state_dict,
    )

    if not by_name:
        state = _by_name(state, model)
    options = StateDictOptions(full_state_dict=True)
    set_optimizer_state_dict(model, optimizer, state, options=options)


def _load_weights(model: Any, path: Path, *, sharded: bool = False) -> None:
    """Load the checkpoint's safetensors weights into ``model`` (under FSDP each process keeps
    its shard); ConfigError when they do not fit it (a tied weight saved once is not missing)."""
    from safetensors.torch import load_file

    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise ConfigError(f"{path} holds no safetensors weights to resume from")
    state: dict[str, Any] = {}
    for f in files:
        state.update(load_file(str(f)))
    if sharded:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

        options = StateDictOptions(full_state_dict=True, strict=False)
        result = set_model_state_dict(model, state, options=options)
    else:
        result = model.load_state_dict(state, strict=False)
    # a parameter shared by several names (tied embeddings) is saved under one of them
    owners: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        owners.setdefault(id(param), []).append(name)
    shared = {n: names for names in owners.values() for n in names}
    missing = [
        k for k in result.missing_keys if not any(o in state for o in shared.get(k, [k]) if o != k)
    ]
    if missing or result.unexpected_keys:
        raise ConfigError(
            f"the weights in {path} do not fit the model of model_dir (missing: "
            f"{', '.join(missing[:5]) or 'none'}; unexpected: "
            f"{', '.join(result.unexpected_keys[:5]) or 'none'}); resume with the same model_dir"
        )
