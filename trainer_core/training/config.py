"""Training configs: the :class:`TrainConfig` base dataclass every trainer's config extends, the
:class:`TrainResult` every trainer returns, and their text forms.

Each field carries its help text in ``metadata["help"]`` (:func:`option`), or an attribute
docstring right under the field; the same text is the help of the job form (:func:`config_help`).
:func:`config_from_dict` checks names and types (an unknown key is a
:class:`~trainer_core.errors.ConfigError` that names it); :func:`config_to_yaml` /
:func:`config_from_yaml` round-trip a config (it is saved in every checkpoint).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainer_core.errors import ConfigError

__all__ = [
    "DTYPES",
    "LR_SCHEDULES",
    "TrainConfig",
    "TrainResult",
    "config_from_dict",
    "config_from_yaml",
    "config_help",
    "config_to_yaml",
    "option",
]

DTYPES = ("fp32", "bf16")
LR_SCHEDULES = ("constant", "linear", "cosine")


def option(
    default: Any = dataclasses.MISSING,
    *,
    help: str,  # noqa: A002
    choices: Sequence[str] | None = None,
    **kwargs: Any,
) -> Any:
    """A config field with its help text (shown in the job form) and, for a closed set of
    values, its ``choices`` (a menu in the form)."""
    metadata: dict[str, Any] = {"help": help}
    if choices is not None:
        metadata["choices"] = tuple(choices)
    if default is dataclasses.MISSING:
        return field(metadata=metadata, **kwargs)
    return field(default=default, metadata=metadata, **kwargs)


# --------------------------------------------------------------------------- configs


@dataclass
class TrainConfig:
    """Options every trainer shares. Subclasses add their own, each with its help text."""

    model_dir: str = option(
        help="A local model directory (save_pretrained output, or an earlier Steplab checkpoint) "
        "to start from. Nothing is downloaded."
    )
    output_dir: str = option(help="Where checkpoints are written (checkpoint-<step>/ inside).")
    dataset: str = option(
        "", help="The exported JSONL file to train on, or a directory holding train.jsonl."
    )
    seed: int = option(
        0, help="Seed of every random choice (initialisation, data order, dropout, sampling)."
    )
    learning_rate: float = option(5e-4, help="Peak learning rate of AdamW.")
    max_steps: int = option(100, help="Number of optimizer steps to train for.")
    batch_size: int = option(
        4,
        help="Examples per micro-batch over all processes together (each of N processes takes "
        "batch_size / N of them), so a config trains the same whatever the number of processes.",
    )
    grad_accum: int = option(
        1,
        help="Micro-batches accumulated per optimizer step (examples per step = "
        "batch_size x grad_accum).",
    )
    max_length: int = option(
        512, help="Longest sequence in tokens; a longer one keeps its first max_length tokens."
    )
    dtype: str = option(
        "fp32",
        help="fp32, or bf16: full fine-tuning keeps fp32 master weights and computes in bf16 "
        "(mixed precision); with LoRA the frozen base weights are stored in bf16.",
    )
    lora_r: int = option(
        0,
        help="0 trains every weight; above 0, the rank of LoRA adapters (peft) on all linear "
        "layers, the base model frozen.",
    )
    lora_alpha: int = option(16, help="LoRA scaling numerator (the update is scaled by alpha/r).")
    lora_dropout: float = option(0.0, help="Dropout on the LoRA adapters' input.")
    warmup_steps: int = option(0, help="Steps of linear learning-rate warmup from 0.")
    lr_schedule: str = option(
        "linear", help="After warmup: constant, linear (decay to 0 at max_steps) or cosine."
    )
    weight_decay: float = option(0.0, help="AdamW weight decay.")
    adam_beta1: float = option(0.9, help="AdamW beta1 (decay of the gradient's running mean).")
    adam_beta2: float = option(
        0.999,
        help="AdamW beta2 (decay of the squared gradient's running mean); 0.95 reacts faster, "
        "which suits short runs and tiny models.",
    )
    max_grad_norm: float = option(
        1.0, help="Clip the gradient norm to this value before each step (0: no clipping)."
    )
    save_every: int = option(
        0, help="Write a checkpoint every this many steps (0: only at the end)."
    )
    resume_from: str = option(
        "",
        help="A checkpoint directory (or an output_dir: its latest checkpoint) to resume "
        "exactly from: weights, optimizer, schedule, random state and step.",
    )
    device: str = option("auto", help="auto (a GPU when there is one), cpu or cuda.")
    log_every: int = option(1, help="Report metrics every this many steps.")

    def validate(self) -> None:
        """Raise ConfigError naming each invalid value."""
        problems = []
        if not str(self.model_dir).strip():
            problems.append("model_dir is empty: give a local model directory")
        if not str(self.output_dir).strip():
            problems.append("output_dir is empty: give a directory for checkpoints")
        for name in ("max_steps", "batch_size", "grad_accum", "max_length", "log_every"):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be at least 1 (got {getattr(self, name)})")
        for name in ("lora_r", "warmup_steps", "save_every", "weight_decay", "max_grad_norm"):
            if getattr(self, name) < 0:
                problems.append(f"{name} must be 0 or more (got {getattr(self, name)})")
        if not self.learning_rate > 0:
            problems.append(f"learning_rate must be above 0 (got {self.learning_rate})")
        if not (0 <= self.adam_beta1 < 1 and 0 <= self.adam_beta2 < 1):
            problems.append("adam_beta1 and adam_beta2 must be in [0, 1)")
        if not 0 <= self.lora_dropout < 1:
            problems.append(f"lora_dropout must be in [0, 1) (got {self.lora_dropout})")
        if self.dtype not in DTYPES:
            problems.append(f"dtype {self.dtype!r} is not one of {', '.join(DTYPES)}")
        if self.lr_schedule not in LR_SCHEDULES:
            problems.append(
                f"lr_schedule {self.lr_schedule!r} is not one of {', '.join(LR_SCHEDULES)}"
            )
        if self.device != "auto" and self.device.split(":")[0] not in ("cpu", "cuda"):
            problems.append(f"device {self.device!r}: use auto, cpu, cuda or cuda:N")
        if problems:
            raise ConfigError(f"{type(self).__name__}: " + "; ".join(problems))


@dataclass
class TrainResult:
    """What a finished training run returns."""

    final_loss: float  # the loss of the last optimizer step
    steps: int  # optimizer steps done in total (a resumed run counts the earlier ones)
    checkpoint_dir: str  # the last checkpoint written (a loadable model directory)
    metrics_history: list[dict[str, float]] = field(default_factory=list)  # one per logged step


def _attribute_docstrings(cls: type) -> dict[str, str]:
    """``name: type = ...`` followed by a string literal, in the class bodies of ``cls``'s MRO."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in zip(body, body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


