"""Importing the real agent logs into the store, from the service and from the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from webapp.common.errors import ApplicationError
from webapp.trajectories import services
from webapp.trajectories.models import Step, Trajectory

REPO = Path(__file__).resolve().parents[3]
SHARED = REPO.parent / "shared" / "data" / "agent-logs"
STEPLAB = str(Path(sys.executable).parent / "steplab")
FIXTURES = REPO / "tests" / "fixtures" / "agent_logs"

needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="../shared/data/agent-logs is absent")
pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

EXPECTED = {
    "swe-agent_test-repo.traj": [5],
    "swe-agent_function-calling_marshmallow.traj": [11],
    "mini-swe-agent_local.traj.json": [2],
    "openhands_basic.json": [2],
    "openhands_resolver_output.jsonl": [4, 22],
    "inspect_security-guide.json": [0, 0, 0],
    "inspect_read_sample.eval": [0],
    "tau-bench_airline_slice.json": [8, 0, 7, 20, 6, 6],
}


@needs_shared
def test_every_shared_log_imports_once_and_a_reimport_writes_nothing():
    paths = [str(SHARED / name) for name in EXPECTED]
    summary = services.trajectories_import_files(paths=paths)
    assert len(summary.created) == sum(len(v) for v in EXPECTED.values()), summary.duplicates
    for name, counts in EXPECTED.items():
        rows = Trajectory.objects.filter(source_file__name=name).order_by("pk")
        assert sorted(r.step_count for r in rows) == sorted(counts), name
    swe = Trajectory.objects.get(source_file__name="swe-agent_test-repo.traj")
    assert (
        swe.source_format == "swe-agent" and swe.outcome["metadata"]["exit_status"] == "submitted"
    )
    # the system and instance prompts are message steps 0 and 1; the tool calls follow
    assert [s.role for s in swe.steps.filter(kind="message")] == ["system", "user"]
    assert swe.message_count == 2 and swe.steps.get(index=2 + 4).tool == "submit"
    assert swe.source_file.raw_bytes() == (SHARED / "swe-agent_test-repo.traj").read_bytes()
    tau = Trajectory.objects.filter(source_format="tau-bench")
    assert set(tau.values_list("reward", flat=True)) == {0.0}
    before = (Trajectory.objects.count(), Step.objects.count())
    again = services.trajectories_import_files(paths=paths)
    assert again.created == [] and len(again.duplicates) == before[0]
    assert (Trajectory.objects.count(), Step.objects.count()) == before


def test_a_bad_file_among_good_ones_all_or_nothing_imports_nothing(tmp_path):
    good = FIXTURES / "openai_chat_conversation.json"
    broken = tmp_path / "broken.json"
    broken.write_text('[{"role": "user", "content": "hi"}, {"role": "assis')
    with pytest.raises(ApplicationError, match="broken.json"):
        services.trajectories_import_files(paths=[str(good), str(broken)], all_or_nothing=True)
    assert not Trajectory.objects.exists()
    summary = services.trajectories_import_files(paths=[str(good), str(broken)])
    assert [bool(row["error"]) for row in summary.files] == [False, True]
    assert Trajectory.objects.count() == 1


def test_a_zip_with_one_bad_member_all_or_nothing_imports_nothing(tmp_path):
    archive = tmp_path / "logs.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(FIXTURES / "openai_chat_conversation.json", "good.json")
        zf.writestr("bad.json", "{ not json")
    with pytest.raises(ApplicationError, match="logs.zip:bad.json"):
        services.trajectories_import_files(paths=[str(archive)], all_or_nothing=True)
    assert not Trajectory.objects.exists()


def _env_for_test_db() -> dict[str, str]:
    from django.db import connection

    env = dict(os.environ)
    if connection.vendor == "postgresql":
        db = connection.settings_dict
        env["DATABASE_URL"] = (
            f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
        )
    else:
        env["STEPLAB_SQLITE_PATH"] = str(connection.settings_dict["NAME"])
    return env


@needs_shared
@pytest.mark.django_db(transaction=True)
def test_cli_import_convert_and_validate(tmp_path):
    env = _env_for_test_db()
    log = str(SHARED / "openhands_resolver_output.jsonl")
    imported = subprocess.run(
        [STEPLAB, "import", log], capture_output=True, text=True, env=env, check=False
    )
    assert imported.returncode == 0, imported.stderr
    assert "imported 2 trajectories; 0 duplicate(s) skipped" in imported.stdout
    again = subprocess.run(
        [STEPLAB, "import", log], capture_output=True, text=True, env=env, check=False
    )
    assert "imported 0 trajectories; 2 duplicate(s) skipped" in again.stdout

    nodb = dict(os.environ, DATABASE_URL="postgres://nobody@127.0.0.1:1/nothing")
    out = tmp_path / "all.jsonl"
    converted = subprocess.run(
        [
            STEPLAB,
            "convert",
            str(SHARED / "swe-agent_test-repo.traj"),
            str(SHARED / "tau-bench_airline_slice.json"),
            "-o",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=nodb,
        check=False,
    )
    assert converted.returncode == 0, converted.stderr
    lines = out.read_text().splitlines()
    assert len(lines) == 7 and json.loads(lines[0])["schema_version"] == "1.1"
    roundtrip = subprocess.run(
        [STEPLAB, "validate", str(out)], capture_output=True, text=True, env=nodb, check=False
    )
    assert (
        roundtrip.returncode == 0
        and "steplab" in roundtrip.stdout
        and "7 trajectories" in roundtrip.stdout
    )
    bad = subprocess.run(
        [STEPLAB, "validate", str(SHARED / "SOURCES.md")],
        capture_output=True,
        text=True,
        env=nodb,
        check=False,
    )
    assert bad.returncode == 1 and "formats tried:" in bad.stdout
