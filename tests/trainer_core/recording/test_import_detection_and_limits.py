"""Detection that does not depend on optional keys (history-only SWE-agent, OpenHands events as
JSON lines, evaluation rows with only ``history``, a unique parser when no sniffer claims a
file), one outcome per file of a zip, and every bad input refused with a message that says what
is wrong and what to do — bounded in memory while decompressing."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path

import pytest

from trainer_core.recording.importers import (
    ImportFailure,
    ImportLimits,
    ImportResult,
    Source,
    import_path,
    import_source,
    read_path,
)
from trainer_core.recording.schema import Step, TaskRef, Trajectory

REPO = Path(__file__).resolve().parents[3]
SHARED = REPO.parent / "shared" / "data" / "agent-logs"
FIXTURES = REPO / "tests" / "fixtures" / "agent_logs"
STEPLAB = str(Path(sys.executable).parent / "steplab")
needs_shared = pytest.mark.skipif(
    not SHARED.is_dir(), reason="../shared/data/agent-logs is absent (the real agent logs)"
)

# SWE-agent's HistoryItem: role, content and message_type are its required keys.
SWE_HISTORY = [
    {"role": "system", "content": "You are a helpful assistant.", "message_type": "system_prompt"},
    {
        "role": "user",
        "content": "ISSUE:\nFix the colon.\n\nINSTRUCTIONS:\n...",
        "message_type": "observation",
    },  # fmt: skip
    {
        "role": "assistant",
        "content": "Find it.\n```\nfind_file x.py\n```",
        "thought": "Find it.",
        "action": "find_file x.py",
        "message_type": "action",
    },  # fmt: skip
    {"role": "user", "content": "Found 1 match", "message_type": "observation"},
    {
        "role": "assistant",
        "content": "Done.\n```\nsubmit\n```",
        "thought": "Done.",
        "action": "submit",
        "message_type": "action",
    },  # fmt: skip
    {"role": "user", "content": "diff --git a/x.py", "message_type": "observation"},
]
OPENHANDS_EVENTS = [
    {"id": 1, "source": "user", "action": "message", "args": {"content": "Fix the failing test"}},
    {
        "id": 2,
        "source": "agent",
        "action": "run",
        "args": {"command": "pytest -q", "thought": "Run them."},
    },  # fmt: skip
    {
        "id": 3,
        "source": "agent",
        "cause": 2,
        "observation": "run",
        "content": "1 failed",
        "extras": {"exit_code": 1},
    },  # fmt: skip
    {"id": 4, "source": "agent", "action": "finish", "args": {"final_thought": "Fixed."}},
]


def _write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def _canonical(*steps: Step, **fields) -> str:
    return Trajectory(task=TaskRef(id="t", prompt="p"), steps=list(steps), **fields).to_json()


def _refusal(path: Path, **limits) -> str:
    (outcome,) = read_path(path, limits=ImportLimits(**limits))
    assert isinstance(outcome, ImportFailure), outcome
    with pytest.raises(ImportFailure):
        import_path(path, limits=ImportLimits(**limits))
    return str(outcome)


# --- detection ---------------------------------------------------------------------------------


def test_a_history_only_swe_agent_file_is_detected():
    source = Source("run.traj", json.dumps({"history": SWE_HISTORY}).encode())
    result = import_source(source)
    assert (result.format, result.format_version) == ("swe-agent", "traj/history-only")
    (trajectory,) = result.trajectories
    assert [s.tool for s in trajectory.tool_steps] == ["find_file", "submit"]
    assert trajectory.tool_steps[0].observation == "Found 1 match"


@needs_shared
@pytest.mark.parametrize(
    "name", ["swe-agent_test-repo.traj", "swe-agent_function-calling_marshmallow.traj"]
)
def test_real_swe_agent_histories_alone_are_detected(name, tmp_path):
    history = json.loads((SHARED / name).read_text())["history"]
    path = _write(tmp_path, name, json.dumps({"history": history}))
    (result,) = import_path(path)
    assert result.format == "swe-agent"
    # independent count: one step per tool call of an assistant turn, else one per action
    expected = sum(
        len(m.get("tool_calls") or []) or 1
        for m in history
        if m["role"] == "assistant" and not m.get("is_demo")
    )
    assert result.steps == expected


def test_openhands_events_one_per_line_are_detected(tmp_path):
    lines = "".join(json.dumps(e) + "\n" for e in OPENHANDS_EVENTS)
    (result,) = import_path(_write(tmp_path, "events.jsonl", lines))
    (array,) = import_path(_write(tmp_path, "events.json", json.dumps(OPENHANDS_EVENTS)))
    assert (result.format, result.format_version) == ("openhands", "events.jsonl")
    assert [s.tool for s in result.trajectories[0].tool_steps] == ["run", "finish"]
    assert result.trajectories[0].steps == array.trajectories[0].steps


@needs_shared
def test_real_openhands_events_as_json_lines_read_as_the_array(tmp_path):
    events = json.loads((SHARED / "openhands_basic.json").read_text())
    lines = "".join(json.dumps(e) + "\n" for e in events)
    (result,) = import_path(_write(tmp_path, "basic.jsonl", lines))
    (array,) = import_path(SHARED / "openhands_basic.json")
    assert result.format == "openhands"
    assert result.trajectories[0].steps == array.trajectories[0].steps
    actions = [e for e in events if e.get("source") == "agent" and "action" in e]
    assert result.steps == len([e for e in actions if e["action"] not in ("system", "message")])


def test_openhands_evaluation_rows_need_only_their_history(tmp_path):
    rows = [{"history": OPENHANDS_EVENTS}, {"history": OPENHANDS_EVENTS[:3]}]
    path = _write(tmp_path, "output.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    (result,) = import_path(path)
    assert (result.format, result.format_version) == ("openhands", "output.jsonl")
    assert [len(t.tool_steps) for t in result.trajectories] == [2, 1]


def test_when_no_sniffer_claims_a_file_the_one_parser_that_reads_it_is_kept(tmp_path):
    # tau-bench results without the optional reward and info: no sniffer claims them
    results = json.loads((FIXTURES / "tau_bench_hat136.json").read_text())
    bare = [{"task_id": r["task_id"], "traj": r["traj"]} for r in results]
    (result,) = import_path(_write(tmp_path, "results.json", json.dumps(bare)))
    (full,) = import_path(FIXTURES / "tau_bench_hat136.json")
    assert result.format == "tau-bench"
    assert [s.tool for s in result.trajectories[0].steps] == [
        s.tool for s in full.trajectories[0].steps
    ]


def test_content_no_parser_reads_names_the_formats_tried_and_what_to_do(tmp_path):
    message = _refusal(_write(tmp_path, "notes.json", json.dumps({"hello": "world"})))
    assert "no format recognised the content" in message and "choose it" in message
    assert "(formats tried: " in message and "swe-agent" in message.split("formats tried")[1]


# --- a zip: one outcome per member ------------------------------------------------------------------


def test_a_zip_gives_one_outcome_per_member_good_and_bad(tmp_path):
    archive = tmp_path / "logs.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(FIXTURES / "openai_chat_conversation.json", "good/chat.json")
        zf.writestr("bad/broken.json", '{"messages": [')
        zf.writestr("good/run.traj", json.dumps({"history": SWE_HISTORY}))
    outcomes = read_path(archive)
    assert [type(o) for o in outcomes] == [ImportResult, ImportFailure, ImportResult]
    assert [o.format for o in outcomes if isinstance(o, ImportResult)] == [
        "openai-chat",
        "swe-agent",
    ]
    assert str(outcomes[1]).startswith("logs.zip:bad/broken.json: invalid JSON")
    with pytest.raises(ImportFailure, match="logs.zip:bad/broken.json"):
        import_path(archive)


# --- bad inputs: each refused with its message -------------------------------------------------------


def test_json_nested_deeper_than_the_reader_goes_is_refused(tmp_path):
    deep = "[" * 200_000 + "]" * 200_000
    message = _refusal(_write(tmp_path, "deep.json", deep))
    assert "nested too deeply" in message and "flatten it" in message
    lines = '{"schema_version": "1.0", "steps": []}\n' + '{"a": ' * 100_000 + "1" + "}" * 100_000
    message = _refusal(_write(tmp_path, "deep.jsonl", lines))
    assert "line 2" in message and "nested too deeply" in message


def test_a_stored_value_nested_past_the_limit_is_refused_with_its_path(tmp_path):
    value: dict = {"leaf": 1}
    for _ in range(70):
        value = {"k": value}
    line = _canonical(Step(index=0, tool="bash", params={"payload": value}))
    message = _refusal(_write(tmp_path, "nested.jsonl", line))
    assert "record 0" in message and "field 'steps[0].params.payload.k.k" in message
    assert "nested more than 64 levels deep" in message and "STEPLAB_IMPORT_MAX_DEPTH" in message
    (result,) = import_path(tmp_path / "nested.jsonl", limits=ImportLimits(max_depth=100))
    assert result.steps == 1


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("exit_code", 2**40, "1099511627776 is out of range: the store keeps 32-bit integers"),
        ("tokens_in", 2**31, "2147483648 is out of range"),
        ("index", 2**33, "8589934592 is out of range"),
    ],
)
def test_integers_that_do_not_fit_the_store_are_refused(tmp_path, field, value, expected):
    step = {"index": 0, "tool": "bash", field: value}
    line = json.dumps({"schema_version": "1.0", "steps": [step]})
    message = _refusal(_write(tmp_path, "big.jsonl", line))
    assert f"field 'steps[0].{field}'" in message and expected in message
    assert "fix the value in the file or remove it" in message


def test_an_integer_too_long_to_read_is_refused(tmp_path):
    line = '{"schema_version": "1.0", "steps": [{"index": 0, "tool": "x", "exit_code": ' + "9" * 5000 + "}]}"  # fmt: skip
    message = _refusal(_write(tmp_path, "long.jsonl", line))
    assert "number too long to read" in message and "write it as a string" in message


@pytest.mark.parametrize(
    ("where", "literal", "field"),
    [
        ("duration", "NaN", "steps.0.duration"),  # the schema's own check, its path
        ("reward", "Infinity", "steps[0].reward"),
        ("params", '{"x": [1, -Infinity]}', "steps[0].params.x[1]"),
    ],
)
def test_nan_and_infinity_are_refused_where_they_would_be_stored(tmp_path, where, literal, field):
    step = f'{{"index": 0, "tool": "x", "{where}": {literal}}}'
    line = f'{{"schema_version": "1.0", "steps": [{step}]}}'
    message = _refusal(_write(tmp_path, "nan.jsonl", line))
    assert f"field '{field}'" in message
    assert "NaN and Infinity are refused" in message and "write null or a finite number" in message


def test_nan_in_an_outcome_score_is_refused(tmp_path):
    line = _canonical(Step(index=0, tool="x")).replace('"score":null', '"score":NaN')
    message = _refusal(_write(tmp_path, "score.jsonl", line))
    assert "field 'outcome.score'" in message and "NaN" in message


def test_two_steps_with_the_same_index_are_refused(tmp_path):
    line = _canonical(Step(index=0, tool="a"), Step(index=1, tool="b"), Step(index=1, tool="c"))
    message = _refusal(_write(tmp_path, "dup.jsonl", line))
    assert "steps 1 and 2 both have index 1" in message and "field 'steps[2].index'" in message
    assert "give every step its own index" in message


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path):
    path = _write(
        tmp_path, "big.jsonl", _canonical(Step(index=0, tool="x", observation="y" * 5000))
    )
    message = _refusal(path, max_file_bytes=1000)
    assert "big.jsonl: the file is" in message and "over the limit of 1,000 bytes" in message
    assert "STEPLAB_IMPORT_MAX_FILE_BYTES" in message


def _bomb(path: Path, *, size: int, good: int = 1, zip64: bool = True) -> Path:
    """A zip of ``good`` small chat logs and one member of ``size`` spaces (it compresses ~1000x)."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for n in range(good):
            zf.write(FIXTURES / "openai_chat_conversation.json", f"good-{n}.json")
        with zf.open("bomb.json", "w", force_zip64=zip64) as handle:
            chunk = b" " * (1 << 20)
            for _ in range(size >> 20):
                handle.write(chunk)
    return path


