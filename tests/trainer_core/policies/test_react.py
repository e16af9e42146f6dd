"""The ReAct text format: instructions, rendering, and a parser that accepts what models write and
says precisely what is wrong with what it cannot accept."""

from __future__ import annotations

import json

import pytest

from trainer_core.envs import make
from trainer_core.policies.base import Turn
from trainer_core.policies.chat_format import system_prompt
from trainer_core.policies.react import (
    parse_react,
    react_instructions,
    react_messages,
    render_react_turn,
    tool_fields,
)
from trainer_core.tasks.model import ToolSpec

CALC = {"tool": "calculator", "params": {"expression": "2+2"}, "thought": "Add them."}


def _action(tool="calculator", params=None, thought="Add them."):
    return {
        "tool": tool,
        "params": {"expression": "2+2"} if params is None else params,
        "thought": thought,
    }


# --- accepted shapes ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        'Thought: Add them.\nAction: calculator\nAction Input: {"expression": "2+2"}',
        # case-insensitive labels, odd spacing, Windows line ends
        'THOUGHT:Add them.\r\naction :  calculator\r\naction input:{"expression": "2+2"}',
        # markdown decoration
        '**Thought:** Add them.\n**Action:** calculator\n**Action Input:** {"expression": "2+2"}',
        # numbered labels (the ReAct paper's style)
        'Thought 1: Add them.\nAction 1: calculator\nAction Input 1: {"expression": "2+2"}',
        # the whole answer in a code fence
        '```\nThought: Add them.\nAction: calculator\nAction Input: {"expression": "2+2"}\n```',
        # the arguments in a json code fence, over several lines
        'Thought: Add them.\nAction: calculator\nAction Input:\n```json\n{\n  "expression":'
        ' "2+2"\n}\n```',
        # inline code around the name and the arguments
        'Thought: Add them.\nAction: `calculator`\nAction Input: `{"expression": "2+2"}`',
        # a hallucinated observation and a next step after the action: cut
        'Thought: Add them.\nAction: calculator\nAction Input: {"expression": "2+2"}\n'
        'Observation: 4\nThought: done\nAction: submit\nAction Input: {"answer": "4"}',
        # trailing prose after the JSON
        'Thought: Add them.\nAction: calculator\nAction Input: {"expression": "2+2"} and wait.',
        # a second action without an observation: only the first counts
        'Thought: Add them.\nAction: calculator\nAction Input: {"expression": "2+2"}\n'
        'Action: submit\nAction Input: {"answer": "4"}',
        # the call form
        'Thought: Add them.\nAction: calculator({"expression": "2+2"})',
        # the object form, with "params" or "arguments"
        'Thought: Add them.\nAction: {"tool": "calculator", "params": {"expression": "2+2"}}',
        'Thought: Add them.\nAction: {"tool": "calculator", "arguments": {"expression": "2+2"}}',
        # the object form with arguments as a JSON string (OpenAI style)
        'Thought: Add them.\nAction: {"tool": "calculator", "arguments": "{\\"expression\\": '
        '\\"2+2\\"}"}',
        # the arguments double-encoded as a JSON string
        'Thought: Add them.\nAction: calculator\nAction Input: "{\\"expression\\": \\"2+2\\"}"',
        # the object form spread over lines
        'Thought: Add them.\nAction: {\n  "tool": "calculator",\n  "params": {"expression": '
        '"2+2"}\n}',
    ],
)
def test_accepted_shapes_give_the_same_action(text):
    assert parse_react(text) == CALC


def test_thought_is_the_text_before_the_action_when_there_is_no_label():
    text = 'I will add them.\nAction: calculator\nAction Input: {"expression": "2+2"}'
    assert parse_react(text) == _action(thought="I will add them.")


def test_multi_line_thought_is_kept_whole():
    text = 'Thought: First line.\nSecond line.\nAction: calculator\nAction Input: {"expression": "2+2"}'
    assert parse_react(text)["thought"] == "First line.\nSecond line."


def test_thought_inside_the_action_object_is_used_when_there_is_none_outside():
    text = 'Action: {"tool": "submit", "params": {"answer": "4"}, "thought": "Done."}'
    assert parse_react(text) == {"tool": "submit", "params": {"answer": "4"}, "thought": "Done."}


def test_calls_without_arguments():
    assert parse_react("Thought: stop.\nAction: submit()") == _action("submit", {}, "stop.")
    assert parse_react("Action: submit\nAction Input: {}") == _action("submit", {}, "")
    assert parse_react('Action: {"tool": "submit"}') == _action("submit", {}, "")


def test_nested_and_unicode_arguments_are_kept_exactly():
    params = {"path": "a/b.py", "edits": [{"old": "x = '}'", "new": 'y = "{"'}], "n": 1.5}
    params["note"] = "naïve — 日本"
    text = (
        f"Thought: edit.\nAction: edit_file\nAction Input: {json.dumps(params, ensure_ascii=False)}"
    )
    assert parse_react(text) == _action("edit_file", params, "edit.")


def test_tool_names_with_dots_colons_and_dashes():
    text = 'Action: fs.read-file:v2\nAction Input: {"path": "x"}'
    assert parse_react(text)["tool"] == "fs.read-file:v2"


def test_the_word_action_inside_a_thought_line_is_not_a_label():
    text = (
        "Thought: The next Action: should be the calculator.\n"
        'Action: calculator\nAction Input: {"expression": "2+2"}'
    )
    out = parse_react(text)
    assert out["tool"] == "calculator"
    assert out["thought"] == "The next Action: should be the calculator."


