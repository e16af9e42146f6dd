"""Timestamps are range-checked at import (issue 17, point 3): a far-future or far-past step
time is refused with a message naming the file, the record and the field, whatever the format;
ordinary times (with or without a zone) import unchanged."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from trainer_core.recording.importers import ImportFailure, import_path, read_path

pytestmark = pytest.mark.sqlite

FAR_FUTURE = "9999-12-31T23:59:59-14:00"  # the year 10000 in UTC: unreadable once stored


def _canonical(started_at: str, *, records: int = 1) -> str:
    steps = [
        {"index": 0, "tool": "bash", "started_at": "2024-05-01T10:00:00Z"},
        {"index": 1, "tool": "bash", "started_at": started_at},
    ]
    good = {"schema_version": "1.0", "steps": steps[:1]}
    bad = {"schema_version": "1.0", "steps": steps}
    return "".join(json.dumps(good) + "\n" for _ in range(records)) + json.dumps(bad) + "\n"


def _refusal(path: Path) -> str:
    (outcome,) = read_path(path)
    assert isinstance(outcome, ImportFailure), outcome
    with pytest.raises(ImportFailure):
        import_path(path)
    return str(outcome)


@pytest.mark.parametrize(
    "moment",
    [FAR_FUTURE, "3000-01-01T00:00:00Z", "0001-01-01T00:00:00+14:00", "1899-12-31T23:59:59"],
)
def test_a_timestamp_out_of_range_is_refused_naming_file_record_and_field(tmp_path, moment):
    path = tmp_path / "late.jsonl"
    path.write_text(_canonical(moment, records=2))
    message = _refusal(path)
    assert message.startswith("late.jsonl, record 2, field 'steps[1].started_at'"), message
    assert f"{datetime.fromisoformat(moment).isoformat()} is out of range" in message
    assert "from 1900-01-01 to 2999-12-31 (UTC)" in message
    assert "fix the time in the file or remove it" in message


def test_times_in_range_import_with_or_without_a_zone(tmp_path):
    path = tmp_path / "ok.jsonl"
    path.write_text(_canonical("2999-12-31T09:00:00-14:00") + _canonical("1900-01-01T00:00:00"))
    (result,) = import_path(path)
    stamps = [s.started_at for t in result.trajectories for s in t.steps]
    assert stamps[2] == datetime.fromisoformat("2999-12-31T09:00:00-14:00")
    assert stamps[-1] == datetime(1900, 1, 1)
    assert stamps[0].astimezone(UTC) == datetime(2024, 5, 1, 10, tzinfo=UTC)


def test_another_format_is_checked_the_same_way(tmp_path):
    events = [
        {"id": 1, "source": "user", "action": "message", "args": {"content": "Fix the test"}},
        {
            "id": 2,
            "source": "agent",
            "action": "run",
            "args": {"command": "pytest -q", "thought": "Run them."},
            "timestamp": FAR_FUTURE,
        },
        {"id": 3, "source": "agent", "cause": 2, "observation": "run", "content": "1 failed"},
        {"id": 4, "source": "agent", "action": "finish", "args": {"final_thought": "Done."}},
    ]
    path = tmp_path / "events.json"
    path.write_text(json.dumps(events))
    message = _refusal(path)
    assert re.match(r"events\.json, record 0, field 'steps\[\d+\]\.started_at'", message), message
    assert f"{FAR_FUTURE} is out of range" in message