def _lie_about_size(archive: Path, member: str, size: int) -> None:
    """Rewrite the central directory so that ``member`` claims ``size`` bytes uncompressed."""
    data = bytearray(archive.read_bytes())
    entry = 0
    while True:
        entry = data.index(b"PK\x01\x02", entry)
        name_length = int.from_bytes(data[entry + 28 : entry + 30], "little")
        if data[entry + 46 : entry + 46 + name_length] == member.encode():
            break
        entry += 4
    data[entry + 24 : entry + 28] = size.to_bytes(4, "little")
    archive.write_bytes(bytes(data))


@pytest.mark.parametrize("header", ["honest", "lying"])
def test_a_decompression_bomb_member_is_refused_in_bounded_memory(tmp_path, header):
    archive = _bomb(tmp_path / "bomb.zip", size=256 << 20, zip64=header == "honest")
    if header == "lying":  # claims 1,000 bytes: the reader must not trust it either way
        _lie_about_size(archive, "bomb.json", 1000)
    limits = ImportLimits(max_member_bytes=8 << 20)
    tracemalloc.start()
    try:
        outcomes = read_path(archive, limits=limits)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    good, bomb = outcomes
    assert isinstance(good, ImportResult) and good.steps == 3
    assert isinstance(bomb, ImportFailure)
    if header == "honest":
        assert "bomb.zip:bomb.json: the archive member, decompressed, is 256.0 MB" in str(bomb)
        assert "STEPLAB_IMPORT_MAX_MEMBER_BYTES" in str(bomb)
    else:
        assert "bomb.zip:bomb.json: the archive member cannot be decompressed" in str(bomb)
    assert peak < 32 << 20, f"peak {peak / 2**20:.0f} MB while reading a 256 MB bomb"


