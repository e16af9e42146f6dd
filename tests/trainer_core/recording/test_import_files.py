"""Many files at once: import_files and convert_files (all or nothing), validate_files (a report
per file) — what ``steplab convert`` and ``steplab validate`` call."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from trainer_core.recording.importers import (
    ImportFailure,
    convert_files,
    import_files,
    import_path,
    validate_files,
)
from trainer_core.recording.schema import Trajectory

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "agent_logs"
CHAT = FIXTURES / "openai_chat_conversation.json"
AGENTGYM = FIXTURES / "agentgym_trajs.jsonl"


def _broken(tmp_path: Path) -> Path:
    path = tmp_path / "broken.json"
    path.write_text('[{"role": "user", "content": "hi"}, {"role": 3}]')
    return path


def test_import_files_reads_every_file_in_order_and_reports_each_result():
    seen = []
    results = import_files([CHAT, AGENTGYM], on_result=seen.append)
    assert [r.format for r in results] == ["openai-chat", "agentgym"]
    assert seen == results
    assert results == import_path(CHAT) + import_path(AGENTGYM)
    assert results[1].steps == sum(len(t.tool_steps) for t in results[1].trajectories) > 0
    assert results[1].messages == sum(len(t.message_steps) for t in results[1].trajectories) > 0


def test_import_files_is_all_or_nothing(tmp_path):
    with pytest.raises(ImportFailure, match="broken.json"):
        import_files([CHAT, _broken(tmp_path)])


def test_convert_files_writes_canonical_jsonl_or_nothing(tmp_path):
    out = tmp_path / "out.jsonl"
    results = convert_files([CHAT, AGENTGYM], out)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert len(lines) == sum(len(r.trajectories) for r in results) == 1 + 1
    expected = [t.to_json() for r in results for t in r.trajectories]
    assert lines == expected
    assert Trajectory.model_validate(json.loads(lines[0])).agent == "openai-chat"

    failed = tmp_path / "failed.jsonl"
    with pytest.raises(ImportFailure):
        convert_files([CHAT, _broken(tmp_path)], failed)
    assert not failed.exists()


def test_convert_files_with_a_format_skips_detection(tmp_path):
    out = tmp_path / "out.jsonl"
    with pytest.raises(ImportFailure, match="conversations"):
        convert_files([CHAT], out, format="agentgym")
    assert not out.exists()
    (result,) = convert_files([CHAT], out, format="openai-chat")
    assert result.format == "openai-chat"


def test_validate_files_reports_each_file_and_goes_on_after_a_failure(tmp_path):
    archive = tmp_path / "logs.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(CHAT, "a/chat.json")
        zf.write(AGENTGYM, "b/gym.jsonl")
    broken = _broken(tmp_path)
    reports = validate_files([CHAT, broken, archive])
    assert [r.path for r in reports] == [str(CHAT), str(broken), str(archive)]
    ok, bad, zipped = reports
    assert ok.ok and ok.error is None and ok.trajectories == 1
    assert ok.steps == sum(len(t.tool_steps) for t in ok.results[0].trajectories)
    assert not bad.ok and bad.results == [] and bad.trajectories == bad.steps == 0
    assert bad.error.startswith("broken.json: no format recognised the content")
    assert zipped.ok and [r.file for r in zipped.results] == [
        "logs.zip:a/chat.json",
        "logs.zip:b/gym.jsonl",
    ]
    assert zipped.trajectories == 1 + 1
