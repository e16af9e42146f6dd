"""What this machine gives the local backend, probed once per process (:func:`host_support`):
a ``bwrap`` that can run a test sandbox, and the cgroup driver (v1 or v2) with the controllers
we may use. Also the warnings logged when commands run without isolation or containment, and
the refusal to run them without containment unless ``STEPLAB_SANDBOX_UNCONTAINED=1``."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import tempfile
import threading
import warnings
from dataclasses import dataclass, field

from trainer_core.errors import SandboxError
from trainer_core.sandboxes.base import SandboxLimits
from trainer_core.sandboxes.local.cgroup_v1 import CgroupV1
from trainer_core.sandboxes.local.cgroup_v2 import ROOT_SETTING, CgroupV2
from trainer_core.sandboxes.local.command import bwrap_argv
from trainer_core.sandboxes.local.limits import CgroupDriver, NoCgroups, SandboxCgroups
from trainer_core.sandboxes.shared import command_env

_log = logging.getLogger(__name__)

UNCONTAINED_SETTING = "STEPLAB_SANDBOX_UNCONTAINED"
CONTAINMENT_HELP = (
    "cgroup v1: run as root with the memory and pids controllers mounted under /sys/fs/cgroup; "
    "cgroup v2: a group of the unified hierarchy this user may write, given pids and memory by "
    "its parent and holding no processes (as root: mkdir /sys/fs/cgroup/steplab and enable "
    "+pids +memory in /sys/fs/cgroup/cgroup.subtree_control; as a user: a group in the part of "
    f"the hierarchy systemd delegates to that user, under user@UID.service), named by "
    f"{ROOT_SETTING} (found by itself in those two places); or set {UNCONTAINED_SETTING}=1 to run commands "
    "anyway with rlimits only (no memory limit across processes; as root nothing but the wall "
    "time bounds a fork bomb)"
)


@dataclass(frozen=True)
class HostSupport:
    """What the local backend can use on this machine."""

    bwrap: str | None  # path of a bwrap that ran a test sandbox, else None
    bwrap_detail: str
    cgroup_parents: dict[str, str] = field(default_factory=dict)  # controller -> parent dir
    cgroup_detail: str = ""
    cgroup_driver: CgroupDriver = field(default_factory=CgroupV1)  # made cgroup_parents

    @property
    def cgroup_memory(self) -> bool:
        return "memory" in self.cgroup_parents

    @property
    def cgroup_pids(self) -> bool:
        return "pids" in self.cgroup_parents

    @property
    def cgroup_version(self) -> str | None:
        """``v1`` or ``v2`` where a cgroup controller is usable, else None."""
        return self.cgroup_driver.version if self.cgroup_parents else None

    @property
    def contained(self) -> bool:
        """Whether commands run in cgroups that bound their memory and process count."""
        return self.cgroup_memory and self.cgroup_pids

    def sandbox_cgroups(self, limits: SandboxLimits) -> SandboxCgroups:
        """The cgroups of one sandbox, made now. Without containment: SandboxError, unless
        ``STEPLAB_SANDBOX_UNCONTAINED=1`` (then none, with a warning once per process)."""
        if self.contained:
            try:
                return self.cgroup_driver.create(self.cgroup_parents, limits)
            except OSError as exc:
                problem = f"cannot create the sandbox's cgroup ({exc})"
        else:
            missing = [c for c in ("memory", "pids") if c not in self.cgroup_parents]
            problem = (
                f"no usable {' or '.join(missing)} cgroup on this machine ({self.cgroup_detail})"
            )
        if not uncontained_allowed():
            raise SandboxError(
                f"the local sandbox will not run commands without containment: {problem}. "
                f"To fix: {CONTAINMENT_HELP}."
            )
        _warn_once(
            "uncontained",
            f"LocalSandbox: {problem}; commands run WITHOUT cgroup containment because "
            f"{UNCONTAINED_SETTING}=1 (rlimits only)",
        )
        return NoCgroups()


def uncontained_allowed() -> bool:
    return os.environ.get(UNCONTAINED_SETTING, "").strip().lower() in ("1", "true", "yes")


_support: HostSupport | None = None
_support_lock = threading.Lock()
_warned: set[str] = set()


def host_support() -> HostSupport:
    """Probe bubblewrap and cgroups once per process (a trivial sandboxed ``/bin/true``)."""
    global _support
    with _support_lock:
        if _support is None:
            bwrap, bwrap_detail = _probe_bwrap()
            driver, parents, cgroup_detail = probe_cgroups()
            _support = HostSupport(bwrap, bwrap_detail, parents, cgroup_detail, driver)
        return _support


def probe_cgroups(version: str = "auto") -> tuple[CgroupDriver, dict[str, str], str]:
    """(the driver, controller -> parent directory, what was found) for cgroup ``version``:
    ``v1``, ``v2`` or ``auto``: v1 then v2, the first that gives both memory and pids, else the
    one that gives most; only v2 when STEPLAB_SANDBOX_CGROUP_ROOT names a group (a setting that
    does not work is reported, never silently replaced)."""
    if version == "auto":
        order = ["v2"] if os.environ.get(ROOT_SETTING) else ["v1", "v2"]
    elif version in ("v1", "v2"):
        order = [version]
    else:
        raise ValueError(f"cgroup version {version!r}: use v1, v2 or auto")
    found = []
    for name in order:
        driver: CgroupDriver = CgroupV1() if name == "v1" else CgroupV2()
        parents, detail = driver.probe()
        if len(parents) == 2:
            return driver, parents, detail
        found.append((driver, parents, detail))
    driver, parents, _ = max(found, key=lambda item: len(item[1]))
    return driver, parents, "; ".join(detail for _, _, detail in found)


def _probe_bwrap() -> tuple[str | None, str]:
    path = shutil.which("bwrap")
    if not path:
        return None, "bwrap not found on PATH (apt-get install bubblewrap)"
    probe_dir = tempfile.mkdtemp(prefix="steplab-bwrap-probe-")
    try:
        argv = bwrap_argv(path, probe_dir, network=False) + ["/bin/true"]
        proc = subprocess.run(  # noqa: S603 - fixed argv
            argv, capture_output=True, text=True, timeout=20, check=False, env=command_env(True)
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{path} could not run a test sandbox: {exc}"
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
    if proc.returncode != 0:
        reason = (proc.stderr or proc.stdout).strip()[:300]
        return None, f"{path} failed to run a test sandbox (exit {proc.returncode}): {reason}"
    return path, f"{path} ran a test sandbox"


def warn_unisolated(reason: str) -> None:
    """Log (and warn, once per process) that commands run WITHOUT isolation."""
    _warn_once(
        "unisolated",
        f"LocalSandbox: bubblewrap is not usable ({reason}); commands run WITHOUT isolation "
        "(host filesystem and network visible), only with rlimits/cgroups",
    )


def _warn_once(kind: str, message: str) -> None:
    with _support_lock:
        if kind in _warned:
            return
        _warned.add(kind)
    _log.warning(message)
    warnings.warn(message, RuntimeWarning, stacklevel=4)
