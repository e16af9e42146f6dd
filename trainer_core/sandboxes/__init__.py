"""Sandboxes: where an agent's commands run. ``base`` (the Sandbox protocol), ``local``
(bubblewrap, the embedded default) and ``docker`` (the docker SDK; podman's Docker API here),
``shared`` (what both backends share) and ``tools`` (the coding tools an agent uses)."""
