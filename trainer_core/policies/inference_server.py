"""InferenceServerSampler: episodes sampled by an inference server that Steplab updates with each
new policy version — vLLM for LoRA runs, SGLang for full weights (decoupled RL, issue 19).

::

    sampler = InferenceServerSampler(
        "http://gpu1:8000", engine="vllm", model="Qwen/Qwen2.5-0.5B-Instruct",
        tokenizer=tokenizer, temperature=0.7, max_new_tokens=256,
    )
    sampler.check(probe_prompt=prompt_ids, lora_run=True)   # at launch: refuses what won't work
    sampler.sync(3, "/shared/runs/7/checkpoint-30", "rl7")  # version 3 is live: adapter rl7-v3
    generations = sampler.generate_ids([prompt_ids, ...])   # local_hf.Generation, as LocalHFPolicy

:meth:`~InferenceServerSampler.generate_ids` returns the same
:class:`~trainer_core.policies.local_hf.Generation` objects as ``LocalHFPolicy.generate_ids``, so
the episodes code drives either. Prompts go out as token ids and the server's sampled ids and
their log-probs come back as they are (nothing is re-tokenised); the stop token (``<|im_end|>``,
or the tokenizer's eos) ends ``token_ids`` when ``finish_reason`` is ``"stop"``. The text is the
tokenizer's decoding of the ids without the stop token (as LocalHFPolicy); without a tokenizer,
the server's own text. One request per prompt, up to ``max_concurrency`` at a time.

Sampling is the distribution RL corrects for: ``temperature`` from the config; top-p, top-k,
min-p and penalties off (sent explicitly, since both servers otherwise take defaults from the
model's generation_config.json); a top_p below 1 or a top_k is refused. The log-probs must be
those of the distribution actually sampled from, temperature applied:

- vLLM computes them *before* temperature unless started with ``--logprobs-mode
  processed_logprobs`` (its default, ``raw_logprobs``, is the model's plain log-softmax);
  Steplab requires the processed mode.
- SGLang returns ``log(softmax(logits / temperature))`` unless ``SGLANG_RETURN_ORIGINAL_LOGPROB``
  (``RETURN_ORIGINAL_LOGPROB`` in older versions) is set; it must not be.

:meth:`~InferenceServerSampler.check` (``probe_prompt`` given, temperature not 0 or 1) verifies
this on the live server: one token's top-5 log-probs at the temperature T and at 1; the gaps
between two tokens' log-probs shrink by exactly 1/T in the processed mode and not at all in the
raw one. A server answering without ids or log-probs is refused in every call.

Updating the server (:meth:`~InferenceServerSampler.sync`):

- **vLLM (LoRA runs)**: version N is the adapter ``<run>-v<N>`` (:func:`adapter_name`), loaded
  with ``POST /v1/load_lora_adapter {"lora_name", "lora_path"}`` from the version's adapter
  directory (Steplab checkpoints keep it under ``<checkpoint>/adapter/``); then this run's older
  adapters are unloaded (``POST /v1/unload_lora_adapter {"lora_name"}``, keeping the newest
  ``keep_adapters``), and every request names the current adapter as its ``model``. The server
  must run with ``--enable-lora`` and ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True`` (without it
  those routes do not exist: 404). Version 0 with no adapter directory samples the base model.
- **SGLang (full weights)**: ``POST /update_weights_from_disk {"model_path", "weight_version"}``
  with the version's checkpoint directory (a Steplab checkpoint is a whole model, merged for
  LoRA runs); answers tagged with another weight_version are refused afterwards.

The server reads the path itself: checkpoints live on storage the server mounts at the same path.
Any other engine is refused at construction with the reason (:func:`check_server` at launch also
refuses a server that names itself something else, a vLLM without the LoRA routes, a vLLM for a
full-weights run).

Sources read (the loopback servers in tests/trainer_core/policies/fake_inference_servers.py
reproduce these shapes):

vllm-project/vllm
  - vllm/entrypoints/serve/lora/api_router.py @27873cab: the two routes exist only with
    VLLM_ALLOW_RUNTIME_LORA_UPDATING; success is 200 with a plain-text body, an error the
    ErrorResponse JSON with status error.code.
  - vllm/entrypoints/serve/lora/protocol.py @7fd1b438: LoadLoRAAdapterRequest {lora_name,
    lora_path}, UnloadLoRAAdapterRequest {lora_name, lora_int_id?}.
  - vllm/entrypoints/openai/models/serving.py @00153c8b: 400 "The lora adapter '<n>' has
    already been loaded…", 404 "The lora adapter '<n>' cannot be found." (unload), 404
    LoRAAdapterNotFoundError "Loading lora <n> failed: No adapter found for <path>", 500 for
    any other load failure; 404 "The model `<m>` does not exist." for an unknown model; adapters
    listed in /v1/models with ``parent`` and ``root`` (the path).
  - vllm/entrypoints/serve/utils/error_response.py @f389ba78: which exception gives which status.
  - vllm/v1/worker/lora_model_runner_mixin.py @8548e7c2: "LoRA is not enabled. Use
    --enable-lora to enable LoRA." (a RuntimeError: 500 on load).
  - vllm/entrypoints/openai/engine/protocol.py @d7e52523: ErrorResponse {"error": {message,
    type, param, code}}; ModelCard owned_by "vllm".
  - vllm/entrypoints/openai/completion/protocol.py @d5dba2d7 and completion/serving.py
    @cc139d8e: prompt as list[int], logprobs, stop_token_ids, return_token_ids (choices[].
    token_ids / prompt_token_ids), return_tokens_as_token_ids ("token_id:<id>"),
    logprobs.token_logprobs clamped at -9999.
  - vllm/v1/core/sched/utils.py @6110ea29 and vllm/v1/engine/detokenizer.py @e372329d: the stop
    token is the last sampled id; the text leaves it out.
  - vllm/v1/sample/sampler.py @3e342658: raw_logprobs (default) before temperature, processed
    after; vllm/sampling_params.py @db573835: top_k -1 disables.

sgl-project/sglang
  - python/sglang/srt/entrypoints/http_server.py @0025436e: /update_weights_from_disk answers
    {success, message, num_paused_requests}, 200 or 400; weight_version; /generate;
    /get_model_info; errors {"error": {"message"}} with 400.
  - python/sglang/srt/managers/io_struct.py @001067ff: UpdateWeightFromDiskReqInput (model_path,
    weight_version, …), GenerateReqInput (input_ids, sampling_params, return_logprob,
    logprob_start_len -1 = output tokens only, top_logprobs_num).
  - python/sglang/srt/managers/tokenizer_manager.py (the excerpt the search index holds, commit
    not named): {"text", "output_ids", "meta_info": {finish_reason, weight_version,
    output_token_logprobs: [(logprob, token_id, None)], …}}.
  - python/sglang/srt/layers/sampler.py @584f55d1: logprobs = log(softmax(logits / T));
    python/sglang/srt/sampling/sampling_params.py @0bebedd8: parameter names, top_k -1 = all;
    schedule_batch FINISH_MATCHED_TOKEN {"type": "stop", "matched": id}, FINISH_LENGTH
    {"type": "length", "length": n}; ModelCard owned_by "sglang".
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainer_core.errors import ConfigError, PolicyError
from trainer_core.policies import _server_protocols as wire
from trainer_core.policies import chat_format
from trainer_core.policies.base import Decision, Turn, Usage
from trainer_core.policies.local_hf import Generation

if TYPE_CHECKING:
    from trainer_core.tasks.model import Task, ToolSpec

__all__ = [
    "ENGINES",
    "InferenceServerSampler",
    "ServerInfo",
    "adapter_name",
    "check_server",
    "sampler_from_parameters",
]

ENGINES: tuple[str, ...] = ("vllm", "sglang")
_NAMES = {"vllm": "vLLM", "sglang": "SGLang"}
_RUN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
#: top log-probs asked for by the launch probe
PROBE_TOP = 5


def adapter_name(run_name: str, version: int) -> str:
    """The vLLM adapter name of a run's version: ``<run>-v<N>``."""
    return f"{run_name}-v{int(version)}"