def test_the_archive_total_and_member_count_are_limited(tmp_path):
    archive = tmp_path / "many.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for n in range(4):
            zf.writestr(f"part-{n}.jsonl", _canonical(Step(index=0, tool="x", observation=f"{n}" * 4000)))  # fmt: skip
    outcomes = read_path(archive, limits=ImportLimits(max_archive_bytes=10_000))
    assert [isinstance(o, ImportResult) for o in outcomes] == [True, True, False, False]
    assert "the archive, decompressed, is larger, over the limit of 10,000 bytes" in str(
        outcomes[2]
    )
    assert "STEPLAB_IMPORT_MAX_ARCHIVE_BYTES" in str(outcomes[2])
    message = _refusal(archive, max_members=3)
    assert "holds 4 files, over the limit of 3 (STEPLAB_IMPORT_MAX_MEMBERS)" in message


def test_a_member_that_cannot_be_decompressed_is_refused(tmp_path):
    archive = tmp_path / "corrupt.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("a.jsonl", _canonical(Step(index=0, tool="x", observation="z" * 3000)))
    data = bytearray(archive.read_bytes())
    start = data.index(b"a.jsonl") + len(b"a.jsonl") + 10  # inside the compressed data
    data[start : start + 20] = b"\xff" * 20
    archive.write_bytes(bytes(data))
    (outcome,) = read_path(archive)
    assert isinstance(outcome, ImportFailure)
    assert "cannot be decompressed" in str(outcome) and "zip it again" in str(outcome)


