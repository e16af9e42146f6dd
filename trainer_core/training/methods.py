"""The training methods by name (``sft``, ``dpo``, ``grpo``): each one's config class and
``train`` function, and :func:`train_from_yaml`, the one call that trains a method from a YAML
config (what ``steplab train METHOD --config FILE`` runs).

The trainer modules are imported only when a method is used, so importing this module imports no
torch.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainer_core.errors import ConfigError
from trainer_core.progress import ProgressEvent
from trainer_core.training.config import TrainConfig, TrainResult, config_from_yaml

__all__ = ["METHODS", "config_class", "train_from_yaml", "train_method"]

#: Method name → (its trainer module, the name of its config class there).
METHODS: dict[str, tuple[str, str]] = {
    "sft": ("trainer_core.training.sft", "SFTConfig"),
    "dpo": ("trainer_core.training.dpo", "DPOConfig"),
    "grpo": ("trainer_core.training.grpo", "GRPOConfig"),
}


def _trainer_module(method: str) -> Any:
    if method not in METHODS:
        raise ConfigError(f"unknown training method {method!r}; use one of {', '.join(METHODS)}")
    return importlib.import_module(METHODS[method][0])


def config_class(method: str) -> type[TrainConfig]:
    """The config dataclass of ``method`` (ConfigError naming the methods for an unknown one)."""
    return getattr(_trainer_module(method), METHODS[method][1])


def train_method(
    method: str,
    config: TrainConfig,
    *,
    on_progress: Callable[[ProgressEvent], None] | None = None,
) -> TrainResult:
    """Run ``method``'s ``train(config, on_progress)``."""
    return _trainer_module(method).train(config, on_progress=on_progress)


def _yaml_text(text_or_path: str | os.PathLike[str]) -> str:
    """The YAML of a config given as a path (a ``Path``, or one line of text without ``": "``)
    or as the YAML text itself (several lines, or one ``key: value`` line or ``{...}`` mapping)."""
    text = os.fspath(text_or_path)
    stripped = text.strip()
    is_text = "\n" in stripped or ": " in stripped or stripped.startswith("{")
    if not isinstance(text_or_path, os.PathLike) and is_text:
        return text
    path = Path(text).expanduser()
    if not path.is_file():
        raise ConfigError(f"config file {text!r} not found: give a YAML file of training options")
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config file {text!r} cannot be read: {exc}") from None


def train_from_yaml(
    method: str,
    text_or_path: str | os.PathLike[str],
    *,
    on_progress: Callable[[ProgressEvent], None] | None = None,
    on_config: Callable[[TrainConfig], None] | None = None,
) -> TrainResult:
    """Train ``method`` (``sft``, ``dpo`` or ``grpo``) from a YAML config — a file path or the
    YAML text — and return the trainer's :class:`~.config.TrainResult`. ``on_config`` is shown
    the parsed config before training starts (the CLI prints what it runs, e.g. GRPO's
    advantage estimator). Raises
    :class:`~trainer_core.errors.SteplabError` subclasses with messages that say what to fix: a
    ConfigError for an unknown method, a missing file, bad YAML or bad options; the trainer's
    own errors (InputError for bad data, EnvironmentUnavailable for a missing library or GPU)."""
    cls = config_class(method)
    config = config_from_yaml(cls, _yaml_text(text_or_path))
    if on_config is not None:
        on_config(config)
    return train_method(method, config, on_progress=on_progress)
