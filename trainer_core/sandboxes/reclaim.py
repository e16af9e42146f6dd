"""Reclaiming what the sandboxes of dead processes left behind: their workspaces, cgroups and
containers, as the registry (:mod:`trainer_core.sandboxes.registry`) recorded them. The jobs
reaper runs :func:`reclaim_dead` on every pass."""

from __future__ import annotations

import logging
import os
import re
import stat
from typing import Any

from trainer_core.sandboxes.docker.client import default_base_url, docker_sdk
from trainer_core.sandboxes.local import cgroupfs
from trainer_core.sandboxes.local.workspace import rmtree
from trainer_core.sandboxes.registry import (
    CLAIMED,
    RECORD,
    WORKSPACE_PREFIX,
    identity,
    load,
    process_alive,
    process_start,
    read_text,
    registry_dir,
    unregister,
)

_log = logging.getLogger(__name__)

_CONTAINER = re.compile(r"^[0-9a-f]{12,64}$")


def reclaim_dead() -> list[dict[str, Any]]:
    """Remove the workspaces, cgroups and containers of sandboxes whose process is dead (on this
    host, in this PID namespace, since this boot), and their records. Returns what was
    reclaimed: one dict per sandbox (owner, pid, workspace, cgroups, container, problems)."""
    directory = registry_dir(create=False)
    if directory is None:
        return []
    here = identity()
    reclaimed = []
    for name in sorted(os.listdir(directory)):
        path = os.path.join(directory, name)
        claimed = CLAIMED.match(name)
        if claimed and process_start(int(claimed.group(2))) is not None:
            continue  # another reaper is on it
        if not (claimed or RECORD.match(name)):
            continue
        record = load(path)
        if record is None or any(record.get(k) != here[k] for k in here) or process_alive(record):
            continue
        key = (claimed or RECORD.match(name)).group(1)
        mine = os.path.join(directory, f"{key}.json.{os.getpid()}")
        try:
            os.rename(path, mine)  # claim it: a second reaper finds it gone
        except OSError:
            continue
        problems = _remove(record)
        unregister(mine)
        reclaimed.append({**record, "problems": problems})
        _log.warning(
            "reclaimed a sandbox of dead process %s (%s): %s%s",
            record.get("pid"),
            record.get("owner") or "no job",
            record.get("workspace") or record.get("container"),
            f"; {'; '.join(problems)}" if problems else "",
        )
    return reclaimed


def _remove(record: dict[str, Any]) -> list[str]:
    """Remove what one record names, each part checked first; the problems met (if any)."""
    problems: list[str] = []
    mounts = _cgroup_mounts()
    for group in record.get("cgroups") or []:
        problem = _remove_cgroup(str(group), mounts)
        if problem:
            problems.append(problem)
    workspace = record.get("workspace")
    if workspace:
        problem = _remove_workspace(str(workspace))
        if problem:
            problems.append(problem)
    container = record.get("container")
    if container:
        problem = _remove_container(str(container), record.get("base_url"))
        if problem:
            problems.append(problem)
    return problems


def _cgroup_mounts() -> list[str]:
    mounts = []
    for line in read_text("/proc/self/mountinfo").splitlines():
        left, _, right = line.partition(" - ")
        parts = left.split()
        if len(parts) > 4 and right.split()[:1] in (["cgroup"], ["cgroup2"]):
            mounts.append(parts[4])
    return mounts


def _remove_cgroup(group: str, mounts: list[str]) -> str:
    real = os.path.realpath(group)
    base = os.path.basename(real)
    if (
        real != group
        or not base.startswith(("steplab-", "sandbox-"))
        or not any(real.startswith(m.rstrip("/") + "/") for m in mounts)
    ):
        return f"left {group}: not a sandbox cgroup"
    if not os.path.isdir(real):
        return ""
    cgroupfs.kill_members(real)
    return "" if cgroupfs.remove(real) else f"could not remove cgroup {real}"


def _remove_workspace(workspace: str) -> str:
    try:
        info = os.lstat(workspace)
    except FileNotFoundError:
        return ""
    except OSError as exc:
        return f"cannot look at {workspace}: {exc}"
    if (
        os.path.realpath(workspace) != workspace
        or not os.path.basename(workspace).startswith(WORKSPACE_PREFIX)
        or not stat.S_ISDIR(info.st_mode)
        or info.st_uid != os.geteuid()
    ):
        return f"left {workspace}: not a sandbox workspace of this user"
    rmtree(workspace)
    return f"could not remove all of {workspace}" if os.path.lexists(workspace) else ""


def _remove_container(container: str, base_url: str | None) -> str:
    if not _CONTAINER.match(container):
        return f"left container {container[:80]!r}: not a container id"
    try:
        docker = docker_sdk()
        api = docker.APIClient(base_url=base_url or default_base_url(), timeout=30, version="auto")
    except Exception as exc:  # noqa: BLE001 - the daemon may be gone too
        return f"cannot reach the Docker API to remove container {container[:12]}: {exc}"
    try:
        api.remove_container(container, force=True, v=True)
    except Exception as exc:  # noqa: BLE001 - a 404: it is gone already
        if getattr(exc, "status_code", None) != 404:
            return f"could not remove container {container[:12]}: {exc}"
    finally:
        api.close()
    return ""
