"""What this machine gives the local backend, probed once per process (:func:`host_support`):
a ``bwrap`` that can run a test sandbox, and the cgroup driver with the controllers we may use.
Also the one warning logged when commands have to run without isolation."""

from __future__ import annotations

import logging
import shutil
import subprocess
import tempfile
import threading
import warnings
from dataclasses import dataclass, field

from trainer_core.sandboxes.base import SandboxLimits
from trainer_core.sandboxes.local.cgroup_v1 import CgroupV1
from trainer_core.sandboxes.local.command import bwrap_argv
from trainer_core.sandboxes.local.limits import CgroupDriver, CommandCgroups
from trainer_core.sandboxes.shared import command_env

_log = logging.getLogger(__name__)


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

    def command_cgroups(self, limits: SandboxLimits) -> CommandCgroups:
        """The cgroups of one command (created now; none where this machine has none)."""
        return self.cgroup_driver.create(self.cgroup_parents, limits)


_support: HostSupport | None = None
_support_lock = threading.Lock()
_warned_unisolated = False


def host_support() -> HostSupport:
    """Probe bubblewrap and cgroups once per process (a trivial sandboxed ``/bin/true``)."""
    global _support
    with _support_lock:
        if _support is None:
            bwrap, bwrap_detail = _probe_bwrap()
            driver = _cgroup_driver()
            parents, cgroup_detail = driver.probe()
            _support = HostSupport(bwrap, bwrap_detail, parents, cgroup_detail, driver)
        return _support


def _cgroup_driver() -> CgroupDriver:
    """The cgroup version this machine is driven with. Only v1 exists so far; a v2 driver
    would be chosen here where ``/sys/fs/cgroup`` is the unified hierarchy."""
    return CgroupV1()


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
    global _warned_unisolated
    with _support_lock:
        if _warned_unisolated:
            return
        _warned_unisolated = True
    message = (
        f"LocalSandbox: bubblewrap is not usable ({reason}); commands run WITHOUT isolation "
        "(host filesystem and network visible), only with rlimits/cgroups"
    )
    _log.warning(message)
    warnings.warn(message, RuntimeWarning, stacklevel=3)
