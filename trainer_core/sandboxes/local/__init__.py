"""The local sandbox: a throwaway workspace directory, commands run under bubblewrap.

Each command runs in its own bubblewrap sandbox (``--unshare-all``: own user, PID, network,
IPC, UTS and cgroup namespaces), sees the host's ``/usr`` read-only, a private ``/tmp`` and the
workspace at ``/work`` (the only writable place), has no network unless ``limits.network`` and
no capabilities. Limits:

* wall time: the command runs in a new session; on timeout (or ``interrupt()``) its whole
  process group is SIGKILLed, which takes the sandbox's PID namespace down with it;
* CPU seconds, address space, file size (and process count where the kernel enforces it) via
  rlimits, only ever lowering the inherited limits;
* memory and process count additionally via the sandbox's cgroup (cgroup v1 ``memory`` and
  ``pids`` groups, or one cgroup v2 group under a delegated base), made once when the sandbox
  starts, joined by each command, emptied after each command and removed when it closes.

  Both are in place before the command starts: bubblewrap holds the sandbox's first process
  (``--block-fd``) until it and bubblewrap are in the cgroups with lowered rlimits (see
  :mod:`.process`); without bubblewrap the child sets them between fork and exec.
  Without one the sandbox refuses to start, unless ``STEPLAB_SANDBOX_UNCONTAINED=1``;
* stdout and stderr are each kept up to ``limits.output_bytes`` (the rest is read and
  dropped, so the child never blocks on a full pipe) with a marker saying how much was cut.

Without a working ``bwrap`` commands still run, as plain subprocesses in the workspace with the
same limits, but NOT isolated: a warning is logged once and ``info.isolated`` is False.

Note for root: the kernel never applies RLIMIT_NPROC to uid 0 (also not inside a user
namespace, where uid 0 is still the host's root), so only the ``pids`` cgroup stops a fork bomb
there; ``info.details["fork_bomb_containment"]`` says what this machine has.

The parts: :mod:`.command` (the bubblewrap command line), :mod:`.limits` (rlimits and the
cgroup interface) with :mod:`.cgroup_v1`, :mod:`.cgroup_v2` and :mod:`.cgroupfs`, :mod:`.host`
(what this machine supports, probed once), :mod:`.process` (spawn, collect output, kill on
timeout, reap), :mod:`.workspace` (host-side paths, repo seeding) and :mod:`.sandbox`
(:class:`LocalSandbox`, composing them).
"""

from trainer_core.sandboxes.local.host import HostSupport, host_support
from trainer_core.sandboxes.local.sandbox import LocalSandbox
from trainer_core.sandboxes.shared import (
    GIT_EMAIL,
    GIT_NAME,
    SANDBOX_PATH,
    SANDBOX_WORKDIR,
    TIMEOUT_EXIT_CODE,
)

__all__ = [
    "GIT_EMAIL",
    "GIT_NAME",
    "SANDBOX_PATH",
    "SANDBOX_WORKDIR",
    "TIMEOUT_EXIT_CODE",
    "HostSupport",
    "LocalSandbox",
    "host_support",
]
