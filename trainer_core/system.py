"""What this machine has for Steplab's work: sandboxes, browsers, torch. No Django here; the
web app adds the database and the broker to make the full diagnostic report."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from dataclasses import asdict, dataclass


@dataclass
class Check:
    name: str
    status: str  # "ok", "missing", "error"
    detail: str
    hint: str = ""

    def as_dict(self) -> dict:
        return asdict(self)


def _run(argv: list[str], timeout: float = 10.0) -> tuple[int, str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)  # noqa: S603
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 1, str(exc)
    return proc.returncode, (proc.stdout or proc.stderr).strip()


def probe_python() -> Check:
    return Check(
        "python",
        "ok",
        f"{platform.python_implementation()} {platform.python_version()} ({sys.executable})",
    )


def probe_bubblewrap() -> Check:
    path = shutil.which("bwrap")
    if not path:
        return Check(
            "bubblewrap",
            "missing",
            "bwrap not found",
            "apt-get install bubblewrap (local sandboxes)",
        )
    code, version = _run([path, "--version"])
    if code != 0:
        return Check("bubblewrap", "error", version)
    code, out = _run(
        [
            path,
            "--unshare-all",
            "--die-with-parent",
            "--ro-bind",
            "/usr",
            "/usr",
            "--symlink",
            "usr/bin",
            "/bin",
            "--symlink",
            "usr/lib",
            "/lib",
            "--symlink",
            "usr/lib64",
            "/lib64",
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "/bin/true",
        ]
    )
    if code != 0:
        return Check(
            "bubblewrap",
            "error",
            f"{version}, but a test sandbox failed: {out[:200]}",
            "bwrap needs user namespaces; see PLATFORM notes",
        )
    return Check("bubblewrap", "ok", f"{version}; a test sandbox ran")


def probe_podman() -> Check:
    path = shutil.which("podman")
    if not path:
        return Check(
            "podman",
            "missing",
            "podman not found",
            "apt-get install podman runc (Docker-API sandboxes without a Docker engine)",
        )
    code, version = _run([path, "--version"])
    return Check("podman", "ok" if code == 0 else "error", version)


def probe_docker_host() -> Check:
    host = os.environ.get("DOCKER_HOST", "")
    sock = "/var/run/docker.sock"
    if host:
        return Check("docker API", "ok", f"DOCKER_HOST={host}")
    if os.path.exists(sock):
        return Check("docker API", "ok", sock)
    return Check(
        "docker API",
        "missing",
        "no DOCKER_HOST and no /var/run/docker.sock",
        "serve one with 'podman system service' and set DOCKER_HOST for the docker sandbox backend",
    )


def probe_chromium() -> Check:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            code, version = _run([path, "--version"], timeout=20)
            return Check("chromium", "ok" if code == 0 else "error", version or path)
    return Check(
        "chromium", "missing", "no chromium on PATH", "apt-get install chromium (browser tests)"
    )


def probe_torch() -> Check:
    """Imports torch (slow, ~1-2 s); only the diagnostic calls this."""
    try:
        import torch  # noqa: PLC0415 - lazy on purpose
    except Exception as exc:  # not installed or broken
        return Check(
            "torch", "missing", f"cannot import torch: {exc}", "pip install -c constraints.txt -e ."
        )
    if torch.cuda.is_available():
        names = ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))
        device = f"cuda ({torch.cuda.device_count()}: {names})"
    elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        device = "mps"
    else:
        device = f"cpu ({torch.get_num_threads()} threads)"
    return Check("torch", "ok", f"torch {torch.__version__}, device {device}")


def probe_machine() -> list[Check]:
    """Every machine-level check, in display order."""
    return [
        probe_python(),
        probe_bubblewrap(),
        probe_podman(),
        probe_docker_host(),
        probe_chromium(),
        probe_torch(),
    ]
