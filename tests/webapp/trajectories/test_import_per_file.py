"""Importing many files: every file that reads is stored, every file that does not is reported
(each file all or nothing; all-or-nothing for the whole batch on request), on the upload page, in
the service and in ``steplab import``. Every bad input is refused with its message and writes
nothing — never a 500 — and memory stays bounded on a decompression bomb. An errored run imports
as a failed trajectory whose error is shown beside its outcome."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tracemalloc
import zipfile
from html import escape
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from trainer_core.recording.schema import Step, TaskRef, Trajectory
from webapp.trajectories import services
from webapp.trajectories.models import SourceFile
from webapp.trajectories.models import Step as StepRow
from webapp.trajectories.models import Trajectory as TrajectoryRow

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / "tests" / "fixtures" / "agent_logs"
STEPLAB = str(Path(sys.executable).parent / "steplab")
CHAT = (FIXTURES / "openai_chat_conversation.json").read_bytes()
EVIL_NAME = "<img src=x onerror=alert(1)>.json"
SWE_HISTORY = {
    "history": [
        {"role": "system", "content": "You are SWE-agent.", "message_type": "system_prompt"},
        {"role": "user", "content": "Fix the bug.", "message_type": "observation"},
        {
            "role": "assistant",
            "content": "Look.",
            "thought": "Look.",
            "action": "ls",
            "message_type": "action",
        },  # fmt: skip
        {"role": "user", "content": "a.py", "message_type": "observation"},
    ]
}


def _line(*steps: Step, marker: str = "t") -> str:
    return Trajectory(task=TaskRef(id=marker, prompt=f"do {marker}"), steps=list(steps)).to_json()


def _raw_step(**fields) -> str:
    """One canonical trajectory line whose first step has ``fields`` written as raw JSON text."""
    body = ", ".join(f'"{k}": {v}' for k, v in {"index": "0", "tool": '"x"', **fields}.items())
    return f'{{"schema_version": "1.0", "steps": [{{{body}}}]}}'


def _zip(members: dict[str, bytes | str]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, content in members.items():
            zf.writestr(name, content)
    return buffer.getvalue()


def _bomb_zip(size: int, *, good: bool = True) -> bytes:
    """A zip of a good chat log (``good``) and ``size`` bytes of spaces (~1000x compressed)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        if good:
            zf.writestr("good.json", CHAT)
        with zf.open("bomb.json", "w", force_zip64=True) as handle:
            for _ in range(size >> 20):
                handle.write(b" " * (1 << 20))
    return buffer.getvalue()


def _counts() -> tuple[int, int, int]:
    return TrajectoryRow.objects.count(), StepRow.objects.count(), SourceFile.objects.count()


def _upload(client, files: dict[str, bytes | str], **options):
    uploads = [
        SimpleUploadedFile(name, content.encode() if isinstance(content, str) else content)
        for name, content in files.items()
    ]
    return client.post(reverse("trajectories:import"), {"files": uploads, **options})


