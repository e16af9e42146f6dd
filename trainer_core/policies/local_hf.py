"""LocalHFPolicy: a local Hugging Face causal language model as a policy, on CPU or GPU.

The model is a directory (a Steplab checkpoint or any local model saved with
``save_pretrained``); nothing is downloaded. torch and transformers are imported on first use::

    policy = LocalHFPolicy("var/checkpoints/run-7", temperature=0.7, seed=1)
    policy.reset(task)
    decision = policy.act(observation, history, tools)   # Decision(action={"tool", ...}, ...)

The policy prompts in the one chat format (:mod:`trainer_core.policies.chat_format`): the system
prompt (``chat_format.system_prompt(tools, instructions=system)``: ``system`` or a one-line
default, then the tools and how to call them; with ``list_tools=False`` only the first part, for
a model trained on its tools), the task prompt and the earlier turns become
messages, :func:`~.chat_format.tokenize` turns them into the prompt's token
ids with a generation prompt (the same ids training uses), the model samples until
``<|im_end|>`` and :func:`~.chat_format.parse_assistant` reads the action. An output that is not
an action gives ``Decision(action=None, error=..., raw=text)``; the policy never raises for what
the model wrote.

Sampling: ``temperature`` (0 means greedy decoding) and nucleus ``top_p``; no other logits
processor applies (the checkpoint's own generation settings are ignored), so the sampled tokens
come from ``softmax(logits / temperature)`` restricted to the top-p nucleus.

Log-probabilities (``return_logprobs=True``): ``Decision.prompt_token_ids``, ``token_ids`` (the
sampled completion, the closing ``<|im_end|>`` included when the model stopped) and ``logprobs``,
one per token: ``log_softmax(logits / temperature)`` at the sampled token, i.e. the policy's
log-probability at the sampling temperature before top-p truncation (with ``temperature=0``, the
model's plain ``log_softmax(logits)``). A forward pass over prompt + completion gives the same
numbers up to floating-point error, which is what policy-gradient training recomputes.

Precision (``precision``): ``auto`` (the default) loads fp32 weights on the CPU and the
checkpoint's own dtype on a GPU; ``fp32`` and ``bf16`` load the weights in that dtype;
``bf16-mixed`` loads fp32 weights and runs every forward pass under bf16 autocast, logits returned
in fp32 — how a full fine-tuning run with ``dtype: bf16`` computes (accelerate's mixed precision),
so a sampler of that run gets the trainer's log-probs
(``trainer_core.training.modelling.compute_precision`` names a run's).

A model sharded over processes (FSDP, the one being trained) decodes in lockstep with the other
processes (``synced_gpus``): every forward pass is a collective, so each process keeps stepping
until all of them are done.

For batch sampling (GRPO), :meth:`LocalHFPolicy.generate` takes several conversations and
:meth:`LocalHFPolicy.generate_ids` several prompts as token ids; :meth:`LocalHFPolicy.from_model`
wraps a model and tokenizer already in memory (the one being trained).
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer_core.errors import ConfigError, EnvironmentUnavailable, PolicyError
from trainer_core.policies import chat_format
from trainer_core.policies.base import Decision, Turn, Usage

if TYPE_CHECKING:
    from trainer_core.tasks.model import Task, ToolSpec

__all__ = ["PRECISIONS", "Generation", "LocalHFPolicy", "check_model_dir", "is_sharded_model"]

WEIGHT_FILES: tuple[str, ...] = (
    "model.safetensors",
    "model.safetensors.index.json",
    "pytorch_model.bin",
    "pytorch_model.bin.index.json",
)
TOKENIZER_FILES: tuple[str, ...] = ("tokenizer.json", "tokenizer_config.json")


#: The ``precision`` a policy computes in (see the module docstring).
PRECISIONS: tuple[str, ...] = ("auto", "fp32", "bf16", "bf16-mixed")

#: how many loaded models a process keeps for the next policy of the same directory
LOADED_MODELS_KEPT = 2
_LOADED: OrderedDict[tuple, tuple[Any, Any, Any]] = OrderedDict()
_LOADED_LOCK = threading.Lock()


def _load_key(path: Path, device: Any, precision: str = "auto") -> tuple:
    """What a loaded model depends on: the directory, the device, the precision and every file's
    size and modification time (a checkpoint rewritten in place is loaded again)."""
    files = []
    for f in sorted(path.iterdir()):
        if f.is_file():
            st = f.stat()
            files.append((f.name, st.st_size, st.st_mtime_ns))
    return (str(path.resolve()), str(device), precision, tuple(files))


def _autocast_forward(model: Any, torch: Any) -> None:
    """Run every forward pass of ``model`` under bf16 autocast on its device and return its
    logits in fp32, as accelerate wraps a prepared model's forward for mixed precision."""
    forward = model.forward
    device_type = next(model.parameters()).device.type

    @functools.wraps(forward)  # generate reads the wrapped forward's signature
    def mixed(*args: Any, **kwargs: Any) -> Any:
        with torch.autocast(device_type=device_type, dtype=torch.bfloat16):
            out = forward(*args, **kwargs)
        logits = getattr(out, "logits", None)
        if logits is not None and logits.dtype != torch.float32:
            out.logits = logits.float()
        return out

    model.forward = mixed


