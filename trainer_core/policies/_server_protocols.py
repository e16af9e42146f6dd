"""The wire protocols of the inference servers Steplab samples from and updates (vLLM, SGLang):
one HTTP connection with timeouts and a bound on what an answer may weigh, the request bodies,
and the answers read into :class:`~trainer_core.policies.local_hf.Generation` values or clear
:class:`~trainer_core.errors.PolicyError` messages. :mod:`trainer_core.policies.inference_server`
is the public side (and lists the sources each shape was read from).

Everything here is strict: an answer without the sampled token ids or their log-probs, with
lengths that disagree, or with a prompt the server re-tokenised, is refused with the reason —
a trainer must never learn from ids or log-probs that were not the ones sampled.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainer_core.errors import ConfigError, PolicyError

__all__ = [
    "SAMPLER_PARAMETERS",
    "Answer",
    "Connection",
    "Sampled",
    "error_message",
    "sglang_body",
    "sglang_sampled",
    "sglang_top_logprobs",
    "vllm_body",
    "vllm_sampled",
    "vllm_top_logprobs",
]

#: the parameters of a stored ``inference_server`` policy (beyond its model: the served base
#: model's name), i.e. the keyword arguments of InferenceServerSampler they configure
SAMPLER_PARAMETERS: tuple[str, ...] = (
    "base_url",
    "engine",
    "api_key_env",
    "tokenizer_dir",
    "stop_token_ids",
    "temperature",
    "max_new_tokens",
    "top_p",
    "top_k",
    "system",
    "list_tools",
    "timeout",
    "sync_timeout",
    "max_concurrency",
    "keep_adapters",
)
#: statuses worth one more try (the server is starting or overloaded); nothing else is retried
RETRY_STATUSES = frozenset({502, 503, 504})
#: vLLM clamps a log-prob to -9999.0 (``max(step_token.logprob, -9999.0)`` in
#: completion/serving.py); SGLang clamps log(0) to float32's minimum. Below this a value is a
#: clamp, not a probability, and is never used to compare distributions.
CLAMPED_LOGPROB = -9000.0
_TOKEN_ID = re.compile(r"^token_id:(-?\d+)$")


@dataclass
class Answer:
    """One HTTP answer: the status, the body (bounded), and the body as JSON (None when it is
    not JSON)."""

    status: int
    body: bytes

    @property
    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", errors="replace")


def error_message(answer: Answer) -> str:
    """What the server said went wrong, in one line: vLLM's ``{"error": {"message"}}`` (and the
    older flat ``{"object": "error", "message"}``), SGLang's ``{"error": {"message"}}`` or
    ``{"success": false, "message"}``, FastAPI's ``{"detail"}``, else the text itself."""
    data = answer.json
    message: Any = None
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict):
            message = error.get("message")
        elif isinstance(error, str):
            message = error
        message = message or data.get("message") or data.get("detail")
    if message is None:
        message = answer.text
    text = " ".join(str(message).split())
    return text[:500] + ("…" if len(text) > 500 else "")


def is_missing_route(answer: Answer) -> bool:
    """A 404 from the web framework itself (``{"detail": "Not Found"}``): the route does not
    exist, as opposed to a 404 the route answered (an adapter or model it does not hold)."""
    data = answer.json
    return answer.status == 404 and isinstance(data, dict) and data.get("detail") == "Not Found"


