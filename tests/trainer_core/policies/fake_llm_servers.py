"""A loopback HTTP server that speaks the Anthropic Messages and OpenAI chat-completions
protocols, for testing code that uses the real ``anthropic`` / ``openai`` SDKs.

It answers from a scripted queue and records every request, so a test can say what the "model"
answers and then assert exactly what the SDK sent::

    with FakeLLMServer() as server:
        server.enqueue(
            rate_limited(retry_after="0"),
            anthropic_message([anthropic_text("Add."), anthropic_tool_use("calculator", {...})]),
        )
        client = anthropic.Anthropic(api_key="k", base_url=server.anthropic_base_url)
        ...
        assert len(server.requests) == 2
        assert server.requests[-1].headers["x-api-key"] == "k"

Routing: a reply built by an ``anthropic_*`` helper only answers ``POST /v1/messages``, one built
by an ``openai_*`` helper only ``POST /v1/chat/completions``; a generic :class:`Reply` (such as
:func:`rate_limited` or :func:`server_error`) answers whichever request comes next. So one server
can script both protocols at once (a policy on one, an LLM judge on the other). A reply may also
be a callable ``(RecordedRequest) -> Reply`` for answers that depend on the request.

When no scripted reply is left, the server answers 400 with ``x-should-retry: false`` and an
error body saying the script ran out (the SDKs then raise at once instead of retrying), and
records the request in :attr:`FakeLLMServer.unexpected`.

Everything stays on 127.0.0.1 with an ephemeral port; the server runs in a daemon thread and
stops on ``close()`` (or when the ``with`` block ends).
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = [
    "ANTHROPIC_PATH",
    "OPENAI_PATH",
    "FakeLLMServer",
    "RecordedRequest",
    "Reply",
    "anthropic_error",
    "anthropic_message",
    "anthropic_text",
    "anthropic_tool_use",
    "openai_completion",
    "openai_error",
    "openai_tool_call",
    "rate_limited",
    "server_error",
]

ANTHROPIC_PATH = "/v1/messages"
OPENAI_PATH = "/v1/chat/completions"
_ids = itertools.count(1)


@dataclass
class Reply:
    """One scripted HTTP answer. ``body``: a JSON-able value (sent as JSON), ``str`` or ``bytes``
    (sent as is). ``path``: only a request to this path takes it (None: any request)."""

    status: int = 200
    body: Any = None
    headers: Mapping[str, str] = field(default_factory=dict)
    path: str | None = None
    delay: float = 0.0  # seconds to wait before answering (to exercise client timeouts)


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    raw: bytes
    json: Any  # the body parsed as JSON, or None when it is not JSON

    @property
    def retry_count(self) -> int:
        """The SDK's own count of retries before this attempt (``x-stainless-retry-count``)."""
        return int(self.headers.get("x-stainless-retry-count", "0") or 0)


ReplyLike = Reply | Callable[[RecordedRequest], Reply]


