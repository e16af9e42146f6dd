"""The local sandbox: a throwaway workspace directory, commands run under bubblewrap.

Each command runs in its own bubblewrap sandbox (``--unshare-all``: own user, PID, network,
IPC, UTS and cgroup namespaces), sees the host's ``/usr`` read-only, a private ``/tmp`` and the
workspace at ``/work`` (the only writable place), has no network unless ``limits.network`` and
no capabilities. Limits:

* wall time: the command runs in a new session; on timeout (or ``interrupt()``) its whole
  process group is SIGKILLed, which takes the sandbox's PID namespace down with it;
* CPU seconds, address space, file size (and process count where the kernel enforces it) via
  ``setrlimit`` in the child before ``exec``, only ever lowering the inherited limits;
* memory and process count additionally via a per-command cgroup v1 group (``memory`` and
  ``pids`` controllers) when this machine lets us create one, removed after the command;
* stdout and stderr are each kept up to ``limits.output_bytes`` (the rest is read and
  dropped, so the child never blocks on a full pipe) with a marker saying how much was cut.

Without a working ``bwrap`` commands still run, as plain subprocesses in the workspace with the
same limits, but NOT isolated: a warning is logged once and ``info.isolated`` is False.

Note for root: the kernel never applies RLIMIT_NPROC to uid 0 (also not inside a user
namespace, where uid 0 is still the host's root), so only the ``pids`` cgroup stops a fork bomb
there; ``info.details["fork_bomb_containment"]`` says what this machine has.
"""

from __future__ import annotations

import logging
import os
import re
import resource
import selectors
import shutil
import signal
import stat
import subprocess
import tarfile
import tempfile
import threading
import time
import uuid
import warnings
import weakref
from dataclasses import dataclass, field

from trainer_core.errors import SandboxError
from trainer_core.sandboxes.base import ExecResult, Sandbox, SandboxInfo, SandboxLimits

_log = logging.getLogger(__name__)

SANDBOX_PATH = "/usr/local/bin:/usr/bin:/bin"
SANDBOX_WORKDIR = "/work"  # where the workspace appears inside bubblewrap
GIT_NAME = "Steplab Agent"
GIT_EMAIL = "agent@steplab.invalid"
TIMEOUT_EXIT_CODE = 124  # like coreutils' timeout(1)

_READ_CHUNK = 65536
_AFTER_EXIT_GRACE = 0.5  # the command exited but something still holds its pipes: kill it then
_DRAIN_AFTER_KILL = 2.0  # after a kill, how long to keep reading what is left in the pipes
_SNAPSHOT_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

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


# --- what this machine supports (probed once per process) -----------------------------------


@dataclass(frozen=True)
class HostSupport:
    """What the local backend can use on this machine."""

    bwrap: str | None  # path of a bwrap that ran a test sandbox, else None
    bwrap_detail: str
    cgroup_parents: dict[str, str] = field(default_factory=dict)  # controller -> parent dir
    cgroup_detail: str = ""

    @property
    def cgroup_memory(self) -> bool:
        return "memory" in self.cgroup_parents

    @property
    def cgroup_pids(self) -> bool:
        return "pids" in self.cgroup_parents


_support: HostSupport | None = None
_support_lock = threading.Lock()
_warned_unisolated = False


def host_support() -> HostSupport:
    """Probe bubblewrap and cgroups once per process (a trivial sandboxed ``/bin/true``)."""
    global _support
    with _support_lock:
        if _support is None:
            bwrap, bwrap_detail = _probe_bwrap()
            parents, cgroup_detail = _probe_cgroups()
            _support = HostSupport(bwrap, bwrap_detail, parents, cgroup_detail)
        return _support


