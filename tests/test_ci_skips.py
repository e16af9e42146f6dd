"""Under CI=true a skip fails the run (unless tests/skip_allowlist.txt says why)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.sqlite


def _run(tmp_path: Path, ci: str) -> subprocess.CompletedProcess:
    probe = tmp_path / "test_probe.py"
    probe.write_text(
        "import pytest\n\n"
        "def test_runs():\n    assert True\n\n"
        "def test_skips():\n    pytest.skip('nothing to test against')\n\n"
        "@pytest.mark.xfail(reason='known')\ndef test_known_failure():\n    assert False\n"
    )
    env = {**os.environ, "CI": ci, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.ci_skips", "-q", "-p", "no:cacheprovider",
         "-c", os.devnull, "--rootdir", str(tmp_path), str(probe)],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_a_skip_fails_under_ci_and_passes_outside(tmp_path):
    outside = _run(tmp_path, "")
    assert outside.returncode == 0, outside.stdout
    inside = _run(tmp_path, "true")
    assert inside.returncode == 1, inside.stdout
    assert "1 failed, 1 passed, 1 xfailed" in inside.stdout
    assert "skipped under CI=true" in inside.stdout and "nothing to test against" in inside.stdout


def test_the_allowlist_names_its_reasons():
    from tests.ci_skips import allowlist, skip_fails

    allowed = allowlist()
    assert all(why for why in allowed.values()), "every allowed skip says why"
    assert skip_fails("tests/test_x.py::test_y", {"tests/test_z.py": "why"})
    assert not skip_fails("tests/test_z.py::test_y", {"tests/test_z.py": "why"})
