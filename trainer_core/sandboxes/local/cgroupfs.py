"""File operations on cgroup directories shared by the v1 and v2 drivers: write a control file,
list a group's processes, SIGKILL everything in a group, remove a group, and check that a
process moved into a group really shows up there."""

from __future__ import annotations

import os
import signal
import subprocess
import time


def write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def read(path: str) -> str:
    with open(path) as fh:
        return fh.read()


def read_pids(group: str) -> list[int]:
    try:
        with open(os.path.join(group, "cgroup.procs")) as fh:
            items = fh.read().split()
    except OSError:
        return []
    return [int(p) for p in items if p.isdigit()]


def _is_zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            return fh.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
    except (OSError, IndexError):
        return True  # gone


def kill_members(group: str, *, rounds: int = 50, skip: set[int] | None = None) -> None:
    """SIGKILL everything in ``group`` until only zombies are left (a fork bomb may race us a
    little). ``skip``: our own child, killed and reaped by the caller."""
    pause = 0.0005
    for _ in range(rounds):
        pids = [p for p in read_pids(group) if p not in (skip or ()) and not _is_zombie(p)]
        if not pids:
            return
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(pause)
        pause = min(pause * 2, 0.02)


def remove(group: str, *, wait: float = 2.0) -> bool:
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
            kill_members(group, rounds=1)
            time.sleep(pause)
            pause = min(pause * 2, 0.02)


def try_join(group: str) -> str | None:
    """Move a short-lived process into ``group`` and back out; None when that worked, else why
    not."""
    proc = subprocess.Popen(["sleep", "5"], stdin=subprocess.DEVNULL)  # noqa: S603, S607
    try:
        write(os.path.join(group, "cgroup.procs"), str(proc.pid))
        if proc.pid not in read_pids(group):
            return f"a process moved into {group} did not show up there"
        return None
    except OSError as exc:
        return f"cannot move a process into {group}: {exc.strerror or exc}"
    finally:
        proc.kill()
        proc.wait()