def _probe_bwrap() -> tuple[str | None, str]:
    path = shutil.which("bwrap")
    if not path:
        return None, "bwrap not found on PATH (apt-get install bubblewrap)"
    probe_dir = tempfile.mkdtemp(prefix="steplab-bwrap-probe-")
    try:
        argv = _bwrap_argv(path, probe_dir, network=False) + ["/bin/true"]
        proc = subprocess.run(  # noqa: S603 - fixed argv
            argv, capture_output=True, text=True, timeout=20, check=False, env=_command_env(True)
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"{path} could not run a test sandbox: {exc}"
    finally:
        shutil.rmtree(probe_dir, ignore_errors=True)
    if proc.returncode != 0:
        reason = (proc.stderr or proc.stdout).strip()[:300]
        return None, f"{path} failed to run a test sandbox (exit {proc.returncode}): {reason}"
    return path, f"{path} ran a test sandbox"


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


def _probe_cgroups() -> tuple[dict[str, str], str]:
    """Which cgroup v1 controllers (memory, pids) let us create a group, limit it and move a
    process into it. Groups go under this process's own group (keeping the outer accounting)
    or else under the controller's root."""
    limit_files = {"memory": "memory.limit_in_bytes", "pids": "pids.max"}
    limit_values = {"memory": str(256 * 1024 * 1024), "pids": "64"}
    parents: dict[str, str] = {}
    notes: list[str] = []
    for controller, limit_file in limit_files.items():
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


def _killpg(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _has_exited(proc: subprocess.Popen) -> bool:
    """Whether ``proc`` has exited, without reaping it (its pid stays reserved)."""
    if proc.returncode is not None:
        return True
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


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


# --- command lines and environment ----------------------------------------------------------


def _bwrap_argv(bwrap: str, workspace: str, *, network: bool) -> list[str]:
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


def _command_env(isolated: bool, workspace: str | None = None) -> dict[str, str]:
    """The whole environment a command sees: nothing of the host's (no secrets leak in)."""
    home = SANDBOX_WORKDIR if isolated else (workspace or SANDBOX_WORKDIR)
    return {
        "PATH": SANDBOX_PATH,
        "HOME": home,
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "TMPDIR": "/tmp",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": GIT_NAME,
        "GIT_AUTHOR_EMAIL": GIT_EMAIL,
        "GIT_COMMITTER_NAME": GIT_NAME,
        "GIT_COMMITTER_EMAIL": GIT_EMAIL,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_PAGER": "cat",
        "PAGER": "cat",
    }


def _shell() -> str:
    return "bash" if shutil.which("bash", path=SANDBOX_PATH) else "sh"


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


def _make_preexec(rlimits: list[tuple[int, int]], cgroup_procs: list[str]):
    """Runs in the child between fork and exec: join the cgroups, then lower the rlimits.
    Only async-signal-tolerant calls (os.open/os.write/setrlimit), no Python-level locks."""

    def preexec() -> None:
        pid = str(os.getpid()).encode()
        for path in cgroup_procs:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, pid)
            finally:
                os.close(fd)
        for which, value in rlimits:
            _soft, hard = resource.getrlimit(which)
            new = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(which, (new, new))  # never raises a limit

    return preexec


# --- output capture -------------------------------------------------------------------------


class _Capture:
    """Keeps the first ``cap`` bytes of a stream and counts the rest."""

    def __init__(self, cap: int) -> None:
        self.cap = max(0, cap)
        self.chunks: list[bytes] = []
        self.kept = 0
        self.dropped = 0

    def add(self, data: bytes) -> None:
        room = self.cap - self.kept
        if room > 0:
            part = data[:room]
            self.chunks.append(part)
            self.kept += len(part)
            self.dropped += len(data) - len(part)
        else:
            self.dropped += len(data)

    def text(self) -> str:
        out = b"".join(self.chunks).decode("utf-8", errors="replace")
        if self.dropped:
            if out and not out.endswith("\n"):
                out += "\n"
            out += f"[... output truncated: {self.dropped} bytes dropped ...]\n"
        return out


@dataclass(eq=False)
class _Run:
    proc: subprocess.Popen
    cgroups: list[str]
    killed: bool = False
    interrupted: bool = False
    reaped: bool = False  # once reaped, its pid (= its process group id) may be reused
    lock: threading.Lock = field(default_factory=threading.Lock)


# --- the sandbox ----------------------------------------------------------------------------


class LocalSandbox(Sandbox):
    """A throwaway workspace on this machine; commands under bubblewrap when it works.

    ``files`` (path -> text) and ``repo`` (a directory, or a .tar/.tar.gz/.tgz tarball) seed the
    workspace (the repo first, then the files over it), then each ``setup`` shell command runs;
    the result is the baseline that ``reset()`` returns to.
    """

    def __init__(
        self,
        limits: SandboxLimits = SandboxLimits(),  # noqa: B008 - frozen dataclass
        *,
        files: dict[str, str] | None = None,
        repo: str | None = None,
        setup: list[str] | None = None,
        workdir_parent: str | None = None,
    ) -> None:
        self.limits = limits
        self._files = dict(files or {})
        self._repo = repo
        self._setup = list(setup or [])
        self._workdir_parent = workdir_parent
        self._root: str | None = None
        self._workspace: str | None = None
        self._snapshots: dict[str, str] = {}
        self._baseline: str | None = None
        self._lock = threading.Lock()
        self._running: set[_Run] = set()
        self._finalizer: weakref.finalize | None = None
        self._support: HostSupport | None = None
        self._closed = False

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        if self._root is not None:
            raise SandboxError("this sandbox was already started; make a new one")
        self._support = support = host_support()
        if support.bwrap is None:
            _warn_unisolated(support.bwrap_detail)
        self._root = tempfile.mkdtemp(prefix="steplab-sandbox-", dir=self._workdir_parent)
        self._finalizer = weakref.finalize(self, _rmtree, self._root)
        self._workspace = os.path.join(self._root, "work")
        os.mkdir(self._workspace)
        os.mkdir(os.path.join(self._root, "snapshots"))
        try:
            if self._repo is not None:
                self._copy_repo(self._repo)
            for path, content in self._files.items():
                self.write_file(path, content)
            for command in self._setup:
                result = self.exec(command)
                if not result.ok:
                    why = (
                        f"timed out after {self.limits.wall_seconds}s"
                        if result.timed_out
                        else f"exit code {result.exit_code}"
                    )
                    detail = (result.stderr.strip() or result.stdout.strip())[-2000:]
                    raise SandboxError(
                        f"setup command {command!r} failed ({why}): {detail or '(no output)'}"
                    )
            self._baseline = self.snapshot()
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.interrupt()
        if self._finalizer is not None:
            self._finalizer()  # removes the workspace and every snapshot
        self._snapshots.clear()

    @property
    def workspace(self) -> str:
        """The workspace directory on the host (``/work`` inside the sandbox)."""
        self._require_started()
        assert self._workspace is not None
        return self._workspace

    @property
    def info(self) -> SandboxInfo:
        support = self._support or host_support()
        isolated = support.bwrap is not None
        pids_ok = support.cgroup_pids
        if pids_ok:
            containment = "pids cgroup (pids.max)"
        elif os.geteuid() != 0:
            containment = "RLIMIT_NPROC only"
        else:
            containment = (
                "none: no pids cgroup and RLIMIT_NPROC does not apply to root; "
                "a fork bomb is bounded only by the wall-time limit"
            )
        return SandboxInfo(
            backend="local",
            isolated=isolated,
            details={
                "bwrap": support.bwrap_detail,
                "network": self.limits.network if isolated else "host network (not isolated)",
                "cgroups": support.cgroup_detail,
                "cgroup_memory": support.cgroup_memory,
                "cgroup_pids": pids_ok,
                "rlimits": ["cpu", "as", "fsize", "nproc"],
                "fork_bomb_containment": containment,
                "workspace": self._workspace,
                "workdir_inside": SANDBOX_WORKDIR if isolated else self._workspace,
            },
        )

    # --- commands ---------------------------------------------------------------------------

    def exec(
        self, cmd: str | list[str], *, timeout: float | None = None, stdin: str | None = None
    ) -> ExecResult:
        self._require_started()
        assert self._workspace is not None and self._support is not None
        if isinstance(cmd, str):
            argv = [_shell(), "-c", cmd]
        elif isinstance(cmd, list | tuple) and cmd and all(isinstance(a, str) for a in cmd):
            argv = list(cmd)
        else:
            raise SandboxError("exec() takes a shell string or a non-empty list of strings (argv)")
        wall = self.limits.wall_seconds if timeout is None else float(timeout)
        if wall <= 0:
            raise SandboxError(f"timeout must be positive, got {timeout!r}")
        support = self._support
        isolated = support.bwrap is not None
        if isolated:
            full = _bwrap_argv(support.bwrap, self._workspace, network=self.limits.network)
            full += ["--", *argv]
        else:
            full = argv
        groups = self._make_cgroups()
        started = time.monotonic()
        try:
            proc = subprocess.Popen(  # noqa: S603 - argv, no shell
                full,
                stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self._workspace,
                env=_command_env(isolated, self._workspace),
                start_new_session=True,
                close_fds=True,
                preexec_fn=_make_preexec(
                    self._rlimits(isolated), [os.path.join(g, "cgroup.procs") for g in groups]
                ),
            )
        except FileNotFoundError as exc:
            for group in groups:
                _remove_cgroup(group)
            if isolated:
                raise SandboxError(f"cannot start bubblewrap: {exc}") from exc
            return ExecResult("", f"{argv[0]}: command not found\n", 127, 0.0)
        except (OSError, subprocess.SubprocessError) as exc:
            for group in groups:
                _remove_cgroup(group)
            raise SandboxError(f"cannot start {argv[0]!r}: {exc}") from exc
        run = _Run(proc, groups)
        with self._lock:
            self._running.add(run)
            closed = self._closed
        if closed:
            self._kill(run)
        try:
            out, err, timed_out = self._collect(run, started, wall, stdin)
        finally:
            with self._lock:
                self._running.discard(run)
            # Anything left over (background jobs) dies with the command: its process group,
            # signalled before the command is reaped (so the group id cannot have been reused),
            # then whatever is still in its cgroups.
            with run.lock:
                if not run.reaped:
                    _killpg(proc.pid)
                    proc.wait()
                    run.reaped = True
            for group in groups:
                _kill_cgroup(group)
                if not _remove_cgroup(group):
                    _log.warning("could not remove cgroup %s", group)
        duration = time.monotonic() - started
        if timed_out:
            exit_code = TIMEOUT_EXIT_CODE
        elif run.interrupted and proc.returncode == 0:
            exit_code = -signal.SIGKILL
        else:
            exit_code = proc.returncode
        return ExecResult(
            stdout=out.text(),
            stderr=err.text(),
            exit_code=exit_code,
            duration=duration,
            timed_out=timed_out,
            truncated=bool(out.dropped or err.dropped),
        )

    def interrupt(self) -> None:
        with self._lock:
            runs = list(self._running)
        for run in runs:
            run.interrupted = True
            self._kill(run)

    def _rlimits(self, isolated: bool) -> list[tuple[int, int]]:
        lim = self.limits
        out: list[tuple[int, int]] = []
        if lim.cpu_seconds is not None:
            out.append((resource.RLIMIT_CPU, int(lim.cpu_seconds)))
        if lim.memory_mb is not None:
            out.append((resource.RLIMIT_AS, int(lim.memory_mb) * 1024 * 1024))
        if lim.file_size_mb is not None:
            out.append((resource.RLIMIT_FSIZE, int(lim.file_size_mb) * 1024 * 1024))
        if lim.pids is not None:
            # In a user namespace (bubblewrap) the count starts at zero; without one it counts
            # every process of this user, so leave room for those. Root is exempt either way.
            base = 0 if isolated else _count_user_processes(os.geteuid())
            out.append((resource.RLIMIT_NPROC, base + int(lim.pids)))
        return out

    def _make_cgroups(self) -> list[str]:
        assert self._support is not None
        groups = []
        name = f"steplab-{uuid.uuid4().hex}"
        wanted = {
            "memory": None
            if self.limits.memory_mb is None
            else self.limits.memory_mb * 1024 * 1024,
            "pids": self.limits.pids,
        }
        for controller, parent in self._support.cgroup_parents.items():
            value = wanted.get(controller)
            if value is None:
                continue
            group = os.path.join(parent, name)
            try:
                os.mkdir(group)
                if controller == "memory":
                    _write(os.path.join(group, "memory.limit_in_bytes"), str(value))
                    memsw = os.path.join(group, "memory.memsw.limit_in_bytes")
                    if os.path.exists(memsw):  # no escaping the limit into swap
                        try:
                            _write(memsw, str(value))
                        except OSError:
                            pass
                else:
                    _write(os.path.join(group, "pids.max"), str(value))
            except OSError as exc:
                _log.warning("cgroup %s unusable (%s); falling back to rlimits", group, exc)
                _remove_cgroup(group)
                continue
            groups.append(group)
        return groups

    def _kill(self, run: _Run) -> None:
        with run.lock:
            run.killed = True
            if not run.reaped:
                _killpg(run.proc.pid)  # the session/group it leads
            for group in run.cgroups:
                _kill_cgroup(group, skip={run.proc.pid})

    def _collect(
        self, run: _Run, started: float, wall: float, stdin: str | None
    ) -> tuple[_Capture, _Capture, bool]:
        proc = run.proc
        assert proc.stdout is not None and proc.stderr is not None
        cap = self.limits.output_bytes
        captures = {proc.stdout.fileno(): _Capture(cap), proc.stderr.fileno(): _Capture(cap)}
        out, err = captures[proc.stdout.fileno()], captures[proc.stderr.fileno()]
        sel = selectors.DefaultSelector()
        for fd in captures:
            os.set_blocking(fd, False)
            sel.register(fd, selectors.EVENT_READ)
        pending = memoryview((stdin or "").encode())
        stdin_fd = proc.stdin.fileno() if proc.stdin is not None else None
        if stdin_fd is not None:
            if pending:
                os.set_blocking(stdin_fd, False)
                sel.register(stdin_fd, selectors.EVENT_WRITE)
            else:
                proc.stdin.close()
        # A pidfd wakes the loop the moment the command exits (pipes may stay open if it left
        # background jobs behind); without one, poll every 50 ms.
        pidfd = None
        if hasattr(os, "pidfd_open"):
            try:
                pidfd = os.pidfd_open(proc.pid)
                sel.register(pidfd, selectors.EVENT_READ, data="exit")
            except OSError:
                pidfd = None
        deadline = started + wall
        timed_out = False
        exited_at: float | None = None
        give_up_at: float | None = None
        try:
            while any(key.data != "exit" for key in sel.get_map().values()):
                now = time.monotonic()
                if not run.killed and now >= deadline:
                    timed_out = True
                    self._kill(run)
                if exited_at is None and _has_exited(proc):
                    exited_at = now
                if exited_at is not None and not run.killed and now - exited_at > _AFTER_EXIT_GRACE:
                    self._kill(run)  # the command is over; strays still hold its pipes
                if run.killed and give_up_at is None:
                    give_up_at = now + _DRAIN_AFTER_KILL
                if give_up_at is not None and now >= give_up_at:
                    break
                if run.killed or exited_at is not None:
                    wait = 0.05
                else:
                    wait = min(1.0 if pidfd is not None else 0.05, deadline - now)
                for key, events in sel.select(timeout=max(0.0, wait)):
                    fd = key.fd
                    if key.data == "exit":
                        sel.unregister(fd)
                        exited_at = time.monotonic()
                        continue
                    if events & selectors.EVENT_WRITE:
                        try:
                            written = os.write(fd, pending[:_READ_CHUNK])
                            pending = pending[written:]
                        except BlockingIOError:
                            continue
                        except OSError:  # the command closed its stdin
                            pending = pending[:0]
                        if not pending:
                            sel.unregister(fd)
                            proc.stdin.close()
                        continue
                    try:
                        data = os.read(fd, _READ_CHUNK)
                    except (BlockingIOError, InterruptedError):
                        continue
                    if not data:
                        sel.unregister(fd)
                        continue
                    captures[fd].add(data)
            # Both pipes are closed; the command may still run (it closed them itself).
            while not run.killed and not _has_exited(proc):
                if time.monotonic() >= deadline:
                    timed_out = True
                    self._kill(run)
                    break
                time.sleep(0.01)
        finally:
            sel.close()
            if pidfd is not None:
                os.close(pidfd)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    try:
                        stream.close()
                    except OSError:
                        pass
        return out, err, timed_out

    # --- files ------------------------------------------------------------------------------

    def _resolve(self, path: str) -> str:
        self._require_started()
        assert self._workspace is not None
        if not isinstance(path, str) or not path.strip():
            raise SandboxError("path must be a non-empty string relative to the workspace root")
        if "\x00" in path:
            raise SandboxError("path must not contain NUL bytes")
        if os.path.isabs(path):
            raise SandboxError(
                f"{path!r} is an absolute path; give a path relative to the workspace root "
                "(e.g. 'src/main.py')"
            )
        root = os.path.realpath(self._workspace)
        target = os.path.realpath(os.path.join(root, path))
        if target != root and not target.startswith(root + os.sep):
            raise SandboxError(f"{path!r} resolves outside the workspace; that is not allowed")
        return target

    def read_file(self, path: str) -> bytes:
        target = self._resolve(path)
        try:
            with open(target, "rb") as fh:
                return fh.read()
        except FileNotFoundError:
            raise SandboxError(f"{path!r}: no such file in the workspace") from None
        except IsADirectoryError:
            raise SandboxError(f"{path!r} is a directory, not a file") from None
        except OSError as exc:
            raise SandboxError(f"cannot read {path!r}: {exc.strerror or exc}") from None

    def write_file(self, path: str, content: str | bytes) -> None:
        target = self._resolve(path)
        if target == os.path.realpath(self.workspace) or os.path.isdir(target):
            raise SandboxError(f"{path!r} is a directory; give a file path")
        data = content.encode("utf-8") if isinstance(content, str) else bytes(content)
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "wb") as fh:
                fh.write(data)
        except OSError as exc:
            raise SandboxError(f"cannot write {path!r}: {exc.strerror or exc}") from None

    # --- snapshots --------------------------------------------------------------------------

    def snapshot(self) -> str:
        self._require_started()
        assert self._root is not None and self._workspace is not None
        snapshot_id = uuid.uuid4().hex[:16]
        dest = os.path.join(self._root, "snapshots", snapshot_id)
        try:
            shutil.copytree(self._workspace, dest, symlinks=True)
        except (OSError, shutil.Error) as exc:
            _rmtree(dest)
            raise SandboxError(f"cannot snapshot the workspace: {exc}") from None
        self._snapshots[snapshot_id] = dest
        return snapshot_id

    def restore(self, snapshot_id: str) -> None:
        self._require_started()
        assert self._workspace is not None
        if not isinstance(snapshot_id, str) or not _SNAPSHOT_ID.match(snapshot_id):
            raise SandboxError(f"{snapshot_id!r} is not a snapshot id")
        source = self._snapshots.get(snapshot_id)
        if source is None:
            raise SandboxError(f"no snapshot {snapshot_id!r} in this sandbox")
        with os.scandir(self._workspace) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    _rmtree(entry.path)
                else:
                    os.unlink(entry.path)
        try:
            shutil.copytree(source, self._workspace, symlinks=True, dirs_exist_ok=True)
        except (OSError, shutil.Error) as exc:
            raise SandboxError(f"cannot restore snapshot {snapshot_id!r}: {exc}") from None

    def reset(self) -> None:
        self._require_started()
        if self._baseline is None:
            raise SandboxError("no baseline yet: start() did not finish")
        self.restore(self._baseline)

    # --- helpers ----------------------------------------------------------------------------

    def _require_started(self) -> None:
        if self._closed:
            raise SandboxError("this sandbox is closed")
        if self._root is None:
            raise SandboxError(
                "this sandbox is not started; call start() or use it in a with block"
            )

    def _copy_repo(self, repo: str) -> None:
        assert self._workspace is not None
        if os.path.isdir(repo):
            try:
                shutil.copytree(repo, self._workspace, symlinks=True, dirs_exist_ok=True)
            except (OSError, shutil.Error) as exc:
                raise SandboxError(f"cannot copy repo {repo!r}: {exc}") from None
        elif os.path.isfile(repo):
            _extract_tar(repo, self._workspace)
        else:
            raise SandboxError(f"repo {repo!r} is neither a directory nor a tarball")