def is_sharded_model(model: Any) -> bool:
    """Whether ``model``'s weights are sharded over several processes (FSDP 1 or 2): each of its
    forward passes is then a collective that every process must take part in."""
    import torch

    dist = torch.distributed
    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1):
        return False
    from torch.distributed.fsdp import FullyShardedDataParallel

    return any(
        getattr(m, "_is_fsdp_managed_module", False) or isinstance(m, FullyShardedDataParallel)
        for m in model.modules()
    )


def _load_from_disk(
    path: Path, device: Any, torch: Any, transformers: Any, precision: str = "auto"
) -> tuple:
    """The tokenizer (with the chat format's tokens), the model in eval mode in ``precision``
    (see the module docstring), the device."""
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as exc:
        raise PolicyError(f"could not load the tokenizer in {str(path)!r}: {exc}") from None
    chat_format.ensure_special_tokens(tokenizer, chat_template=False)
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16, "bf16-mixed": torch.float32}
    dtype = dtypes.get(precision, torch.float32 if device.type == "cpu" else "auto")
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(
            path, dtype=dtype, local_files_only=True
        )
    except Exception as exc:
        raise PolicyError(f"could not load the model in {str(path)!r}: {exc}") from None
    if model.get_input_embeddings().num_embeddings < len(tokenizer):
        # A model that never saw the format's tokens: it runs, but was not trained on them.
        model.resize_token_embeddings(len(tokenizer))
    model.to(device)
    model.eval()
    if precision == "bf16-mixed":
        _autocast_forward(model, torch)
    _clean_generation_config(model)
    return tokenizer, model, device


@dataclass
class Generation:
    """One sampled completion."""

    text: str  # the completion decoded, without the closing <|im_end|>
    prompt_token_ids: list[int]
    token_ids: list[int]  # sampled ids; ends with the stop token when finish_reason is "stop"
    logprobs: list[float] | None  # per token of token_ids, when asked (see the module docstring)
    finish_reason: str  # "stop" (the model ended its turn) or "length" (max_new_tokens reached)