class Connection:
    """HTTP calls to one server: ``httpx`` with a timeout per call, an ``Authorization: Bearer``
    key read from ``api_key_env`` (vLLM's and SGLang's ``--api-key``), answers cut off above
    ``max_response_bytes``, and transport failures (refused, timed out) as PolicyError. Calls
    marked ``retry`` are tried again on 502/503/504 or a refused connection, ``max_retries``
    times, waiting 0.5 s, 1 s, 2 s…"""

    def __init__(
        self,
        base_url: str,
        *,
        api_key_env: str | None,
        timeout: float,
        max_response_bytes: int,
        max_retries: int,
    ) -> None:
        import httpx

        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.timeout = float(timeout)
        self.max_response_bytes = int(max_response_bytes)
        self.max_retries = int(max_retries)
        self._httpx = httpx
        self._client = httpx.Client(timeout=httpx.Timeout(self.timeout, connect=10.0))

    def close(self) -> None:
        self._client.close()

    def _headers(self) -> dict[str, str]:
        if not self.api_key_env:
            return {}
        key = os.environ.get(self.api_key_env, "").strip()
        if not key:
            raise PolicyError(
                f"the environment variable {self.api_key_env} is not set; set it to the "
                f"inference server's --api-key in the environment of the process that samples, "
                "or leave api_key_env empty for a server that checks no key"
            )
        return {"Authorization": f"Bearer {key}"}

    def call(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        what: str,
        timeout: float | None = None,
        retry: bool = False,
    ) -> Answer:
        """``method path`` with ``body`` as JSON; ``what`` names the call in error messages
        (e.g. "loading adapter rl7-v3")."""
        attempts = 1 + (self.max_retries if retry else 0)
        for attempt in range(attempts):
            last = attempt == attempts - 1
            try:
                answer = self._once(method, path, body, timeout)
            except self._httpx.ConnectError as exc:
                if not last:
                    time.sleep(0.5 * 2**attempt)
                    continue
                raise PolicyError(
                    f"{what}: cannot reach the inference server at {self.base_url} ({exc}); "
                    "start it, or check base_url (host and port)"
                ) from None
            except self._httpx.TimeoutException:
                limit = timeout or self.timeout
                raise PolicyError(
                    f"{what}: the inference server at {self.base_url} did not answer within "
                    f"{limit:g} s; raise timeout, or check that the server is not stuck"
                ) from None
            except self._httpx.HTTPError as exc:
                raise PolicyError(
                    f"{what}: the request to {self.base_url}{path} failed: {exc}"
                ) from None
            if answer.status in RETRY_STATUSES and not last:
                time.sleep(0.5 * 2**attempt)
                continue
            return answer
        raise AssertionError("unreachable")  # pragma: no cover

    def _once(self, method: str, path: str, body: Any, timeout: float | None) -> Answer:
        kwargs: dict[str, Any] = {"headers": self._headers()}
        if body is not None:
            kwargs["json"] = body
        if timeout is not None:
            kwargs["timeout"] = self._httpx.Timeout(timeout, connect=10.0)
        with self._client.stream(method, self.base_url + path, **kwargs) as response:
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > self.max_response_bytes:
                    raise PolicyError(
                        f"the answer of {self.base_url}{path} is larger than "
                        f"{self.max_response_bytes} bytes; it is refused (raise "
                        "max_response_bytes if the server is right to send that much)"
                    )
                chunks.append(chunk)
            return Answer(response.status_code, b"".join(chunks))


@dataclass
class Sampled:
    """What one sampling request returned, checked: the ids and their log-probs (same length,
    at least one), the server's finish (``stop`` / ``length``), its text (None when it sent
    none) and the weights version it reports (SGLang; None otherwise)."""

    token_ids: list[int]
    logprobs: list[float]
    finish: str
    text: str | None
    weight_version: str | None = None


def _sampling_fields(temperature: float) -> dict[str, Any]:
    """Every knob that changes the sampling distribution, set to off explicitly: the servers take
    defaults from the model's generation_config.json (vLLM's ``get_diff_sampling_param``, SGLang's
    ``preferred_sampling_params``), which would otherwise apply a top-k or a penalty unseen."""
    return {
        "temperature": temperature,
        "top_p": 1.0,
        "top_k": -1,  # "-1 (disable)" in both servers' SamplingParams
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "frequency_penalty": 0.0,
        "presence_penalty": 0.0,
        "skip_special_tokens": False,
        "spaces_between_special_tokens": False,
    }


# --- vLLM: POST /v1/completions --------------------------------------------------------------


def vllm_body(
    model: str,
    prompt: Sequence[int],
    *,
    temperature: float,
    max_new_tokens: int,
    stop_token_ids: Sequence[int],
    top_logprobs: int = 0,
) -> dict[str, Any]:
    """A completions request for one prompt given as token ids (``prompt: list[int]`` is taken
    as tokens, never re-tokenised), asking for the sampled ids (``return_token_ids``, and
    ``return_tokens_as_token_ids`` for servers older than that field) and the sampled token's
    log-prob (``logprobs: 0``; ``top_logprobs`` more for the launch probe)."""
    return {
        "model": model,
        "prompt": list(prompt),
        "max_tokens": int(max_new_tokens),
        "n": 1,
        "stop_token_ids": list(stop_token_ids),
        "logprobs": int(top_logprobs),
        "return_token_ids": True,
        "return_tokens_as_token_ids": True,
        "stream": False,
        **_sampling_fields(temperature),
    }


