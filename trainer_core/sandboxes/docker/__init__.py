"""The docker sandbox: one long-lived container per sandbox, driven through the Docker API.

Works with Docker and with podman's Docker API (``scripts/podman-sandbox.sh`` sets that up
here and builds ``localhost/steplab-sandbox``: Debian bookworm minbase with python3 and git).
The ``docker`` SDK is imported only when a :class:`DockerSandbox` starts.

The container (``start()``):

* runs a tiny reaping loop as PID 1 (``sleep`` in a ``sh`` loop; orphans are reaped by it);
* has no network unless ``limits.network`` (``network_mode="none"``);
* a read-only root; the workspace ``/work`` and ``/tmp`` are tmpfs mounts (``/work`` is the
  only place meant to be written; it counts against the container's memory when written from
  inside);
* runs as ``nobody`` (65534:65534), with every capability dropped and ``no-new-privileges``;
* limits: ``memory_mb`` -> cgroup memory (no extra swap), ``pids`` -> the pids cgroup,
  ``cpu_seconds`` and ``file_size_mb`` -> RLIMIT_CPU / RLIMIT_FSIZE for every process, the
  ``cpus`` argument -> a CPU quota (``nano_cpus``), nofile 1024:20000 and nproc 1024.

``files``, ``repo`` (a directory or a tarball) and every later ``write_file`` go in as tar
archives (``put_archive``), owned by 65534; ``read_file`` and ``snapshot`` come out as archives
(``get_archive``). Snapshots are kept in memory (a tar of ``/work``); ``restore`` empties
``/work`` and puts the archive back.

Each ``exec`` runs ``timeout --signal=KILL <wall>`` inside the container under a small ``sh``
wrapper that records the command's process group and, once the command is over, kills what it
left behind in that group. The client also guards the deadline: if the exec has not ended half
a second after it, the group is SIGKILLed through a second exec, and if the stream still does
not end the connection is cut. A timed-out command reports ``timed_out=True`` and exit code
124, like the local backend. Processes that leave the group on purpose (``setsid``) outlive
their command until ``close()`` removes the container.

The parts: :mod:`.client` (the SDK, which daemon), :mod:`.command` (the container and the exec
wrapper), :mod:`.limits` (the container's resource limits), :mod:`.process` (the exec's output
stream, deadline and exit code), :mod:`.archives` (files in and out as tars) and
:mod:`.sandbox` (:class:`DockerSandbox`, composing them).
"""

from trainer_core.sandboxes.docker.client import (
    DOCKER_DEFAULT_SOCKET,
    STEPLAB_PODMAN_SOCKET,
    default_base_url,
)
from trainer_core.sandboxes.docker.command import DEFAULT_IMAGE, USER, WORKDIR
from trainer_core.sandboxes.docker.sandbox import DockerSandbox

__all__ = [
    "DEFAULT_IMAGE",
    "DOCKER_DEFAULT_SOCKET",
    "STEPLAB_PODMAN_SOCKET",
    "USER",
    "WORKDIR",
    "DockerSandbox",
    "default_base_url",
]