def check_model_dir(model_dir: str | Path) -> Path:
    """The directory, if it holds a model config, weights and a tokenizer; else a PolicyError
    that says which files were expected."""
    path = Path(model_dir).expanduser()
    if not path.exists():
        raise PolicyError(
            f"model directory {str(path)!r} does not exist; give the directory a model was "
            "saved into (save_pretrained) or a Steplab checkpoint"
        )
    if not path.is_dir():
        raise PolicyError(f"{str(path)!r} is a file; a local model is a directory")
    if (path / "adapter_config.json").is_file() and not (path / "config.json").is_file():
        raise PolicyError(
            f"{str(path)!r} holds a LoRA adapter (adapter_config.json), not a whole model; merge it "
            "into its base model (peft's merge_and_unload) and save_pretrained the result"
        )
    missing = []
    if not (path / "config.json").is_file():
        missing.append("config.json")
    if not any((path / name).is_file() for name in WEIGHT_FILES) and not any(
        path.glob("*.safetensors")
    ):
        missing.append(f"weights ({' or '.join(WEIGHT_FILES)})")
    if missing:
        raise PolicyError(
            f"{str(path)!r} holds no model: {', '.join(missing)} missing. A model directory holds "
            "config.json and its weights, as written by save_pretrained"
        )
    if not any((path / name).is_file() for name in TOKENIZER_FILES):
        raise PolicyError(
            f"{str(path)!r} holds no tokenizer: expected {' or '.join(TOKENIZER_FILES)} (with "
            "its vocabulary files), as written by tokenizer.save_pretrained"
        )
    return path


def _import_torch() -> tuple[Any, Any]:
    try:
        import torch
        import transformers
    except ImportError as exc:
        raise EnvironmentUnavailable(
            f"the local model policy needs torch and transformers ({exc}); install them"
        ) from None
    return torch, transformers


def _stop_ids(tokenizer: Any) -> list[int]:
    """The token ids generation stops at: ``<|im_end|>``, then the eos token when different."""
    stop_ids = [tokenizer.convert_tokens_to_ids(chat_format.IM_END)]
    if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in stop_ids:
        stop_ids.append(tokenizer.eos_token_id)
    return stop_ids


def _fit_context(model: Any, width: int, max_new_tokens: int) -> int:
    """``max_new_tokens`` cut to what the model's context leaves after a ``width``-token prompt;
    a PolicyError when the prompt alone fills it."""
    limit = getattr(model.config, "max_position_embeddings", None)
    if not (isinstance(limit, int) and limit > 0):
        return max_new_tokens
    if width >= limit:
        raise PolicyError(
            f"the prompt has {width} tokens and the model takes at most {limit}; shorten "
            "the episode (fewer steps, shorter observations) or use a model with a longer "
            "context"
        )
    return min(max_new_tokens, limit - width)


def _left_pad(torch: Any, prompts: Sequence[Sequence[int]], width: int, pad_id: int):
    """``(input_ids, attention_mask)``, both (batch, width): each prompt right-aligned after
    ``pad_id`` padding, the mask 1 on the prompt's tokens."""
    input_ids = torch.full((len(prompts), width), pad_id, dtype=torch.long)
    attention_mask = torch.zeros((len(prompts), width), dtype=torch.long)
    for row, prompt in enumerate(prompts):
        input_ids[row, width - len(prompt) :] = torch.tensor(list(prompt), dtype=torch.long)
        attention_mask[row, width - len(prompt) :] = 1
    return input_ids, attention_mask


def _sampled_logprobs(
    torch: Any, out: Any, width: int, batch: int, *, scale: float
) -> list[list[float]]:
    """Per row, the log-probability of each generated token under the sampling distribution
    (logits / ``scale``, the temperature; 1 when greedy)."""
    rows: list[list[float]] = [[] for _ in range(batch)]
    for step, logits in enumerate(out.logits):  # (batch, vocab) per generated position
        chosen = out.sequences[:, width + step].unsqueeze(-1)  # (batch, 1)
        values = torch.log_softmax(logits.float() / scale, dim=-1).gather(-1, chosen)
        for row, value in enumerate(values.squeeze(-1).tolist()):
            rows[row].append(value)
    return rows