class FakeLLMServer:
    """A threaded HTTP server on 127.0.0.1:<ephemeral port>; see the module docstring."""

    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self.unexpected: list[RecordedRequest] = []
        self._queue: list[ReplyLike] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                server._handle(self)

            def do_GET(self) -> None:  # noqa: N802
                server._handle(self)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return  # keep test output quiet

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.02},  # close() returns at once
            name="fake-llm-server",
            daemon=True,
        )
        self._thread.start()

    # --- addresses ------------------------------------------------------------------------

    @property
    def url(self) -> str:
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def anthropic_base_url(self) -> str:
        """``base_url`` for ``anthropic.Anthropic`` (the SDK appends ``/v1/messages``)."""
        return self.url

    @property
    def openai_base_url(self) -> str:
        """``base_url`` for ``openai.OpenAI`` (the SDK appends ``/chat/completions``)."""
        return f"{self.url}/v1"

    # --- the script -----------------------------------------------------------------------

    def enqueue(self, *replies: ReplyLike) -> FakeLLMServer:
        with self._lock:
            self._queue.extend(replies)
        return self

    @property
    def pending(self) -> int:
        """How many scripted replies are still unused."""
        with self._lock:
            return len(self._queue)

    def requests_to(self, path: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == path]

    def bodies(self, path: str | None = None) -> list[Any]:
        """The JSON bodies of the recorded requests (to ``path`` when given), oldest first."""
        return [r.json for r in self.requests if path is None or r.path == path]

    def _take(self, path: str) -> ReplyLike | None:
        with self._lock:
            for index, item in enumerate(self._queue):
                wanted = getattr(item, "path", None)
                if wanted is None or wanted == path:
                    return self._queue.pop(index)
        return None

    # --- serving --------------------------------------------------------------------------

    def _handle(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("content-length") or 0)
        raw = handler.rfile.read(length) if length else b""
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        path = handler.path.split("?", 1)[0]
        request = RecordedRequest(
            method=handler.command,
            path=path,
            headers={k.lower(): v for k, v in handler.headers.items()},
            raw=raw,
            json=parsed,
        )
        with self._lock:
            self.requests.append(request)
        item = self._take(path)
        if item is None:
            with self._lock:
                self.unexpected.append(request)
            reply = Reply(
                400,
                {
                    "type": "error",
                    "error": {
                        "type": "invalid_request_error",
                        "message": f"fake server: no scripted reply left for {request.method} {path}",
                    },
                },
                headers={"x-should-retry": "false"},
            )
        else:
            reply = item(request) if callable(item) else item
        if reply.delay:
            threading.Event().wait(reply.delay)
        self._send(handler, reply)

    @staticmethod
    def _send(handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        if isinstance(reply.body, bytes):
            payload, ctype = reply.body, "application/octet-stream"
        elif isinstance(reply.body, str):
            payload, ctype = reply.body.encode(), "text/plain; charset=utf-8"
        else:
            payload, ctype = json.dumps(reply.body).encode(), "application/json"
        try:
            handler.send_response(reply.status)
            headers = {k.lower(): v for k, v in reply.headers.items()}
            handler.send_header("content-type", headers.pop("content-type", ctype))
            handler.send_header("content-length", str(len(payload)))
            for name, value in headers.items():
                handler.send_header(name, value)
            handler.end_headers()
            handler.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (a timeout test)

    # --- lifetime -------------------------------------------------------------------------

    def close(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLMServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- generic replies ----------------------------------------------------------------------


def rate_limited(retry_after: str | None = "0", *, path: str | None = None, **extra: str) -> Reply:
    """A 429 in both protocols' error shape, with ``Retry-After`` when given (extra headers,
    e.g. ``**{"retry-after-ms": "5"}``, are added as they are)."""
    headers = dict(extra)
    if retry_after is not None:
        headers["retry-after"] = retry_after
    return Reply(
        429,
        _error_body("rate_limit_error", "Rate limit reached; please slow down."),
        headers=headers,
        path=path,
    )


def server_error(
    status: int = 500, message: str = "Internal server error", *, path: str | None = None, **headers
) -> Reply:
    return Reply(status, _error_body("api_error", message), headers=headers, path=path)


def _error_body(kind: str, message: str) -> dict[str, Any]:
    # Anthropic's shape is {"type": "error", "error": {"type", "message"}}; OpenAI's is
    # {"error": {"message", "type", "code"}}. One body that carries both reads right in both SDKs.
    return {"type": "error", "error": {"type": kind, "message": message, "code": kind}}


# --- Anthropic Messages -------------------------------------------------------------------


def anthropic_text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def anthropic_tool_use(name: str, input: Any, *, id: str | None = None) -> dict[str, Any]:  # noqa: A002
    return {"type": "tool_use", "id": id or f"toolu_{next(_ids):04d}", "name": name, "input": input}


def anthropic_message(
    content: list[dict[str, Any]] | str,
    *,
    stop_reason: str | None = None,
    input_tokens: int = 10,
    output_tokens: int = 5,
    model: str = "claude-test",
    usage: dict[str, Any] | None = None,
    status: int = 200,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """A ``POST /v1/messages`` answer. ``content``: blocks (see :func:`anthropic_text`,
    :func:`anthropic_tool_use`) or a string (one text block)."""
    blocks = [anthropic_text(content)] if isinstance(content, str) else list(content)
    if stop_reason is None:
        stop_reason = "tool_use" if any(b.get("type") == "tool_use" for b in blocks) else "end_turn"
    return Reply(
        status,
        {
            "id": f"msg_{next(_ids):04d}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": usage
            if usage is not None
            else {"input_tokens": input_tokens, "output_tokens": output_tokens},
        },
        headers=dict(headers or {}),
        path=ANTHROPIC_PATH,
    )


def anthropic_error(status: int, kind: str, message: str, **headers: str) -> Reply:
    """An Anthropic error answer, e.g. ``anthropic_error(401, "authentication_error", ...)``."""
    return Reply(
        status,
        {"type": "error", "error": {"type": kind, "message": message}},
        headers=headers,
        path=ANTHROPIC_PATH,
    )


# --- OpenAI chat completions --------------------------------------------------------------


def openai_tool_call(name: str, arguments: Any, *, id: str | None = None) -> dict[str, Any]:
    """A tool call; ``arguments`` given as a string is sent verbatim (malformed JSON included),
    anything else is JSON-encoded."""
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "id": id or f"call_{next(_ids):04d}",
        "type": "function",
        "function": {"name": name, "arguments": text},
    }


def openai_completion(
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    *,
    finish_reason: str | None = None,
    prompt_tokens: int | None = 10,
    completion_tokens: int | None = 5,
    model: str = "test-model",
    message_extra: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> Reply:
    """A ``POST /v1/chat/completions`` answer with one choice. ``prompt_tokens=None`` leaves
    ``usage`` out, as some servers do."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = list(tool_calls)
    message.update(message_extra or {})
    if finish_reason is None:
        finish_reason = "tool_calls" if tool_calls else "stop"
    body: dict[str, Any] = {
        "id": f"chatcmpl-{next(_ids):04d}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }
    if prompt_tokens is not None:
        completion = completion_tokens or 0
        body["usage"] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion,
            "total_tokens": prompt_tokens + completion,
        }
    return Reply(200, body, headers=dict(headers or {}), path=OPENAI_PATH)


def openai_error(
    status: int, message: str, *, kind: str = "invalid_request_error", **headers: str
) -> Reply:
    return Reply(
        status,
        {"error": {"message": message, "type": kind, "param": None, "code": None}},
        headers=headers,
        path=OPENAI_PATH,
    )
