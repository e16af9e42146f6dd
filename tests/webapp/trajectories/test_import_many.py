"""Importing many files at once: stored in parts while the next files are read (one
transaction), each file still all or nothing, the per-file table in the order of the files, a
trajectory met again in a later part reported as a duplicate of the first, and a file the
database refuses left out on its own (the other files stored, one transaction each)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer_core.recording.schema import Step, TaskRef, Trajectory
from webapp.common.errors import ApplicationError
from webapp.trajectories import services
from webapp.trajectories.models import SourceFile
from webapp.trajectories.models import Step as StepRow
from webapp.trajectories.models import Trajectory as TrajectoryRow

pytestmark = pytest.mark.django_db

MANY = services.STORE_EVERY + 60  # more files than one part holds


def _line(number: int, **fields) -> str:
    steps = [
        Step(index=0, kind="message", role="user", text=f"task {number}"),
        Step(index=1, tool="bash", params={"command": f"echo {number}"}, observation=f"{number}"),
    ]
    return Trajectory(task=TaskRef(id=f"t{number}", prompt=f"do {number}"), steps=steps, **fields).to_json()  # fmt: skip


def _files(folder: Path, lines: dict[int, str]) -> list[str]:
    paths = []
    for number in range(MANY):
        path = folder / f"f{number:04d}.jsonl"
        path.write_text(lines.get(number, _line(number)) + "\n")
        paths.append(str(path))
    return paths


def _counts() -> tuple[int, int, int]:
    return TrajectoryRow.objects.count(), StepRow.objects.count(), SourceFile.objects.count()


@pytest.mark.sqlite
def test_many_files_are_stored_in_parts_each_file_all_or_nothing(tmp_path):
    late = MANY - 10  # in a later part than file 3
    paths = _files(
        tmp_path,
        {
            150: '{"schema_version": "1.1", "steps": [',  # refused: not JSON
            late: _line(3) + "\n",  # the same trajectory as file 3 (other bytes)
        },
    )
    with pytest.raises(services.ImportRefused):
        services.trajectories_import_files(paths=paths, all_or_nothing=True)
    assert _counts() == (0, 0, 0)

    summary = services.trajectories_import_files(paths=paths)
    assert [row["file"] for row in summary.files] == [Path(p).name for p in paths]
    assert "invalid JSON" in summary.files[150]["error"]
    assert summary.files[late]["duplicates"] == 1 and summary.files[late]["created"] == 0
    assert summary.duplicates == [
        {"file": f"f{late:04d}.jsonl", "index": 0, "existing_id": None, "same_as": "f0003.jsonl #0"}
    ]
    stored = MANY - 2
    assert len(summary.created) == stored and (summary.steps, summary.messages) == (stored, stored)
    # no raw source is kept for a file none of whose trajectories was stored
    assert _counts() == (stored, 2 * stored, stored)
    row = TrajectoryRow.objects.get(task_ref=f"t{MANY - 1}")
    assert row.source_file.name == f"f{MANY - 1:04d}.jsonl" and row.message_count == 1
    assert list(row.steps.values_list("index", "kind", "params")) == [
        (0, "message", {}),
        (1, "tool", {"command": f"echo {MANY - 1}"}),
    ]

    again = services.trajectories_import_files(paths=paths)
    assert again.created == [] and len(again.duplicates) == stored + 1
    assert _counts() == (stored, 2 * stored, stored)


def test_a_file_the_database_refuses_is_left_out_and_the_others_are_stored(tmp_path):
    """PostgreSQL (SQLite keeps over-long text): a value no check foresees (a schema version
    longer than its column) makes the database refuse the transaction: every other file is stored on its own, the refused one reported."""
    bad = services.STORE_EVERY + 20  # after a part was already written (and rolled back)
    paths = _files(tmp_path, {bad: _line(bad, schema_version="9" * 20)})
    with pytest.raises(ApplicationError, match="the database refused the import"):
        services.trajectories_import_files(paths=paths, all_or_nothing=True)
    assert _counts() == (0, 0, 0)

    summary = services.trajectories_import_files(paths=paths)
    assert f"f{bad:04d}.jsonl: the database refused it" in summary.files[bad]["error"]
    assert [bool(row["error"]) for row in summary.files].count(True) == 1
    assert len(summary.created) == MANY - 1
    assert _counts() == (MANY - 1, 2 * (MANY - 1), MANY - 1)
    assert not TrajectoryRow.objects.filter(task_ref=f"t{bad}").exists()


@pytest.mark.sqlite
def test_nul_and_lone_surrogates_in_parameters_are_stored_as_replacement_characters(tmp_path):
    path = tmp_path / "odd.jsonl"
    path.write_text(
        '{"schema_version": "1.1", "steps": [{"index": 0, "tool": "x", '
        '"params": {"a\\u0000": ["b\\ud800", {"c": "\\u0000"}]}, "metadata": {"m": "\\udfff"}}]}\n'
    )
    summary = services.trajectories_import_files(paths=[str(path)])
    step = StepRow.objects.get(trajectory_id=summary.created[0])
    lone = "\ufffd" * 3  # a lone surrogate is 3 bytes that are not UTF-8 (as in observations)
    assert step.params == {"a\ufffd": [f"b{lone}", {"c": "\ufffd"}]}
    assert step.metadata == {"m": lone}
