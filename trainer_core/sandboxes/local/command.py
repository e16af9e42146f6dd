"""The command line of one local command: the bubblewrap argv that isolates it (own user, PID,
network, IPC, UTS and cgroup namespaces; the host's ``/usr`` read-only, a private ``/tmp``, the
workspace at ``/work`` as the only writable place; no capabilities) and the shell that runs a
command given as a string."""

from __future__ import annotations

import os
import shutil

from trainer_core.sandboxes.shared import SANDBOX_PATH, SANDBOX_WORKDIR

# Host files bound read-only when present: enough for python3 and git to work inside.
_RO_FILES = (
    "/etc/alternatives",
    "/etc/ssl",
    "/etc/ld.so.cache",
    "/etc/localtime",
    "/etc/passwd",
    "/etc/group",
)
_RO_FILES_NETWORK = (
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
)
_TOP_LEVEL_LINKS = (
    ("/bin", "usr/bin"),
    ("/lib", "usr/lib"),
    ("/lib64", "usr/lib64"),
    ("/sbin", "usr/sbin"),
)


def bwrap_argv(bwrap: str, workspace: str, *, network: bool) -> list[str]:
    """bubblewrap's own arguments (the command's argv follows after ``--``)."""
    argv = [bwrap, "--unshare-all"]
    if network:
        argv.append("--share-net")
    argv += ["--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr"]
    for link, target in _TOP_LEVEL_LINKS:
        if os.path.islink(link) or not os.path.exists(link):
            argv += ["--symlink", target, link]  # merged /usr: /bin -> usr/bin
        else:
            argv += ["--ro-bind", link, link]  # a host with a real /bin
    for path in _RO_FILES + (_RO_FILES_NETWORK if network else ()):
        if os.path.exists(path):
            argv += ["--ro-bind", path, path]
    argv += [
        "--proc", "/proc",
        "--dev", "/dev",
        "--tmpfs", "/tmp",
        "--bind", workspace, SANDBOX_WORKDIR,
        "--chdir", SANDBOX_WORKDIR,
        "--setenv", "HOME", SANDBOX_WORKDIR,
        "--setenv", "PATH", SANDBOX_PATH,
        "--setenv", "GIT_CONFIG_NOSYSTEM", "1",
        "--hostname", "sandbox",
        "--cap-drop", "ALL",
        "--remount-ro", "/",  # the sandbox's own root: nothing but /work and /tmp is writable
    ]  # fmt: skip
    return argv


def command_line(bwrap: str | None, workspace: str, argv: list[str], *, network: bool) -> list[str]:
    """What is spawned for ``argv``: under bubblewrap when there is one, else ``argv`` itself."""
    if bwrap is None:
        return argv
    return [*bwrap_argv(bwrap, workspace, network=network), "--", *argv]


def shell() -> str:
    """The shell of string commands: bash when the sandbox's PATH has it, else sh."""
    return "bash" if shutil.which("bash", path=SANDBOX_PATH) else "sh"
