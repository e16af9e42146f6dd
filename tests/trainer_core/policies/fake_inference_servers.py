"""Loopback vLLM and SGLang servers for testing the inference-server sampler: the routes Steplab
calls, with the request, response and error shapes of the real servers, over a toy model whose
next-token logits are a deterministic function of the context and of the loaded weights.

Shapes read from the servers' code (files and commits as cited in
``trainer_core/policies/inference_server.py``):

- vLLM: GET /v1/models (ModelCard ``owned_by: "vllm"``, adapters with ``parent`` and ``root``;
  engine/protocol.py @d7e52523, models/serving.py @00153c8b); POST /v1/load_lora_adapter and
  /v1/unload_lora_adapter only with VLLM_ALLOW_RUNTIME_LORA_UPDATING, else FastAPI's 404
  ``{"detail": "Not Found"}`` (serve/lora/api_router.py @27873cab), success 200 with a plain-text
  body, errors ``{"error": {"message", "type", "param", "code"}}`` with status ``code``: 400
  already loaded, 404 no adapter at the path (LoRAAdapterNotFoundError), 404 unknown on unload,
  500 "LoRA is not enabled. Use --enable-lora to enable LoRA." (lora_model_runner_mixin.py
  @8548e7c2); POST /v1/completions with token-id prompts, ``logprobs``, ``return_token_ids``,
  ``return_tokens_as_token_ids`` (completion/protocol.py @d5dba2d7, completion/serving.py
  @cc139d8e), the stop token the last sampled id and left out of the text (v1/core/sched/utils.py
  @6110ea29, v1/engine/detokenizer.py @e372329d), 404 "The model `<m>` does not exist." for an
  unknown model; log-probs raw (before temperature, vLLM's default) or processed
  (v1/sample/sampler.py @3e342658).
- SGLang: GET /v1/models (``owned_by: "sglang"``), GET /get_model_info, POST
  /update_weights_from_disk answering ``{success, message, num_paused_requests}`` with 200 or 400
  and tagging the weights with ``weight_version`` (entrypoints/http_server.py @0025436e,
  managers/io_struct.py @001067ff); POST /generate with ``input_ids``, ``sampling_params``,
  ``return_logprob``, ``top_logprobs_num`` answering ``{"text", "output_ids", "meta_info":
  {"finish_reason": {"type": "stop", "matched": id} | {"type": "length", "length": n},
  "weight_version", "output_token_logprobs": [[logprob, id, null], ...]}}`` (tokenizer_manager.py,
  schedule_batch.py), the matched stop token trimmed from ``output_ids`` and ``text``
  (detokenizer_manager.trim_matched_stop), log-probs ``log(softmax(logits / T))``
  (layers/sampler.py @584f55d1) or, with SGLANG_RETURN_ORIGINAL_LOGPROB, before temperature.

Any route answers GET with 405 when it only takes POST (FastAPI), and an unknown path with 404
``{"detail": "Not Found"}``. ``fail_next(path, status, body)`` makes the next request to a path
answer that instead. Every request is recorded (``requests``: ``(method, path, json)``).
"""

from __future__ import annotations

import json
import math
import random
import socket
import threading
import zlib
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = ["FakeOtherServer", "FakeSGLang", "FakeVLLM", "toy_logprobs"]

NOT_FOUND = {"detail": "Not Found"}
METHOD_NOT_ALLOWED = {"detail": "Method Not Allowed"}


def toy_logits(context: Sequence[int], weights: str, vocab: int) -> list[float]:
    """The toy model: logits for the token after ``context`` under ``weights`` (a tag of the
    loaded base model or adapter)."""
    seed = zlib.crc32(repr((list(context[-6:]), len(context), weights)).encode())
    rng = random.Random(seed)
    return [rng.gauss(0.0, 2.5) for _ in range(vocab)]


def _log_softmax(values: Sequence[float]) -> list[float]:
    top = max(values)
    total = math.log(sum(math.exp(v - top) for v in values)) + top
    return [v - total for v in values]