@dataclass
class ServerInfo:
    """What :meth:`InferenceServerSampler.check` found."""

    engine: str  # vllm | sglang
    models: list[str]  # the served base models (vLLM: adapters not included)
    model: str  # the base model requests name until an adapter is synced (vLLM)
    lora_routes: bool  # vLLM: /v1/load_lora_adapter exists
    logprobs_checked: bool  # the temperature probe ran and passed
    notes: list[str] = field(default_factory=list)


def _check_sampling(temperature: Any, top_p: Any, top_k: Any, max_new_tokens: Any) -> None:
    if (
        isinstance(temperature, bool)
        or not isinstance(temperature, int | float)
        or not (temperature >= 0)
    ):
        raise ConfigError(f"temperature must be 0 (greedy) or more, not {temperature!r}")
    if top_p is not None and (isinstance(top_p, bool) or top_p != 1.0):
        raise ConfigError(
            f"top_p={top_p!r} is refused: RL corrects for the distribution it sampled from, and "
            "a sampler keeps top-p off (1.0) so that the server's log-probs are those of "
            "softmax(logits / temperature)"
        )
    if top_k not in (None, 0, -1):
        raise ConfigError(
            f"top_k={top_k!r} is refused: a sampler keeps top-k off (none, 0 or -1) so that the "
            "server's log-probs are those of the distribution it sampled from"
        )
    if (
        isinstance(max_new_tokens, bool)
        or not isinstance(max_new_tokens, int)
        or max_new_tokens < 1
    ):
        raise ConfigError(
            f"max_new_tokens must be a whole number of at least 1, not {max_new_tokens!r}"
        )


