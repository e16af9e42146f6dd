"""cgroup v2 (the unified hierarchy) for local sandboxes: the ``pids`` and ``memory`` controllers.

Where: ``STEPLAB_SANDBOX_CGROUP_ROOT`` names a group of the unified hierarchy that is ours to
use (an absolute path under the cgroup2 mount, or a path inside the hierarchy; created if
missing). Without it, the first that works of ``<hierarchy root>/steplab`` (root on a VM, a
systemd host or a container's own namespace) and ``<the parent of this process's group>/steplab``
(a group systemd delegated to a user, e.g. ``systemd-run --user -p Delegate=yes``).

That base group must get ``pids`` and ``memory`` from its parent (enabled in the parent's
``cgroup.subtree_control``: we try to enable them where they are available but not enabled) and
must itself have no processes, so it can enable them for the groups below it (cgroup v2's
"no internal processes" rule). The probe enables them in the base's ``cgroup.subtree_control``,
then makes a test group, limits it and moves a process into it.

Each sandbox gets one group below the base (:class:`CgroupV2Group`) with ``pids.max``,
``memory.max`` and ``memory.swap.max = 0`` (no escaping the limit into swap) from its limits;
every command of the sandbox joins it. ``cgroup.kill`` (Linux 5.14+; else a SIGKILL per
member) empties it, and it is removed when the sandbox closes.
"""

from __future__ import annotations

import errno
import logging
import os
import time
import uuid

from trainer_core.sandboxes.base import SandboxLimits
from trainer_core.sandboxes.local import cgroupfs
from trainer_core.sandboxes.local.limits import CgroupDriver, SandboxCgroups

_log = logging.getLogger(__name__)

ROOT_SETTING = "STEPLAB_SANDBOX_CGROUP_ROOT"
CONTROLLERS = ("pids", "memory")


class CgroupV2(CgroupDriver):
    """The unified hierarchy's ``pids`` and ``memory`` controllers under a delegated group.
    ``root``: the base group (default: ``STEPLAB_SANDBOX_CGROUP_ROOT``, else found)."""

    version = "v2"

    def __init__(self, root: str | None = None) -> None:
        self.root = root if root is not None else (os.environ.get(ROOT_SETTING) or None)

    def probe(self) -> tuple[dict[str, str], str]:
        mount = unified_mount()
        if mount is None:
            return {}, "cgroup v2: no cgroup2 file system is mounted (/proc/self/mountinfo)"
        if self.root:
            candidates = [_inside(mount, self.root)]
        else:
            candidates = _candidates(mount)
        errors = []
        for base in candidates:
            err = _prepare(base)
            if err is None:
                return dict.fromkeys(CONTROLLERS, base), f"cgroup v2: {base} (pids, memory)"
            errors.append(err)
        return {}, f"cgroup v2 at {mount}: not usable ({'; '.join(errors)})"

    def create(self, parents: dict[str, str], limits: SandboxLimits) -> CgroupV2Group:
        group = os.path.join(parents["pids"], f"sandbox-{uuid.uuid4().hex}")
        os.mkdir(group)
        try:
            memory = "max" if limits.memory_mb is None else str(limits.memory_mb * 1024 * 1024)
            cgroupfs.write(os.path.join(group, "memory.max"), memory)
            cgroupfs.write(
                os.path.join(group, "pids.max"), "max" if limits.pids is None else str(limits.pids)
            )
            swap = os.path.join(group, "memory.swap.max")
            if limits.memory_mb is not None and os.path.exists(swap):
                cgroupfs.write(swap, "0")
        except OSError:
            cgroupfs.remove(group)
            raise
        return CgroupV2Group(group)


class CgroupV2Group(SandboxCgroups):
    """One sandbox's group in the unified hierarchy."""

    version = "v2"

    def __init__(self, group: str) -> None:
        super().__init__()
        self.group = group
        self._events = os.path.join(group, "cgroup.events")
        self._kill_file = os.path.join(group, "cgroup.kill")
        self._has_kill = os.path.exists(self._kill_file)

    @property
    def groups(self) -> list[str]:
        return [self.group]

    def _populated(self) -> bool:
        """Whether a live process is in the group (``populated`` in ``cgroup.events``)."""
        try:
            return "populated 1" in cgroupfs.read(self._events)
        except OSError:
            return False

    def kill(self, *, wait: float = 2.0) -> None:
        """SIGKILL everything in the group and wait (up to ``wait`` s) until it is empty;
        nothing to do, and one read, when it is empty already."""
        deadline = time.monotonic() + wait
        pause = 0.0005
        while self._populated():
            try:
                if not self._has_kill:
                    raise OSError("no cgroup.kill")
                cgroupfs.write(self._kill_file, "1")
            except OSError:
                cgroupfs.kill_members(self.group, rounds=1)
            if time.monotonic() > deadline:
                return
            time.sleep(pause)
            pause = min(pause * 2, 0.02)

    def remove(self) -> None:
        self.kill()
        if not cgroupfs.remove(self.group):
            _log.warning("could not remove cgroup %s", self.group)