def _vllm_ids_from_tokens(tokens: Any) -> list[int] | None:
    """Ids from ``logprobs.tokens`` written as ``token_id:<id>`` (return_tokens_as_token_ids)."""
    if not isinstance(tokens, list):
        return None
    ids = []
    for token in tokens:
        match = _TOKEN_ID.match(token) if isinstance(token, str) else None
        if match is None:
            return None
        ids.append(int(match.group(1)))
    return ids


def _int_list(value: Any) -> list[int] | None:
    if isinstance(value, list) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        return list(value)
    return None


def _float_list(value: Any, what: str) -> list[float]:
    if not isinstance(value, list) or not value:
        raise PolicyError(f"{what}: the server returned no log-probs of the sampled tokens")
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise PolicyError(
                f"{what}: a sampled token has no log-prob ({v!r}); Steplab needs the log-prob of "
                "every sampled token"
            )
        out.append(float(v))
    return out


def vllm_sampled(data: Any, prompt: Sequence[int], *, model: str, what: str) -> Sampled:
    """One choice of a vLLM completions answer, checked (see the module docstring)."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        raise PolicyError(f"{what}: the answer is not a completion with one choice")
    if model and data.get("model") not in (None, model):
        raise PolicyError(
            f"{what}: asked for model {model!r} but the server answered with "
            f"{data.get('model')!r}; the sampled tokens would not be the version's"
        )
    choice = choices[0]
    logprobs = choice.get("logprobs")
    logprobs = logprobs if isinstance(logprobs, dict) else {}
    from_field = _int_list(choice.get("token_ids"))
    from_tokens = _vllm_ids_from_tokens(logprobs.get("tokens"))
    if from_field is None and from_tokens is None:
        raise PolicyError(
            f"{what}: the server returned no sampled token ids (neither choices[].token_ids "
            "nor logprobs.tokens as 'token_id:<id>'); Steplab trains on the sampled ids and "
            "never re-tokenises text: use a vLLM that supports return_token_ids or "
            "return_tokens_as_token_ids"
        )
    if from_field is not None and from_tokens is not None and from_field != from_tokens:
        raise PolicyError(f"{what}: choices[].token_ids and logprobs.tokens disagree")
    ids = from_field if from_field is not None else from_tokens
    values = _float_list(logprobs.get("token_logprobs"), what)
    echoed = _int_list(choice.get("prompt_token_ids"))
    if echoed is not None and echoed != list(prompt):
        raise PolicyError(f"{what}: the server changed the prompt's token ids (re-tokenised it)")
    finish = choice.get("finish_reason")
    if finish not in ("stop", "length"):
        raise PolicyError(f"{what}: the server ended the completion with {finish!r}")
    text = choice.get("text") if isinstance(choice.get("text"), str) else None
    return _checked(Sampled(ids or [], values, finish, text), what)


def vllm_top_logprobs(data: Any, what: str) -> dict[Any, float]:
    """The first position's ``top_logprobs`` of a probe answer: ``{token: log-prob}`` (tokens as
    ``token_id:<id>`` strings or plain strings; only compared with another probe's keys)."""
    try:
        first = data["choices"][0]["logprobs"]["top_logprobs"][0]
    except (KeyError, IndexError, TypeError):
        first = None
    if not isinstance(first, dict) or not first:
        raise PolicyError(f"{what}: the server returned no top log-probs for the probe")
    return {key: float(value) for key, value in first.items()}


# --- SGLang: POST /generate -----------------------------------------------------------------


def sglang_body(
    prompt: Sequence[int],
    *,
    temperature: float,
    max_new_tokens: int,
    stop_token_ids: Sequence[int],
    top_logprobs: int = 0,
) -> dict[str, Any]:
    """A native /generate request for one prompt as ``input_ids``, with ``return_logprob`` for
    the output tokens only (``logprob_start_len: -1``)."""
    sampling = {
        "max_new_tokens": int(max_new_tokens),
        "stop_token_ids": list(stop_token_ids),
        **_sampling_fields(temperature),
    }
    body: dict[str, Any] = {
        "input_ids": list(prompt),
        "sampling_params": sampling,
        "return_logprob": True,
        "logprob_start_len": -1,
        "stream": False,
    }
    if top_logprobs:
        body["top_logprobs_num"] = int(top_logprobs)
    return body