def _load_tokenizer(path: str) -> Any:
    """A Hugging Face tokenizer from a local directory, which must already hold the chat
    format's tokens (a served model cannot grow its vocabulary)."""
    try:
        import transformers
    except ImportError as exc:  # pragma: no cover - transformers is a dependency
        raise ConfigError(f"tokenizer_dir needs transformers ({exc}); install it") from None
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as exc:
        raise ConfigError(f"could not load the tokenizer in {path!r}: {exc}") from None
    for token in (chat_format.IM_START, chat_format.IM_END):
        if len(tokenizer.encode(token, add_special_tokens=False)) != 1:
            raise ConfigError(
                f"the tokenizer in {path!r} has no {token} token; serve a model trained in "
                "Steplab's chat format (a Steplab checkpoint), whose tokenizer holds it"
            )
    return tokenizer


class InferenceServerSampler:
    """A sampler (and a policy: ``reset``/``act``) backed by a vLLM or SGLang server that Steplab
    updates with each version (see the module docstring).

    ``model``: the served base model's name (vLLM; empty: the first one the server lists).
    ``tokenizer``: a Hugging Face tokenizer holding the chat format's tokens, or the path of a
    local tokenizer directory; it gives the stop ids (``<|im_end|>``, then eos), the texts, and
    the prompts of :meth:`act`. Without one, give ``stop_token_ids``. ``keep_adapters``: how many
    of this run's newest adapters stay loaded on a vLLM server (1: only the current one; more
    when several samplers share one server and may lag a version)."""

    def __init__(
        self,
        base_url: str,
        *,
        engine: str,
        model: str = "",
        tokenizer: Any = None,
        stop_token_ids: Sequence[int] | None = None,
        temperature: float = 0.7,
        max_new_tokens: int = 256,
        top_p: float | None = None,
        top_k: int | None = None,
        api_key_env: str | None = None,
        timeout: float = 120.0,
        sync_timeout: float = 600.0,
        max_response_bytes: int = 16 * 1024 * 1024,
        max_concurrency: int = 16,
        max_retries: int = 2,
        keep_adapters: int = 1,
        system: str | None = None,
        list_tools: bool = True,
        name: str = "inference-server",
    ) -> None:
        self.engine = wire.check_engine_name(engine)
        if not isinstance(base_url, str) or not re.match(r"^https?://[^/\s]+", base_url.strip()):
            raise ConfigError(
                f"base_url must be the server's http(s) root, e.g. 'http://gpu1:8000', not "
                f"{base_url!r}"
            )
        _check_sampling(temperature, top_p, top_k, max_new_tokens)
        for label, value, least in (
            ("timeout", timeout, 0),
            ("sync_timeout", sync_timeout, 0),
            ("max_response_bytes", max_response_bytes, 1024),
            ("max_concurrency", max_concurrency, 1),
            ("keep_adapters", keep_adapters, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float) or value < least:
                raise ConfigError(f"{label} must be a number of at least {least}, not {value!r}")
        if stop_token_ids is not None and not (
            isinstance(stop_token_ids, list | tuple)
            and all(isinstance(t, int) and not isinstance(t, bool) for t in stop_token_ids)
        ):
            raise ConfigError("stop_token_ids must be a list of token ids")
        base = base_url.strip().rstrip("/")
        self.base_url = base[: -len("/v1")] if base.endswith("/v1") else base
        self.model = (model or "").strip()
        self.temperature = float(temperature)
        self.max_new_tokens = int(max_new_tokens)
        self.sync_timeout = float(sync_timeout)
        self.max_concurrency = int(max_concurrency)
        self.keep_adapters = int(keep_adapters)
        self.system = system
        self.list_tools = bool(list_tools)
        self.name = name
        self._tokenizer_arg = tokenizer
        self._tokenizer: Any = None if isinstance(tokenizer, str | Path) else tokenizer
        self._extra_stops = list(stop_token_ids or [])
        self.adapter: str | None = None  # vLLM: the adapter requests name (None: the base model)
        self.version: int | None = None  # the version last synced
        self._weight_version: str | None = None  # SGLang: the weight_version answers must carry
        self._prompt: str | None = None
        self._conn = wire.Connection(
            self.base_url,
            api_key_env=api_key_env or None,
            timeout=float(timeout),
            max_response_bytes=int(max_response_bytes),
            max_retries=int(max_retries),
        )

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> InferenceServerSampler:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the tokenizer --------------------------------------------------------------------

    @property
    def tokenizer(self) -> Any:
        if self._tokenizer is None and self._tokenizer_arg is not None:
            self._tokenizer = _load_tokenizer(str(self._tokenizer_arg))
        return self._tokenizer

    @property
    def stop_token_ids(self) -> list[int]:
        """``<|im_end|>``, then the tokenizer's eos when different, then ``stop_token_ids``."""
        stops: list[int] = []
        tokenizer = self.tokenizer
        if tokenizer is not None:
            stops.append(tokenizer.convert_tokens_to_ids(chat_format.IM_END))
            if tokenizer.eos_token_id is not None:
                stops.append(tokenizer.eos_token_id)
        stops.extend(self._extra_stops)
        if not stops:
            raise ConfigError(
                "give a tokenizer (or tokenizer_dir) or stop_token_ids: the sampler stops at "
                "<|im_end|> and must know its id"
            )
        return list(dict.fromkeys(stops))

    # --- checking the server at launch ----------------------------------------------------

    def check(
        self, *, probe_prompt: Sequence[int] | None = None, lora_run: bool | None = None
    ) -> ServerInfo:
        """Refuse, with the reason, a server this sampler cannot use: one that is not the
        ``engine`` (read from ``owned_by`` in GET /v1/models), a vLLM without the runtime LoRA
        routes or asked to sample a full-weights run (``lora_run=False``), an SGLang that is not
        a generation model or lacks /update_weights_from_disk. With ``probe_prompt`` (token
        ids), one token is sampled to check that ids and log-probs come back, and (temperature
        not 0 or 1) that the log-probs are temperature-applied (module docstring)."""
        what = f"checking the inference server at {self.base_url}"
        cards = self._model_cards(what)
        owners = sorted({str(c.get("owned_by")) for c in cards})
        if owners != [self.engine]:
            named = ", ".join(repr(o) for o in owners) or "nothing"
            if any(o in ENGINES for o in owners):
                raise PolicyError(
                    f"{what}: engine is {self.engine!r} but the server names itself {named} in "
                    "GET /v1/models; set engine to what the server is"
                )
            raise PolicyError(
                f"{what}: an OpenAI-compatible server that Steplab cannot update: it names "
                f"itself {named} in GET /v1/models, and Steplab sends new weights only to vLLM "
                "(LoRA adapters) and SGLang (/update_weights_from_disk)"
            )
        bases = [str(c.get("id")) for c in cards if not c.get("parent")]
        info = ServerInfo(self.engine, bases, "", False, False)
        if self.engine == "vllm":
            self._check_vllm(info, lora_run, what)
        else:
            self._check_sglang(info, what)
        if probe_prompt is not None:
            self.generate_ids([list(probe_prompt)], max_new_tokens=1)
            info.logprobs_checked = self._check_logprobs_mode(list(probe_prompt), info)
        return info

    def _model_cards(self, what: str) -> list[dict[str, Any]]:
        answer = self._conn.call("GET", "/v1/models", what=what, retry=True)
        data = answer.json
        cards = data.get("data") if isinstance(data, dict) else None
        if answer.status in (401, 403):
            raise PolicyError(f"{what}: {_refused_key(answer)}")
        if answer.status != 200 or not isinstance(cards, list):
            raise PolicyError(
                f"{what}: GET /v1/models answered {answer.status} ({wire.error_message(answer)}); "
                "base_url must be the root of a vLLM or SGLang server"
            )
        return [c for c in cards if isinstance(c, dict)]

    def _route_exists(self, path: str, what: str) -> bool:
        """A POST-only route answers GET with 405; a missing one with FastAPI's 404."""
        answer = self._conn.call("GET", path, what=what)
        if answer.status in (401, 403):
            raise PolicyError(f"{what}: {_refused_key(answer)}")
        return not wire.is_missing_route(answer)

    def _check_vllm(self, info: ServerInfo, lora_run: bool | None, what: str) -> None:
        if lora_run is False:
            raise PolicyError(
                f"{what}: vLLM samples LoRA runs only (Steplab loads each version as an adapter); "
                "a full-weights run needs SGLang, which reloads whole checkpoints"
            )
        if self.model and self.model not in info.models:
            raise PolicyError(
                f"{what}: the server does not serve {self.model!r} (it serves "
                f"{', '.join(info.models) or 'nothing'}); set model to the served name"
            )
        info.model = self.model = self.model or (info.models[0] if info.models else "")
        info.lora_routes = self._route_exists("/v1/load_lora_adapter", what)
        if not info.lora_routes:
            raise PolicyError(
                f"{what}: this vLLM has no /v1/load_lora_adapter, so Steplab cannot give it new "
                "versions; start it with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True in its "
                "environment and --enable-lora"
            )
        info.notes.append(
            "--enable-lora is checked at the first sync (vLLM does not say before an adapter "
            "is loaded)"
        )

    def _check_sglang(self, info: ServerInfo, what: str) -> None:
        answer = self._conn.call("GET", "/get_model_info", what=what)
        data = answer.json if answer.status == 200 else None
        if isinstance(data, dict) and data.get("is_generation") is False:
            raise PolicyError(f"{what}: the SGLang server runs an embedding model, not a generator")
        if not self._route_exists("/update_weights_from_disk", what):
            raise PolicyError(
                f"{what}: the server has no /update_weights_from_disk, so Steplab cannot give "
                "it new versions; use an SGLang version that has it"
            )
        info.model = self.model = self.model or (info.models[0] if info.models else "")

    def _check_logprobs_mode(self, prompt: list[int], info: ServerInfo) -> bool:
        """The temperature probe (module docstring): False when there is nothing to check."""
        t = self.temperature
        if t in (0.0, 1.0):
            info.notes.append("log-prob mode not probed: at temperature 0 or 1 both modes agree")
            return False
        what = f"probing the log-probs of {self.base_url}"
        at_t, at_1 = self._top_logprobs(prompt, t, what), self._top_logprobs(prompt, 1.0, what)
        if sum(math.exp(v) for v in at_1.values()) > 1.001 or any(v > 1e-4 for v in at_1.values()):
            raise PolicyError(self._mode_problem(what, "logits, not log-probs"))
        common = [k for k in at_1 if k in at_t and min(at_1[k], at_t[k]) > wire.CLAMPED_LOGPROB]
        if len(common) >= 2:
            hi, lo = max(common, key=at_1.__getitem__), min(common, key=at_1.__getitem__)
            gap_1, gap_t = at_1[hi] - at_1[lo], at_t[hi] - at_t[lo]
            if gap_1 > 1e-3:
                ratio = gap_t / gap_1
                if abs(ratio - 1.0 / t) > abs(ratio - 1.0):
                    raise PolicyError(self._mode_problem(what, "taken before the temperature"))
                return True
        raise PolicyError(
            f"{what}: the probe prompt's next-token log-probs are too flat to tell whether they "
            "are temperature-applied; give a probe prompt the model has an opinion about"
        )

    def _mode_problem(self, what: str, how: str) -> str:
        fix = (
            "start vLLM with --logprobs-mode processed_logprobs"
            if self.engine == "vllm"
            else "start SGLang without SGLANG_RETURN_ORIGINAL_LOGPROB / RETURN_ORIGINAL_LOGPROB"
        )
        return (
            f"{what}: the server's log-probs are {how}; RL needs the log-probs of the "
            f"distribution it sampled from (temperature {self.temperature:g} applied): {fix}"
        )

    def _top_logprobs(self, prompt: list[int], temperature: float, what: str) -> dict[Any, float]:
        stops = self.stop_token_ids
        if self.engine == "vllm":
            body = wire.vllm_body(
                self._request_model(),
                prompt,
                temperature=temperature,
                max_new_tokens=1,
                stop_token_ids=stops,
                top_logprobs=PROBE_TOP,
            )
            answer = self._sample_call("/v1/completions", body, what)
            return wire.vllm_top_logprobs(answer.json, what)
        body = wire.sglang_body(
            prompt,
            temperature=temperature,
            max_new_tokens=1,
            stop_token_ids=stops,
            top_logprobs=PROBE_TOP,
        )
        return wire.sglang_top_logprobs(self._sample_call("/generate", body, what).json, what)

    # --- new versions -----------------------------------------------------------------------

    def sync(self, version: int, path: str, run_name: str) -> None:
        """Make ``version`` (its checkpoint directory ``path``) the one sampled from. vLLM: load
        the adapter ``<run_name>-v<version>`` and unload this run's older ones; SGLang: reload
        the weights from ``path`` (module docstring). Raises PolicyError with the server's
        reason when the server refuses."""
        if isinstance(version, bool) or not isinstance(version, int) or version < 0:
            raise ConfigError(f"version must be a whole number of 0 or more, not {version!r}")
        if not isinstance(path, str | Path) or not str(path).strip():
            raise ConfigError("path must be the version's checkpoint directory")
        if not isinstance(run_name, str) or not _RUN_NAME.match(run_name):
            raise ConfigError(
                f"run_name must be letters, digits, '.', '_' or '-' (it names the adapters), "
                f"not {run_name!r}"
            )
        if self.engine == "vllm":
            self._sync_vllm(version, str(path), run_name)
        else:
            self._sync_sglang(version, str(path))
        self.version = version

    def _sync_vllm(self, version: int, path: str, run_name: str) -> None:
        lora_path = _adapter_dir(path, version)
        name = adapter_name(run_name, version)
        if lora_path is None:  # version 0 without an adapter: the base model itself
            self.adapter = None
        else:
            self._load_adapter(name, lora_path, version)
            self.adapter = name
        self._unload_older(run_name, version)

    def _load_adapter(self, name: str, lora_path: str, version: int) -> None:
        what = f"loading version {version} as adapter {name} from {lora_path}"
        body = {"lora_name": name, "lora_path": lora_path}
        answer = self._conn.call(
            "POST", "/v1/load_lora_adapter", body, what=what, timeout=self.sync_timeout
        )
        if answer.status == 200:
            return
        message = wire.error_message(answer)
        if wire.is_missing_route(answer):
            raise PolicyError(
                f"{what}: the server has no /v1/load_lora_adapter; start vLLM with "
                "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True and --enable-lora"
            )
        if answer.status == 400 and "already been loaded" in message:
            loaded = self._loaded_roots().get(name)
            if loaded in (None, lora_path):
                return  # another sampler of this run loaded the same version
            raise PolicyError(
                f"{what}: an adapter named {name} is loaded from {loaded}, not {lora_path}; "
                "two runs share one name: give the run another name"
            )
        if answer.status == 404:
            raise PolicyError(
                f"{what}: vLLM found no adapter there ({message}); the server reads the path "
                "itself: keep checkpoints on storage the server mounts at the same path"
            )
        hint = (
            "; start vLLM with --enable-lora"
            if "enable-lora" in message or "LoRA is not enabled" in message
            else ""
        )
        raise PolicyError(f"{what}: vLLM answered {answer.status}: {message}{hint}")

    def _loaded_roots(self) -> dict[str, str | None]:
        """The adapters the vLLM server holds: ``{name: path}`` (``root`` in /v1/models)."""
        cards = self._model_cards(f"listing the adapters of {self.base_url}")
        return {str(c.get("id")): c.get("root") for c in cards if c.get("parent")}

    def _unload_older(self, run_name: str, version: int) -> None:
        """Unload this run's adapters older than the newest ``keep_adapters`` (a 404: another
        sampler unloaded it first)."""
        pattern = re.compile(rf"^{re.escape(run_name)}-v(\d+)$")
        for name in self._loaded_roots():
            match = pattern.match(name)
            if match is None or int(match.group(1)) > version - self.keep_adapters:
                continue
            what = f"unloading adapter {name}"
            answer = self._conn.call(
                "POST", "/v1/unload_lora_adapter", {"lora_name": name}, what=what
            )
            if answer.status not in (200, 404) or wire.is_missing_route(answer):
                raise PolicyError(
                    f"{what}: vLLM answered {answer.status}: {wire.error_message(answer)}"
                )

    def _sync_sglang(self, version: int, path: str) -> None:
        what = f"loading version {version} into SGLang from {path}"
        body = {"model_path": path, "weight_version": str(version)}
        answer = self._conn.call(
            "POST", "/update_weights_from_disk", body, what=what, timeout=self.sync_timeout
        )
        data = answer.json
        if answer.status == 200 and isinstance(data, dict) and data.get("success") is True:
            self._weight_version = str(version)
            return
        if wire.is_missing_route(answer):
            raise PolicyError(f"{what}: the server has no /update_weights_from_disk")
        raise PolicyError(
            f"{what}: SGLang answered {answer.status}: {wire.error_message(answer)}; the server "
            "reads the path itself: keep checkpoints on storage it mounts at the same path"
        )

    # --- sampling ---------------------------------------------------------------------------

    def _request_model(self) -> str:
        if self.adapter:
            return self.adapter
        if not self.model:
            cards = self._model_cards(f"asking {self.base_url} for its model")
            bases = [str(c.get("id")) for c in cards if not c.get("parent")]
            if not bases:
                raise PolicyError(f"{self.base_url} serves no model")
            self.model = bases[0]
        return self.model

    def _sample_call(self, path: str, body: dict[str, Any], what: str) -> wire.Answer:
        answer = self._conn.call("POST", path, body, what=what, retry=True)
        if answer.status == 200:
            return answer
        message = wire.error_message(answer)
        if wire.is_missing_route(answer):
            raise PolicyError(f"{what}: the server has no {path}; is it {_NAMES[self.engine]}?")
        if answer.status == 404 and self.adapter and self.adapter in message:
            raise PolicyError(
                f"{what}: adapter {self.adapter} is not loaded on the server any more ({message}); "
                "another sampler sharing this server may have unloaded it: give each sampler its "
                "own server or raise keep_adapters"
            )
        raise PolicyError(f"{what}: {_NAMES[self.engine]} answered {answer.status}: {message}")

    def _sample_one(
        self, prompt: list[int], max_new_tokens: int, stops: list[int], model: str
    ) -> Generation:
        what = f"sampling from {self.base_url}"
        if self.engine == "vllm":
            body = wire.vllm_body(
                model,
                prompt,
                temperature=self.temperature,
                max_new_tokens=max_new_tokens,
                stop_token_ids=stops,
            )
            data = self._sample_call("/v1/completions", body, what).json
            # an adapter's answer names it; a base model's may name another of its aliases
            sampled = wire.vllm_sampled(data, prompt, model=self.adapter or "", what=what)
        else:
            body = wire.sglang_body(
                prompt,
                temperature=self.temperature,
                max_new_tokens=max_new_tokens,
                stop_token_ids=stops,
            )
            sampled = wire.sglang_sampled(
                self._sample_call("/generate", body, what).json, what=what
            )
            expected = self._weight_version
            if expected is not None and sampled.weight_version not in (None, expected):
                raise PolicyError(
                    f"{what}: the server sampled with weights version {sampled.weight_version}, "
                    f"not {expected}; another process updated this server: give each run's "
                    "samplers their own SGLang server"
                )
        if len(sampled.token_ids) > max_new_tokens:
            raise PolicyError(f"{what}: the server sampled more than max_new_tokens tokens")
        return self._generation(prompt, sampled, stops)

    def _generation(self, prompt: list[int], sampled: wire.Sampled, stops: list[int]) -> Generation:
        ids = sampled.token_ids
        stopped = sampled.finish == "stop" and ids[-1] in stops
        tokenizer = self.tokenizer
        if tokenizer is not None:
            text_ids = ids[:-1] if stopped else ids
            text = tokenizer.decode(
                text_ids, skip_special_tokens=False, clean_up_tokenization_spaces=False
            )
        else:
            text = sampled.text or ""
            if stopped and text.endswith(chat_format.IM_END):
                text = text[: -len(chat_format.IM_END)]
        return Generation(
            text=text,
            prompt_token_ids=list(prompt),
            token_ids=list(ids),
            logprobs=list(sampled.logprobs),
            finish_reason="stop" if sampled.finish == "stop" else "length",
        )

    def generate_ids(
        self, prompts: Sequence[Sequence[int]], *, max_new_tokens: int | None = None
    ) -> list[Generation]:
        """Sample one completion per prompt (token ids) from the current version, in the
        prompts' order; each Generation carries the sampled ids and their log-probs exactly as
        the server returned them (module docstring)."""
        limit = self.max_new_tokens if max_new_tokens is None else int(max_new_tokens)
        if limit < 1:
            raise ConfigError(f"max_new_tokens must be at least 1, not {max_new_tokens!r}")
        rows = [list(p) for p in prompts]
        if any(not row for row in rows):
            raise ConfigError("every prompt needs at least one token")
        if any(isinstance(t, bool) or not isinstance(t, int) for row in rows for t in row):
            raise ConfigError("prompts are lists of token ids (integers)")
        if not rows:
            return []
        stops = self.stop_token_ids  # loads the tokenizer once, before any thread
        model = self._request_model() if self.engine == "vllm" else ""
        if len(rows) == 1:
            return [self._sample_one(rows[0], limit, stops, model)]
        workers = min(self.max_concurrency, len(rows))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sampler") as pool:
            return list(pool.map(lambda row: self._sample_one(row, limit, stops, model), rows))

    # --- the policy protocol (collect runs, Try it) -----------------------------------------

    def reset(self, task: Task | None) -> None:
        self._prompt = getattr(task, "prompt", None) if task is not None else None

    def system_text(self, tools: Sequence[ToolSpec]) -> str:
        """As :meth:`LocalHFPolicy.system_text`: the tools' system prompt, or only the
        instructions with ``list_tools`` off."""
        if not self.list_tools:
            return (self.system or chat_format.DEFAULT_INSTRUCTIONS).strip()
        return chat_format.system_prompt(tools, instructions=self.system)

    def act(self, observation: str, history: Sequence[Turn], tools: Sequence[ToolSpec]) -> Decision:
        """One step, prompted in the one chat format as LocalHFPolicy prompts (needs a
        tokenizer); the Decision carries the prompt's and the sampled ids and log-probs."""
        tokenizer = self.tokenizer
        if tokenizer is None:
            raise PolicyError(
                f"{self.name}: acting needs the served model's tokenizer: give tokenizer_dir"
            )
        prompt = observation if not history else self._prompt
        if prompt is None:
            raise PolicyError(
                "the policy does not know the task prompt: call reset(task) or start the episode "
                "with an empty history"
            )
        if not history:
            self._prompt = observation
        started = time.perf_counter()
        messages = chat_format.to_messages(
            prompt=prompt, history=history, system=self.system_text(tools)
        )
        ids = chat_format.tokenize(messages, tokenizer, add_generation_prompt=True).input_ids
        generation = self.generate_ids([ids])[0]
        parsed = chat_format.parse_assistant(generation.text)
        plain = not isinstance(parsed, dict) and chat_format.is_plain_text(
            generation.text, generation.finish_reason
        )
        return Decision(
            action=parsed if isinstance(parsed, dict) else None,
            usage=Usage(
                tokens_in=len(ids),
                tokens_out=len(generation.token_ids),
                latency=time.perf_counter() - started,
            ),
            error=parsed if isinstance(parsed, str) else None,
            raw=generation.text,
            prompt_token_ids=generation.prompt_token_ids,
            token_ids=generation.token_ids,
            logprobs=generation.logprobs,
            metadata={
                "prompt_format": "native",
                "finish_reason": generation.finish_reason,
                "engine": self.engine,
                "version": self.version,
                **({"plain_text": True} if plain else {}),
            },
        )


def _refused_key(answer: wire.Answer) -> str:
    return (
        f"the server refused the request ({answer.status}: {wire.error_message(answer)}); "
        "set api_key_env to the variable holding the server's --api-key"
    )


def _adapter_dir(path: str, version: int) -> str | None:
    """The LoRA adapter directory of a version's checkpoint: ``<path>/adapter`` (Steplab's
    layout) or ``<path>`` itself when it is an adapter. None for version 0 without one (the base
    model). A path this machine cannot see is taken to be in Steplab's layout (the server
    checks it)."""
    root = Path(path)
    if not root.exists():
        return str(root / "adapter")
    for candidate in (root / "adapter", root):
        if (candidate / "adapter_config.json").is_file():
            return str(candidate)
    if version == 0:
        return None
    raise PolicyError(
        f"version {version} at {path} holds no LoRA adapter (adapter/adapter_config.json): vLLM "
        "samples LoRA runs only, as adapters; a full-weights run needs SGLang"
    )


def sampler_from_parameters(
    model: str, parameters: dict[str, Any], *, tokenizer: Any = None, name: str = ""
) -> InferenceServerSampler:
    """The sampler of a stored ``inference_server`` policy (its model and parameters,
    :data:`~trainer_core.policies._server_protocols.SAMPLER_PARAMETERS`; check them for secrets
    with :func:`~trainer_core.policies.factory.check_parameters` first); ``tokenizer``, when
    given, is used instead of loading ``tokenizer_dir`` (a sampler job has it already)."""
    params = dict(parameters or {})
    unknown = sorted(set(params) - set(wire.SAMPLER_PARAMETERS))
    if unknown:
        raise ConfigError(
            f"unknown parameter(s) for an inference-server policy: {', '.join(unknown)}; "
            f"accepted: {', '.join(wire.SAMPLER_PARAMETERS)}"
        )
    tokenizer_dir = params.pop("tokenizer_dir", None)
    return InferenceServerSampler(
        params.pop("base_url", ""),
        engine=params.pop("engine", ""),
        model=model,
        tokenizer=tokenizer if tokenizer is not None else tokenizer_dir,
        name=name or "inference-server",
        **params,
    )


def check_server(
    base_url: str,
    *,
    engine: str,
    model: str = "",
    tokenizer: Any = None,
    stop_token_ids: Sequence[int] | None = None,
    temperature: float = 0.7,
    api_key_env: str | None = None,
    timeout: float = 30.0,
    max_retries: int = 2,
    probe_prompt: Sequence[int] | None = None,
    lora_run: bool | None = None,
) -> ServerInfo:
    """At launch: :meth:`InferenceServerSampler.check` on a sampler of these settings (engine
    ``vllm`` for LoRA runs, ``sglang`` for full weights; anything else refused with the
    reason)."""
    with InferenceServerSampler(
        base_url,
        engine=engine,
        model=model,
        tokenizer=tokenizer,
        stop_token_ids=stop_token_ids,
        temperature=temperature,
        api_key_env=api_key_env,
        timeout=timeout,
        max_retries=max_retries,
    ) as sampler:
        return sampler.check(probe_prompt=probe_prompt, lora_run=lora_run)
