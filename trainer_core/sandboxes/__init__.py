"""Sandboxes: where an agent's commands run. ``local`` (bubblewrap, the embedded default) and
``docker`` (the docker SDK; podman's Docker API here)."""
