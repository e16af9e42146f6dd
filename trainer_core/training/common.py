"""What every trainer shares: the config base, model loading, encoding, log-probs, checkpoints.

Trainers (:mod:`.sft`, :mod:`.dpo`, :mod:`.grpo`) are one readable ``train(config, on_progress)``
each; the pieces they have in common live here, as small functions:

Configs
    :class:`TrainConfig` is the base dataclass of every trainer's config. Each field carries its
    help text in ``metadata["help"]`` (or an attribute docstring right under the field); the same
    text is the help of the job form (:func:`config_help`). :func:`config_from_dict` checks names
    and types (an unknown key is a :class:`~trainer_core.errors.ConfigError` that names it),
    :func:`config_to_yaml` / :func:`config_from_yaml` round-trip a config (it is saved in every
    checkpoint).

Models
    :func:`load_model_and_tokenizer` loads a local model directory (a checkpoint of ours or any
    ``save_pretrained`` output; nothing is downloaded), adds the chat format's tokens
    (:func:`~trainer_core.policies.chat_format.ensure_special_tokens`, embeddings resized) and
    wraps the model with LoRA adapters (peft) when ``lora_r > 0``.

Encoding
    :func:`encode_messages` tokenizes chat messages with the one chat format
    (:func:`~trainer_core.policies.chat_format.tokenize`): ``labels`` hold the policy's own tokens
    (every assistant turn's content and its closing ``<|im_end|>``) and ``-100`` elsewhere,
    ``step_ids`` say which assistant turn (0-based) each token belongs to, ``weights`` are per-token
    loss weights. **Truncation**: a sequence longer than ``max_length`` keeps its first
    ``max_length`` tokens (the end is cut, so late turns lose their tokens; split long
    trajectories at step boundaries instead where that matters — SFT's ``chunk_max_steps``).
    :func:`collate` pads a batch on the right.

Log-probabilities
    :func:`token_logprobs` gives ``log p(labels[t] | tokens < t)`` at every label position (0 where
    the label is ``-100``); :func:`sequence_logprobs` sums them per sequence (DPO, GRPO).

Checkpoints
    :class:`Checkpointer` writes ``<output_dir>/checkpoint-<step>/``: a loadable model directory
    (``config.json``, weights, tokenizer — for LoRA the merged model, with the adapter under
    ``adapter/``), ``optimizer.pt``, ``scheduler.pt``, ``rng_state_<rank>.pt`` (Python, NumPy and
    torch random states of each process), ``train_config.yaml`` and ``trainer_state.json`` (step,
    extra, written last: a checkpoint without it is incomplete). Loading it back restores all of
    these, so a resumed run continues exactly as if it had not stopped (its batches are a
    function of the seed and the step, see the trainers).

Optimisation
    :func:`make_optimizer_and_scheduler`: AdamW over the trainable parameters and a warmup +
    ``lr_schedule`` schedule (stepped once per optimizer step by the trainer, never by accelerate,
    so the schedule does not depend on the number of processes).
"""

from __future__ import annotations

import ast
import copy
import dataclasses
import inspect
import json
import math
import random
import textwrap
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer_core.errors import ConfigError, EnvironmentUnavailable, InputError, PolicyError
from trainer_core.progress import ProgressEvent

__all__ = [
    "IGNORE_INDEX",
    "Checkpointer",
    "Encoded",
    "TrainConfig",
    "TrainResult",
    "collate",
    "config_from_dict",
    "config_from_yaml",
    "config_help",
    "config_to_yaml",
    "encode_messages",
    "find_checkpoint",
    "load_model_and_tokenizer",
    "make_accelerator",
    "make_optimizer_and_scheduler",
    "option",
    "read_jsonl",
    "report",
    "sequence_logprobs",
    "set_seed",
    "token_logprobs",
    "weights_dtype",
]

IGNORE_INDEX = -100
DTYPES = ("fp32", "bf16")
LR_SCHEDULES = ("constant", "linear", "cosine")
TRAINER_STATE = "trainer_state.json"
CONFIG_FILE = "train_config.yaml"


def option(default: Any = dataclasses.MISSING, *, help: str, **kwargs: Any) -> Any:  # noqa: A002
    """A config field with its help text (shown in the job form)."""
    if default is dataclasses.MISSING:
        return field(metadata={"help": help}, **kwargs)
    return field(default=default, metadata={"help": help}, **kwargs)


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

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"the config is not valid YAML: {exc}") from None
    return config_from_dict(cls, data or {})