def toy_logprobs(
    context: Sequence[int], weights: str, vocab: int, temperature: float, mode: str
) -> list[float]:
    """What the server reports for each token of the vocabulary: ``mode`` is vLLM's
    --logprobs-mode (raw_logprobs, processed_logprobs, raw_logits, processed_logits)."""
    logits = toy_logits(context, weights, vocab)
    scale = temperature if temperature > 0 else 1.0
    processed = [v / scale for v in logits]
    return {
        "raw_logprobs": _log_softmax(logits),
        "processed_logprobs": _log_softmax(processed),
        "raw_logits": logits,
        "processed_logits": processed,
    }[mode]


class _Server:
    """A threaded HTTP server on 127.0.0.1 routing to ``self.routes[(method, path)]``."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str, Any]] = []
        self._failures: dict[str, list[tuple[int, Any]]] = {}
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                super().setup()
                # headers and body go out in two writes: without this, a kept-alive connection
                # waits for the client's delayed ACK (~40 ms) on every answer
                self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

            def do_GET(self) -> None:  # noqa: N802 - http.server's naming
                server._handle(self, "GET")

            def do_POST(self) -> None:  # noqa: N802
                server._handle(self, "POST")

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def routes(self) -> dict[tuple[str, str], Callable[[Any], tuple[int, Any]]]:
        raise NotImplementedError

    def authorized(self, path: str, authorization: str | None) -> bool:
        return True

    def fail_next(self, path: str, status: int, body: Any) -> None:
        """The next request to ``path`` answers ``status`` with ``body`` (JSON, or text)."""
        self._failures.setdefault(path, []).append((status, body))

    def calls(self, path: str) -> list[Any]:
        """The JSON bodies sent to ``path``, in order."""
        return [body for method, p, body in self.requests if p == path and method == "POST"]

    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = handler.path.split("?")[0]
        with self.lock:
            self.requests.append((method, path, body))
            failures = self._failures.get(path)
            if not self.authorized(path, handler.headers.get("authorization")):
                status, answer = 401, {"error": "Unauthorized"}
            elif failures:
                status, answer = failures.pop(0)
            else:
                routes = self.routes()
                route = routes.get((method, path))
                if route is not None:
                    status, answer = route(body)
                elif any(p == path for _, p in routes):
                    status, answer = 405, METHOD_NOT_ALLOWED
                else:
                    status, answer = 404, NOT_FOUND
        if isinstance(answer, str):
            data, kind = answer.encode(), "text/plain; charset=utf-8"
        else:
            data, kind = json.dumps(answer).encode(), "application/json"
        handler.send_response(status)
        handler.send_header("content-type", kind)
        handler.send_header("content-length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)


def _sample(
    prompt: list[int],
    weights: str,
    *,
    vocab: int,
    temperature: float,
    max_tokens: int,
    stop_ids: Sequence[int],
    mode: str,
    script: list[list[int]] | dict[tuple[int, ...], list[int]],
    rng: random.Random,
) -> tuple[list[int], list[float], list[dict[int, float]], bool]:
    """Tokens (scripted, else drawn from softmax(logits / T); greedy at 0) with the reported
    value of each and the top of each position's reported values; ``stopped``: a stop id
    ended it."""
    if isinstance(script, dict):  # keyed by prompt: concurrent requests arrive in any order
        planned = script.pop(tuple(prompt), None)
    else:
        planned = script.pop(0) if script else None
    ids: list[int] = []
    values: list[float] = []
    tops: list[dict[int, float]] = []
    context = list(prompt)
    while len(ids) < max_tokens:
        reported = toy_logprobs(context, weights, vocab, temperature, mode)
        if planned is not None:
            if len(ids) >= len(planned):
                break
            token = planned[len(ids)]
        elif temperature == 0:
            token = max(range(vocab), key=reported.__getitem__)
        else:
            probs = [
                math.exp(v)
                for v in toy_logprobs(context, weights, vocab, temperature, "processed_logprobs")
            ]
            token = rng.choices(range(vocab), weights=probs)[0]
        ids.append(token)
        values.append(reported[token])
        tops.append({t: reported[t] for t in sorted(range(vocab), key=lambda t: -reported[t])})
        context.append(token)
        if token in stop_ids:
            return ids, values, tops, True
    return ids, values, tops, False


def _script(script: Any) -> list[list[int]] | dict[tuple[int, ...], list[int]]:
    if isinstance(script, dict):
        return {tuple(prompt): list(ids) for prompt, ids in script.items()}
    return [list(s) for s in script]


def _text(ids: Sequence[int]) -> str:
    return "".join(f"<{t}>" for t in ids)


class FakeVLLM(_Server):
    """vLLM's routes (module docstring). ``runtime_lora_updating``: the LoRA routes exist;
    ``enable_lora``: loading works (else 500 as vLLM without --enable-lora);
    ``logprobs_mode``: vLLM's --logprobs-mode; ``token_ids``: the server knows
    ``return_token_ids`` (older ones do not); ``answer_logprobs`` / ``answer_token_ids_in_tokens``:
    set False for a server that ignores ``logprobs`` / ``return_tokens_as_token_ids``.
    ``script``: token sequences the next completions "sample", in order, or a mapping from a
    prompt's token ids to what that prompt "samples" (for requests sent concurrently).
    ``api_key``: started with --api-key."""

    def __init__(
        self,
        *,
        model: str = "Qwen/Qwen2.5-0.5B-Instruct",
        runtime_lora_updating: bool = True,
        enable_lora: bool = True,
        logprobs_mode: str = "processed_logprobs",
        token_ids: bool = True,
        answer_logprobs: bool = True,
        answer_token_ids_in_tokens: bool = True,
        vocab: int = 48,
        script: Sequence[Sequence[int]] | dict[tuple[int, ...], Sequence[int]] = (),
        api_key: str | None = None,
    ) -> None:
        self.model = model
        self.api_key = api_key
        self.runtime_lora_updating = runtime_lora_updating
        self.enable_lora = enable_lora
        self.logprobs_mode = logprobs_mode
        self.token_ids = token_ids
        self.answer_logprobs = answer_logprobs
        self.answer_token_ids_in_tokens = answer_token_ids_in_tokens
        self.vocab = vocab
        self.script = _script(script)
        self.adapters: dict[str, str] = {}  # name -> path
        self.answers: list[dict[str, Any]] = []  # every completion answer sent
        self._rng = random.Random(0)
        super().__init__()

    def routes(self):
        routes = {
            ("GET", "/v1/models"): self._models,
            ("GET", "/version"): lambda _: (200, {"version": "0.11.0"}),
            ("POST", "/v1/completions"): self._completions,
        }
        if self.runtime_lora_updating:
            routes[("POST", "/v1/load_lora_adapter")] = self._load
            routes[("POST", "/v1/unload_lora_adapter")] = self._unload
        return routes

    def authorized(self, path: str, authorization: str | None) -> bool:
        """vLLM's --api-key: paths under /v1 need ``Authorization: Bearer <key>``, else 401
        ``{"error": "Unauthorized"}`` (serve/middleware/authenticate.py @baaf6e9c)."""
        if self.api_key is None or not path.startswith("/v1"):
            return True
        return authorization == f"Bearer {self.api_key}"

    @staticmethod
    def error(status: int, message: str, kind: str, param: str | None = None) -> tuple[int, Any]:
        return status, {"error": {"message": message, "type": kind, "param": param, "code": status}}

    def _models(self, _: Any) -> tuple[int, Any]:
        card = {"object": "model", "created": 0, "owned_by": "vllm", "permission": []}
        data = [{**card, "id": self.model, "root": f"/models/{self.model}", "parent": None}]
        data += [
            {**card, "id": name, "root": path, "parent": self.model}
            for name, path in self.adapters.items()
        ]
        return 200, {"object": "list", "data": data}

    def _load(self, body: Any) -> tuple[int, Any]:
        name, path = (body or {}).get("lora_name"), (body or {}).get("lora_path")
        if not name or not path:
            return self.error(
                400, "Both 'lora_name' and 'lora_path' must be provided.", "InvalidUserInput"
            )
        if name in self.adapters:
            return self.error(
                400,
                f"The lora adapter '{name}' has already been loaded. If you want to load the "
                "adapter in place, set 'load_inplace' to True.",
                "InvalidUserInput",
            )
        if not self.enable_lora:
            return self.error(
                500, "LoRA is not enabled. Use --enable-lora to enable LoRA.", "InternalServerError"
            )
        if not (Path(path) / "adapter_config.json").is_file():
            return self.error(
                404, f"Loading lora {name} failed: No adapter found for {path}", "NotFoundError"
            )
        self.adapters[name] = path
        return 200, f"Success: LoRA adapter '{name}' added successfully."

    def _unload(self, body: Any) -> tuple[int, Any]:
        name = (body or {}).get("lora_name")
        if not name:
            return self.error(
                400,
                "'lora_name' needs to be provided to unload a LoRA adapter.",
                "InvalidUserInput",
            )
        if name not in self.adapters:
            return self.error(404, f"The lora adapter '{name}' cannot be found.", "NotFoundError")
        del self.adapters[name]
        return 200, f"Success: LoRA adapter '{name}' removed successfully."

    def _completions(self, body: Any) -> tuple[int, Any]:
        model = body.get("model")
        if model != self.model and model not in self.adapters:
            return self.error(404, f"The model `{model}` does not exist.", "NotFoundError", "model")
        prompt = body["prompt"]
        ids, values, tops, stopped = _sample(
            prompt,
            model,
            vocab=self.vocab,
            temperature=float(body.get("temperature", 1.0)),
            max_tokens=int(body.get("max_tokens", 16)),
            stop_ids=body.get("stop_token_ids") or [],
            mode=self.logprobs_mode,
            script=self.script,
            rng=self._rng,
        )
        choice: dict[str, Any] = {
            "index": 0,
            "text": _text(ids[:-1] if stopped else ids),
            "logprobs": None,
            "finish_reason": "stop" if stopped else "length",
            "stop_reason": ids[-1] if stopped else None,
            "prompt_logprobs": None,
        }
        if body.get("logprobs") is not None and self.answer_logprobs:
            as_ids = body.get("return_tokens_as_token_ids") and self.answer_token_ids_in_tokens
            name = (lambda t: f"token_id:{t}") if as_ids else _text_of
            k = int(body["logprobs"])
            choice["logprobs"] = {
                "text_offset": list(range(len(ids))),
                "token_logprobs": [max(v, -9999.0) for v in values],
                "tokens": [name(t) for t in ids],
                "top_logprobs": [
                    {name(t): max(top[t], -9999.0) for t in [sampled, *list(top)[:k]]}
                    for sampled, top in zip(ids, tops, strict=True)
                ],
            }
        if body.get("return_token_ids") and self.token_ids:
            choice["token_ids"] = ids
            choice["prompt_token_ids"] = prompt
        answer = {
            "id": f"cmpl-{len(self.answers)}",
            "object": "text_completion",
            "created": 0,
            "model": model,
            "choices": [choice],
            "usage": {"prompt_tokens": len(prompt), "completion_tokens": len(ids)},
        }
        self.answers.append(answer)
        return 200, answer


def _text_of(token: int) -> str:
    return f"<{token}>"


class FakeSGLang(_Server):
    """SGLang's routes (module docstring). ``original_logprob``: started with
    SGLANG_RETURN_ORIGINAL_LOGPROB (log-probs before temperature). ``answer_logprobs``: set
    False for a server that ignores ``return_logprob``."""

    def __init__(
        self,
        *,
        model_path: str = "/models/base",
        original_logprob: bool = False,
        answer_logprobs: bool = True,
        is_generation: bool = True,
        vocab: int = 48,
        script: Sequence[Sequence[int]] | dict[tuple[int, ...], Sequence[int]] = (),
    ) -> None:
        self.model_path = model_path
        self.weight_version = "default"
        self.original_logprob = original_logprob
        self.answer_logprobs = answer_logprobs
        self.is_generation = is_generation
        self.vocab = vocab
        self.script = _script(script)
        self.answers: list[dict[str, Any]] = []
        self._rng = random.Random(0)
        super().__init__()

    def routes(self):
        return {
            ("GET", "/v1/models"): lambda _: (
                200,
                {
                    "object": "list",
                    "data": [
                        {
                            "id": "default",
                            "object": "model",
                            "created": 0,
                            "owned_by": "sglang",
                            "root": "default",
                            "max_model_len": 4096,
                        }
                    ],
                },
            ),
            ("GET", "/get_model_info"): lambda _: (
                200,
                {
                    "model_path": self.model_path,
                    "tokenizer_path": self.model_path,
                    "is_generation": self.is_generation,
                    "preferred_sampling_params": None,
                    "weight_version": self.weight_version,
                },
            ),
            ("POST", "/update_weights_from_disk"): self._update,
            ("POST", "/generate"): self._generate,
        }

    def _update(self, body: Any) -> tuple[int, Any]:
        path = (body or {}).get("model_path") or ""
        if not (Path(path) / "config.json").is_file():
            message = f"Failed to update weights: {path} is not a model directory. Rolling back."
            return 400, {"success": False, "message": message, "num_paused_requests": 0}
        self.model_path = path
        message = "Succeeded to update model weights."
        if body.get("weight_version") is not None:
            self.weight_version = str(body["weight_version"])
            message += f" Weight version updated to {self.weight_version}."
        return 200, {"success": True, "message": message, "num_paused_requests": 0}

    def _generate(self, body: Any) -> tuple[int, Any]:
        params = body.get("sampling_params") or {}
        prompt = body.get("input_ids")
        if not isinstance(prompt, list):
            return 400, {
                "error": {"message": "Either text, input_ids or input_embeds should be provided."}
            }
        temperature = float(params.get("temperature", 1.0))
        ids, values, tops, stopped = _sample(
            prompt,
            self.model_path,
            vocab=self.vocab,
            temperature=temperature,
            max_tokens=int(params.get("max_new_tokens", 128)),
            stop_ids=params.get("stop_token_ids") or [],
            mode="raw_logprobs" if self.original_logprob else "processed_logprobs",
            script=self.script,
            rng=self._rng,
        )
        finish = (
            {"type": "stop", "matched": ids[-1]}
            if stopped
            else {"type": "length", "length": len(ids)}
        )
        kept = ids[:-1] if stopped else ids  # trim_matched_stop (no_stop_trim is False)
        meta: dict[str, Any] = {
            "id": f"req-{len(self.answers)}",
            "finish_reason": finish,
            "prompt_tokens": len(prompt),
            "weight_version": self.weight_version,
            "completion_tokens": len(ids),
            "cached_tokens": 0,
        }
        if body.get("return_logprob") and self.answer_logprobs:
            meta["input_token_logprobs"] = []
            meta["output_token_logprobs"] = [[v, t, None] for v, t in zip(values, ids, strict=True)]
            k = int(body.get("top_logprobs_num") or 0)
            if k:
                meta["output_top_logprobs"] = [
                    [[top[t], t, None] for t in list(top)[:k]] for top in tops
                ]
        answer = {"text": _text(kept), "output_ids": kept, "meta_info": meta}
        self.answers.append(answer)
        return 200, answer


class FakeOtherServer(_Server):
    """An OpenAI-compatible server that is neither vLLM nor SGLang: GET /v1/models names its
    owner ``owned_by`` (e.g. "library", "openai")."""

    def __init__(self, owned_by: str = "library") -> None:
        self.owned_by = owned_by
        super().__init__()

    def routes(self):
        card = {"id": "llama3:latest", "object": "model", "created": 0, "owned_by": self.owned_by}
        return {("GET", "/v1/models"): lambda _: (200, {"object": "list", "data": [card]})}
