"""Lossless message steps (schema 1.1): every importer keeps every turn of its logs, in order.

Each test reads the source file itself, independently of the importer, into the sequence of turns
it holds — ``"T"`` for a tool call, ``(role, text)`` for a message — and compares it with the
imported steps. Tool-call counts are those of the 1.0 importers (asserted again in the format
tests). The real logs are in ../shared/data/agent-logs; the other formats use our own fixtures.
"""

from __future__ import annotations

import json
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

import pytest

from trainer_core.recording.importers import import_path
from trainer_core.recording.schema import SCHEMA_VERSION, Step, Trajectory, as_trajectory

SHARED = Path(__file__).resolve().parents[3].parent / "shared" / "data" / "agent-logs"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "agent_logs"


def shared(name: str) -> Path:
    path = SHARED / name
    if not path.is_file():
        pytest.skip(f"shared agent log {path} is not present on this machine")
    return path


def turns(trajectory: Trajectory) -> list[Any]:
    """The imported steps as "T" (a tool call) or (role, text) (a message)."""
    out: list[Any] = []
    for step in trajectory.steps:
        out.append("T" if step.kind == "tool" else (step.role, step.text))
    assert [s.index for s in trajectory.steps] == list(range(len(trajectory.steps)))
    assert trajectory.schema_version == SCHEMA_VERSION
    return out


def imported(path: Path) -> list[Trajectory]:
    return [t for result in import_path(path) for t in result.trajectories]


def check(path: Path, expected: list[list[Any]]) -> list[Trajectory]:
    trajectories = imported(path)
    assert [turns(t) for t in trajectories] == expected
    assert sum(len(e) for e in expected) > 0
    return trajectories


# --- independent readings of the chat formats ----------------------------------------------------


