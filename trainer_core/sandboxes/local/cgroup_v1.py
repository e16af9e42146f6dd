"""cgroup v1 for local sandboxes: the ``memory`` and ``pids`` controllers.

:class:`CgroupV1` probes which controllers let us create a group, limit it and move a process
into it (under this process's own group, keeping the outer accounting, or else under the
controller's root), and makes one group per controller for each sandbox
(:class:`CgroupV1Groups`: ``memory.limit_in_bytes`` and, where present,
``memory.memsw.limit_in_bytes`` so there is no escaping into swap; ``pids.max``). Every command
of the sandbox joins them; when the sandbox closes, whatever is left in them is killed and the
groups are removed.
"""

from __future__ import annotations

import logging
import os
import uuid

from trainer_core.sandboxes.base import SandboxLimits
from trainer_core.sandboxes.local import cgroupfs
from trainer_core.sandboxes.local.limits import CgroupDriver, SandboxCgroups

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
        return parents, "cgroup v1: " + "; ".join(notes)

    def create(self, parents: dict[str, str], limits: SandboxLimits) -> CgroupV1Groups:
        name = f"steplab-{uuid.uuid4().hex}"
        wanted = {
            "memory": None if limits.memory_mb is None else limits.memory_mb * 1024 * 1024,
            "pids": limits.pids,
        }
        groups = CgroupV1Groups([])
        try:
            for controller, parent in parents.items():
                group = os.path.join(parent, name)
                os.mkdir(group)
                groups.dirs.append(group)
                if wanted.get(controller) is not None:
                    _set_limit(group, controller, wanted[controller])
        except OSError:
            groups.remove()
            raise
        return groups


class CgroupV1Groups(SandboxCgroups):
    """One sandbox's groups: one directory per controller."""

    version = "v1"

    def __init__(self, dirs: list[str]) -> None:
        super().__init__()
        self.dirs = dirs

    @property
    def groups(self) -> list[str]:
        return self.dirs

    def kill(self) -> None:
        for group in self.dirs:
            cgroupfs.kill_members(group)

    def remove(self) -> None:
        for group in self.dirs:
            cgroupfs.kill_members(group)
            if not cgroupfs.remove(group):
                _log.warning("could not remove cgroup %s", group)


def _set_limit(group: str, controller: str, value: int) -> None:
    cgroupfs.write(os.path.join(group, _LIMIT_FILES[controller]), str(value))
    if controller != "memory":
        return
    memsw = os.path.join(group, "memory.memsw.limit_in_bytes")
    if os.path.exists(memsw):  # no escaping the limit into swap
        try:
            cgroupfs.write(memsw, str(value))
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
    try:
        os.mkdir(group)
    except OSError as exc:
        return f"cannot create a group under {parent}: {exc.strerror}"
    try:
        cgroupfs.write(os.path.join(group, limit_file), value)
        return cgroupfs.try_join(group)
    except OSError as exc:
        return f"cannot use a group under {parent}: {exc.strerror or exc}"
    finally:
        cgroupfs.remove(group)
