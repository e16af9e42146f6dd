#!/usr/bin/env python3
"""Steplab's two commands.

    python3 run.py          run the app: create .venv, install, migrate, load built-in data,
                            create the first admin, start the web server and a worker; Ctrl+C stops
                            (on 127.0.0.1 with the debug page; any other STEPLAB_HOST, or DEBUG=0,
                            runs gunicorn without it and needs SECRET_KEY: docs/security.md)
    python3 run.py test     run the test suite (PostgreSQL and Redis, then the SQLite subset)
    python3 run.py install  only create/update .venv

Needs only Python 3.11. Installs with pip into .venv, always with constraints.txt.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = Path(os.environ.get("STEPLAB_VENV", ROOT / ".venv")).resolve()
PY = VENV / "bin" / "python"


def _say(line: str) -> None:
    print(f"[steplab] {line}", flush=True)


def ensure_venv() -> Path:
    if sys.version_info[:2] != (3, 11):
        sys.exit(
            f"Steplab needs Python 3.11 (this is {sys.version.split()[0]}). "
            "Run it with python3.11, e.g. 'python3.11 run.py'."
        )
    if not PY.exists():
        _say(f"creating {VENV}")
        venv.EnvBuilder(with_pip=True, clear=False).create(VENV)
    digest = hashlib.sha256()
    for name in ("pyproject.toml", "constraints.txt"):
        digest.update((ROOT / name).read_bytes())
    digest.update(str(ROOT).encode())
    stamp = VENV / ".steplab-installed"
    if not stamp.exists() or stamp.read_text().strip() != digest.hexdigest():
        _say("installing Python packages with constraints.txt (the first time takes a few minutes)")
        cmd = [
            str(PY),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "-q",
            "-c",
            str(ROOT / "constraints.txt"),
            "-e",
            str(ROOT),
        ]
        if subprocess.call(cmd, cwd=ROOT) != 0:  # noqa: S603
            sys.exit("pip install failed (see above). Fix the cause and run the command again.")
        stamp.write_text(digest.hexdigest())
    return PY


def run_tests(args: list[str]) -> int:
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", PYTHONUNBUFFERED="1")
    pytest = [str(PY), "-m", "pytest", "--durations=15"]
    if args:
        return subprocess.call([*pytest, *args], cwd=ROOT, env=env)  # noqa: S603
    _say("tests on PostgreSQL and Redis")
    first = subprocess.call(pytest, cwd=ROOT, env=env)  # noqa: S603
    _say("the SQLite subset (the embedded default)")
    second = subprocess.call(
        [*pytest, "-m", "sqlite"], cwd=ROOT, env=dict(env, STEPLAB_TEST_DB="sqlite")
    )  # noqa: S603
    for name, code in (("PostgreSQL run", first), ("SQLite run", second)):
        if code == 5:
            _say(f"{name}: no tests were collected — that is a failure")
        elif code != 0:
            _say(f"{name}: failed (exit {code})")
    return 0 if first == 0 and second == 0 else (first or second or 1)


def main(argv: list[str]) -> int:
    command = argv[0] if argv else "serve"
    if command in ("-h", "--help", "help"):
        print(__doc__)
        return 0
    py = ensure_venv()
    if command == "install":
        _say(f"ready: {py}")
        return 0
    if command == "test":
        return run_tests(argv[1:])
    args = argv if command != "serve" else argv[1:]
    os.chdir(ROOT)
    os.execv(str(py), [str(py), "-m", "webapp.cli", "serve", *args])  # noqa: S606
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
