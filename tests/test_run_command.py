"""README command 1, for real: a fresh copy of the tree, `python3 run.py`, log in over HTTP, run the
diagnostic to success, Ctrl+C, and nothing left behind."""

from __future__ import annotations

import http.cookiejar
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _copy_tree(dest: Path) -> None:
    """What a fresh clone has: tracked files and untracked files git does not ignore."""
    files = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"],
            cwd=REPO,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        src = REPO / name
        if src.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)


def _clean_env(port: int) -> dict[str, str]:
    venv_bin = str(Path(sys.executable).parent)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            (
                "DATABASE_URL",
                "CELERY_",
                "STEPLAB_",
                "DJANGO_",
                "VIRTUAL_ENV",
                "PYTHONPATH",
                "SECRET_KEY",
                "DEBUG",
            )
        )
    }
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    env["STEPLAB_PORT"] = str(port)
    return env


def _processes_under(path: Path) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(path) in cmdline:
            found.append(f"{proc.name}: {cmdline}")
    return found


class Browserless:
    """Just enough of a browser: cookies, CSRF tokens, redirects."""

    def __init__(self, base: str):
        self.base = base
        self.jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.jar))

    def get(self, path: str) -> tuple[str, str]:
        with self.opener.open(self.base + path, timeout=30) as resp:
            return resp.geturl(), resp.read().decode()

    def post_form(self, path: str, fields: dict[str, str]) -> tuple[str, str]:
        _, page = self.get(path)
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert token, f"no CSRF token on {path}"
        data = urllib.parse.urlencode({"csrfmiddlewaretoken": token.group(1), **fields}).encode()
        request = urllib.request.Request(
            self.base + path, data=data, headers={"Referer": self.base + path}
        )
        with self.opener.open(request, timeout=30) as resp:
            return resp.geturl(), resp.read().decode()


def test_readme_command_1_runs_the_app_on_a_fresh_copy_and_stops_cleanly(tmp_path):
    readme = (REPO / "README.md").read_text()
    assert "python3 run.py\n" in readme, "README command 1 is `python3 run.py`"
    clone = tmp_path / "steplab"
    _copy_tree(clone)
    assert not (clone / ".venv").exists() and not (clone / "var").exists()
    port = _free_port()

    proc = subprocess.Popen(  # noqa: S603
        ["python3", "run.py"],
        cwd=clone,
        env=_clean_env(port),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, like a terminal's foreground job
    )
    output: list[str] = []
    reader = threading.Thread(
        target=lambda: output.extend(line.decode(errors="replace") for line in proc.stdout),
        daemon=True,
    )
    reader.start()

    def log() -> str:
        return "".join(output[-80:])

    try:
        deadline = (
            time.monotonic() + 900
        )  # a fresh .venv: pip installs everything (from the local cache)
        while not any("Steplab is running at" in line for line in output):
            assert proc.poll() is None, f"run.py exited with {proc.returncode}:\n{log()}"
            assert time.monotonic() < deadline, f"no URL after 900s:\n{log()}"
            time.sleep(0.5)
        url = (
            next(line for line in output if "Steplab is running at" in line)
            .split("at ", 1)[1]
            .strip()
        )
        assert url == f"http://127.0.0.1:{port}/"
        password_line = next(line for line in output if "its password is in" in line)
        password_file = Path(password_line.split("its password is in", 1)[1].strip())
        assert password_file.is_relative_to(clone)
        creds = dict(line.split(": ", 1) for line in password_file.read_text().splitlines())

        browser = Browserless(url.rstrip("/"))
        landed, _ = browser.get("/")
        assert "/login/" in landed, "anonymous visitors go to the login page"
        landed, page = browser.post_form(
            "/login/", {"username": creds["username"], "password": creds["password"]}
        )
        assert landed == url and "Dashboard" in page, "logged in and on the dashboard"

        landed, page = browser.post_form(
            "/jobs/diagnostic/new/",
            {
                "steps": "4",
                "step_seconds": "0.1",
                "children": "0",
                "fail_at_step": "0",
                "report": "on",
            },
        )
        match = re.search(r"/jobs/(\d+)/$", landed)
        assert match, f"expected the job page, got {landed}"
        job_id = match.group(1)
        deadline = time.monotonic() + 180
        while True:
            _, fragment = browser.get(f"/jobs/{job_id}/progress/")
            status = re.search(r'data-status="(\w+)"', fragment).group(1)
            if status in ("succeeded", "failed", "cancelled"):
                break
            assert time.monotonic() < deadline, f"job {job_id} still {status}:\n{log()}"
            time.sleep(0.5)
        assert status == "succeeded", f"{fragment}\n{log()}"
        assert 'aria-valuenow="100"' in fragment
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl+C
        try:
            code = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            raise
    assert code == 0, f"run.py exited with {code} after Ctrl+C:\n{log()}"
    time.sleep(1.0)
    left = _processes_under(clone)
    assert left == [], "processes left behind after Ctrl+C:\n" + "\n".join(left)
    with socket.socket() as s:
        # the port is free again (REUSEADDR: our own finished connections may sit in TIME_WAIT)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", port))
