"""The Docker API client side of the docker backend: the ``docker`` SDK (imported only when a
sandbox starts), which daemon to talk to, and removing a sandbox's container."""

from __future__ import annotations

import logging
import os
from typing import Any

from trainer_core.errors import SandboxError

_log = logging.getLogger(__name__)

STEPLAB_PODMAN_SOCKET = "unix:///run/steplab-podman.sock"  # scripts/podman-sandbox.sh
DOCKER_DEFAULT_SOCKET = "unix:///var/run/docker.sock"
SETUP_HINT = "run scripts/podman-sandbox.sh (or point DOCKER_HOST at a Docker daemon)"


def docker_sdk():
    """The ``docker`` package; SandboxError when it is not installed."""
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - docker is a dependency
        raise SandboxError(f"the docker sandbox needs the docker SDK (pip install docker): {exc}")
    return docker


def default_base_url() -> str:
    """``$DOCKER_HOST``, else the steplab podman socket when it exists, else Docker's socket."""
    env = os.environ.get("DOCKER_HOST")
    if env:
        return env
    if os.path.exists(STEPLAB_PODMAN_SOCKET.removeprefix("unix://")):
        return STEPLAB_PODMAN_SOCKET
    return DOCKER_DEFAULT_SOCKET


def remove_container(api: Any, container_id: str) -> None:
    """Force-remove the container (with its volumes) and close the client; best effort."""
    try:
        api.remove_container(container_id, force=True, v=True)
    except Exception as exc:
        if getattr(exc, "status_code", None) != 404:
            _log.warning("could not remove sandbox container %s: %s", container_id[:12], exc)
    try:
        api.close()
    except Exception:  # noqa: S110 - best effort
        pass
