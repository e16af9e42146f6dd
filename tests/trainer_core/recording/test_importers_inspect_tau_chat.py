"""Importers of Inspect AI, tau-bench, Steplab JSONL, OpenAI chat, Anthropic Messages, Claude Code
and AgentGym logs: real shared files (skipped when absent), own fixtures, malformed variants."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from trainer_core.recording.importers import ImportFailure, import_path
from trainer_core.recording.schema import Trajectory

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "agent-logs"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "agent_logs"


def shared(name: str) -> Path:
    path = SHARED / name
    if not path.is_file():
        pytest.skip(f"shared agent log {path} is not present on this machine")
    return path


def load(path: Path, expected_format: str) -> list[Trajectory]:
    results = import_path(path)
    assert [r.format for r in results] == [expected_format]
    trajectories = results[0].trajectories
    for t in trajectories:
        assert Trajectory.model_validate_json(t.to_json()) == t
        assert t.source_format == expected_format
        assert [s.index for s in t.steps] == list(range(len(t.steps)))
    return trajectories


# ---------------------------------------------------------------- real shared files


def test_inspect_json_log():
    trajectories = load(shared("inspect_security-guide.json"), "inspect")
    assert len(trajectories) == 3
    first = trajectories[0]
    assert first.metadata["format_version"] == "2"
    assert first.task.id == "1"
    assert first.task.prompt == "How do I prevent SQL Injection attacks?"
    assert first.task.task_set == "security_guide"
    assert first.model == "openai/gpt-4o-mini"
    assert first.metadata["output_model"] == "gpt-4o-mini-2024-07-18"
    assert first.metadata["epoch"] == 1
    assert first.tool_steps == []  # question answering: no tool calls in this log
    assert first.outcome.success is True and first.outcome.score == 1.0
    grade = first.outcome.metadata["scores"]["model_graded_fact"]
    assert grade["value"] == "C" and "GRADE: C" in grade["explanation"]
    assert "parameterized queries" in first.outcome.metadata["final_answer"]
    assert (first.usage.tokens_in, first.usage.tokens_out) == (320, 309)
    assert first.usage.duration == pytest.approx(6.282)
    assert [t.task.prompt for t in trajectories[1:]] == [
        "How do I prevent sqli?",
        "How do I prevent cross site scripting?",
    ]


def test_inspect_eval_archive_is_one_file():
    trajectories = load(shared("inspect_read_sample.eval"), "inspect")
    assert len(trajectories) == 1
    t = trajectories[0]
    assert t.metadata["format_version"] == "2"
    assert t.metadata["archive_member"] == "samples/1_epoch_1.json"
    assert t.task.prompt.startswith("Is the following statement something you would say?")
    assert t.model == "ollama/gemma3"
    assert t.outcome.success is True
    assert t.outcome.metadata["scores"]["match"]["answer"] == "Yes"
    assert t.outcome.metadata["target"] == " Yes"
    assert (t.usage.tokens_in, t.usage.tokens_out) == (66, 3)
    assert t.metadata["sample_metadata"]["label_confidence"] == pytest.approx(0.886, abs=1e-3)


def test_tau_bench_results():
    trajectories = load(shared("tau-bench_airline_slice.json"), "tau-bench")
    assert len(trajectories) == 6
    assert [len(t.tool_steps) for t in trajectories] == [8, 0, 7, 20, 6, 6]
    assert [t.task.id for t in trajectories] == ["0", "1", "2", "3", "4", "5"]
    for t in trajectories:
        assert t.outcome.score == 0.0 and t.outcome.success is False
        assert t.metadata["format_version"] == ""
        assert t.environment == "tau-bench/airline"
        assert t.outcome.terminated is True  # ###STOP### or a transfer to a human agent
    first = trajectories[0]
    step = first.tool_steps[0]
    assert step.tool == "get_user_details"
    assert step.params == {"user_id": "mia_li_3668"}
    assert '"first_name": "Mia"' in step.observation
    assert step.metadata["tool_call_id"] == "call_oIHazX6yQrB8hUwl4cRilFKj"
    assert first.tool_steps[1].tool == "search_direct_flight"
    assert first.tool_steps[1].params["destination"] == "SEA"
    assert first.task.prompt.startswith("You are mia_li_3668.")
    assert first.metadata["first_user_message"].startswith("Hi! I'm looking to book a flight")
    assert first.outcome.metadata["info"]["reward_info"]["actions"][0]["name"] == "book_reservation"
    assert first.metadata["user_cost_usd"] == pytest.approx(0.0035475)
    # The dialogue is message steps in its place: the system prompt, the user's turns and the
    # text replies to the user (tool-call counts unchanged).
    assert first.steps[0].role == "system" and first.steps[0].text.startswith("# Airline Agent")
    assert first.steps[1].role == "user" and first.steps[1].text.startswith("Hi! I'm looking")
    assert any(s.role == "assistant" for s in first.message_steps)
    assert trajectories[1].tool_steps == [] and trajectories[1].message_steps
    assert trajectories[4].tool_steps[-1].tool == "transfer_to_human_agents"
    assert trajectories[4].tool_steps[-1].observation == "Transfer successful"
    # An assistant message with text and a tool call: the text is the step's thought.
    assert any(
        s.thought.startswith("Thank you for the clarification") for s in trajectories[3].tool_steps
    )


# ---------------------------------------------------------------- own fixtures


def test_inspect_tool_calls_and_epochs():
    trajectories = load(FIXTURES / "inspect_tool_calls.json", "inspect")
    assert [t.metadata["epoch"] for t in trajectories] == [1, 2]
    ok, failed = trajectories
    assert ok.task.prompt == "Decode the flag in /challenge/flag.enc and submit it."  # attachment
    assert [s.tool for s in ok.tool_steps] == ["bash", "bash", "submit"]
    assert ok.tool_steps[0].params == {"cmd": "ls -la /challenge"}
    assert "flag.enc" in ok.tool_steps[0].observation
    assert (
        ok.tool_steps[0].thought == "Start by listing the challenge directory.\nLet me look around."
    )
    assert ok.tool_steps[2].params["answer"] == "picoCTF{r0t13_is_n0t_crypt0}"
    assert ok.outcome.success is True and ok.outcome.score == 1.0
    assert failed.outcome.success is False and failed.outcome.score == 0.0
    assert failed.tool_steps[1].error == "timeout"
    assert failed.tool_steps[1].observation == "Command timed out before completing."
    assert ok.model == "anthropic/claude-3-7-sonnet-20250219"
    assert (ok.usage.tokens_in, ok.usage.tokens_out) == (2100, 160)


def test_steplab_jsonl_round_trip():
    path = FIXTURES / "steplab_trajectories.jsonl"
    trajectories = load(path, "steplab")
    originals = [Trajectory.model_validate_json(line) for line in path.read_text().splitlines()]
    assert len(trajectories) == 2
    assert trajectories[0].metadata["format_version"] == "1.0"
    for got, original in zip(trajectories, originals, strict=True):
        meta = dict(got.metadata)
        for key in ("format_version", "source_file", "original_source_format"):
            meta.pop(key, None)
        assert meta == original.metadata
        assert got.model_dump(exclude={"metadata", "source_format"}) == original.model_dump(
            exclude={"metadata", "source_format"}
        )
    assert trajectories[0].tool_steps[1].params == {
        "path": "README.md",
        "old": "recieve",
        "new": "receive",
    }
    assert trajectories[0].tool_steps[0].observation == "12:You will recieve an email."
    assert trajectories[1].metadata["original_source_format"] == "inspect"


def test_openai_chat_conversation():
    (t,) = load(FIXTURES / "openai_chat_conversation.json", "openai-chat")
    assert t.model == "gpt-4o-2024-08-06"
    assert (t.usage.tokens_in, t.usage.tokens_out) == (1834, 212)
    assert t.task.id == "conv-weather-7"
    assert t.task.prompt.startswith("Will I need an umbrella")
    assert [s.tool for s in t.tool_steps] == ["get_weather", "get_weather", "convert_units"]
    lisbon, porto, convert = t.tool_steps
    assert lisbon.params == {"city": "Lisbon", "day": "tomorrow"}
    assert lisbon.thought == "I'll check the forecast for both cities."
    assert '"precip_prob": 0.1' in lisbon.observation  # matched by id, not by position
    assert '"Porto"' in porto.observation and porto.thought == ""
    assert convert.params == {"values_c": [19, 14], "to": "F"}
    assert convert.observation == "[66.2, 57.2]"
    assert "umbrella for Porto" in t.outcome.metadata["final_answer"]
    assert t.steps[0].role == "system"
    assert t.steps[0].text.startswith("You are a helpful travel assistant")
    assert t.metadata["tools"] == ["get_weather", "convert_units"]


def test_openai_chat_jsonl():
    trajectories = load(FIXTURES / "openai_chat_batch.jsonl", "openai-chat")
    assert len(trajectories) == 2
    assert trajectories[0].tool_steps[0].tool == "calculator"
    assert trajectories[0].tool_steps[0].params == {"expression": "0.17 * 2340"}
    assert trajectories[0].tool_steps[0].observation == "397.8"
    assert trajectories[0].outcome.success is True
    assert trajectories[1].outcome.success is False
    assert trajectories[1].tool_steps[0].observation.startswith("main.py")


def test_anthropic_messages():
    (t,) = load(FIXTURES / "anthropic_messages_transcript.json", "anthropic-messages")
    assert t.model == "claude-sonnet-4-20250514"
    assert [s.tool for s in t.tool_steps] == ["run_sql"] * 3
    first, bad, good = t.tool_steps
    assert (
        first.thought == "I need the orders table schema first.\nLet me look at the orders table."
    )
    assert "information_schema.columns" in first.params["query"]
    assert first.observation.startswith("order_id")
    assert (first.tokens_in, first.tokens_out) == (512, 96)
    assert bad.error == "tool_error" and 'relation "order" does not exist' in bad.observation
    assert "42" in good.observation
    assert (t.usage.tokens_in, t.usage.tokens_out) == (512 + 640 + 700 + 760, 96 + 120 + 80 + 30)
    assert t.task.prompt == "How many orders were shipped late last month?"
    assert t.outcome.metadata["final_answer"].startswith("42 orders")
    assert t.steps[0].role == "system"
    assert t.steps[0].text.startswith("You are a careful data engineer")


def test_claude_code_sessions():
    trajectories = load(FIXTURES / "claude_code_session.jsonl", "claude-code")
    assert len(trajectories) == 2
    fix, question = trajectories
    assert fix.metadata["format_version"] == "1.0.51"
    assert fix.task.id == "4f1c2a9e-7b3d-4e0a-9c51-2d8e6f0b1a73"
    assert fix.task.prompt.startswith("The invoice total is off by a cent")  # isMeta skipped
    assert fix.model == "claude-sonnet-4-20250514"
    assert fix.metadata["cwd"] == "/home/dev/projects/invoicer"
    assert fix.metadata["summary"] == "Fix rounding bug in invoice totals"
    assert [s.tool for s in fix.tool_steps] == ["Read", "Edit", "Bash"]
    read, edit, bash = fix.tool_steps
    # Thinking and text came on separate lines of the same API message.
    assert read.thought == (
        "Probably float arithmetic; look at the file.\nI'll look at the totals module first."
    )
    assert read.params["file_path"].endswith("invoicer/totals.py")
    assert "def total(lines)" in read.observation
    assert read.duration == pytest.approx(0.25)
    assert read.tokens_in == 4 + 1200 + 10000 and read.tokens_out == 150  # counted once
    assert "Decimal" in edit.params["new_string"]
    assert bash.params["command"] == "python -m pytest tests/test_totals.py -q"
    assert bash.error == "tool_error" and "NameError" in bash.observation
    assert fix.usage.tokens_in == 11204 + 11506 + 11605
    assert fix.usage.tokens_out == 150 + 90 + 40
    assert fix.usage.duration == pytest.approx(15.5)
    assert [s.tool for s in question.tool_steps] == ["Grep"]
    assert question.tool_steps[0].observation == "Makefile:41:release: build sign upload"
    assert question.outcome.metadata["final_answer"].startswith("`make release` runs")
    assert (question.usage.tokens_in, question.usage.tokens_out) == (6, 45)


def test_agentgym_items():
    webshop, alfworld = load(FIXTURES / "agentgym_trajs.json", "agentgym")
    assert webshop.environment == "agentgym/webshop"
    assert webshop.task.id == "webshop_12"
    assert webshop.task.prompt.startswith("i need a gluten free vegan protein bar pack of 12")
    assert [s.tool for s in webshop.tool_steps] == ["search", "click", "click"]
    search = webshop.tool_steps[0]
    assert search.params == {"action": "search[gluten free vegan protein bar 12 pack]"}
    assert search.thought.startswith("I think I should search")
    assert "GreenBite Vegan Protein Bar" in search.observation
    assert (
        webshop.tool_steps[2].observation == "" and webshop.tool_steps[2].metadata["no_observation"]
    )
    assert webshop.outcome.success is True and webshop.outcome.score == 1.0
    assert webshop.metadata["instruction"].startswith("You are web shopping.")
    assert alfworld.environment == "agentgym/alfworld"
    assert alfworld.task.prompt == "put a cool apple in microwave."
    assert [s.tool for s in alfworld.tool_steps] == ["act", "act"]
    assert alfworld.tool_steps[1].params == {"action": "take apple 1 from countertop 1"}
    assert alfworld.tool_steps[1].observation.startswith("You pick up the apple 1")
    assert alfworld.outcome.success is None
    (line,) = load(FIXTURES / "agentgym_trajs.jsonl", "agentgym")
    assert line.tool_steps == alfworld.tool_steps


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("steplab_trajectories.jsonl", "steplab"),
        ("openai_chat_conversation.json", "openai-chat"),
        ("openai_chat_batch.jsonl", "openai-chat"),
        ("anthropic_messages_transcript.json", "anthropic-messages"),
        ("claude_code_session.jsonl", "claude-code"),
        ("agentgym_trajs.json", "agentgym"),
        ("agentgym_trajs.jsonl", "agentgym"),
        ("inspect_tool_calls.json", "inspect"),
    ],
)
def test_detection_does_not_confuse_formats(fixture, expected):
    assert [r.format for r in import_path(FIXTURES / fixture)] == [expected]


# ---------------------------------------------------------------- malformed input


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    return path


def fails(path: Path, *fragments: str) -> str:
    with pytest.raises(ImportFailure) as info:
        import_path(path)
    text = str(info.value)
    assert path.name in text
    for fragment in fragments:
        assert fragment in text, text
    return text


def test_empty_file(tmp_path):
    fails(write(tmp_path, "empty.json", "  \n"), "empty")


def test_truncated_json(tmp_path):
    text = (FIXTURES / "inspect_tool_calls.json").read_text()
    fails(write(tmp_path, "cut.json", text[: len(text) // 2]), "invalid JSON at line")
    chat = (FIXTURES / "openai_chat_conversation.json").read_text()
    fails(write(tmp_path, "chat.json", chat[:-40]), "invalid JSON")


def test_tau_bench_wrong_types(tmp_path):
    items = [{"task_id": 0, "reward": "1", "info": {}, "traj": []}]
    fails(write(tmp_path, "tau.json", json.dumps(items)), "record 0", "field 'reward'")
    items = [
        {"task_id": 0, "reward": 1.0, "info": {}, "traj": []},
        {"task_id": 1, "reward": 0.0, "info": {}, "traj": [{"role": "user", "content": "hi"}, 7]},
    ]
    fails(write(tmp_path, "tau2.json", json.dumps(items)), "record 1", "field 'traj[1]'")


def _eval_with(tmp_path: Path, name: str, extra: dict[str, bytes]) -> Path:
    source = FIXTURES / "inspect_tool_calls.json"
    log = json.loads(source.read_text())
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as zf:
        header = {k: v for k, v in log.items() if k != "samples"}
        zf.writestr("header.json", json.dumps(header))
        for sample in log["samples"]:
            zf.writestr(f"samples/{sample['id']}_epoch_{sample['epoch']}.json", json.dumps(sample))
        for member, data in extra.items():
            zf.writestr(member, data)
    return path


def test_eval_archive_round_and_bad_member(tmp_path):
    good = _eval_with(tmp_path, "good.eval", {})
    trajectories = load(good, "inspect")
    assert [len(t.tool_steps) for t in trajectories] == [3, 3]
    bad = _eval_with(tmp_path, "bad.eval", {"samples/x_epoch_1.json": b'{"id": "x", "messa'})
    fails(bad, "record samples/x_epoch_1.json", "invalid JSON")
    sample = json.loads((FIXTURES / "inspect_tool_calls.json").read_text())["samples"][0]
    sample["id"] = "y"
    sample["messages"][2]["tool_calls"][0]["arguments"] = ["ls"]
    typed = _eval_with(tmp_path, "typed.eval", {"samples/y_epoch_1.json": json.dumps(sample)})
    fails(typed, "record samples/y_epoch_1.json", "field 'messages[2].tool_calls[0].arguments'")


def test_inspect_json_wrong_type(tmp_path):
    log = json.loads((FIXTURES / "inspect_tool_calls.json").read_text())
    log["samples"][1]["scores"] = ["C"]
    fails(write(tmp_path, "log.json", json.dumps(log)), "record 1", "field 'scores'")


def test_openai_chat_wrong_types(tmp_path):
    convo = json.loads((FIXTURES / "openai_chat_conversation.json").read_text())
    convo["messages"][2]["tool_calls"][1]["function"]["arguments"] = 42
    fails(
        write(tmp_path, "chat.json", json.dumps(convo)),
        "record 0",
        "field 'messages[2].tool_calls[1].function.arguments'",
    )
    lines = (FIXTURES / "openai_chat_batch.jsonl").read_text().splitlines()
    second = json.loads(lines[1])
    second["messages"][1]["tool_calls"][0]["function"]["name"] = None
    text = lines[0] + "\n" + json.dumps(second) + "\n"
    fails(
        write(tmp_path, "batch.jsonl", text),
        "record 2",
        "field 'messages[1].tool_calls[0].function.name'",
    )


def test_anthropic_wrong_type(tmp_path):
    convo = json.loads((FIXTURES / "anthropic_messages_transcript.json").read_text())
    convo["messages"][3]["content"][1]["input"] = "SELECT 1"
    fails(
        write(tmp_path, "msgs.json", json.dumps(convo)),
        "record 0",
        "field 'messages[3].content[1].input'",
    )


def test_claude_code_broken_line_and_type(tmp_path):
    lines = (FIXTURES / "claude_code_session.jsonl").read_text().splitlines()
    broken = lines[:4] + [lines[4][:50]] + lines[5:]
    fails(write(tmp_path, "s.jsonl", "\n".join(broken)), "record line 5", "invalid JSON")
    event = json.loads(lines[6])  # the Read tool's result
    event["message"]["content"][0]["content"] = 12
    typed = lines[:6] + [json.dumps(event)] + lines[7:]
    fails(
        write(tmp_path, "t.jsonl", "\n".join(typed)),
        "record line 7",
        "field 'message.content[0].content'",
    )


def test_agentgym_wrong_type(tmp_path):
    items = json.loads((FIXTURES / "agentgym_trajs.json").read_text())
    items[1]["conversations"][3]["value"] = ["go to countertop 1"]
    fails(
        write(tmp_path, "ag.json", json.dumps(items)), "record 1", "field 'conversations[3].value'"
    )


def test_steplab_invalid_record(tmp_path):
    lines = (FIXTURES / "steplab_trajectories.jsonl").read_text().splitlines()
    record = json.loads(lines[1])
    record["steps"][0]["index"] = -1
    fails(
        write(tmp_path, "t.jsonl", lines[0] + "\n" + json.dumps(record) + "\n"),
        "record line 2",
        "field 'steps.0.index'",
    )
    fails(write(tmp_path, "u.jsonl", lines[0] + "\n" + lines[1][:80] + "\n"), "record line 2")