def unified_mount() -> str | None:
    """Where the cgroup2 file system is mounted (``/sys/fs/cgroup`` on a pure v2 machine,
    ``/sys/fs/cgroup/unified`` on a hybrid one), or None."""
    try:
        with open("/proc/self/mountinfo") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return None
    mounts = []
    for line in lines:
        fields, _, fs = line.partition(" - ")
        if fs.split(" ", 1)[0] == "cgroup2":
            mounts.append(fields.split()[4])
    return min(mounts, key=len) if mounts else None


def own_group(mount: str) -> str | None:
    """This process's group in the unified hierarchy (a directory under ``mount``)."""
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                if line.startswith("0::"):
                    path = os.path.normpath(os.path.join(mount, line[3:].strip().lstrip("/")))
                    return path if os.path.isdir(path) else None
    except OSError:
        pass
    return None


def _inside(mount: str, root: str) -> str:
    root = os.path.normpath(root)
    if root == mount or root.startswith(mount + os.sep):
        return root
    return os.path.join(mount, root.lstrip("/"))


def _candidates(mount: str) -> list[str]:
    out = [os.path.join(mount, "steplab")]
    own = own_group(mount)
    if own is not None and own != mount:
        out.append(os.path.join(os.path.dirname(own), "steplab"))
    return list(dict.fromkeys(out))


def _prepare(base: str) -> str | None:
    """Make ``base`` ready to hold sandbox groups; None when it is, else why not."""
    created = False
    if not os.path.isdir(base):
        try:
            os.mkdir(base)
            created = True
        except OSError as exc:
            return f"cannot create {base}: {exc.strerror}"
    err = _give_controllers(base)
    if err is None:
        err = _try_group(base)
    if err is not None and created:
        cgroupfs.remove(base)
    return err


def _controllers(path: str, name: str) -> list[str]:
    try:
        return cgroupfs.read(os.path.join(path, name)).split()
    except OSError:
        return []


def _enable(group: str, controllers: list[str]) -> str | None:
    """Enable ``controllers`` for the groups below ``group``; None, or why not."""
    try:
        cgroupfs.write(
            os.path.join(group, "cgroup.subtree_control"), " ".join(f"+{c}" for c in controllers)
        )
        return None
    except OSError as exc:
        if exc.errno == errno.EBUSY:
            return (
                f"{group} has processes in it, so it cannot give controllers to groups below it "
                "(cgroup v2 allows that only to a group without processes): move its processes "
                f"into a leaf group, or set {ROOT_SETTING} to a delegated group without processes"
            )
        return f"cannot enable {', '.join(controllers)} in {group}: {exc.strerror or exc}"


def _give_controllers(base: str) -> str | None:
    parent = os.path.dirname(base)
    missing = [c for c in CONTROLLERS if c not in _controllers(base, "cgroup.controllers")]
    if missing:
        available = _controllers(parent, "cgroup.controllers")
        if any(c not in available for c in missing):
            held = [c for c in missing if os.path.isdir(f"/sys/fs/cgroup/{c}")]
            why = f" (cgroup v1 holds {', '.join(held)} on this machine)" if held else ""
            return (
                f"{parent} has no {', '.join(c for c in missing if c not in available)} "
                f"controller to give (its cgroup.controllers: {' '.join(available) or 'none'}){why}"
            )
        err = _enable(parent, missing)
        if err is not None:
            return err
    enabled = _controllers(base, "cgroup.subtree_control")
    todo = [c for c in CONTROLLERS if c not in enabled]
    return _enable(base, todo) if todo else None


def _try_group(base: str) -> str | None:
    group = os.path.join(base, f"steplab-probe-{uuid.uuid4().hex[:12]}")
    try:
        os.mkdir(group)
    except OSError as exc:
        return f"cannot create a group under {base}: {exc.strerror}"
    try:
        cgroupfs.write(os.path.join(group, "pids.max"), "64")
        cgroupfs.write(os.path.join(group, "memory.max"), str(256 * 1024 * 1024))
        return cgroupfs.try_join(group)
    except OSError as exc:
        return f"cannot limit a group under {base}: {exc.strerror or exc}"
    finally:
        cgroupfs.remove(group)
