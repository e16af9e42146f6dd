"""The Sandbox protocol and its value types."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field


@dataclass(frozen=True)
class SandboxLimits:
    """Limits applied to every command. ``None`` means "no limit of this kind"."""

    wall_seconds: float = 30.0  # default per-command timeout; the process group is killed
    cpu_seconds: int | None = 60
    memory_mb: int | None = 1024
    pids: int | None = 256
    file_size_mb: int | None = 64
    output_bytes: int = 64_000  # stdout and stderr are each truncated to this many bytes
    network: bool = False


@dataclass(frozen=True)
class ExecResult:
    stdout: str
    stderr: str
    exit_code: int
    duration: float
    timed_out: bool = False
    truncated: bool = False  # output was cut to SandboxLimits.output_bytes

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out


@dataclass
class SandboxInfo:
    backend: str
    isolated: bool  # False: commands run without isolation (a warning was logged)
    details: dict = field(default_factory=dict)


class Sandbox(ABC):
    """A workspace where commands run. Paths are relative to the workspace root."""

    limits: SandboxLimits

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def exec(
        self, cmd: str | list[str], *, timeout: float | None = None, stdin: str | None = None
    ) -> ExecResult:
        """Run ``cmd`` in the workspace. A list is an argv run without a shell; a string is a
        shell command (``bash -c``), used only by the agent's own ``bash`` tool."""

    @abstractmethod
    def read_file(self, path: str) -> bytes: ...

    @abstractmethod
    def write_file(self, path: str, content: str | bytes) -> None: ...

    @abstractmethod
    def snapshot(self) -> str:
        """Save the workspace; returns an id for ``restore``."""

    @abstractmethod
    def restore(self, snapshot_id: str) -> None: ...

    @abstractmethod
    def reset(self) -> None:
        """Back to the workspace as it was right after ``start`` (and the task's setup)."""

    @abstractmethod
    def close(self) -> None: ...

    def interrupt(self) -> None:  # noqa: B027 - optional hook, a no-op by default
        """Kill the command running now, if any (called from another thread)."""

    @property
    @abstractmethod
    def info(self) -> SandboxInfo: ...

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