def _generation(
    tokenizer: Any,
    prompt: Sequence[int],
    ids: list[int],
    stop_ids: list[int],
    logprobs: list[float] | None,
) -> Generation:
    """One row's Generation: the tokens up to and with the first stop token (finish "stop"),
    or all of them (finish "length"); the text leaves the stop token out."""
    end = next((i for i, t in enumerate(ids) if t in stop_ids), None)
    finish = "length" if end is None else "stop"
    ids = ids if end is None else ids[: end + 1]
    text_ids = ids if end is None else ids[:-1]
    text = tokenizer.decode(text_ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
    return Generation(
        text=text,
        prompt_token_ids=list(prompt),
        token_ids=ids,
        logprobs=logprobs[: len(ids)] if logprobs is not None else None,
        finish_reason=finish,
    )


class LocalHFPolicy:
    """A local Hugging Face causal LM as a policy (see the module docstring)."""

    def __init__(
        self,
        model_dir: str | Path,
        *,
        device: str = "auto",
        precision: str = "auto",
        temperature: float = 0.7,
        max_new_tokens: int = 256,
        top_p: float = 1.0,
        seed: int | None = None,
        system: str | None = None,
        list_tools: bool = True,
        return_logprobs: bool = False,
        name: str = "local",
    ):
        _check_sampling(temperature, top_p, max_new_tokens)
        if precision not in PRECISIONS:
            raise ConfigError(f"precision {precision!r} is not one of {', '.join(PRECISIONS)}")
        self.model_dir = Path(model_dir)
        self.device_name = device
        self.precision = precision
        self.temperature = float(temperature)
        self.max_new_tokens = int(max_new_tokens)
        self.top_p = float(top_p)
        self.seed = seed
        self.system = system
        self.list_tools = bool(list_tools)
        self.return_logprobs = return_logprobs
        self.name = name
        self._model: Any = None
        self._tokenizer: Any = None
        self._device: Any = None
        self._calls = 0
        self._task: Task | None = None
        self._prompt: str | None = None

    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, **kwargs: Any) -> LocalHFPolicy:
        """A policy around a model and tokenizer already loaded (e.g. the one being trained); it
        samples on the model's device. The tokenizer must hold the format's tokens
        (:func:`~.chat_format.ensure_special_tokens`, embeddings resized)."""
        policy = cls(kwargs.pop("model_dir", "<in memory>"), **kwargs)
        policy._tokenizer = tokenizer
        policy._model = model
        policy._device = next(model.parameters()).device
        _clean_generation_config(model)
        return policy

    # --- loading -------------------------------------------------------------------------------

    def load(self) -> None:
        """Load the tokenizer and model (done by the first call that needs them). A process keeps
        the last :data:`LOADED_MODELS_KEPT` models it loaded (keyed by directory, device and the
        files' sizes and times), so the episodes of a collect run load their policy once."""
        if self._model is not None:
            return
        path = check_model_dir(self.model_dir)
        torch, transformers = _import_torch()
        device = self._resolve_device(torch)
        key = _load_key(path, device, self.precision)
        with _LOADED_LOCK:
            loaded = _LOADED.pop(key, None)
            if loaded is None:
                loaded = _load_from_disk(path, device, torch, transformers, self.precision)
            _LOADED[key] = loaded  # newest last
            while len(_LOADED) > max(LOADED_MODELS_KEPT, 1):
                _LOADED.popitem(last=False)
        self._tokenizer, self._model, self._device = loaded

    def _resolve_device(self, torch: Any) -> Any:
        name = self.device_name
        if name == "auto":
            return torch.device("cuda" if torch.cuda.is_available() else "cpu")
        try:
            device = torch.device(name)
        except RuntimeError:
            raise ConfigError(f"unknown device {name!r}; use auto, cpu, cuda or cuda:N") from None
        if device.type == "cuda" and not torch.cuda.is_available():
            raise EnvironmentUnavailable(
                f"device {name!r} was asked for but CUDA is not available on this machine; use "
                "device='cpu' or 'auto'"
            )
        return device

    @property
    def model(self) -> Any:
        self.load()
        return self._model

    @property
    def tokenizer(self) -> Any:
        self.load()
        return self._tokenizer

    @property
    def device(self) -> Any:
        self.load()
        return self._device

    # --- the policy protocol -------------------------------------------------------------------

    def reset(self, task: Task | None) -> None:
        """Start an episode. The random stream goes on across episodes."""
        self._task = task
        self._prompt = getattr(task, "prompt", None) if task is not None else None

    def messages(
        self, observation: str, history: Sequence[Turn], tools: Sequence[ToolSpec]
    ) -> list[dict[str, Any]]:
        """The chat messages the policy prompts with for this step (no side effects)."""
        prompt = observation if not history else self._prompt
        if prompt is None:
            raise PolicyError(
                "the policy does not know the task prompt: call reset(task) or start the episode "
                "with an empty history"
            )
        system = self.system_text(tools)
        return chat_format.to_messages(prompt=prompt, history=history, system=system)

    def system_text(self, tools: Sequence[ToolSpec]) -> str:
        """The system message: ``system_prompt(tools, instructions=system)``; with ``list_tools``
        off, only the instructions (a model fine-tuned on its tools needs no listing, and its
        prompts are ~4x shorter)."""
        if not self.list_tools:
            return (self.system or chat_format.DEFAULT_INSTRUCTIONS).strip()
        return chat_format.system_prompt(tools, instructions=self.system)

    def act(self, observation: str, history: Sequence[Turn], tools: Sequence[ToolSpec]) -> Decision:
        started = time.perf_counter()
        messages = self.messages(observation, history, tools)
        if not history:
            self._prompt = observation
        generation = self.generate([messages])[0]
        return self._decision(generation, latency=time.perf_counter() - started)

    @classmethod
    def act_together(
        cls,
        policies: Sequence[LocalHFPolicy],
        requests: Sequence[tuple[str, Sequence[Turn], Sequence[ToolSpec]]],
    ) -> list[Decision]:
        """``act`` for several episodes at once, one ``(observation, history, tools)`` request per
        policy, decoded in one batch when the policies share a loaded model and their sampling
        settings (else one by one). Each row samples from its own policy's seeded stream, so an
        episode plays the same tokens whether it is decoded alone or in a batch (up to the
        floating-point differences of a padded batch)."""
        if len(policies) != len(requests):
            raise ConfigError("act_together needs one request per policy")
        if len(policies) < 2 or not _batchable(policies):
            return [p.act(*request) for p, request in zip(policies, requests, strict=True)]
        started = time.perf_counter()
        conversations = []
        for policy, (observation, history, tools) in zip(policies, requests, strict=True):
            conversations.append(policy.messages(observation, history, tools))
            if not history:
                policy._prompt = observation
        seeds = [policy._next_call_seed() for policy in policies]
        lead = policies[0]
        generations = lead.generate(
            conversations, row_seeds=None if lead.temperature == 0.0 else seeds
        )
        latency = time.perf_counter() - started
        return [
            policy._decision(generation, latency=latency)
            for policy, generation in zip(policies, generations, strict=True)
        ]

    def _decision(self, generation: Generation, *, latency: float) -> Decision:
        usage = Usage(
            tokens_in=len(generation.prompt_token_ids),
            tokens_out=len(generation.token_ids),
            cost=0.0,
            latency=latency,
        )
        parsed = chat_format.parse_assistant(generation.text)
        decision = Decision(
            action=parsed if isinstance(parsed, dict) else None,
            usage=usage,
            error=parsed if isinstance(parsed, str) else None,
            raw=generation.text,
            metadata={"prompt_format": "native", "finish_reason": generation.finish_reason},
        )
        if decision.action is None and chat_format.is_plain_text(
            generation.text, generation.finish_reason
        ):
            decision.metadata["plain_text"] = True
        if self.return_logprobs:
            decision.prompt_token_ids = generation.prompt_token_ids
            decision.token_ids = generation.token_ids
            decision.logprobs = generation.logprobs
        return decision

    # --- sampling ------------------------------------------------------------------------------

    def generate(
        self,
        conversations: Sequence[Sequence[Mapping[str, Any]]],
        *,
        temperature: float | None = None,
        top_p: float | None = None,
        max_new_tokens: int | None = None,
        return_logprobs: bool | None = None,
        row_seeds: Sequence[int] | None = None,
    ) -> list[Generation]:
        """Sample one assistant turn for each conversation (chat messages), in one batch.
        Unset arguments take the policy's settings; ``row_seeds`` as in :meth:`generate_ids`."""
        tokenizer = self.tokenizer
        prompts = [
            chat_format.tokenize(messages, tokenizer, add_generation_prompt=True).input_ids
            for messages in conversations
        ]
        return self.generate_ids(
            prompts,
            temperature=temperature,
            top_p=top_p,
            max_new_tokens=max_new_tokens,
            return_logprobs=return_logprobs,
            row_seeds=row_seeds,
        )

    def generate_ids(
        self,
        prompts: Sequence[Sequence[int]],
        *,
        temperature: float | None = None,
        top_p: float | None = None,
        max_new_tokens: int | None = None,
        return_logprobs: bool | None = None,
        row_seeds: Sequence[int] | None = None,
    ) -> list[Generation]:
        """Sample a completion for each prompt given as token ids (left-padded into one batch),
        stopping at ``<|im_end|>`` (or the tokenizer's eos token).

        Random streams: without ``row_seeds`` the whole batch samples from one stream (the
        policy's next seeded call, or torch's global stream without a seed); with ``row_seeds``
        (one per prompt) each row samples from its own generator seeded so — a row draws exactly
        the tokens it would draw alone with that seed."""
        temperature = self.temperature if temperature is None else float(temperature)
        top_p = self.top_p if top_p is None else float(top_p)
        max_new_tokens = self.max_new_tokens if max_new_tokens is None else int(max_new_tokens)
        want_logprobs = self.return_logprobs if return_logprobs is None else return_logprobs
        _check_sampling(temperature, top_p, max_new_tokens)
        if not prompts:
            return []
        if any(len(p) == 0 for p in prompts):
            raise ConfigError("every prompt needs at least one token")
        if row_seeds is not None and len(row_seeds) != len(prompts):
            raise ConfigError("row_seeds needs one seed per prompt")
        torch, transformers = _import_torch()
        model, tokenizer, device = self.model, self.tokenizer, self.device
        stop_ids = _stop_ids(tokenizer)
        pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stop_ids[0]
        width = max(len(p) for p in prompts)
        max_new_tokens = _fit_context(model, width, max_new_tokens)
        input_ids, attention_mask = _left_pad(torch, prompts, width, pad_id)

        greedy = temperature == 0.0
        per_row = row_seeds is not None and not greedy
        processors = transformers.LogitsProcessorList()
        if per_row:  # the rows' own draws, picked greedily (see _RowSampling)
            processors.append(_RowSampling(torch, transformers, row_seeds, temperature, top_p))
        sample = not greedy and not per_row
        config = transformers.GenerationConfig(
            max_new_tokens=max_new_tokens,
            do_sample=sample,
            temperature=temperature if sample else None,
            top_p=top_p if sample else None,
            top_k=0 if sample else None,
            num_beams=1,
            eos_token_id=stop_ids,
            pad_token_id=pad_id,
            return_dict_in_generate=True,
            output_logits=want_logprobs,
        )
        stream = contextlib.nullcontext() if per_row else self._random_stream(torch)
        with stream, torch.no_grad():
            out = model.generate(
                input_ids=input_ids.to(device),
                attention_mask=attention_mask.to(device),
                generation_config=config,
                logits_processor=processors,
                synced_gpus=True if is_sharded_model(model) else None,
            )

        new = out.sequences[:, width:].tolist()
        logprob_rows = None
        if want_logprobs:
            scale = 1.0 if greedy else temperature
            logprob_rows = _sampled_logprobs(torch, out, width, len(prompts), scale=scale)
        return [
            _generation(
                tokenizer,
                prompt,
                new[row],
                stop_ids,
                logprob_rows[row] if logprob_rows is not None else None,
            )
            for row, prompt in enumerate(prompts)
        ]

    def _next_call_seed(self) -> int | None:
        """The seed of this policy's next sampling call: (seed, call number); None without a
        seed."""
        self._calls += 1
        if self.seed is None:
            return None
        return (int(self.seed) * 1_000_003 + self._calls) % (2**63)

    def _random_stream(self, torch: Any) -> contextlib.AbstractContextManager[Any]:
        """With a seed, each call samples from its own seeded stream (seed, call number) and the
        global random state is left as it was; without one, from torch's global stream."""
        call_seed = self._next_call_seed()
        if call_seed is None:
            return contextlib.nullcontext()
        devices = []
        if self._device is not None and self._device.type == "cuda":
            index = self._device.index  # "cuda" without an index is the current GPU
            devices = [index if index is not None else torch.cuda.current_device()]

        @contextlib.contextmanager
        def stream():
            with torch.random.fork_rng(devices=devices):
                torch.manual_seed(call_seed)
                yield

        return stream()