def test_the_limits_come_from_the_settings_variables():
    limits = ImportLimits.from_env(
        {"STEPLAB_IMPORT_MAX_MEMBER_BYTES": "1000", "STEPLAB_IMPORT_MAX_DEPTH": "8"}
    )
    assert (limits.max_member_bytes, limits.max_depth) == (1000, 8)
    assert limits.max_file_bytes == ImportLimits().max_file_bytes
    with pytest.raises(ValueError, match="STEPLAB_IMPORT_MAX_DEPTH='deep' is not a number"):
        ImportLimits.from_env({"STEPLAB_IMPORT_MAX_DEPTH": "deep"})


def test_steplab_validate_reads_a_gigabyte_bomb_under_a_512_mb_address_space(tmp_path):
    """The whole command, in a process that cannot map 1 GB: the bomb is refused by the limit
    (not by running out of memory) and the good member is read."""
    archive = _bomb(tmp_path / "bomb.zip", size=1 << 30)
    limit = 512 << 20

    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = dict(os.environ, STEPLAB_IMPORT_MAX_MEMBER_BYTES=str(16 << 20))
    done = subprocess.run(
        [STEPLAB, "validate", str(archive)],
        capture_output=True,
        text=True,
        env=env,
        preexec_fn=cap,
        check=False,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert "ok   bomb.zip:good-0.json: openai-chat" in done.stdout
    assert "FAIL bomb.zip:bomb.json: the archive member, decompressed, is 1024.0 MB" in done.stdout
    assert "MemoryError" not in done.stderr


def test_large_finite_numbers_and_long_ints_in_json_are_kept(tmp_path):
    step = Step(index=0, tool="x", duration=1e300, params={"v": 1e308, "id": 2**80})
    (result,) = import_path(_write(tmp_path, "ok.jsonl", _canonical(step)))
    assert result.trajectories[0].steps[0].params == {"v": 1e308, "id": 2**80}