def _warn_unisolated(reason: str) -> None:
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


def _rmtree(path: str) -> None:
    """Remove a tree even where a command made parts of it read-only."""

    def make_writable(func, p, _exc):
        try:
            parent = os.path.dirname(p)
            os.chmod(parent, os.stat(parent).st_mode | stat.S_IWUSR | stat.S_IXUSR)
            if not os.path.islink(p):
                os.chmod(p, os.stat(p).st_mode | stat.S_IWUSR | stat.S_IXUSR)
            func(p)
        except OSError:
            pass

    if os.path.lexists(path):
        shutil.rmtree(path, onerror=make_writable)


def _within(base: str, path: str) -> bool:
    return path == base or path.startswith(base + os.sep)


def _extract_tar(archive: str, dest: str) -> None:
    """Extract a tarball, rejecting members that would land (or link) outside ``dest``."""
    base = os.path.realpath(dest)
    try:
        tf = tarfile.open(archive)  # closed by the with below
    except (tarfile.TarError, OSError) as exc:
        raise SandboxError(f"repo {archive!r} is not a readable tarball: {exc}") from None
    with tf:
        for member in tf.getmembers():
            name = member.name
            target = os.path.normpath(os.path.join(base, name))
            if os.path.isabs(name) or not _within(base, target):
                raise SandboxError(f"tarball member {name!r} escapes the workspace; refusing it")
            if member.issym():
                link = member.linkname
                resolved = os.path.normpath(os.path.join(os.path.dirname(target), link))
                if os.path.isabs(link) or not _within(base, resolved):
                    raise SandboxError(
                        f"tarball symlink {name!r} -> {link!r} points outside the workspace"
                    )
            elif member.islnk():
                resolved = os.path.normpath(os.path.join(base, member.linkname))
                if not _within(base, resolved):
                    raise SandboxError(
                        f"tarball hard link {name!r} -> {member.linkname!r} points outside"
                    )
            elif member.ischr() or member.isblk():
                raise SandboxError(f"tarball member {name!r} is a device file; refusing it")
        try:
            if hasattr(tarfile, "data_filter"):
                tf.extractall(base, filter="data")
            else:  # pragma: no cover - Python < 3.11.4; members were checked above
                tf.extractall(base)  # noqa: S202
        except (tarfile.TarError, OSError) as exc:
            raise SandboxError(f"cannot extract {archive!r}: {exc}") from None