def _sglang_finish(meta: Mapping[str, Any], what: str) -> str:
    finish = meta.get("finish_reason")
    kind = finish.get("type") if isinstance(finish, dict) else finish
    if kind in ("stop", "length"):
        return kind
    detail = finish.get("message") if isinstance(finish, dict) else None
    raise PolicyError(
        f"{what}: the server ended the generation with {kind!r}" + (f": {detail}" if detail else "")
    )


def sglang_sampled(data: Any, *, what: str) -> Sampled:
    """A /generate answer (``{"text", "output_ids", "meta_info": {"finish_reason",
    "output_token_logprobs": [[logprob, token_id, text|null], ...], "weight_version"}}``),
    checked. The ids are read from ``output_token_logprobs`` (one entry per sampled token, the
    stop token included); ``output_ids``, when sent, must be the same ids or the same without
    the final stop token (SGLang trims a matched stop token unless ``no_stop_trim``)."""
    meta = data.get("meta_info") if isinstance(data, dict) else None
    if not isinstance(meta, dict):
        raise PolicyError(f"{what}: the answer is not a /generate result (no meta_info)")
    entries = meta.get("output_token_logprobs")
    if not isinstance(entries, list) or not entries:
        raise PolicyError(
            f"{what}: the server returned no output_token_logprobs; Steplab needs the sampled "
            "token ids and their log-probs (return_logprob)"
        )
    ids: list[int] = []
    values: list[Any] = []
    for entry in entries:
        if not (isinstance(entry, list | tuple) and len(entry) >= 2):
            raise PolicyError(f"{what}: an output_token_logprobs entry is not [logprob, id, …]")
        token = entry[1]
        if isinstance(token, bool) or not isinstance(token, int):
            raise PolicyError(f"{what}: an output_token_logprobs entry has no token id")
        ids.append(token)
        values.append(entry[0])
    logprobs = _float_list(values, what)
    finish = _sglang_finish(meta, what)
    output_ids = _int_list(data.get("output_ids"))
    if output_ids is not None and output_ids not in (ids, ids[:-1]):
        raise PolicyError(f"{what}: output_ids and output_token_logprobs disagree")
    matched = (
        meta["finish_reason"].get("matched") if isinstance(meta["finish_reason"], dict) else None
    )
    if finish == "stop" and isinstance(matched, int) and ids[-1] != matched:
        raise PolicyError(
            f"{what}: the generation stopped at token {matched} but its log-prob is missing"
        )
    text = data.get("text") if isinstance(data.get("text"), str) else None
    version = meta.get("weight_version")
    return _checked(
        Sampled(ids, logprobs, finish, text, None if version is None else str(version)), what
    )


def sglang_top_logprobs(data: Any, what: str) -> dict[Any, float]:
    """The first position's ``output_top_logprobs`` of a probe answer as ``{id: log-prob}``."""
    try:
        first = data["meta_info"]["output_top_logprobs"][0]
    except (KeyError, IndexError, TypeError):
        first = None
    if not isinstance(first, list) or not first:
        raise PolicyError(f"{what}: the server returned no top log-probs for the probe")
    return {entry[1]: float(entry[0]) for entry in first}


def _checked(sampled: Sampled, what: str) -> Sampled:
    if not sampled.token_ids:
        raise PolicyError(f"{what}: the server sampled no token")
    if len(sampled.logprobs) != len(sampled.token_ids):
        raise PolicyError(
            f"{what}: {len(sampled.token_ids)} sampled tokens but {len(sampled.logprobs)} log-probs"
        )
    if any(v > 1e-4 for v in sampled.logprobs):
        raise PolicyError(
            f"{what}: the server's log-probs include positive values, so they are logits, not "
            "log-probs (vLLM: start it with --logprobs-mode processed_logprobs)"
        )
    return sampled


def check_engine_name(engine: Any) -> str:
    """``vllm`` or ``sglang``; anything else is refused with the reason."""
    if engine in ("vllm", "sglang"):
        return engine
    raise ConfigError(
        f"engine {engine!r} is an OpenAI-compatible server that Steplab cannot update: a "
        "sampler needs new weights after each update, which Steplab sends to vLLM (LoRA "
        "adapters, /v1/load_lora_adapter) and SGLang (/update_weights_from_disk) only; use "
        "engine 'vllm' or 'sglang' (or the 'openai' policy kind to collect episodes without "
        "updates)"
    )
