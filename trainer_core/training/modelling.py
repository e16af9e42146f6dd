"""The model side of training: seeding, the device and the ``accelerate.Accelerator``, loading a
local model directory for training (the chat format's tokens added, LoRA adapters via peft) and
the per-token log-probabilities a trainer's loss is built from.

:func:`load_model_and_tokenizer` loads a local model directory (a checkpoint of ours or any
``save_pretrained`` output; nothing is downloaded), adds the chat format's tokens
(:func:`~trainer_core.policies.chat_format.ensure_special_tokens`, embeddings resized) and wraps
the model with LoRA adapters (peft) when ``lora_r > 0``. :func:`token_logprobs` gives
``log p(labels[t] | tokens < t)`` at every label position (0 where the label is ``-100``);
:func:`sequence_logprobs` sums them per sequence (DPO, GRPO). torch, transformers, peft and
accelerate are imported inside the functions.

Precision (:func:`compute_precision`): ``dtype: fp32`` computes in fp32; ``dtype: bf16`` with full
fine-tuning keeps fp32 weights and runs every forward pass of the prepared model under bf16
autocast (accelerate's mixed precision, ``bf16-mixed``); with LoRA the frozen base is stored and
computed in bf16, the adapters in fp32 (``bf16``). Log-probabilities are always taken in fp32 from
the logits. Whatever computes with the trained model outside its prepared forward — the DPO and
GRPO reference models, a decoupled run's samplers — computes in the same precision, so equal
weights give equal log-probs.

FSDP: accelerate 1.x shards a model only on accelerators (GPUs and the like). On the CPU an
``accelerate launch --use_fsdp`` fails to start (FSDP 1) or silently trains with DDP (FSDP 2);
:func:`make_accelerator` refuses both with what to do, and refuses LoRA under FSDP.
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from trainer_core.errors import ConfigError, EnvironmentUnavailable, PolicyError
from trainer_core.training.config import DTYPES, TrainConfig

__all__ = [
    "FSDP_NEEDS_GPUS",
    "IGNORE_INDEX",
    "compute_precision",
    "is_peft_model",
    "load_model_and_tokenizer",
    "load_seeded",
    "make_accelerator",
    "require_torch",
    "resolve_device",
    "sequence_logprobs",
    "set_seed",
    "token_logprobs",
    "unwrap",
    "weights_dtype",
]

#: The label of a token that carries no loss (Hugging Face's convention for ``labels``).
IGNORE_INDEX = -100


# --------------------------------------------------------------------------- seeds, devices


def set_seed(seed: int) -> None:
    """Seed Python's, NumPy's and torch's (CPU and CUDA) random streams."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)


def require_torch() -> Any:
    """``torch``, or EnvironmentUnavailable saying to install it."""
    try:
        import torch
    except ImportError as exc:
        raise EnvironmentUnavailable(f"training needs torch ({exc}); install it") from None
    return torch


def resolve_device(device: str) -> Any:
    """The ``torch.device`` for a config's ``device`` (auto: a GPU when there is one)."""
    torch = require_torch()
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


def compute_precision(config: TrainConfig) -> str:
    """How the trained model computes (see the module docstring): ``fp32``; ``bf16-mixed`` (full
    fine-tuning with ``dtype: bf16``: fp32 weights, bf16 autocast); ``bf16`` (LoRA with ``dtype:
    bf16``: the frozen base in bf16). The local-model policy takes the same names
    (``LocalHFPolicy(precision=...)``), so a sampler computes as the trainer does."""
    if config.dtype != "bf16":
        return "fp32"
    return "bf16" if config.lora_r > 0 else "bf16-mixed"


#: Why a launch with FSDP on the CPU is refused (:func:`make_accelerator`).
FSDP_NEEDS_GPUS = (
    "this run was launched with FSDP (accelerate launch --use_fsdp, or an accelerate config "
    "with FSDP) but runs on the CPU, and accelerate {version} shards models only on GPUs (and "
    "other accelerators): on the CPU, FSDP 1 does not start and FSDP 2 silently trains with DDP, "
    "a whole copy of the model in every process. Launch without --use_fsdp to train with DDP on "
    "the CPU (docs/training.md), or run on GPUs"
)


