"""cgroup v1 for local commands: the ``memory`` and ``pids`` controllers.

:class:`CgroupV1` probes which controllers let us create a group, limit it and move a process
into it (under this process's own group, keeping the outer accounting, or else under the
controller's root), and makes one group per controller for each command
(:class:`CgroupV1Groups`: ``memory.limit_in_bytes`` and, where present,
``memory.memsw.limit_in_bytes`` so there is no escaping into swap; ``pids.max``). After the
command, whatever is left in the groups is killed and the groups are removed.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import time
import uuid

from trainer_core.sandboxes.base import SandboxLimits
from trainer_core.sandboxes.local.limits import CgroupDriver, CommandCgroups

_log = logging.getLogger(__name__)

_LIMIT_FILES = {"memory": "memory.limit_in_bytes", "pids": "pids.max"}


class CgroupV1(CgroupDriver):
    """The cgroup v1 ``memory`` and ``pids`` controllers under ``/sys/fs/cgroup``."""

    version = "v1"

    def probe(self) -> tuple[dict[str, str], str]:
        limit_values = {"memory": str(256 * 1024 * 1024), "pids": "64"}
        parents: dict[str, str] = {}
        notes: list[str] = []
        for controller, limit_file in _LIMIT_FILES.items():
            mount, own = _own_cgroup_dir(controller)
            if not os.path.isfile(os.path.join(mount, "cgroup.procs")):
                notes.append(f"{controller}: no cgroup v1 controller at {mount}")
                continue
            errors = []
            for parent in dict.fromkeys((own, mount)):
                err = _try_cgroup(parent, limit_file, limit_values[controller])
                if err is None:
                    parents[controller] = parent
                    notes.append(f"{controller}: {parent}")
                    break
                errors.append(err)
            else:
                notes.append(f"{controller}: not usable ({'; '.join(errors)})")
        return parents, "; ".join(notes)

    def create(self, parents: dict[str, str], limits: SandboxLimits) -> CgroupV1Groups:
        name = f"steplab-{uuid.uuid4().hex}"
        wanted = {
            "memory": None if limits.memory_mb is None else limits.memory_mb * 1024 * 1024,
            "pids": limits.pids,
        }
        groups = []
        for controller, parent in parents.items():
            value = wanted.get(controller)
            if value is None:
                continue
            group = os.path.join(parent, name)
            try:
                os.mkdir(group)
                _set_limit(group, controller, value)
            except OSError as exc:
                _log.warning("cgroup %s unusable (%s); falling back to rlimits", group, exc)
                _remove_cgroup(group)
                continue
            groups.append(group)
        return CgroupV1Groups(groups)


class CgroupV1Groups(CommandCgroups):
    """One command's groups: one directory per controller."""

    def __init__(self, groups: list[str]) -> None:
        self.groups = groups

    @property
    def procs_files(self) -> list[str]:
        return [os.path.join(group, "cgroup.procs") for group in self.groups]

    def kill(self, *, skip: set[int] | None = None) -> None:
        for group in self.groups:
            _kill_cgroup(group, skip=skip)

    def release(self) -> None:
        for group in self.groups:
            _kill_cgroup(group)
            if not _remove_cgroup(group):
                _log.warning("could not remove cgroup %s", group)


def _set_limit(group: str, controller: str, value: int) -> None:
    _write(os.path.join(group, _LIMIT_FILES[controller]), str(value))
    if controller != "memory":
        return
    memsw = os.path.join(group, "memory.memsw.limit_in_bytes")
    if os.path.exists(memsw):  # no escaping the limit into swap
        try:
            _write(memsw, str(value))
        except OSError:
            pass


def _own_cgroup_dir(controller: str) -> tuple[str, str]:
    """(the controller's mount, this process's group under it if visible, else the mount)."""
    mount = os.path.join("/sys/fs/cgroup", controller)
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                parts = line.rstrip("\n").split(":", 2)
                if len(parts) == 3 and controller in parts[1].split(","):
                    own = os.path.normpath(os.path.join(mount, parts[2].lstrip("/")))
                    if os.path.isdir(own):
                        return mount, own
    except OSError:
        pass
    return mount, mount


def _try_cgroup(parent: str, limit_file: str, value: str) -> str | None:
    group = os.path.join(parent, f"steplab-probe-{uuid.uuid4().hex[:12]}")
    proc = None
    try:
        os.mkdir(group)
    except OSError as exc:
        return f"cannot create a group under {parent}: {exc.strerror}"
    try:
        _write(os.path.join(group, limit_file), value)
        proc = subprocess.Popen(["sleep", "5"], stdin=subprocess.DEVNULL)  # noqa: S603, S607
        _write(os.path.join(group, "cgroup.procs"), str(proc.pid))
        if str(proc.pid) not in _read_pids(group, raw=True):
            return f"a process moved into {group} did not show up there"
        return None
    except OSError as exc:
        return f"cannot use a group under {parent}: {exc.strerror or exc}"
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()
        _remove_cgroup(group)


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _read_pids(group: str, *, raw: bool = False) -> list:
    try:
        with open(os.path.join(group, "cgroup.procs")) as fh:
            items = fh.read().split()
    except OSError:
        return []
    return items if raw else [int(p) for p in items if p.isdigit()]


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True  # gone


def _kill_cgroup(group: str, *, rounds: int = 50, skip: set[int] | None = None) -> None:
    """SIGKILL everything in ``group`` until only zombies are left (a fork bomb may race us a
    little). ``skip``: our own child, killed and reaped by the caller."""
    pause = 0.0005
    for _ in range(rounds):
        pids = [p for p in _read_pids(group) if p not in (skip or ()) and not _is_zombie(p)]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


def _remove_cgroup(group: str, *, wait: float = 2.0) -> bool:
    """rmdir a cgroup (it fails while dying processes are still in it; retry for a while)."""
    deadline = time.monotonic() + wait
    pause = 0.0005
    while True:
        try:
            os.rmdir(group)
            return True
        except FileNotFoundError:
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            _kill_cgroup(group, rounds=1)
            time.sleep(pause)
            pause = min(pause * 2, 0.02)
