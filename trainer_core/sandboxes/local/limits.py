"""Resource limits of local commands.

Two mechanisms, both applied before the command runs (see
:func:`trainer_core.sandboxes.local.process.spawn`):

* rlimits (:func:`rlimits_for`): CPU seconds, address space, file size and process count,
  only ever lowering the inherited limits (:func:`lower_rlimits`);
* cgroups, made once per sandbox, behind a small interface: a :class:`CgroupDriver` probes
  what this machine lets us use and creates the :class:`SandboxCgroups` of one sandbox (joined
  by the child of each command through its :class:`CommandCgroups`, emptied after each
  command, removed when the sandbox closes). The drivers are
  :mod:`trainer_core.sandboxes.local.cgroup_v1` and :mod:`trainer_core.sandboxes.local.cgroup_v2`,
  chosen in :mod:`trainer_core.sandboxes.local.host`.
"""

from __future__ import annotations

import os
import resource
import threading
from abc import ABC, abstractmethod

from trainer_core.sandboxes.base import SandboxLimits

# --- rlimits -----------------------------------------------------------------------------------


def rlimits_for(limits: SandboxLimits, *, isolated: bool) -> list[tuple[int, int]]:
    """The (resource, value) pairs to set in the child of one command."""
    out: list[tuple[int, int]] = []
    if limits.cpu_seconds is not None:
        out.append((resource.RLIMIT_CPU, int(limits.cpu_seconds)))
    if limits.memory_mb is not None:
        out.append((resource.RLIMIT_AS, int(limits.memory_mb) * 1024 * 1024))
    if limits.file_size_mb is not None:
        out.append((resource.RLIMIT_FSIZE, int(limits.file_size_mb) * 1024 * 1024))
    if limits.pids is not None:
        # In a user namespace (bubblewrap) the count starts at zero; without one it counts
        # every process of this user, so leave room for those. Root is exempt either way.
        base = 0 if isolated else _count_user_processes(os.geteuid())
        out.append((resource.RLIMIT_NPROC, base + int(limits.pids)))
    return out


def lower_rlimits(rlimits: list[tuple[int, int]], pid: int = 0) -> None:
    """Set each rlimit (soft and hard) of process ``pid`` (0: this one) to its value, or to its
    hard limit when that is lower: a limit is never raised. Safe between fork and exec (no
    Python-level locks)."""
    for which, value in rlimits:
        _soft, hard = resource.prlimit(pid, which)
        new = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.prlimit(pid, which, (new, new))


def _count_user_processes(uid: int) -> int:
    count = 0
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.stat(f"/proc/{entry}").st_uid == uid:
                    count += 1
            except OSError:
                pass
    return count


# --- cgroups: the interface a cgroup version implements ----------------------------------------


class SandboxCgroups(ABC):
    """The cgroups of one sandbox: made when it starts (limited by its :class:`SandboxLimits`),
    joined by each of its commands, emptied after each command and removed when it closes."""

    version: str = ""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running = 0  # commands running now

    @property
    @abstractmethod
    def groups(self) -> list[str]:
        """The group directories (empty where this machine has none)."""

    @property
    def procs_files(self) -> list[str]:
        """The files a pid is written to, to move that process into the groups."""
        return [os.path.join(group, "cgroup.procs") for group in self.groups]

    @abstractmethod
    def kill(self) -> None:
        """SIGKILL every live process in the groups."""

    @abstractmethod
    def remove(self) -> None:
        """Kill what is left in the groups and remove them (a warning if one stays)."""

    def command(self) -> CommandCgroups:
        """The groups as one command sees them (see :class:`CommandCgroups`)."""
        return CommandCgroups(self)


class NoCgroups(SandboxCgroups):
    """A sandbox without cgroups (only where running uncontained was allowed)."""

    @property
    def groups(self) -> list[str]:
        return []

    def kill(self) -> None:
        pass

    def remove(self) -> None:
        pass


class CommandCgroups:
    """One command's view of its sandbox's groups. It joins them; it kills everything in them
    (on timeout, interrupt and after it ended, for what it left behind) only while it is the
    sandbox's one running command, so a command never takes a concurrent one down with it (its
    own process group and PID namespace still die with it)."""

    def __init__(self, sandbox: SandboxCgroups) -> None:
        self.sandbox = sandbox
        self._released = False
        with sandbox._lock:
            sandbox._running += 1

    @property
    def procs_files(self) -> list[str]:
        return self.sandbox.procs_files

    def _alone(self) -> bool:
        with self.sandbox._lock:
            return self.sandbox._running <= 1

    def kill(self) -> None:
        """SIGKILL everything in the groups, if this is the sandbox's only running command."""
        if self.sandbox.groups and self._alone():
            self.sandbox.kill()

    def release(self) -> None:
        """The command is over: kill what it left in the groups (if it was the only one)."""
        if self._released:
            return
        self._released = True
        if self.sandbox.groups and self._alone():
            self.sandbox.kill()
        with self.sandbox._lock:
            self.sandbox._running -= 1


class CgroupDriver(ABC):
    """One cgroup version: probes this machine once, then makes the groups of each sandbox."""

    version: str

    def __repr__(self) -> str:
        return f"<cgroup {self.version} driver>"

    @abstractmethod
    def probe(self) -> tuple[dict[str, str], str]:
        """(controller -> the directory under which we may create groups, a note on what was
        found). Controllers are ``memory`` and ``pids``; missing ones are not usable."""

    @abstractmethod
    def create(self, parents: dict[str, str], limits: SandboxLimits) -> SandboxCgroups:
        """The groups of one sandbox under ``parents``, limited by ``limits``. OSError when a
        group cannot be made or limited (nothing is left behind then)."""