class _RowSampling:
    """A logits processor that samples every row from its own seeded generator: the
    temperature and top-p warpers (transformers' own, in ``generate``'s order), a softmax and one
    multinomial draw per row; it returns scores that make greedy selection pick the drawn token.
    With one row it draws exactly what ``generate``'s sampling draws after
    ``torch.manual_seed(seed)`` (tested), so batching episodes does not change their streams."""

    def __init__(
        self, torch: Any, transformers: Any, seeds: Sequence[int], temperature: float, top_p: float
    ):
        self.torch = torch
        self.seeds = [int(seed) for seed in seeds]
        self.generators: list[Any] | None = None  # made on the scores' device at the first call
        self.warpers: list[Any] = []
        if temperature != 1.0:
            self.warpers.append(transformers.TemperatureLogitsWarper(temperature))
        if top_p < 1.0:
            self.warpers.append(transformers.TopPLogitsWarper(top_p))

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        torch = self.torch
        if self.generators is None:
            self.generators = [
                torch.Generator(device=scores.device).manual_seed(seed) for seed in self.seeds
            ]
        for warper in self.warpers:
            scores = warper(input_ids, scores)
        probs = torch.softmax(scores, dim=-1)  # (batch, vocab)
        picked = torch.full_like(scores, float("-inf"))
        for row, generator in enumerate(self.generators):
            token = torch.multinomial(probs[row : row + 1], 1, generator=generator)  # (1, 1)
            picked[row, token[0, 0]] = 0.0
        return picked


