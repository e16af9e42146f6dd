"""Process control of the docker backend's commands, on the client side.

An exec is started with the connection hijacked (:func:`start_exec`); a thread reads its
multiplexed output stream into two capped captures (:func:`pump`). :func:`wait` guards the
deadline: the command's own ``timeout`` inside the container should end it, but if the exec
has not ended :data:`_BACKSTOP` seconds after the deadline the command is killed (the caller's
``kill``, a second exec), and if the stream still does not end it is cut (:func:`cancel`).
:func:`exit_code` polls the exec's exit code and :func:`final_exit_code` decides how the
command ended.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from trainer_core.errors import SandboxError
from trainer_core.sandboxes.shared import TIMEOUT_EXIT_CODE, OutputCapture

_BACKSTOP = 0.5  # the exec is still running this long after its deadline: kill it from here
_DRAIN_AFTER_KILL = 1.5  # after that kill, how long to wait for the stream to end


@dataclass(eq=False)
class Run:
    """One command running in the container."""

    run_id: str
    out: OutputCapture
    err: OutputCapture
    exec_id: str | None = None
    response: Any = None
    done: threading.Event = field(default_factory=threading.Event)
    killed: bool = False
    interrupted: bool = False
    cancelled: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)


def start_exec(api: Any, exec_id: str) -> Any:
    """POST /exec/{id}/start with the connection hijacked; returns the raw response. (The
    SDK's own readers read the socket under the HTTP layer's buffer, which can hold the
    first output bytes; :func:`pump` reads through that buffer instead.)"""
    response = api._post_json(
        api._url("/exec/{0}/start", exec_id),
        headers={"Connection": "Upgrade", "Upgrade": "tcp"},
        data={"Tty": False, "Detach": False},
        stream=True,
    )
    api._raise_for_status(response)
    raw_sock = _raw_socket(response)
    if raw_sock is not None:
        raw_sock.settimeout(None)  # a quiet command may run longer than client_timeout
    return response


def pump(run: Run) -> None:
    """Reads the multiplexed output stream (8-byte frame headers: stream, 0, 0, 0, size)."""
    try:
        fp = run.response.raw._fp.fp
        while True:
            header = _read_exactly(fp, 8)
            if len(header) < 8:
                break
            size = int.from_bytes(header[4:8], "big")
            payload = _read_exactly(fp, size)
            (run.err if header[0] == 2 else run.out).add(payload)
            if len(payload) < size:
                break
    except (OSError, ValueError, AttributeError):
        pass  # cut by cancel(), or the container went away
    finally:
        run.done.set()


def wait(run: Run, deadline: float, kill: Callable[[Run], None]) -> bool:
    """Until the output stream ends, with the client-side deadline backstop (see the module
    docstring); whether the backstop had to kill the command (it timed out)."""
    timed_out = False
    give_up_at: float | None = None
    while not run.done.is_set():
        now = time.monotonic()
        if not run.killed and now >= deadline + _BACKSTOP:
            timed_out = True
            kill(run)
            give_up_at = time.monotonic() + _DRAIN_AFTER_KILL
        elif run.killed and give_up_at is None:  # interrupt() from another thread
            give_up_at = now + _DRAIN_AFTER_KILL
        if give_up_at is not None and now >= give_up_at:
            cancel(run)
            break
        limit = give_up_at if give_up_at is not None else deadline + _BACKSTOP
        run.done.wait(max(0.01, min(0.25, limit - now)))
    return timed_out


def cancel(run: Run) -> None:
    """Cut the output stream (a reader blocked on it wakes up with EOF)."""
    run.cancelled = True
    sock = _raw_socket(run.response)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def exit_code(api: Any, run: Run) -> int | None:
    """The exec's exit code, waiting up to 3 s for it to stop running; None when unknown."""
    if run.exec_id is None:
        return None
    end = time.monotonic() + 3.0
    while True:
        try:
            state = api.exec_inspect(run.exec_id)
        except Exception:
            return None
        if not state.get("Running") or time.monotonic() > end:
            code = state.get("ExitCode")
            return code if isinstance(code, int) and not state.get("Running") else None
        time.sleep(0.01)


def final_exit_code(
    run: Run, code: int | None, *, timed_out: bool, duration: float, wall: float, what: str
) -> tuple[int, bool]:
    """(exit code, timed out) of a finished run: 124 on timeout (also when ``timeout`` inside
    the container killed it), -SIGKILL when interrupted; SandboxError when the code was lost."""
    if code == 128 + signal.SIGKILL and duration >= wall and not run.interrupted:
        timed_out = True  # timeout(1) inside the container killed it
    if timed_out:
        return TIMEOUT_EXIT_CODE, True
    if run.interrupted:
        return -signal.SIGKILL, False
    if code is None:
        raise SandboxError(
            f"lost track of {what!r} in the sandbox container (no exit code); "
            "the container may be gone"
        )
    return code, False


def close_response(response: Any) -> None:
    if response is None:
        return
    try:
        response.close()
    except Exception:  # noqa: S110 - best effort
        pass


def _raw_socket(response: Any) -> socket.socket | None:
    try:
        raw = response.raw._fp.fp.raw  # SocketIO under the HTTP layer's buffer
    except AttributeError:
        return None
    return getattr(raw, "_sock", None) or (raw if isinstance(raw, socket.socket) else None)


def _read_exactly(fp: Any, n: int) -> bytes:
    chunks = []
    while n > 0:
        chunk = fp.read(n)
        if not chunk:
            break
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)
