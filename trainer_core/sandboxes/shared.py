"""What both sandbox backends (``local`` and ``docker``) share.

The environment a command sees (:func:`command_env`: nothing of the host's), the checks on
``exec``'s arguments and on workspace paths, the capture of a command's output with its
truncation (:class:`OutputCapture`) and the :class:`ExecResult` built from it, the exit code of
a timed-out command, and :class:`WorkspaceSandbox`: the part of the lifecycle both backends
have in common (setup commands and the baseline, ``reset``, ``interrupt``, snapshot ids, the
started/closed checks).
"""

from __future__ import annotations

import re
import threading
from abc import abstractmethod
from collections.abc import Callable
from typing import Any

from trainer_core.errors import SandboxError
from trainer_core.sandboxes.base import ExecResult, Sandbox, SandboxLimits

SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
SANDBOX_WORKDIR = "/work"  # where the workspace appears inside the sandbox
GIT_NAME = "Steplab Agent"
GIT_EMAIL = "agent@steplab.invalid"
TIMEOUT_EXIT_CODE = 124  # like coreutils' timeout(1)

_SNAPSHOT_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def command_env(isolated: bool, workspace: str | None = None) -> dict[str, str]:
    """The whole environment a command sees: nothing of the host's (no secrets leak in)."""
    home = SANDBOX_WORKDIR if isolated else (workspace or SANDBOX_WORKDIR)
    return {
        "PATH": SANDBOX_PATH,
        "HOME": home,
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "TMPDIR": "/tmp",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": GIT_NAME,
        "GIT_AUTHOR_EMAIL": GIT_EMAIL,
        "GIT_COMMITTER_NAME": GIT_NAME,
        "GIT_COMMITTER_EMAIL": GIT_EMAIL,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",
        "PAGER": "cat",
    }


# --- exec's arguments and workspace paths -------------------------------------------------------


def exec_argv(cmd: str | list[str], shell: Callable[[], str]) -> list[str]:
    """The argv ``exec`` runs: a list as given, a string as ``[shell(), "-c", cmd]``."""
    if isinstance(cmd, str):
        argv = [shell(), "-c", cmd]
    elif isinstance(cmd, list | tuple) and cmd and all(isinstance(a, str) for a in cmd):
        argv = list(cmd)
    else:
        raise SandboxError("exec() takes a shell string or a non-empty list of strings (argv)")
    if any("\x00" in a for a in argv):
        raise SandboxError("a command must not contain NUL bytes (argv cannot carry them)")
    return argv


def wall_seconds(limits: SandboxLimits, timeout: float | None) -> float:
    """The wall-time limit of one command: ``timeout`` if given, else ``limits.wall_seconds``."""
    wall = limits.wall_seconds if timeout is None else float(timeout)
    if wall <= 0:
        raise SandboxError(f"timeout must be positive, got {timeout!r}")
    return wall


def check_relative_path(path: str) -> None:
    """SandboxError unless ``path`` is a non-empty, NUL-free path relative to the workspace."""
    if not isinstance(path, str) or not path.strip():
        raise SandboxError("path must be a non-empty string relative to the workspace root")
    if "\x00" in path:
        raise SandboxError("path must not contain NUL bytes")
    if path.startswith("/"):
        raise SandboxError(
            f"{path!r} is an absolute path; give a path relative to the workspace root "
            "(e.g. 'src/main.py')"
        )


# --- output and results ------------------------------------------------------------------------


class OutputCapture:
    """Keeps the first ``cap`` bytes of a stream and counts the rest."""

    def __init__(self, cap: int) -> None:
        self.cap = max(0, cap)
        self.chunks: list[bytes] = []
        self.kept = 0
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.cap - self.kept
        if room > 0:
            part = data[:room]
            self.chunks.append(part)
            self.kept += len(part)
            self.dropped += len(data) - len(part)
        else:
            self.dropped += len(data)

    def text(self) -> str:
        out = b"".join(self.chunks).decode("utf-8", errors="replace")
        if self.dropped:
            if out and not out.endswith("\n"):
                out += "\n"
            out += f"[... output truncated: {self.dropped} bytes dropped ...]\n"
        return out


def exec_result(
    out: OutputCapture, err: OutputCapture, *, exit_code: int, duration: float, timed_out: bool
) -> ExecResult:
    """The result of one command from its two captured streams."""
    return ExecResult(
        stdout=out.text(),
        stderr=err.text(),
        exit_code=exit_code,
        duration=duration,
        timed_out=timed_out,
        truncated=bool(out.dropped or err.dropped),
    )


# --- the lifecycle both backends share ---------------------------------------------------------


class WorkspaceSandbox(Sandbox):
    """A :class:`Sandbox` with a baseline snapshot and a set of running commands.

    A backend implements :meth:`_is_started` and :meth:`_kill` (of one of its runs), keeps its
    snapshots in ``_snapshots`` (id -> whatever it stores) and calls :meth:`_setup_baseline`
    at the end of ``start()``.
    """

    def __init__(self, limits: SandboxLimits, setup: list[str] | None) -> None:
        self.limits = limits
        self._setup = list(setup or [])
        self._snapshots: dict[str, Any] = {}
        self._baseline: str | None = None
        self._lock = threading.Lock()
        self._running: set[Any] = set()
        self._closed = False

    @abstractmethod
    def _is_started(self) -> bool:
        """Whether ``start()`` got as far as having a workspace."""

    @abstractmethod
    def _kill(self, run: Any) -> None:
        """Kill one running command (its ``interrupted`` flag is already set)."""

    def _setup_baseline(self) -> None:
        """Run each setup command (SandboxError on the first that fails), then snapshot the
        workspace: the baseline ``reset()`` returns to."""
        for command in self._setup:
            result = self.exec(command)
            if not result.ok:
                why = (
                    f"timed out after {self.limits.wall_seconds}s"
                    if result.timed_out
                    else f"exit code {result.exit_code}"
                )
                detail = (result.stderr.strip() or result.stdout.strip())[-2000:]
                raise SandboxError(
                    f"setup command {command!r} failed ({why}): {detail or '(no output)'}"
                )
        self._baseline = self.snapshot()

    def _stored_snapshot(self, snapshot_id: str) -> Any:
        """What ``snapshot()`` stored under ``snapshot_id``; SandboxError if there is none."""
        if not isinstance(snapshot_id, str) or not _SNAPSHOT_ID.match(snapshot_id):
            raise SandboxError(f"{snapshot_id!r} is not a snapshot id")
        stored = self._snapshots.get(snapshot_id)
        if stored is None:
            raise SandboxError(f"no snapshot {snapshot_id!r} in this sandbox")
        return stored

    def reset(self) -> None:
        self._require_started()
        if self._baseline is None:
            raise SandboxError("no baseline yet: start() did not finish")
        self.restore(self._baseline)

    def interrupt(self) -> None:
        with self._lock:
            runs = list(self._running)
        for run in runs:
            run.interrupted = True
            self._kill(run)

    def _require_started(self) -> None:
        if self._closed:
            raise SandboxError("this sandbox is closed")
        if not self._is_started():
            raise SandboxError(
                "this sandbox is not started; call start() or use it in a with block"
            )