def _launched_with_fsdp() -> bool:
    return os.environ.get("ACCELERATE_USE_FSDP", "false").strip().lower() in ("true", "1")


def make_accelerator(config: TrainConfig) -> Any:
    """An ``accelerate.Accelerator`` for ``config``: the process group comes from ``accelerate
    launch`` (one process without it); bf16 is mixed precision; the CPU when asked for.
    ConfigError for FSDP on the CPU (:data:`FSDP_NEEDS_GPUS`) and for LoRA under FSDP."""
    try:
        import accelerate
        from accelerate import Accelerator
        from accelerate.state import AcceleratorState, GradientState, PartialState
        from accelerate.utils import DistributedType
    except ImportError as exc:
        raise EnvironmentUnavailable(f"training needs accelerate ({exc}); install it") from None
    if config.device.startswith("cuda"):
        resolved = resolve_device(config.device)  # a clear error when there is no GPU
        if resolved.index is not None and int(os.environ.get("WORLD_SIZE", "1")) == 1:
            # one process: accelerate trains on the current GPU; make it the one asked for (a
            # launch gives each process the GPU of its local rank)
            require_torch().cuda.set_device(resolved.index)
    if AcceleratorState._shared_state:
        # accelerate keeps one state per process; a worker that trains again (another precision,
        # another device) starts from a clean one. A launched process group is kept.
        launched = PartialState._shared_state and PartialState().num_processes > 1
        AcceleratorState._reset_state(reset_partial_state=not launched)
        GradientState._reset_state()
    mixed = "bf16" if config.dtype == "bf16" and config.lora_r == 0 else "no"
    # On a machine without a GPU, "auto" is the CPU too: accelerate then joins the processes of a
    # launch with gloo (without cpu=True each would train alone).
    cpu = config.device == "cpu" or (
        config.device == "auto" and not require_torch().cuda.is_available()
    )
    fsdp_on_cpu = FSDP_NEEDS_GPUS.format(version=accelerate.__version__)
    try:
        accelerator = Accelerator(cpu=cpu, mixed_precision=mixed)
    except RuntimeError as exc:  # FSDP 1's plugin looks for a GPU
        if cpu and _launched_with_fsdp():
            raise ConfigError(f"{fsdp_on_cpu} (accelerate said: {exc})") from None
        raise
    sharded = accelerator.distributed_type == DistributedType.FSDP
    if cpu and _launched_with_fsdp() and not sharded:
        raise ConfigError(fsdp_on_cpu)
    if sharded and config.lora_r > 0:
        raise ConfigError(
            "LoRA under FSDP is not supported: each checkpoint merges the adapters into a whole "
            "copy of the model, which a sharded model does not have. Train LoRA with DDP "
            "(launch without --use_fsdp; the frozen base in bf16 halves its memory), or use "
            "lora_r: 0 under FSDP"
        )
    return accelerator


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
    torch = require_torch()
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
    """The model inside ``accelerator``'s wrapper (DDP, FSDP), or ``model`` without one."""
    return accelerator.unwrap_model(model) if accelerator is not None else model


def is_peft_model(model: Any) -> bool:
    """Whether ``model`` is a peft model (LoRA adapters on a frozen base)."""
    return hasattr(model, "peft_config") and hasattr(model, "merge_and_unload")


# --------------------------------------------------------------------------- log-probs


def token_logprobs(model: Any, batch: Mapping[str, Any]) -> Any:
    """Per-token log-probs (batch, length) aligned with ``batch["labels"]``: position ``t`` holds
    ``log p(labels[t] | input_ids[:t])`` in fp32, 0 where ``labels[t] == -100`` (and at t=0)."""
    torch = require_torch()
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
