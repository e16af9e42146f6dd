"""Process control of local commands.

:func:`spawn` starts a command in a new session (its pid is its process group id) in its
cgroups and under its rlimits. Under bubblewrap it is held (``--block-fd``) once bubblewrap has
set the sandbox up, before the sandbox's first process forks the command: we move bubblewrap and
that process into the cgroups and lower their rlimits from outside (while bubblewrap sets up:
a cgroup move waits for an RCU grace period, several ms), then let it go; no ``preexec_fn``, so
the spawn itself is a vfork. Without bubblewrap the child joins and lowers its own between fork
and exec. :func:`collect` feeds its stdin
and reads its stdout and stderr under the wall-time deadline: each stream keeps up to the
output cap and the rest is read and dropped, so the child never blocks on a full pipe. On
timeout (or :func:`kill` from another thread) the whole process group is SIGKILLed, and
everything in the sandbox's cgroups; :func:`reap` does the same to what a finished command left
behind (see :class:`~trainer_core.sandboxes.local.limits.CommandCgroups`). :func:`exit_code`
says how it ended.
"""

from __future__ import annotations

import json
import os
import select
import selectors
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

from trainer_core.sandboxes.local.limits import CommandCgroups, lower_rlimits
from trainer_core.sandboxes.shared import TIMEOUT_EXIT_CODE, OutputCapture

_READ_CHUNK = 65536
_AFTER_EXIT_GRACE = 0.5  # the command exited but something still holds its pipes: kill it then
_DRAIN_AFTER_KILL = 2.0  # after a kill, how long to keep reading what is left in the pipes


@dataclass(eq=False)
class Run:
    """One running command."""

    proc: subprocess.Popen
    cgroups: CommandCgroups
    killed: bool = False
    interrupted: bool = False
    reaped: bool = False  # once reaped, its pid (= its process group id) may be reused
    lock: threading.Lock = field(default_factory=threading.Lock)


def spawn(
    argv: list[str],
    *,
    cwd: str,
    env: dict[str, str],
    stdin_piped: bool,
    rlimits: list[tuple[int, int]],
    cgroups: CommandCgroups,
    held: bool = False,
    deadline: float | None = None,
) -> subprocess.Popen:
    """Start ``argv`` in a new session with piped stdout/stderr (stdin piped or /dev/null).
    ``held``: ``argv`` is a bubblewrap command line, held until contained (see the module);
    ``deadline`` (monotonic) bounds the wait for bubblewrap's set-up."""
    popen_args = {
        "stdin": subprocess.PIPE if stdin_piped else subprocess.DEVNULL,
        "stdout": subprocess.PIPE,
        "stderr": subprocess.PIPE,
        "cwd": cwd,
        "env": env,
        "start_new_session": True,
        "close_fds": True,
    }
    if held and _holding["works"]:
        try:
            return _spawn_held(argv, rlimits, cgroups.procs_files, deadline, popen_args)
        except PermissionError:
            # its sandbox's first process may not be limited from outside (a setuid bwrap
            # before it drops its privileges): the child then joins and lowers its own, as
            # without bubblewrap (the held one was killed before it ran anything)
            _holding["works"] = False
    return subprocess.Popen(  # noqa: S603 - argv, no shell
        argv, preexec_fn=_make_preexec(rlimits, cgroups.procs_files), **popen_args
    )


_holding = {"works": True}  # False once holding bubblewrap was refused (see spawn)


def _spawn_held(
    argv: list[str],
    rlimits: list[tuple[int, int]],
    cgroup_procs: list[str],
    deadline: float | None,
    popen_args: dict,
) -> subprocess.Popen:
    """bubblewrap with ``--info-fd`` (it says its sandbox's first process) and ``--block-fd``
    (that process waits there for a byte before it forks the command). A process that ended
    early is killed and returned unreleased (its exit status and stderr tell why); a failure to
    contain it kills it and raises."""
    info_r, info_w = os.pipe()
    hold_r, hold_w = os.pipe()
    try:
        full = [argv[0], "--info-fd", str(info_w), "--block-fd", str(hold_r), *argv[1:]]
        proc = subprocess.Popen(full, pass_fds=(info_w, hold_r), **popen_args)  # noqa: S603
    except BaseException:
        for fd in (info_r, hold_w):
            os.close(fd)
        raise
    finally:
        os.close(info_w)
        os.close(hold_r)
    try:
        release = _contain(proc.pid, info_r, rlimits, cgroup_procs, deadline)
        if release:
            _write_byte(hold_w)
        else:
            _killpg(proc.pid)  # before hold_w closes: EOF on --block-fd would release it
    except BaseException:
        _killpg(proc.pid)
        os.close(hold_w)
        _close_popen(proc)
        raise
    finally:
        os.close(info_r)
    os.close(hold_w)
    return proc