def _table(page: str) -> list[tuple[str, str]]:
    """(status, row text) of each row of the per-file table."""
    import re

    rows = re.findall(r'<tr data-file-status="(\w+)">(.*?)</tr>', page, re.S)
    return [(status, re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", text)).strip()) for status, text in rows]  # fmt: skip


@pytest.fixture
def existing():
    """One trajectory already stored, so 'nothing written' is measured against a non-empty store."""
    return services.trajectories_import_files(paths=[str(FIXTURES / "tau_bench_hat136.json")])


def test_a_zip_of_good_and_bad_files_imports_the_good_ones_and_reports_the_bad(
    operator_client, existing
):
    archive = _zip(
        {
            "logs/chat.json": CHAT,
            "logs/run.traj": json.dumps(SWE_HISTORY),
            "logs/broken.json": '{"messages": [',
            f"logs/{EVIL_NAME}": _raw_step(duration="NaN"),
            "logs/dup.jsonl": _line(Step(index=0, tool="a"), Step(index=0, tool="b")),
        }
    )
    before = _counts()
    response = _upload(operator_client, {"logs.zip": archive, "solo.jsonl": _line(Step(index=0, tool="z"), marker="solo")})  # fmt: skip
    assert response.status_code == 200
    page = response.content.decode()
    rows = _table(page)
    assert [status for status, _ in rows] == [
        "imported",
        "imported",
        "refused",
        "refused",
        "refused",
        "imported",
    ]
    assert rows[0][1].startswith("logs.zip:logs/chat.json openai-chat")
    # trajectories, steps, messages (the system and the task), duplicates
    assert rows[1][1].startswith("logs.zip:logs/run.traj swe-agent traj/history-only 1 1 2 0")
    assert "invalid JSON at line 1" in rows[2][1]
    assert "NaN and Infinity are refused" in rows[3][1]
    assert "both have index 0" in rows[4][1]
    assert (
        "Imported 3 trajectories (5 steps, 5 messages); 0 duplicate(s) skipped; 3 file(s) refused"
        in page
    )
    # the hostile member name is shown escaped, never as markup
    assert EVIL_NAME not in page and escape(EVIL_NAME) in page
    after = _counts()
    assert after[0] - before[0] == 3 and after[1] - before[1] == 5 + 5  # steps and messages
    swe = TrajectoryRow.objects.get(source_format="swe-agent")
    assert swe.source_file.name == "logs.zip:logs/run.traj"  # a member keeps its own raw bytes
    assert json.loads(swe.source_file.raw_bytes()) == SWE_HISTORY

    # the same upload again: duplicates per file, nothing new
    again = _upload(operator_client, {"logs.zip": archive})
    assert [row[1].split()[-2:] for row in _table(again.content.decode())[:2]] == [["1", "—"], ["1", "—"]]  # fmt: skip
    assert _counts()[:2] == after[:2]


def test_all_or_nothing_refuses_the_whole_upload_when_one_file_is_refused(
    operator_client, existing, tmp_path
):
    before = _counts()
    files = {"chat.json": CHAT, "broken.json": '{"messages": ['}
    response = _upload(operator_client, files, all_or_nothing="on")
    page = response.content.decode()
    assert response.status_code == 200
    assert "Nothing was imported (all or nothing): 1 of 2 file(s) refused." in page
    assert [status for status, _ in _table(page)] == ["imported", "refused"]
    assert _counts() == before
    broken = tmp_path / "broken.json"
    broken.write_text('{"messages": [')
    with pytest.raises(services.ImportRefused, match="broken.json: invalid JSON") as refused:
        services.trajectories_import_files(
            paths=[str(FIXTURES / "openai_chat_conversation.json"), str(broken)],
            all_or_nothing=True,
        )
    assert [bool(row["error"]) for row in refused.value.extra["files"]] == [False, True]
    assert _counts() == before


DEEP_OBJECT = '{"a": ' * 50_000 + "1" + "}" * 50_000


def _nested(levels: int) -> str:
    value: dict = {"leaf": 1}
    for _ in range(levels):
        value = {"k": value}
    return _line(Step(index=0, tool="x", params={"v": value}))


BAD_INPUTS = {
    "JSON nested too deeply to read": (
        {"deep.json": DEEP_OBJECT},
        {},
        "deep.json: the JSON is nested too deeply to read",
    ),
    "a stored value nested past the limit": (
        {"nested.jsonl": _nested(70)},
        {},
        "nested more than 64 levels deep (STEPLAB_IMPORT_MAX_DEPTH)",
    ),
    "an integer past a 32-bit column": (
        {"big.jsonl": _raw_step(exit_code=str(2**40))},
        {},
        "field 'steps[0].exit_code': 1099511627776 is out of range",
    ),
    "an integer too long to read": (
        {"long.jsonl": _raw_step(tokens_in="9" * 5000)},
        {},
        "a number too long to read",
    ),
    "NaN in a numeric field": (
        {"nan.jsonl": _raw_step(reward="NaN")},
        {},
        "field 'steps[0].reward': nan is not a number the store can keep",
    ),
    "Infinity in a JSON value": (
        {"inf.jsonl": _raw_step(params='{"x": Infinity}')},
        {},
        "field 'steps[0].params.x': inf is not a number the store can keep",
    ),
    "two steps with the same index": (
        {"dup.jsonl": _line(Step(index=3, tool="a"), Step(index=3, tool="b"))},
        {},
        "steps 0 and 1 both have index 3",
    ),
    "a file over the size limit": (
        {"huge.jsonl": _line(Step(index=0, tool="x", observation="y" * 4000))},
        {"STEPLAB_IMPORT_MAX_FILE_BYTES": 2000},
        "huge.jsonl: the file is 4,",
    ),
    "a zip member over the size limit": (
        {"bomb.zip": lambda: _bomb_zip(64 << 20, good=False)},
        {"STEPLAB_IMPORT_MAX_MEMBER_BYTES": 4 << 20},
        "bomb.zip:bomb.json: the archive member, decompressed, is 64.0 MB, over the limit of 4.0 MB",
    ),
    "a zip with too many members": (
        {"many.zip": _zip({f"{n}.json": CHAT for n in range(5)})},
        {"STEPLAB_IMPORT_MAX_MEMBERS": 4},
        "many.zip: the zip archive holds 5 files, over the limit of 4",
    ),
}


@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_each_bad_input_is_refused_with_its_message_and_writes_nothing(
    case, operator_client, existing, settings
):
    files, limits, expected = BAD_INPUTS[case]
    for name, value in limits.items():
        setattr(settings, name, value)
    files = {name: value() if callable(value) else value for name, value in files.items()}
    before = _counts()
    response = _upload(operator_client, files)
    assert response.status_code == 200
    page = response.content.decode()
    assert escape(expected) in page, page[page.find("import-files") :][:2000]
    assert [status for status, _ in _table(page)][-1] == "refused"
    assert _counts() == before


def test_a_lone_surrogate_is_stored_as_a_replacement_character(operator_client):
    line = _raw_step(observation='"bad \\ud800 text"')
    response = _upload(operator_client, {"surrogate.jsonl": line})
    assert response.status_code == 200
    assert StepRow.objects.get().observation == "bad \ufffd\ufffd\ufffd text"


def test_memory_stays_bounded_importing_a_decompression_bomb(settings, tmp_path):
    settings.STEPLAB_IMPORT_MAX_MEMBER_BYTES = 8 << 20
    archive = tmp_path / "bomb.zip"
    archive.write_bytes(_bomb_zip(256 << 20))
    tracemalloc.start()
    try:
        summary = services.trajectories_import_files(paths=[str(archive)])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [bool(row["error"]) for row in summary.files] == [False, True]
    assert len(summary.created) == 1
    assert peak < 48 << 20, f"peak {peak / 2**20:.0f} MB importing a 256 MB bomb"


def test_an_errored_tau_bench_run_imports_as_a_failed_trajectory_showing_its_error(
    operator_client, tmp_path
):
    # what tau-bench's run.py writes when a run raises: reward 0, the error, no trajectory
    errored = {
        "task_id": 7,
        "reward": 0.0,
        "info": {"error": "RateLimitError: <too many requests>", "traceback": "Traceback ..."},
        "traj": [],
        "trial": 0,
    }
    fine = json.loads((FIXTURES / "tau_bench_hat136.json").read_text())[0]
    path = tmp_path / "results.json"
    path.write_text(json.dumps([fine, errored]))
    summary = services.trajectories_import_files(paths=[str(path)])
    failed = TrajectoryRow.objects.get(task_ref="7")
    assert failed.status == TrajectoryRow.Status.FAILED and failed.success is False
    assert failed.metadata["error"] == "RateLimitError: <too many requests>"
    assert TrajectoryRow.objects.get(task_ref="0").status == TrajectoryRow.Status.FINISHED
    assert len(summary.created) == 2
    page = operator_client.get(reverse("trajectories:detail", args=[failed.pk])).content.decode()
    facts = page[page.find('id="trajectory-facts"') :][:3000]
    assert 'data-testid="run-error"' in facts
    assert escape("RateLimitError: <too many requests>") in facts
    listing = operator_client.get(reverse("trajectories:list"), {"status": "failed"})
    assert f'data-trajectory-id="{failed.pk}"' in listing.content.decode()


def test_the_format_field_is_a_choice_of_known_formats(operator_client):
    page = operator_client.get(reverse("trajectories:import")).content.decode()
    assert '<select name="format"' in page and '<option value="swe-agent">' in page
    response = _upload(operator_client, {"a.json": CHAT}, format="not-a-format")
    assert "Select a valid choice" in response.content.decode()
    chosen = _upload(operator_client, {"a.json": CHAT}, format="agentgym")
    assert [status for status, _ in _table(chosen.content.decode())] == ["refused"]
    assert not TrajectoryRow.objects.exists()


def _env_for_test_db() -> dict[str, str]:
    import os

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


@pytest.mark.django_db(transaction=True)
def test_cli_import_prints_a_row_per_file_and_keeps_the_good_ones(tmp_path):
    archive = tmp_path / "logs.zip"
    archive.write_bytes(_zip({"chat.json": CHAT, "bad.jsonl": _raw_step(exit_code=str(2**40))}))
    env = _env_for_test_db()
    strict = subprocess.run(
        [STEPLAB, "import", "--all-or-nothing", str(archive)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert strict.returncode == 1 and "Nothing was imported (all or nothing)" in strict.stderr
    assert "REFUSED logs.zip:bad.jsonl, record 0, field 'steps[0].exit_code'" in strict.stdout
    assert not TrajectoryRow.objects.exists()
    done = subprocess.run(
        [STEPLAB, "import", str(archive)], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("ok      logs.zip:chat.json: openai-chat")
    assert lines[0].endswith("1 trajectories, 3 steps and 3 messages, 0 duplicate(s)")
    assert lines[1].startswith("REFUSED logs.zip:bad.jsonl, record 0, field 'steps[0].exit_code'")
    assert lines[2] == "imported 1 trajectories; 0 duplicate(s) skipped; 1 file(s) refused"
    assert TrajectoryRow.objects.count() == 1
    unknown = subprocess.run(
        [STEPLAB, "import", "--format", "nope", str(archive)],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert unknown.returncode == 2 and "'nope' is not one of" in unknown.stderr
