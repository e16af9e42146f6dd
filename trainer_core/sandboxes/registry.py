"""The registry of live sandboxes, so that what a killed process's sandboxes leave behind can be
reclaimed (:mod:`trainer_core.sandboxes.reclaim`).

A sandbox removes its workspace and cgroups (local) or its container (docker) when it closes,
or from a finalizer when its process exits normally. A process killed with SIGKILL runs
neither: its workspaces stay in ``/tmp``, its cgroup directories stay, its containers keep
running. So every started sandbox records itself in the **registry**: one small JSON file per
sandbox naming the process that owns it (pid and start time, host, PID namespace, boot) and
what to remove (the workspace directory, the cgroup directories, the container). Closing the
sandbox removes its record.

:func:`trainer_core.sandboxes.reclaim.reclaim_dead` (run by the jobs reaper on every pass,
``steplab jobs reap`` too) removes what the records of dead processes name, then the records. Only records of this host, PID
namespace and boot are judged (another machine's sandboxes are its own reaper's); a record is
claimed by renaming it first, so two reapers never work on the same one.

The registry is ``$STEPLAB_SANDBOX_REGISTRY``, else ``<tmp>/steplab-sandboxes-<uid>``; it is
used only when it is a directory of this user that nobody else may write to (a record names
paths to remove). What a record names is checked again before anything is removed: a workspace
must be a ``steplab-sandbox-*`` directory of this user, a cgroup a ``steplab-*``/``sandbox-*``
directory on a cgroup file system, a container a hex id.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
import tempfile
import threading
import uuid
from typing import Any

_log = logging.getLogger(__name__)

REGISTRY_SETTING = "STEPLAB_SANDBOX_REGISTRY"
WORKSPACE_PREFIX = "steplab-sandbox-"
RECORD = re.compile(r"^([0-9a-f]{32})\.json$")
CLAIMED = re.compile(r"^([0-9a-f]{32})\.json\.(\d+)$")

_owner_lock = threading.Lock()
_owner = ""  # what this process works for now (e.g. "job 12"), written into new records


def set_owner(owner: str) -> None:
    """Name what this process's sandboxes belong to from now on ("" for nothing), e.g. the job
    a worker runs; it is written into each new record and reported when it is reclaimed."""
    global _owner
    with _owner_lock:
        _owner = str(owner)[:200]


def registry_dir(*, create: bool = True) -> str | None:
    """The registry directory, or None when it cannot be used safely (a warning says why)."""
    path = os.environ.get(REGISTRY_SETTING) or os.path.join(
        tempfile.gettempdir(), f"steplab-sandboxes-{os.geteuid()}"
    )
    if create:
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            _log.warning("sandbox registry %s cannot be made: %s", path, exc)
            return None
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if (
        not stat.S_ISDIR(info.st_mode)
        or info.st_uid != os.geteuid()
        or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    ):
        _log.warning(
            "sandbox registry %s is not a private directory of this user; sandboxes of killed "
            "processes will not be reclaimed (remove it, or set %s)",
            path,
            REGISTRY_SETTING,
        )
        return None
    return path


# --- this process ------------------------------------------------------------------------------


def read_text(path: str) -> str:
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return ""


def process_start(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot), None when there is no such
    process (or it is a zombie: it is dead, only not yet waited for)."""
    text = read_text(f"/proc/{pid}/stat")
    if not text or ")" not in text:
        return None
    fields = text.rsplit(")", 1)[1].split()
    if not fields or fields[0] in ("Z", "X"):
        return None
    try:
        return int(fields[19])  # field 22 of proc(5), counted after the command name
    except (IndexError, ValueError):
        return None


def identity() -> dict[str, Any]:
    try:
        pidns = os.readlink("/proc/self/ns/pid")
    except OSError:
        pidns = ""
    return {
        "host": os.uname().nodename,
        "boot": read_text("/proc/sys/kernel/random/boot_id"),
        "pidns": pidns,
    }


def process_alive(record: dict[str, Any]) -> bool:
    """Whether the process that made the record runs (the same process: a reused pid has
    another start time)."""
    started = process_start(int(record.get("pid") or 0))
    if started is None:
        return False
    return record.get("start") is None or started == record["start"]


# --- records -----------------------------------------------------------------------------------


def register(
    *,
    workspace: str | None = None,
    cgroups: list[str] | tuple[str, ...] = (),
    container: str | None = None,
    base_url: str | None = None,
) -> str | None:
    """Record a started sandbox of this process; returns the record's path for
    :func:`unregister` (None when there is no usable registry: the sandbox works all the same,
    it is only not reclaimed should this process be killed)."""
    directory = registry_dir()
    if directory is None:
        return None
    pid = os.getpid()
    with _owner_lock:
        owner = _owner
    record = {
        **identity(),
        "pid": pid,
        "start": process_start(pid),
        "owner": owner,
        "workspace": workspace,
        "cgroups": list(cgroups),
        "container": container,
        "base_url": base_url,
    }
    name = f"{uuid.uuid4().hex}.json"
    path = os.path.join(directory, name)
    try:
        fd = os.open(path + ".new", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            json.dump(record, fh)
        os.replace(path + ".new", path)
    except OSError as exc:
        _log.warning("cannot record sandbox in %s: %s", directory, exc)
        return None
    return path


def unregister(path: str | None) -> None:
    """Forget a sandbox that closed (what it made is gone)."""
    if not path:
        return
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    except OSError as exc:
        _log.warning("cannot remove sandbox record %s: %s", path, exc)


def live_records() -> list[dict[str, Any]]:
    """Every record in the registry (tests and diagnostics)."""
    directory = registry_dir(create=False)
    if directory is None:
        return []
    out = []
    for name in sorted(os.listdir(directory)):
        if RECORD.match(name):
            record = load(os.path.join(directory, name))
            if record is not None:
                out.append({**record, "record": os.path.join(directory, name)})
    return out


def load(path: str) -> dict[str, Any] | None:
    try:
        with open(path) as fh:
            record = json.load(fh)
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) else None