def _contain(
    pid: int,
    info_fd: int,
    rlimits: list[tuple[int, int]],
    cgroup_procs: list[str],
    deadline: float | None,
) -> bool:
    """Move bubblewrap (``pid``; at once, so that the move overlaps its set-up) and then its
    sandbox's first process into the cgroups, and lower that process's rlimits (the command is
    its child; bubblewrap runs nothing else). False when either ended first."""
    try:
        join(pid, cgroup_procs)
        first = _sandbox_pid(info_fd, deadline)
        if first is None:
            return False
        join(first, cgroup_procs)
        lower_rlimits(rlimits, first)
    except ProcessLookupError:
        return False
    return True


def join(pid: int, cgroup_procs: list[str]) -> None:
    """Move process ``pid`` into each group (by writing it to the group's ``cgroup.procs``)."""
    for path in cgroup_procs:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, str(pid).encode())
        finally:
            os.close(fd)


def _sandbox_pid(info_fd: int, deadline: float | None) -> int | None:
    """The ``child-pid`` bubblewrap writes to its info fd (it closes it then); None when it
    closed it without one (it failed) or ``deadline`` passed."""
    data = b""
    while True:
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        ready, _, _ = select.select([info_fd], [], [], timeout)
        if not ready:
            return None
        chunk = os.read(info_fd, 4096)
        if not chunk:
            break
        data += chunk
    try:
        pid = json.loads(data)["child-pid"]
    except (ValueError, KeyError, TypeError):
        return None
    return pid if isinstance(pid, int) and pid > 0 else None


def _write_byte(fd: int) -> None:
    try:
        os.write(fd, b"1")
    except BrokenPipeError:  # it is gone already
        pass


def _close_popen(proc: subprocess.Popen) -> None:
    """Reap a killed process and close its pipes."""
    proc.wait()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()


def _make_preexec(rlimits: list[tuple[int, int]], cgroup_procs: list[str]):
    """Runs in the child between fork and exec: join the cgroups, then lower the rlimits.
    Only async-signal-tolerant calls (os.open/os.write/setrlimit), no Python-level locks."""

    def preexec() -> None:
        join(os.getpid(), cgroup_procs)
        lower_rlimits(rlimits)

    return preexec


def kill(run: Run) -> None:
    """SIGKILL the command's process group (unless already reaped) and its cgroups."""
    with run.lock:
        run.killed = True
        if not run.reaped:
            _killpg(run.proc.pid)  # the session/group it leads
        run.cgroups.kill()


def reap(run: Run) -> None:
    """Anything left over (background jobs) dies with the command: its process group,
    signalled before the command is reaped (so the group id cannot have been reused), then
    whatever is still in its sandbox's cgroups (unless another command of the sandbox runs)."""
    with run.lock:
        if not run.reaped:
            _killpg(run.proc.pid)
            run.proc.wait()
            run.reaped = True
    run.cgroups.release()


def exit_code(run: Run, timed_out: bool) -> int:
    """124 on timeout; an interrupted command that still exited 0 reports -SIGKILL."""
    if timed_out:
        return TIMEOUT_EXIT_CODE
    if run.interrupted and run.proc.returncode == 0:
        return -signal.SIGKILL
    return run.proc.returncode


def collect(
    run: Run, deadline: float, stdin: str | None, cap: int
) -> tuple[OutputCapture, OutputCapture, bool]:
    """Feed ``stdin``, read stdout and stderr until both close (or the command is killed and
    the rest drained), wait for the exit; (stdout, stderr, timed out)."""
    collector = _Collector(run, deadline, stdin, cap)
    try:
        collector.pump()
        collector.wait_for_exit()
    finally:
        collector.close()
    return collector.out, collector.err, collector.timed_out


