"""Resource limits of the docker backend's container: ``memory_mb`` -> the cgroup memory limit
(no extra swap), ``pids`` -> the pids cgroup, the ``cpus`` argument -> a CPU quota
(``nano_cpus``), and ulimits for every process: ``cpu_seconds`` -> RLIMIT_CPU,
``file_size_mb`` -> RLIMIT_FSIZE, nofile 1024:20000 and nproc 1024."""

from __future__ import annotations

from typing import Any

from trainer_core.sandboxes.base import SandboxLimits
from trainer_core.sandboxes.docker.client import docker_sdk


def ulimits(limits: SandboxLimits) -> list[Any]:
    """The container's ulimits (``docker.types.Ulimit``)."""
    ulimit = docker_sdk().types.Ulimit
    out = [
        ulimit(name="nofile", soft=1024, hard=20000),
        ulimit(name="nproc", soft=1024, hard=1024),
    ]
    if limits.cpu_seconds is not None:
        n = int(limits.cpu_seconds)
        out.append(ulimit(name="cpu", soft=n, hard=n))
    if limits.file_size_mb is not None:
        n = int(limits.file_size_mb) * 1024 * 1024
        out.append(ulimit(name="fsize", soft=n, hard=n))
    return out


def resource_config(limits: SandboxLimits, *, cpus: float | None) -> dict[str, Any]:
    """The resource part of ``create_host_config``'s arguments."""
    config: dict[str, Any] = {"ulimits": ulimits(limits)}
    if limits.memory_mb is not None:
        config["mem_limit"] = f"{int(limits.memory_mb)}m"
        config["memswap_limit"] = f"{int(limits.memory_mb)}m"  # no escaping into swap
    if limits.pids is not None:
        config["pids_limit"] = int(limits.pids)
    if cpus is not None:
        config["nano_cpus"] = int(cpus * 1e9)
    return config