# --------------------------------------------------------------------------- seeds, devices


def set_seed(seed: int) -> None:
    """Seed Python's, NumPy's and torch's (CPU and CUDA) random streams."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise EnvironmentUnavailable(f"training needs torch ({exc}); install it") from None
    return torch


def resolve_device(device: str) -> Any:
    torch = _torch()
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        resolved = torch.device(device)
    except RuntimeError:
        raise ConfigError(f"unknown device {device!r}; use auto, cpu, cuda or cuda:N") from None
    if resolved.type == "cuda" and not torch.cuda.is_available():
        raise EnvironmentUnavailable(
            f"device {device!r} was asked for but CUDA is not available here; use cpu or auto"
        )
    return resolved


def weights_dtype(config: TrainConfig) -> str:
    """The dtype the trained model's weights are loaded in: bf16 only for a LoRA run's frozen
    base (full fine-tuning in bf16 keeps fp32 master weights and autocasts)."""
    return "bf16" if config.dtype == "bf16" and config.lora_r > 0 else "fp32"


def make_accelerator(config: TrainConfig) -> Any:
    """An ``accelerate.Accelerator`` for ``config``: the process group comes from ``accelerate
    launch`` (one process without it); bf16 is mixed precision; the CPU when asked for."""
    try:
        from accelerate import Accelerator
        from accelerate.state import AcceleratorState, GradientState, PartialState
    except ImportError as exc:
        raise EnvironmentUnavailable(f"training needs accelerate ({exc}); install it") from None
    if config.device.startswith("cuda"):
        resolve_device(config.device)  # a clear error when there is no GPU
    if AcceleratorState._shared_state:
        # accelerate keeps one state per process; a worker that trains again (another precision,
        # another device) starts from a clean one. A launched process group is kept.
        launched = PartialState._shared_state and PartialState().num_processes > 1
        AcceleratorState._reset_state(reset_partial_state=not launched)
        GradientState._reset_state()
    mixed = "bf16" if config.dtype == "bf16" and config.lora_r == 0 else "no"
    # On a machine without a GPU, "auto" is the CPU too: accelerate then joins the processes of a
    # launch with gloo (without cpu=True each would train alone).
    cpu = config.device == "cpu" or (config.device == "auto" and not _torch().cuda.is_available())
    return Accelerator(cpu=cpu, mixed_precision=mixed)


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


def load_seeded(config: TrainConfig, accelerator: Any) -> tuple[Any, Any]:
    """Seed every generator, then load ``config.model_dir`` (with LoRA adapters when
    ``lora_r``) in the config's precision on the accelerator's device."""
    set_seed(config.seed)
    return load_model_and_tokenizer(
        config.model_dir,
        dtype=weights_dtype(config),
        device=accelerator.device,
        lora_r=config.lora_r,
        lora_alpha=config.lora_alpha,
        lora_dropout=config.lora_dropout,
    )


def checkpoint_due(config: TrainConfig, step: int) -> bool:
    """Whether ``step`` is saved: every ``save_every`` steps and the last one. Trainers save
    before they report the step, so a callback that stops the run (a cancel) keeps it."""
    return step == config.max_steps or bool(config.save_every and step % config.save_every == 0)


def finish_run(
    config: TrainConfig, *, loss: float, step: int, last_dir: str, history: list[dict[str, Any]]
) -> TrainResult:
    """The run's result; a run resumed from a checkpoint already at ``max_steps`` saved nothing
    new, and its checkpoint is that one."""
    if not last_dir:
        last_dir = str(find_checkpoint(config.resume_from))
    return TrainResult(
        final_loss=loss, steps=step, checkpoint_dir=last_dir, metrics_history=history
    )


# --------------------------------------------------------------------------- models


def load_model_and_tokenizer(
    model_dir: str | Path,
    *,
    dtype: str = "fp32",
    device: Any = "auto",
    lora_r: int = 0,
    lora_alpha: int = 16,
    lora_dropout: float = 0.0,
) -> tuple[Any, Any]:
    """Load a local model directory for training: the tokenizer gets the chat format's tokens
    (embeddings resized when some were new), the model goes to ``device`` in train mode, and with
    ``lora_r > 0`` it is wrapped in LoRA adapters on every linear layer (the base frozen; rows of
    newly added tokens are trained too). Raises PolicyError for an unusable directory."""
    from trainer_core.policies import chat_format
    from trainer_core.policies.local_hf import check_model_dir

    if dtype not in DTYPES:
        raise ConfigError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    path = check_model_dir(model_dir)
    torch = _torch()
    try:
        import transformers
    except ImportError as exc:
        raise EnvironmentUnavailable(f"training needs transformers ({exc}); install it") from None
    device = device if not isinstance(device, str) else resolve_device(device)
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as exc:
        raise PolicyError(f"could not load the tokenizer in {str(path)!r}: {exc}") from None
    chat_format.ensure_special_tokens(tokenizer)
    torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            path, dtype=torch_dtype, local_files_only=True
        )
    except Exception as exc:
        raise PolicyError(f"could not load the model in {str(path)!r}: {exc}") from None
    rows = model.get_input_embeddings().num_embeddings
    new_ids: list[int] = []
    if rows < len(tokenizer):
        new_ids = list(range(rows, len(tokenizer)))
        model.resize_token_embeddings(len(tokenizer), mean_resizing=False)
    model.config.use_cache = False
    if lora_r > 0:
        try:
            from peft import LoraConfig, get_peft_model
        except ImportError as exc:
            raise EnvironmentUnavailable(f"LoRA needs peft ({exc}); install it") from None
        lora = LoraConfig(
            r=lora_r,
            lora_alpha=lora_alpha,
            lora_dropout=lora_dropout,
            target_modules="all-linear",
            task_type="CAUSAL_LM",
            trainable_token_indices=new_ids or None,
        )
        model = get_peft_model(model, lora)
    model.to(device)
    model.train()
    return model, tokenizer


def unwrap(model: Any, accelerator: Any = None) -> Any:
    return accelerator.unwrap_model(model) if accelerator is not None else model


def _is_peft(model: Any) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "merge_and_unload")


# --------------------------------------------------------------------------- data


def read_jsonl(path: str | Path, *, split: str = "train") -> list[dict[str, Any]]:
    """Rows of a JSONL file, or of ``<dir>/<split>.jsonl`` when ``path`` is a directory."""
    p = Path(path).expanduser()
    if p.is_dir():
        p = p / f"{split}.jsonl"
    if not p.is_file():
        raise ConfigError(
            f"dataset {str(path)!r} not found: give an exported JSONL file or a directory "
            f"holding {split}.jsonl"
        )
    rows = []
    with p.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{p}:{number}: not valid JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise InputError(f"{p}:{number}: a row must be a JSON object")
            rows.append(row)
    if not rows:
        raise InputError(f"{p} holds no rows")
    return rows


@dataclass
class Encoded:
    """One training sequence."""

    input_ids: list[int]
    labels: list[int]  # the token where the policy produced it, IGNORE_INDEX elsewhere
    step_ids: list[int]  # 0-based assistant turn of each token of the policy's own, -1 elsewhere
    weights: list[float]  # per-token loss weight (1.0 unless a trainer sets it)

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def num_label_tokens(self) -> int:
        return sum(1 for t in self.labels if t != IGNORE_INDEX)


def with_tools_system(
    messages: list[dict[str, Any]], row: Mapping[str, Any], index: int
) -> list[dict[str, Any]]:
    """``messages`` with ``system_prompt(tools)`` first when the row lists ``tools`` (a list, or
    the exporters' JSON text) and the messages have no system message: the prompt the
    local-model policy uses, so training sees what the policy is prompted with."""
    from trainer_core.policies import chat_format

    tools = row.get("tools")
    if isinstance(tools, str):  # the exporters' tools column is JSON text
        if not tools.strip():
            return list(messages)
        try:
            tools = json.loads(tools)
        except ValueError:
            raise InputError(
                f"row {index}: 'tools' is not valid JSON; write it as a JSON list of tool specs"
            ) from None
    first = messages[0] if messages else None
    if tools and not (isinstance(first, Mapping) and first.get("role") == "system"):
        return [{"role": "system", "content": chat_format.system_prompt(tools)}, *messages]
    return list(messages)


def encode_messages(
    messages: Sequence[Mapping[str, Any]], tokenizer: Any, *, max_length: int
) -> Encoded:
    """Chat messages → :class:`Encoded`, with the one chat format's exact mask of the policy's
    tokens. Assistant turn ``k`` (the k-th assistant message) is the k-th run of masked tokens.
    Longer than ``max_length``: the first ``max_length`` tokens are kept."""
    from trainer_core.policies import chat_format

    tokens = chat_format.tokenize(messages, tokenizer)
    ids = tokens.input_ids[:max_length]
    mask = tokens.assistant_mask[:max_length]
    step_ids: list[int] = []
    turn = -1
    previous = 0
    for m in mask:
        if m and not previous:
            turn += 1
        step_ids.append(turn if m else -1)
        previous = m
    labels = [t if m else IGNORE_INDEX for t, m in zip(ids, mask, strict=True)]
    return Encoded(input_ids=ids, labels=labels, step_ids=step_ids, weights=[1.0] * len(ids))


def collate(batch: Sequence[Encoded], pad_id: int) -> dict[str, Any]:
    """Right-padded tensors: ``input_ids`` (pad_id), ``attention_mask``, ``labels`` (-100),
    ``weights`` (0.0) and ``step_ids`` (-1), each (batch, longest)."""
    torch = _torch()
    if not batch:
        raise ConfigError("collate needs at least one example")
    width = max(len(e) for e in batch)

    def pad(rows: list[list[Any]], value: Any, dtype: Any) -> Any:
        return torch.tensor([r + [value] * (width - len(r)) for r in rows], dtype=dtype)

    return {
        "input_ids": pad([e.input_ids for e in batch], pad_id, torch.long),
        "attention_mask": pad([[1] * len(e) for e in batch], 0, torch.long),
        "labels": pad([e.labels for e in batch], IGNORE_INDEX, torch.long),
        "weights": pad([e.weights for e in batch], 0.0, torch.float32),
        "step_ids": pad([e.step_ids for e in batch], -1, torch.long),
    }


# --------------------------------------------------------------------------- log-probs


def token_logprobs(model: Any, batch: Mapping[str, Any]) -> Any:
    """Per-token log-probs (batch, length) aligned with ``batch["labels"]``: position ``t`` holds
    ``log p(labels[t] | input_ids[:t])`` in fp32, 0 where ``labels[t] == -100`` (and at t=0)."""
    torch = _torch()
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    logits = logits[:, :-1, :].float()  # (B, T-1, V): position t predicts token t+1
    labels = batch["labels"][:, 1:]  # (B, T-1)
    mask = labels != IGNORE_INDEX
    picked = logits.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)  # (B, T-1)
    logp = (picked - torch.logsumexp(logits, dim=-1)) * mask
    return torch.nn.functional.pad(logp, (1, 0))  # (B, T)


def sequence_logprobs(model: Any, batch: Mapping[str, Any]) -> Any:
    """Sum of the label tokens' log-probs per sequence, (batch,)."""
    return token_logprobs(model, batch).sum(dim=-1)


# --------------------------------------------------------------------------- optimisation


def make_optimizer_and_scheduler(model: Any, config: TrainConfig, total_steps: int) -> tuple:
    """AdamW over the parameters that require grad, and a LambdaLR: linear warmup over
    ``config.warmup_steps``, then ``config.lr_schedule`` until ``total_steps``."""
    torch = _torch()
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


# --------------------------------------------------------------------------- checkpoints


def _rng_state() -> dict[str, Any]:
    import numpy as np

    torch = _torch()
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

    torch = _torch()
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def find_checkpoint(path: str | Path) -> Path:
    """``path`` if it is a complete checkpoint, else the latest complete ``checkpoint-<step>``
    inside it; ConfigError when there is none."""
    p = Path(path).expanduser()
    if (p / TRAINER_STATE).is_file():
        return p
    found = []
    if p.is_dir():
        for child in p.glob("checkpoint-*"):
            suffix = child.name.removeprefix("checkpoint-")
            if suffix.isdigit() and (child / TRAINER_STATE).is_file():
                found.append((int(suffix), child))
    if not found:
        raise ConfigError(
            f"no complete checkpoint at {str(p)!r}: give a checkpoint-<step> directory written "
            f"by a Steplab trainer (it holds {TRAINER_STATE}) or the output_dir that holds them"
        )
    return max(found)[1]


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
        torch = _torch()
        path = self.output_dir / f"checkpoint-{step}"
        self._wait()
        if self._main:
            path.mkdir(parents=True, exist_ok=True)
            (path / TRAINER_STATE).unlink(missing_ok=True)
        self._wait()
        torch.save(_rng_state(), path / f"rng_state_{self._rank}.pt")
        inner = unwrap(model, self.accelerator)
        state_dict = self.accelerator.get_state_dict(model) if self.accelerator else None
        if self._main:
            if _is_peft(inner):
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
        torch = _torch()
        path = find_checkpoint(path)
        state = json.loads((path / TRAINER_STATE).read_text(encoding="utf-8"))
        inner = unwrap(model, self.accelerator)
        if _is_peft(inner):
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