# --- rejected outputs and what the message says ------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ["empty"]),
        ("   \n ", ["empty"]),
        ("Thought: the answer is 4.", ['no "Action:" line']),
        ("Thought: done.\nFinal Answer: 4", ["Final Answer", "calling the tool"]),
        ("Thought: x\nAction: calculator", ['"Action: calculator"', '"Action Input:"']),
        ("Thought: x\nAction:\nAction Input: {}", ['"Action:" line is empty', "name one tool"]),
        (
            "Thought: x\nAction: I will use the calculator\nAction Input: {}",
            ["only a tool name", "I will use the calculator"],
        ),
        ("Thought: x\nAction: calculator\nAction Input:", ["empty", "{}"]),
        (
            "Thought: x\nAction: calculator\nAction Input: {'expression': '2+2'}",
            ["not valid JSON", "line 1 column 2", "double quotes"],
        ),
        (
            'Thought: x\nAction: calculator\nAction Input: {"expression": "2+2",}',
            ["not valid JSON", "column 22", "trailing comma"],
        ),
        (
            'Thought: x\nAction: calculator\nAction Input: {"a": [1, 2,]}',
            ["not valid JSON", "trailing comma"],
        ),
        (
            'Thought: x\nAction: calculator\nAction Input: {"exact": True}',
            ["not valid JSON", "true, false and null"],
        ),
        (
            'Thought: x\nAction: calculator\nAction Input: {"expression": "2+2"',
            ["not valid JSON", "ends too early"],
        ),
        (
            'Thought: x\nAction: write\nAction Input: {"content": "a\nb"}',
            ["not valid JSON", "Invalid control character", "\\n"],
        ),
        (
            'Thought: x\nAction: calculator\nAction Input: ["2+2"]',
            ["must be a JSON object", "a list"],
        ),
        (
            'Thought: x\nAction: calculator\nAction Input: "2+2"',
            ["must be a JSON object", "a string"],
        ),
        ("Thought: x\nAction: calculator\nAction Input: 4", ["must be a JSON object", "a number"]),
        (
            "Thought: x\nAction: calculator\nAction Input: expression=2+2",
            ["is not JSON", "expression=2+2", "JSON object"],
        ),
        ('Action: calculator({"expression": 2+2})', ["arguments of calculator", "not valid JSON"]),
        ('Action: {"params": {"a": 1}}', ['no "tool"']),
        ('Action: {"tool": "calculator", "params": [1]}', ['"params"', "a list"]),
        (
            'Action: {"tool": "calculator", "params": {"expression": "2+2"}',
            ["Action object", "not valid JSON"],
        ),
    ],
)
def test_rejected_outputs_say_what_is_wrong(text, expected):
    out = parse_react(text)
    assert isinstance(out, str), out
    for part in expected:
        assert part in out, (part, out)


def test_a_hallucinated_observation_before_the_input_is_not_taken_as_the_input():
    text = "Thought: x\nAction: calculator\nObservation: 4"
    out = parse_react(text)
    assert isinstance(out, str) and "Action Input" in out


def test_a_label_between_action_and_input_breaks_the_pair():
    text = 'Action: calculator\nThought: hmm\nAction Input: {"expression": "1"}'
    out = parse_react(text)
    assert isinstance(out, str) and '"Action: calculator"' in out


def test_non_text_is_an_error_not_an_exception():
    assert isinstance(parse_react(None), str)  # type: ignore[arg-type]


# --- rendering ----------------------------------------------------------------------------


def test_render_and_parse_round_trip():
    for action in (
        CALC,
        _action("submit", {"answer": "4"}, ""),
        _action("edit", {"text": 'line1\nline2 "quoted" ü'}, "Two\nlines of thought."),
    ):
        text = render_react_turn(action)
        assert parse_react(text) == action


def test_render_shape():
    assert render_react_turn(CALC) == (
        'Thought: Add them.\nAction: calculator\nAction Input: {"expression": "2+2"}'
    )
    assert render_react_turn({"tool": "submit", "params": {}}) == (
        "Action: submit\nAction Input: {}"
    )


def test_react_messages_replay_actions_and_malformed_turns():
    history = [
        Turn(action=CALC, observation="4"),
        Turn(action=None, observation="Your last output was not a valid action: x", raw="oops"),
    ]
    messages = react_messages("What is 2+2?", history, "SYS")
    assert messages == [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": render_react_turn(CALC)},
        {"role": "user", "content": "Observation: 4"},
        {"role": "assistant", "content": "oops"},
        {"role": "user", "content": "Observation: Your last output was not a valid action: x"},
    ]
    assert react_messages("p", [])[0] == {"role": "user", "content": "p"}


# --- instructions ---------------------------------------------------------------------------


def test_instructions_list_every_tool_with_its_schema_and_the_format():
    env = make("steplab/arithmetic")
    tools = env.available_tools
    text = react_instructions(tools)
    for tool in tools:
        assert f"- {tool.name}: {tool.description}" in text
        assert json.dumps(dict(tool.parameters)) in text
    for label in ("Thought:", "Action:", "Action Input:", "Observation"):
        assert label in text
    # the chat format's react system prompt is built from the same instructions
    assert text in system_prompt(tools, prompt_format="react")


def test_tool_fields_accepts_specs_dicts_openai_tools_and_names():
    spec = ToolSpec("calc", "Compute.", {"type": "object", "properties": {"x": {"type": "number"}}})
    expected = ("calc", "Compute.", {"type": "object", "properties": {"x": {"type": "number"}}})
    assert tool_fields(spec) == expected
    assert tool_fields(spec.as_dict()) == expected
    assert tool_fields({"name": "calc", "description": "Compute.", "input_schema": expected[2]})
    assert tool_fields({"type": "function", "function": {**spec.as_dict()}}) == expected
    assert tool_fields("calc") == ("calc", "", {"type": "object", "properties": {}})