def config_help(cls: type) -> dict[str, str]:
    """Field name → help text (``metadata["help"]``, else the attribute docstring), in order."""
    if not isinstance(cls, type):
        cls = type(cls)
    docs = _attribute_docstrings(cls)
    return {f.name: f.metadata.get("help") or docs.get(f.name, "") for f in dataclasses.fields(cls)}


def _coerce(name: str, value: Any, hint: Any) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is typing.Union or (origin is not None and type(None) in args):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        return _coerce(name, value, inner[0]) if len(inner) == 1 else value
    if hint is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "1", "yes", "on"):
            return True
        if isinstance(value, str) and value.strip().lower() in ("false", "0", "no", "off", ""):
            return False
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise ConfigError(f"{name} must be true or false, not {value!r}")
    if hint is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                pass
        raise ConfigError(f"{name} must be a whole number, not {value!r}")
    if hint is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                pass
        raise ConfigError(f"{name} must be a number, not {value!r}")
    if hint is str:
        if isinstance(value, str):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return str(value)
        if value is None:
            return ""
        raise ConfigError(f"{name} must be text, not {type(value).__name__}")
    if origin in (list, tuple) or hint in (list, tuple):
        if isinstance(value, str) or not isinstance(value, Sequence):
            raise ConfigError(f"{name} must be a list, not {value!r}")
        items = [_coerce(f"{name}[{i}]", v, args[0]) if args else v for i, v in enumerate(value)]
        return tuple(items) if (origin or hint) is tuple else items
    return value


def config_from_dict(cls: type, data: Mapping[str, Any]) -> Any:
    """A ``cls`` config from a mapping (YAML, a form, JSON): unknown keys, missing required
    fields and values of the wrong type are a ConfigError that names them."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"a {cls.__name__} is a mapping of options, not {type(data).__name__}")
    upgrade = getattr(cls, "upgrade_options", None)
    if upgrade is not None:  # options stored by an earlier version, as today's
        data = upgrade(data)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(
            f"unknown option(s) for {cls.__name__}: {', '.join(map(str, unknown))}; "
            f"known options: {', '.join(fields)}"
        )
    required = [
        name
        for name, f in fields.items()
        if f.default is dataclasses.MISSING
        and f.default_factory is dataclasses.MISSING
        and name not in data
    ]
    if required:
        raise ConfigError(f"{cls.__name__} needs {', '.join(required)}")
    hints = typing.get_type_hints(cls)
    values = {name: _coerce(name, value, hints.get(name, Any)) for name, value in data.items()}
    for name, value in values.items():
        choices = fields[name].metadata.get("choices")
        if choices is not None and value not in choices:
            raise ConfigError(f"{name} must be one of {', '.join(choices)} (got {value!r})")
    config = cls(**values)
    return config


def config_to_yaml(config: Any) -> str:
    """The config as YAML (one key per field, in field order)."""
    import yaml

    data = {
        f.name: list(v) if isinstance(v := getattr(config, f.name), tuple) else v
        for f in dataclasses.fields(config)
    }
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True)


def config_from_yaml(cls: type, text: str) -> Any:
    """A ``cls`` config from YAML text (see :func:`config_from_dict`)."""
    import yaml

    from trainer_core import safeparse

    try:
        data = safeparse.load_yaml(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"the config is not valid YAML: {exc}") from None
    return config_from_dict(cls, data or {})
