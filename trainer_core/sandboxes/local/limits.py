"""Resource limits of local commands.

Two mechanisms, both applied in the child between fork and exec (see
:func:`trainer_core.sandboxes.local.process.spawn`):

* rlimits (:func:`rlimits_for`): CPU seconds, address space, file size and process count,
  only ever lowering the inherited limits (:func:`lower_rlimits`);
* per-command cgroups, behind a small interface: a :class:`CgroupDriver` probes what this
  machine lets us use and creates the :class:`CommandCgroups` of one command (joined by the
  child, emptied and removed after the command). The cgroup v1 driver is in
  :mod:`trainer_core.sandboxes.local.cgroup_v1`; a cgroup v2 driver goes beside it and is
  chosen in :mod:`trainer_core.sandboxes.local.host`.
"""

from __future__ import annotations

import os
import resource
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


def lower_rlimits(rlimits: list[tuple[int, int]]) -> None:
    """Set each rlimit (soft and hard) to its value, or to the hard limit when that is lower:
    a limit is never raised. Safe between fork and exec (no Python-level locks)."""
    for which, value in rlimits:
        _soft, hard = resource.getrlimit(which)
        new = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (new, new))


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


class CommandCgroups(ABC):
    """The cgroups one command runs in (possibly none: then every method does nothing)."""

    @property
    @abstractmethod
    def procs_files(self) -> list[str]:
        """The files the child writes its pid to, between fork and exec, to join the groups."""

    @abstractmethod
    def kill(self, *, skip: set[int] | None = None) -> None:
        """SIGKILL every live process in the groups (``skip``: our own child, killed and
        reaped by the caller)."""

    @abstractmethod
    def release(self) -> None:
        """Kill what is left in the groups and remove them (a warning if one stays)."""


class CgroupDriver(ABC):
    """One cgroup version: probes this machine once, then makes the groups of each command."""

    version: str

    def __repr__(self) -> str:
        return f"<cgroup {self.version} driver>"

    @abstractmethod
    def probe(self) -> tuple[dict[str, str], str]:
        """(controller -> the directory under which we may create groups, a note on what was
        found). Controllers are ``memory`` and ``pids``; missing ones are not usable."""

    @abstractmethod
    def create(self, parents: dict[str, str], limits: SandboxLimits) -> CommandCgroups:
        """The groups of one command under ``parents``, limited by ``limits``; a controller
        whose group cannot be set up is left out (a warning; rlimits still apply)."""
