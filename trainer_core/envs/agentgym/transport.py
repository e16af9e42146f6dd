"""HTTP to one AgentGym environment server: bounded (a timeout per request, a cap on the size of
an answer) and uniform (every answer is an :class:`Answer`; only a failure to get one raises).

What an answer *means* (a 200 with ``{"error"}``, a 422 from FastAPI's validation, a 500 from a
raised exception) is each protocol's business (:mod:`trainer_core.envs.agentgym.protocols`);
:meth:`Transport.ok` turns the answers no protocol accepts into a clear
:class:`~trainer_core.errors.EnvironmentUnavailable`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from trainer_core.errors import EnvironmentUnavailable

MAX_ANSWER_BYTES = 8 * 1024 * 1024
NOT_JSON = object()  # Answer.payload when the body is not JSON


@dataclass(frozen=True)
class Answer:
    """One HTTP answer: its status, the parsed JSON body (or ``NOT_JSON``) and the start of the
    body as text (for messages)."""

    method: str
    url: str
    status: int
    payload: Any
    text: str

    @property
    def is_json(self) -> bool:
        return self.payload is not NOT_JSON

    def error(self) -> str | None:
        """The message of an AgentGym ``{"error": ...}`` answer (any status), else None."""
        if self.is_json and isinstance(self.payload, dict) and "error" in self.payload:
            return str(self.payload["error"])
        return None


class Transport:
    """requests to ``base_url``; ``label`` names the server in messages."""

    def __init__(
        self, base_url: str, *, label: str, timeout: float, max_bytes: int = MAX_ANSWER_BYTES
    ):
        self.base_url = base_url.rstrip("/")
        self.label = label
        self.timeout = float(timeout)
        self.max_bytes = int(max_bytes)
        self._client: Any = None

    def _http(self) -> Any:
        if self._client is None:
            import httpx2

            self._client = httpx2.Client(base_url=self.base_url, timeout=self.timeout)
        return self._client

    def call(self, method: str, path: str, *, body: Any = None, params: Any = None) -> Answer:
        """Send one request; raise EnvironmentUnavailable when no answer comes (refused,
        timed out, too big), else return the answer whatever its status."""
        import httpx2

        url = f"{self.base_url}{path}"
        kwargs: dict[str, Any] = {"params": params}
        if body is not None:
            kwargs["json"] = body
        try:
            with self._http().stream(method, path, **kwargs) as response:
                data = bytearray()
                for chunk in response.iter_bytes():
                    data += chunk
                    if len(data) > self.max_bytes:
                        raise EnvironmentUnavailable(
                            f"{method} {url} answered more than {self.max_bytes} bytes; the "
                            f"AgentGym server {self.label!r} is not answering as expected"
                        )
                status = response.status_code
        except httpx2.ConnectError as exc:
            raise EnvironmentUnavailable(
                f"cannot reach the AgentGym server {self.label!r} at {url} ({exc}); start it "
                "(e.g. `textcraft --host 127.0.0.1 --port 36001`) or fix base_url"
            ) from None
        except httpx2.TimeoutException:
            raise EnvironmentUnavailable(
                f"the AgentGym server {self.label!r} did not answer {method} {url} within "
                f"{self.timeout:g}s; check that it is not stuck, or raise timeout"
            ) from None
        except httpx2.HTTPError as exc:
            raise EnvironmentUnavailable(
                f"{method} {url} failed: {type(exc).__name__}: {exc}; check the AgentGym server"
            ) from None
        text = bytes(data).decode("utf-8", errors="replace")
        try:
            payload = json.loads(text)
        except ValueError:
            payload = NOT_JSON
        return Answer(method, url, status, payload, text[:300])

    def ok(self, answer: Answer, *, hint: str = "") -> Any:
        """The JSON payload of a 200 answer; any other answer raises EnvironmentUnavailable
        saying what came back and what to check."""
        if answer.status == 200 and answer.is_json:
            return answer.payload
        where = f"{answer.method} {answer.url}"
        if answer.status == 200:
            problem = f"answered with a body that is not JSON: {answer.text!r}"
        elif answer.status == 422 and _fields(answer.payload):
            problem = f"answered HTTP 422 ({_fields(answer.payload)})"
        else:
            problem = f"answered HTTP {answer.status}: {answer.text!r}"
        advice = {
            404: "the server has no such route: check base_url and env_name (each AgentGym "
            "server speaks its own protocol)",
            405: "the server has that route for another method: check env_name",
            422: "the server refused the request's fields: check env_name, create_params and "
            "reset_params against the server",
            500: "the server raised an exception (an unknown id, an item out of range, a "
            "missing dataset); see the server's log",
        }.get(answer.status, "check that base_url points at an AgentGym environment server")
        raise EnvironmentUnavailable(
            f"{where} on the AgentGym server {self.label!r} {problem}; {advice}{hint}"
        )

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def _fields(payload: Any) -> str:
    """FastAPI's 422 detail as ``body.data_idx: Field required; ...`` ('' when not that shape)."""
    detail = payload.get("detail") if isinstance(payload, dict) else None
    if not isinstance(detail, list):
        return ""
    parts = [
        f"{'.'.join(map(str, d.get('loc', [])))}: {d.get('msg', '')}"
        for d in detail
        if isinstance(d, dict)
    ]
    return "; ".join(parts)