class _Collector:
    """The select loop over one command's pipes (and its pidfd, which wakes the loop the
    moment the command exits: pipes may stay open if it left background jobs behind; without
    a pidfd, the loop polls every 50 ms)."""

    def __init__(self, run: Run, deadline: float, stdin: str | None, cap: int) -> None:
        proc = run.proc
        assert proc.stdout is not None and proc.stderr is not None
        self.run, self.proc, self.deadline = run, proc, deadline
        self.out, self.err = OutputCapture(cap), OutputCapture(cap)
        self.captures = {proc.stdout.fileno(): self.out, proc.stderr.fileno(): self.err}
        self.timed_out = False
        self.exited_at: float | None = None
        self.give_up_at: float | None = None
        self.sel = selectors.DefaultSelector()
        for fd in self.captures:
            os.set_blocking(fd, False)
            self.sel.register(fd, selectors.EVENT_READ)
        self.pending = memoryview((stdin or "").encode())
        if proc.stdin is not None:
            if self.pending:
                os.set_blocking(proc.stdin.fileno(), False)
                self.sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
            else:
                proc.stdin.close()
        self.pidfd = self._open_pidfd()

    def _open_pidfd(self) -> int | None:
        if not hasattr(os, "pidfd_open"):
            return None
        try:
            pidfd = os.pidfd_open(self.proc.pid)
            self.sel.register(pidfd, selectors.EVENT_READ, data="exit")
        except OSError:
            return None
        return pidfd

    def pump(self) -> None:
        """Until both pipes are closed, or the drain time after a kill is over."""
        while any(key.data != "exit" for key in self.sel.get_map().values()):
            now = time.monotonic()
            if not self._keep_going(now):
                break
            for key, events in self.sel.select(timeout=self._select_timeout(now)):
                self._on_ready(key, events)

    def _keep_going(self, now: float) -> bool:
        """Kill on the deadline, or once the command exited but strays still hold its pipes;
        False when the time to drain the pipes after a kill is over."""
        run = self.run
        if not run.killed and now >= self.deadline:
            self.timed_out = True
            kill(run)
        if self.exited_at is None and _has_exited(self.proc):
            self.exited_at = now
        if (
            self.exited_at is not None
            and not run.killed
            and now - self.exited_at > _AFTER_EXIT_GRACE
        ):
            kill(run)  # the command is over; strays still hold its pipes
        if run.killed and self.give_up_at is None:
            self.give_up_at = now + _DRAIN_AFTER_KILL
        return self.give_up_at is None or now < self.give_up_at

    def _select_timeout(self, now: float) -> float:
        if self.run.killed or self.exited_at is not None:
            return 0.05
        return max(0.0, min(1.0 if self.pidfd is not None else 0.05, self.deadline - now))

    def _on_ready(self, key: selectors.SelectorKey, events: int) -> None:
        if key.data == "exit":
            self.sel.unregister(key.fd)
            self.exited_at = time.monotonic()
        elif events & selectors.EVENT_WRITE:
            self._write_stdin(key.fd)
        else:
            self._read(key.fd)

    def _write_stdin(self, fd: int) -> None:
        try:
            written = os.write(fd, self.pending[:_READ_CHUNK])
            self.pending = self.pending[written:]
        except BlockingIOError:
            return
        except OSError:  # the command closed its stdin
            self.pending = self.pending[:0]
        if not self.pending:
            self.sel.unregister(fd)
            assert self.proc.stdin is not None
            self.proc.stdin.close()

    def _read(self, fd: int) -> None:
        try:
            data = os.read(fd, _READ_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        if not data:
            self.sel.unregister(fd)
            return
        self.captures[fd].add(data)

    def wait_for_exit(self) -> None:
        """Both pipes are closed; the command may still run (it closed them itself), or be
        about to be reaped (a process closes its files before it becomes waitable): wait on its
        pidfd (still registered until it fires), else poll every 10 ms."""
        while not self.run.killed and not _has_exited(self.proc):
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                self.timed_out = True
                kill(self.run)
                break
            if self.pidfd is not None and self.exited_at is None:
                self.sel.select(timeout=min(1.0, remaining))
            else:
                time.sleep(0.01)

    def close(self) -> None:
        self.sel.close()
        if self.pidfd is not None:
            os.close(self.pidfd)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass


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