def _text(content: Any) -> str:
    """A message's text: a string, or its parts' texts joined by newlines."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(p["text"] for p in content if isinstance(p, dict) and p.get("text"))


def openai_turns(messages: list[dict[str, Any]]) -> list[Any]:
    """One "T" per tool call; tool results are observations; every other message a turn."""
    out: list[Any] = []
    for m in messages:
        if m["role"] in ("tool", "function"):
            continue
        if m["role"] == "assistant" and m.get("tool_calls"):
            out += ["T"] * len(m["tool_calls"])
            continue
        role = "system" if m["role"] == "developer" else m["role"]
        out.append((role, _text(m.get("content"))))
    return out


def inspect_turns(messages: list[dict[str, Any]]) -> list[Any]:
    out: list[Any] = []
    for m in messages:
        if m["role"] == "tool":
            continue
        if m["role"] == "assistant" and m.get("tool_calls"):
            out += ["T"] * len(m["tool_calls"])
            continue
        content = m.get("content")
        if isinstance(content, list):  # Inspect: text parts; reasoning is the thought
            content = [p for p in content if p.get("type") == "text"]
        out.append((m["role"], _text(content)))
    return out


def block_turns(role: str, content: Any) -> list[Any]:
    """Anthropic blocks: one "T" per tool_use; the text after the last one is a turn."""
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    out: list[Any] = []
    texts: list[str] = []
    thinking = False
    for block in content:
        if block["type"] == "tool_use":
            out.append("T")
            texts, thinking = [], False
        elif block["type"] == "text":
            texts.append(block["text"])
        elif block["type"] == "thinking":
            thinking = True
    if texts or (role == "assistant" and thinking):
        out.append((role, "\n".join(t for t in texts if t)))
    return out


# --- real logs -----------------------------------------------------------------------------------


def test_tau_bench_keeps_every_turn():
    path = shared("tau-bench_airline_slice.json")
    records = json.loads(path.read_text())
    trajectories = check(path, [openai_turns(r["traj"]) for r in records])
    # tool-call counts as in schema 1.0
    assert [len(t.tool_steps) for t in trajectories] == [8, 0, 7, 20, 6, 6]
    assert sum(len(t.message_steps) for t in trajectories) == sum(
        1
        for r in records
        for m in r["traj"]
        if m["role"] != "tool" and not (m["role"] == "assistant" and m.get("tool_calls"))
    )


def test_inspect_json_log_keeps_every_turn():
    path = shared("inspect_security-guide.json")
    samples = json.loads(path.read_text())["samples"]
    trajectories = check(path, [inspect_turns(s["messages"]) for s in samples])
    first = trajectories[0]
    answer = first.message_steps[-1]
    assert answer.role == "assistant" and "parameterized queries" in answer.text


def test_inspect_eval_archive_keeps_every_turn():
    path = shared("inspect_read_sample.eval")
    with zipfile.ZipFile(path) as zf:
        names = sorted(n for n in zf.namelist() if n.startswith("samples/"))
        samples = [json.loads(zf.read(n)) for n in names]
    check(path, [inspect_turns(s["messages"]) for s in samples])


def _leading(messages: list[dict[str, Any]]) -> list[Any]:
    out = []
    for m in messages:
        if m["role"] == "assistant" and not m.get("is_demo"):
            break
        out.append(("system" if m.get("is_demo") else m["role"], _text(m["content"])))
    return out


@pytest.mark.parametrize(
    "name", ["swe-agent_test-repo.traj", "swe-agent_function-calling_marshmallow.traj"]
)
def test_swe_agent_keeps_every_turn(name):
    path = shared(name)
    data = json.loads(path.read_text())
    # the system and instance prompts, then one tool step per trajectory entry (each action;
    # every later history message is an action or its observation)
    (t,) = check(path, [_leading(data["history"]) + ["T"] * len(data["trajectory"])])
    assert t.steps[0].role == "system" and t.steps[1].role == "user"
    assert t.task.prompt in t.steps[1].text


def test_mini_swe_agent_keeps_every_turn():
    path = shared("mini-swe-agent_local.traj.json")
    messages = json.loads(path.read_text())
    actions = sum(1 for m in messages if m["role"] == "assistant")
    replies = [m for m in messages[2:] if m["role"] == "user"]
    assert len(replies) == actions  # each action's observation
    check(path, [_leading(messages) + ["T"] * actions])


def _openhands_turns(events: list[dict[str, Any]]) -> list[Any]:
    out: list[Any] = []
    for e in events:
        if "action" not in e or e.get("source") == "environment":
            continue
        args = e.get("args") if "args" in e else e  # older flat events: args beside "action"
        if e["action"] == "message" and (e.get("source") == "user" or not out):
            out.append(("user", args.get("content") or e.get("message") or ""))
        elif e["action"] == "message" and not e.get("tool_call_metadata"):
            out.append(("assistant", args.get("content") or ""))
        elif e["action"] == "system":
            out.append(("system", args.get("content") or ""))
        elif e["action"] not in ("change_agent_state", "recall", "null", "condensation"):
            out.append("T")
    return out


def test_openhands_events_keep_every_turn():
    path = shared("openhands_basic.json")
    (t,) = check(path, [_openhands_turns(json.loads(path.read_text()))])
    assert t.steps[0].text == t.task.prompt


def test_openhands_eval_output_keeps_every_turn():
    path = shared("openhands_resolver_output.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    check(path, [_openhands_turns(row["history"]) for row in rows])


# --- our own fixtures ----------------------------------------------------------------------------


def test_openai_chat_keeps_every_turn():
    path = FIXTURES / "openai_chat_conversation.json"
    (t,) = check(path, [openai_turns(json.loads(path.read_text())["messages"])])
    assert t.steps[-1].role == "assistant" and "umbrella for Porto" in t.steps[-1].text
    batch = FIXTURES / "openai_chat_batch.jsonl"
    lines = [json.loads(line) for line in batch.read_text().splitlines() if line.strip()]
    check(batch, [openai_turns(line["messages"]) for line in lines])


def test_tau_bench_fixture_keeps_every_turn():
    path = FIXTURES / "tau_bench_hat136.json"
    check(path, [openai_turns(r["traj"]) for r in json.loads(path.read_text())])


def test_inspect_fixture_keeps_every_turn():
    path = FIXTURES / "inspect_tool_calls.json"
    samples = json.loads(path.read_text())["samples"]
    trajectories = imported(path)
    expected = [inspect_turns(s["messages"]) for s in samples]
    # the fixture's user prompt is an attachment reference, resolved on import
    got = [[t if t == "T" else t[0] for t in turns(tr)] for tr in trajectories]
    assert got == [[t if t == "T" else t[0] for t in e] for e in expected]


def test_anthropic_messages_keep_every_turn():
    path = FIXTURES / "anthropic_messages_transcript.json"
    data = json.loads(path.read_text())
    expected = [("system", data["system"])]
    for m in data["messages"]:
        expected += block_turns(m["role"], m["content"])
    (t,) = check(path, [expected])
    assert t.steps[-1].role == "assistant" and t.steps[-1].text.startswith("42 orders")


def test_claude_code_keeps_every_turn():
    path = FIXTURES / "claude_code_session.jsonl"
    sessions: OrderedDict[str, list[Any]] = OrderedDict()
    merged: OrderedDict[tuple[str, str], list[Any]] = OrderedDict()
    order: list[tuple[str, str, Any]] = []
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if event.get("type") not in ("user", "assistant"):
            continue
        sessions.setdefault(event["sessionId"], [])
        message = event["message"]
        if event["type"] == "assistant":  # one line per content block of one API message
            key = (event["sessionId"], message["id"])
            if key not in merged:
                order.append((event["sessionId"], "assistant", key))
            merged.setdefault(key, []).extend(message["content"])
        elif event.get("isMeta"):
            order.append((event["sessionId"], "system", _text(message["content"])))
        else:
            order.append((event["sessionId"], "user", message["content"]))
    for session, role, item in order:
        if role == "assistant":
            sessions[session] += block_turns("assistant", merged[item])
        elif role == "system":
            sessions[session].append((role, item))
        else:
            sessions[session] += block_turns("user", item)
    check(path, list(sessions.values()))


def test_agentgym_keeps_every_turn():
    path = FIXTURES / "agentgym_trajs.json"
    roles = {"human": "user", "gpt": "assistant", "system": "system"}
    expected = []
    for item in json.loads(path.read_text()):
        conv = item["conversations"]
        # the instruction, its acknowledgement and the task; then each gpt turn is an action
        # observed by the human turn after it
        lead = [(roles[t["from"]], t["value"]) for t in conv[:3]]
        expected.append(lead + ["T"] * sum(1 for t in conv[3:] if t["from"] == "gpt"))
    check(path, expected)


# --- the schema ----------------------------------------------------------------------------------


def test_a_1_0_document_loads_with_its_dialogue_as_message_steps():
    doc = {
        "schema_version": "1.0",
        "steps": [
            {"index": 0, "tool": "search", "params": {"q": "x"}, "observation": "found"},
            {"index": 1, "tool": "submit", "params": {"answer": "y"}},
        ],
        "metadata": {
            "system_prompt": "Be brief.",
            "dialogue": [
                {"role": "user", "content": "Find x", "before_step": 0},
                {"role": "assistant", "content": "Found it; submitting.", "before_step": 1},
                {"role": "user", "content": "thanks", "before_step": 2},
            ],
            "other": 1,
        },
    }
    t = as_trajectory(doc)
    assert t.schema_version == SCHEMA_VERSION
    assert turns(t) == [
        ("system", "Be brief."),
        ("user", "Find x"),
        "T",
        ("assistant", "Found it; submitting."),
        "T",
        ("user", "thanks"),
    ]
    assert t.metadata == {"other": 1}
    assert [s.tool for s in t.tool_steps] == ["search", "submit"]
    # a 1.0 document without dialogue is unchanged but for its version
    plain = as_trajectory({**doc, "metadata": {}})
    assert turns(plain) == ["T", "T"] and plain.steps[1].params == {"answer": "y"}


def test_step_kinds_are_checked():
    Step(index=0, kind="message", role="assistant", text="hi", thought="why")
    with pytest.raises(ValueError, match="needs a role"):
        Step(index=0, kind="message", text="hi")
    with pytest.raises(ValueError, match="no tool, params"):
        Step(index=0, kind="message", role="user", text="hi", tool="bash")
    with pytest.raises(ValueError, match="no role or text"):
        Step(index=0, tool="bash", text="hi")
    with pytest.raises(ValueError, match="needs 'tool'"):
        Step.model_validate({"index": 0})
    with pytest.raises(ValueError, match="carries no step reward"):
        Step(index=0, kind="message", role="user", text="hi", reward=1.0)
    Step(index=0, kind="message", role="assistant", text="hi", reward=1.0)
