"""Under CI=true a skip fails the run (unless tests/skip_allowlist.txt says why)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.sqlite


PROBE = (
    "import pytest\n\n"
    "def test_runs():\n    assert True\n\n"
    "def test_skips():\n    pytest.skip('nothing to test against')\n\n"
    "@pytest.mark.skipif(True, reason='marked off')\ndef test_marked():\n    assert True\n\n"
    "@pytest.mark.xfail(reason='known')\ndef test_known_failure():\n    assert False\n"
)
MODULE_SKIP = (
    "import pytest\n\npytest.importorskip('steplab_no_such_module')\n\ndef test_x():\n    pass\n"
)


def _run(tmp_path: Path, ci: str, source: str = PROBE) -> subprocess.CompletedProcess:
    probe = tmp_path / "test_probe.py"
    probe.write_text(source)
    env = {**os.environ, "CI": ci, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.ci_skips", "-q", "-p", "no:cacheprovider",
         "-c", os.devnull, "--rootdir", str(tmp_path), str(probe)],
        cwd=tmp_path, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_a_skip_fails_under_ci_and_passes_outside(tmp_path):
    outside = _run(tmp_path, "")
    assert outside.returncode == 0, outside.stdout
    assert "1 passed, 2 skipped, 1 xfailed" in outside.stdout
    inside = _run(tmp_path, "true")
    assert inside.returncode == 1, inside.stdout
    assert "1 failed, 1 passed, 1 xfailed, 1 error" in inside.stdout  # skipif: at setup
    assert "skipped under CI=true" in inside.stdout and "nothing to test against" in inside.stdout
    assert "marked off" in inside.stdout


def test_a_module_skipped_while_collected_fails_under_ci(tmp_path):
    assert _run(tmp_path, "", MODULE_SKIP).returncode == 5  # outside CI: nothing ran
    inside = _run(tmp_path, "true", MODULE_SKIP)
    assert inside.returncode == 2, inside.stdout  # a collection error
    assert "skipped under CI=true" in inside.stdout and "steplab_no_such_module" in inside.stdout


def test_the_allowlist_names_its_reasons():
    from tests.ci_skips import allowlist, skip_fails

    allowed = allowlist()
    assert all(why for why in allowed.values()), "every allowed skip says why"
    assert skip_fails("tests/test_x.py::test_y", {"tests/test_z.py": "why"})
    assert not skip_fails("tests/test_z.py::test_y", {"tests/test_z.py": "why"})