def _batchable(policies: Sequence[LocalHFPolicy]) -> bool:
    """Whether these policies can decode in one batch: the same loaded model and tokenizer, the
    same sampling settings, and a seed each when they sample (a row's own stream)."""
    lead = policies[0]
    settings = (lead.temperature, lead.top_p, lead.max_new_tokens, bool(lead.return_logprobs))
    for policy in policies:
        if not isinstance(policy, LocalHFPolicy):
            return False
        if (policy.temperature, policy.top_p, policy.max_new_tokens) != settings[:3]:
            return False
        if bool(policy.return_logprobs) != settings[3]:
            return False
        if policy.temperature != 0.0 and policy.seed is None:
            return False
        if policy.model is not lead.model or policy.tokenizer is not lead.tokenizer:
            return False
    return True


def _check_sampling(temperature: float, top_p: float, max_new_tokens: int) -> None:
    if not temperature >= 0.0:
        raise ConfigError(f"temperature must be 0 (greedy) or more, not {temperature!r}")
    if not 0.0 < top_p <= 1.0:
        raise ConfigError(f"top_p must be within (0, 1], not {top_p!r}")
    if int(max_new_tokens) < 1:
        raise ConfigError(f"max_new_tokens must be at least 1, not {max_new_tokens!r}")


def _clean_generation_config(model: Any) -> None:
    """Drop the checkpoint's generation settings (repetition penalty, top-k, ...), so sampling
    is exactly what the policy's arguments say."""
    from transformers import GenerationConfig

    model.generation_config = GenerationConfig()
