"""The checkpoint layout, in one place: writing, finding and restoring the checkpoints of a
training run. Trainers, the web app (recording a run's checkpoints) and resume all ask this module.

:class:`Checkpointer` writes ``<output_dir>/checkpoint-<step>/``: a loadable model directory
(``config.json``, weights, tokenizer — for LoRA the merged model, with the adapter under
``adapter/``), ``optimizer.pt``, ``scheduler.pt``, ``rng_state_<rank>.pt`` (Python, NumPy and
torch random states of each process), ``train_config.yaml`` and ``trainer_state.json`` (step,
extra, written last: a checkpoint without it is incomplete). Loading it back restores all of
these, so a resumed run continues exactly as if it had not stopped (its batches are a function of
the seed and the step, see the trainers).

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
        state_dict = self.accelerator.get_state_dict(model) if self.accelerator else None
        if self._main:
            if is_peft_model(inner):
                inner.save_pretrained(path / "adapter")
                merged = copy.deepcopy(inner).merge_and_unload()
                merged.save_pretrained(path)
                del merged
            else:
                inner.save_pretrained(path, state_dict=state_dict)
            tokenizer.save_pretrained(path)
            torch.save(optimizer.state_dict(), path / "optimizer.pt")
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
            _load_weights(inner, path)
        device = next(inner.parameters()).device
        if optimizer is not None:
            optimizer.load_state_dict(
                torch.load(path / "optimizer.pt", map_location=device, weights_only=False)
            )
        if scheduler is not None:
            scheduler.load_state_dict(torch.load(path / "scheduler.pt", weights_only=False))
        rng = path / f"rng_state_{self._rank}.pt"
        if not rng.is_file():
            rng = path / "rng_state_0.pt"
        _set_rng_state(torch.load(rng, weights_only=False))
        return int(state["step"]), dict(state.get("extra") or {})


def _load_weights(model: Any, path: Path) -> None:
    from safetensors.torch import load_file

    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise ConfigError(f"{path} holds no safetensors weights to resume from")
    state: dict[str, Any] = {}
    for f in files:
        state.update(load_file(str(f)))
    result = model.load_state_dict(state, strict=False)
    own = model.state_dict()
    missing = [
        k
        for k in result.missing_keys
        if not any(own[k].data_ptr() == own[o].data_ptr() for o in state if o in own)
    ]
    if missing or result.unexpected_keys:
        raise ConfigError(
            f"the weights in {path} do not fit the model of model_dir (missing: "
            f"{', '.join(missing[:5]) or 'none'}; unexpected: "
            f"{', '.join(result.unexpected_keys[:5]) or 'none'}); resume with the same model_dir"
        )
