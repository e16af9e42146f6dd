"""The HTTP side of the AgentGym loopback servers: routes with FastAPI's (or Quart's) answers
for what a route does not accept, on 127.0.0.1 with a free port, in a thread.

What the real servers answer, reproduced here (FastAPI 0.1xx with pydantic v2, as the
``agentenv-*`` packages install; Quart for WebArena):

- a body that misses a required field of the route's pydantic model, or has one of the wrong
  type: 422 ``{"detail": [{"type": "missing", "loc": ["body", "id"], "msg": "Field required",
  "input": {...}}, ...]}``; no JSON body at all: ``loc: ["body"]``; a missing or non-integer query
  parameter: ``loc: ["query", "id"]``;
- an unknown route: 404 ``{"detail": "Not Found"}``; a known route with another method: 405
  ``{"detail": "Method Not Allowed"}``;
- an exception the handler does not catch: 500 with the text ``Internal Server Error``
  (``text/plain``, Starlette's ServerErrorMiddleware);
- Quart (``quart=True``): no validation (the handler reads ``request.get_json()`` and raises
  KeyError for a missing field); 404 and 500 are small HTML pages.

A route is ``(method, path) -> Route(fields, handler)``: ``fields`` the model's
``(name, type, required)`` (None: the route takes no body, whatever is sent), ``query`` the
integer query parameters; the handler gets the body (or query) and returns what FastAPI would
serialise, or raises.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

QUART_404 = (
    "<!doctype html>\n<html lang=en>\n<title>404 Not Found</title>\n<h1>Not Found</h1>\n"
    "<p>The requested URL was not found on the server.</p>\n"
)
QUART_500 = (
    "<!doctype html>\n<html lang=en>\n<title>500 Internal Server Error</title>\n"
    "<h1>Internal Server Error</h1>\n<p>The server encountered an internal error and was "
    "unable to complete your request.</p>\n"
)


@dataclass
class Route:
    handler: Callable[[Any], Any]
    fields: list[tuple[str, type, bool]] | None = None  # the request model; None: no body
    query: tuple[str, ...] = ()  # required integer query parameters


def _type_error(name: str, kind: type, value: Any, where: str) -> dict[str, Any] | None:
    if kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return None
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return None  # pydantic's lax mode parses numeric strings
        msg, kind_name = "Input should be a valid integer", "int_type"
        if isinstance(value, str):
            msg, kind_name = f"{msg}, unable to parse string as an integer", "int_parsing"
    elif kind is str:
        if isinstance(value, str):
            return None
        msg, kind_name = "Input should be a valid string", "string_type"
    else:
        return None
    return {"type": kind_name, "loc": [where, name], "msg": msg, "input": value}


def validate_body(route: Route, body: Any) -> list[dict[str, Any]]:
    """FastAPI's 422 detail for a body that does not fit the route's model ([] when it does)."""
    if route.fields is None:
        return []
    if body is None:
        return [{"type": "missing", "loc": ["body"], "msg": "Field required", "input": None}]
    if not isinstance(body, dict):
        return [
            {
                "type": "model_attributes_type",
                "loc": ["body"],
                "msg": "Input should be a valid dictionary or object to extract fields from",
                "input": body,
            }
        ]
    problems = []
    for name, kind, required in route.fields:
        if body.get(name) is None:
            if required:
                problems.append(
                    {
                        "type": "missing",
                        "loc": ["body", name],
                        "msg": "Field required",
                        "input": body,
                    }
                )
        elif problem := _type_error(name, kind, body[name], "body"):
            problems.append(problem)
    return problems


class LoopbackServer:
    """Serve ``routes`` (see the module docstring); ``requests`` records every request as
    ``(method, path, body or query)``. A context manager."""

    quart = False

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests_seen: list[tuple[str, str, Any]] = []
        self.routes = self.make_routes()
        handler = type("Handler", (_Handler,), {"server_obj": self})
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="agentgym-test-server",
            daemon=True,
        )

    def make_routes(self) -> dict[tuple[str, str], Route]:
        raise NotImplementedError

    @property
    def requests(self) -> list[tuple[str, str, Any]]:
        with self.lock:
            return list(self.requests_seen)

    def posts(self, path: str) -> list[Any]:
        return [b for method, p, b in self.requests if method == "POST" and p == path]

    def answer(self, method: str, path: str, body: Any, query: dict[str, str]) -> tuple[int, Any]:
        """(status, payload): a str payload with a status other than 200 is sent as text."""
        route = self.routes.get((method, path))
        if route is None:
            if self.quart:
                return 404, QUART_404
            if any(p == path for _, p in self.routes):
                return 405, {"detail": "Method Not Allowed"}
            return 404, {"detail": "Not Found"}
        if method == "GET":
            problems = [
                {"type": "missing", "loc": ["query", q], "msg": "Field required", "input": None}
                if q not in query
                else _type_error(q, int, query[q], "query")
                for q in route.query
            ]
            problems = [p for p in problems if p]
            if problems and not self.quart:
                return 422, {"detail": problems}
            arg: Any = {q: int(query[q]) if q in route.query else query[q] for q in query}
        else:
            problems = [] if self.quart else validate_body(route, body)
            if problems:
                return 422, {"detail": problems}
            arg = body
        try:
            return 200, route.handler(arg)
        except Exception:  # noqa: BLE001 - what the framework does with an uncaught exception
            return 500, QUART_500 if self.quart else "Internal Server Error"

    def start(self) -> LoopbackServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> Any:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class _Handler(BaseHTTPRequestHandler):
    server_obj: LoopbackServer  # set on the subclass made per server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, payload: Any) -> None:
        if status != 200 and isinstance(payload, str):
            html = payload.startswith("<!doctype")
            data = payload.encode()
            kind = "text/html; charset=utf-8" if html else "text/plain; charset=utf-8"
        else:
            data = json.dumps(payload).encode()
            kind = "application/json"
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _handle(self, method: str) -> None:
        parts = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        body: Any = None
        if method == "POST":
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            if raw:
                try:
                    body = json.loads(raw)
                except ValueError:
                    detail = [
                        {"type": "json_invalid", "loc": ["body", 0], "msg": "JSON decode error"}
                    ]
                    return self._send(422, {"detail": detail})
        server = self.server_obj
        with server.lock:
            server.requests_seen.append((method, parts.path, body if method == "POST" else query))
            status, payload = server.answer(method, parts.path, body, query)
        self._send(status, payload)

    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        self._handle("GET")

    def do_POST(self) -> None:  # noqa: N802 - the http.server API
        self._handle("POST")
