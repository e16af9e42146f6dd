"""The ReAct text format: for models or servers without native tool calling.

The model is told the tools and answers in plain text::

    Thought: I need the product first.
    Action: calculator
    Action Input: {"expression": "17 * 23"}

and the result comes back as a user message ``Observation: 391``. The same rendering is used by
every backend's ``prompt_format="react"`` mode (:func:`react_messages`), so a ReAct trajectory
reads the same whatever served it.

:func:`parse_react` accepts what models actually write, and nothing ambiguous:

- labels in any case, with markdown decoration (``**Action:**``), optionally numbered
  (``Action 1:``), the whole answer or the arguments inside markdown code fences;
- three shapes of the action: ``Action: <tool>`` + ``Action Input: <JSON object>``;
  ``Action: tool({...})``; ``Action: {"tool": ..., "params" | "arguments": {...}}``;
- arguments spanning several lines, followed by anything (a hallucinated ``Observation:``, a
  second action: only the first action counts), or given as a JSON string holding the object.

JSON is strict: single quotes, trailing commas, comments or Python literals are **not** repaired.
The parser answers with what is wrong and where (``line 1 column 2``) and a hint (use double
quotes, remove the trailing comma), the model sees that as its observation and tries again. We
prefer that over a repairing parser (json5, json-repair): a repaired call would be recorded and
trained on as if the model had written valid output, and guessing what a broken call meant can
silently run the wrong arguments.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from trainer_core.errors import ConfigError
from trainer_core.policies.base import Turn

__all__ = [
    "OBSERVATION_PREFIX",
    "STOP_SEQUENCES",
    "parse_react",
    "react_instructions",
    "react_messages",
    "render_react_turn",
    "tool_fields",
]

OBSERVATION_PREFIX = "Observation: "
#: Stop sequences for ReAct generation: the model must not write the observation itself.
STOP_SEQUENCES: tuple[str, ...] = ("\nObservation:",)

_LABEL = r"^[ \t>*_#-]*{name}(?:[ \t]*\d+)?[ \t*_]*:[ \t*_]*"
_ACTION = re.compile(_LABEL.format(name="action"), re.IGNORECASE | re.MULTILINE)
_ACTION_INPUT = re.compile(_LABEL.format(name=r"action[ \t_-]*input"), re.IGNORECASE | re.MULTILINE)
_THOUGHT = re.compile(_LABEL.format(name="thought"), re.IGNORECASE | re.MULTILINE)
_OBSERVATION = re.compile(_LABEL.format(name="observation"), re.IGNORECASE | re.MULTILINE)
_NEXT_LABEL = re.compile(
    _LABEL.format(name=r"(?:thought|action|action[ \t_-]*input|observation|final[ \t]+answer)"),
    re.IGNORECASE | re.MULTILINE,
)
_FENCE_LINE = re.compile(r"^[ \t]*(?:```|~~~)[\w+-]*[ \t]*$", re.MULTILINE)
_TOOL_NAME = re.compile(r"^[A-Za-z_][\w.:/-]*$")
_CALL = re.compile(r"^([A-Za-z_][\w.:/-]*)[ \t]*\(")
_TOOL_KEYS = ("tool", "name", "action", "tool_name")
_ARG_KEYS = ("params", "arguments", "args", "input", "parameters", "action_input", "tool_input")
_SHAPES = (
    'write "Action: <tool name>" and then "Action Input: <JSON object>", '
    'or "Action: <tool name>({...})"'
)


# --- tools and instructions ---------------------------------------------------------------


def tool_fields(tool: Any) -> tuple[str, str, dict[str, Any]]:
    """``(name, description, JSON-schema parameters)`` of a ToolSpec, a dict with those keys (or
    ``input_schema``, or OpenAI's ``{"type": "function", "function": {...}}``), or a bare name."""
    if isinstance(tool, str):
        return tool, "", {"type": "object", "properties": {}}
    if isinstance(tool, Mapping):
        if isinstance(tool.get("function"), Mapping):  # the OpenAI tool shape
            tool = tool["function"]
        name = tool.get("name")
        description = tool.get("description")
        parameters = tool.get("parameters", tool.get("input_schema"))
    else:
        name = getattr(tool, "name", None)
        description = getattr(tool, "description", None)
        parameters = getattr(tool, "parameters", None)
    if not isinstance(name, str) or not name:
        raise ConfigError(f"a tool needs a non-empty name; got {tool!r}")
    schema = dict(parameters) if isinstance(parameters, Mapping) else {}
    schema.setdefault("type", "object")
    if schema.get("type") == "object":
        schema.setdefault("properties", {})
    return name, str(description or ""), schema


def react_instructions(tools: Sequence[Any]) -> str:
    """System-prompt text: the tools with their argument schemas and the exact answer format."""
    lines = ["You solve the task by calling tools, one call per answer.", "", "Tools:"]
    for tool in tools:
        name, description, schema = tool_fields(tool)
        lines.append(f"- {name}: {description}".rstrip(": ") if description else f"- {name}")
        lines.append(f"  Arguments (JSON schema): {json.dumps(schema, ensure_ascii=False)}")
    if not tools:
        lines.append("- (none)")
    lines += [
        "",
        "Answer in exactly this format:",
        "",
        "Thought: <your reasoning about what to do next>",
        "Action: <the name of one tool from the list>",
        'Action Input: <the arguments as a JSON object, e.g. {"name": "value"}>',
        "",
        "The arguments must be valid JSON: double-quoted keys and strings, no trailing commas. "
        "Write nothing after the Action Input. The tool's result comes back to you as "
        '"Observation: ..."; never write an Observation yourself.',
    ]
    return "\n".join(lines)


# --- rendering ----------------------------------------------------------------------------


def render_react_turn(action: Mapping[str, Any]) -> str:
    """An action as the model should have written it (the inverse of :func:`parse_react`)."""
    thought = str(action.get("thought") or "").strip()
    params = action.get("params") or {}
    lines = [f"Thought: {thought}"] if thought else []
    lines.append(f"Action: {action['tool']}")
    lines.append(f"Action Input: {json.dumps(dict(params), ensure_ascii=False)}")
    return "\n".join(lines)


def react_messages(
    prompt: str, history: Sequence[Turn], system: str | None = None
) -> list[dict[str, Any]]:
    """The conversation in OpenAI's message schema, all plain text: the optional system
    message, the prompt, then per turn the assistant's ReAct text (its raw output when the turn
    was malformed) and a user ``Observation: ...``."""
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": prompt})
    for turn in history:
        if turn.action is not None:
            said = render_react_turn(turn.action)
        else:
            said = turn.raw
        messages.append({"role": "assistant", "content": said})
        messages.append({"role": "user", "content": f"{OBSERVATION_PREFIX}{turn.observation}"})
    return messages


# --- parsing ------------------------------------------------------------------------------


def parse_react(text: str) -> dict[str, Any] | str:
    """An action ``{"tool", "params", "thought"}`` from a ReAct answer, or a sentence saying
    precisely what is wrong with it (see the module docstring for what is accepted)."""
    if not isinstance(text, str) or not text.strip():
        return "the answer was empty."
    body = _FENCE_LINE.sub("", text.replace("\r\n", "\n"))
    action_match = _ACTION.search(body)
    if action_match is None:
        if re.search(r"^[ \t*_#]*final[ \t]+answer[ \t*_]*:", body, re.IGNORECASE | re.MULTILINE):
            return (
                'the answer has a "Final Answer:" but no "Action:" line; give the final answer by '
                "calling the tool that submits it."
            )
        return 'the answer has no "Action:" line naming a tool.'
    # The thought: after a "Thought:" label (else from the start), up to the Action line.
    before = body[: action_match.start()]
    thought_match = None
    for thought_match in _THOUGHT.finditer(before):  # noqa: B007 - the last one wins
        pass
    thought = (before[thought_match.end() :] if thought_match else before).strip()
    # Only this action counts: the text ends at a hallucinated observation or the next step.
    rest = body[action_match.end() :]
    observation = _OBSERVATION.search(rest)
    if observation is not None:
        rest = rest[: observation.start()]
    line_end = rest.find("\n")
    value = (rest if line_end < 0 else rest[:line_end]).strip()
    after = "" if line_end < 0 else rest[line_end + 1 :]

    if value.startswith("{"):
        parsed = _decode_object(rest, rest.index("{"), what="the Action object")
        if isinstance(parsed, str):
            return parsed
        return _from_action_object(parsed, thought)
    call = _CALL.match(value)
    if call is not None:
        tool = call.group(1)
        start = rest.index("(", rest.index(tool)) + 1
        inner = rest[start:].lstrip()
        if inner.startswith(")"):
            return {"tool": tool, "params": {}, "thought": thought}
        parsed = _decode_object(rest, len(rest) - len(inner), what=f"the arguments of {tool}(...)")
        if isinstance(parsed, str):
            return parsed
        return {"tool": tool, "params": parsed, "thought": thought}

    tool = value.strip("`'\" \t*_").rstrip(".,;")
    if not tool:
        return 'the "Action:" line is empty; it must name one tool.'
    if not _TOOL_NAME.match(tool):
        return (
            f'the "Action:" line must hold only a tool name, not {_clip(value)!r}; to call a '
            f"tool, {_SHAPES}."
        )
    input_match = _ACTION_INPUT.search(after)
    if input_match is None:
        return (
            f'"Action: {tool}" is not followed by an "Action Input:" line with its JSON arguments.'
        )
    between = after[: input_match.start()]
    if _NEXT_LABEL.search(between):
        return (
            f'"Action: {tool}" is not followed by an "Action Input:" line with its JSON arguments.'
        )
    args_text = after[input_match.end() :]
    next_label = _NEXT_LABEL.search(args_text)
    end = next_label.start() if next_label else len(args_text)
    stripped = args_text[:end].strip().strip("`").strip()
    if stripped.lower().startswith("json"):
        stripped = stripped[4:].lstrip()
    if not stripped:
        return (
            f'the "Action Input:" of {tool} is empty; give its arguments as a JSON object '
            "({} when it takes none)."
        )
    parsed = _decode_object(stripped, 0, what=f"the Action Input of {tool}")
    if isinstance(parsed, str):
        return parsed
    return {"tool": tool, "params": parsed, "thought": thought}


def _from_action_object(obj: dict[str, Any], thought: str) -> dict[str, Any] | str:
    tool = next((obj[k] for k in _TOOL_KEYS if k in obj), None)
    if not isinstance(tool, str) or not tool.strip():
        return (
            'the Action object has no "tool" naming the tool to call; write '
            '{"tool": "<name>", "params": {...}}.'
        )
    key = next((k for k in _ARG_KEYS if k in obj), None)
    params = obj.get(key) if key else {}
    if params is None:
        params = {}
    if isinstance(params, str):
        decoded = _decode_object(params, 0, what=f'the "{key}" string of the Action object')
        if isinstance(decoded, str):
            return decoded
        params = decoded
    if not isinstance(params, dict):
        return (
            f'"{key}" in the Action object must be a JSON object of named arguments, '
            f"not {_json_type(params)}."
        )
    inner_thought = obj.get("thought")
    if isinstance(inner_thought, str) and inner_thought.strip() and not thought:
        thought = inner_thought.strip()
    return {"tool": tool.strip(), "params": params, "thought": thought}


def _decode_object(text: str, start: int, *, what: str) -> dict[str, Any] | str:
    """The JSON object starting at ``text[start]`` (anything after it is ignored), or a
    message with the position of the error and a hint."""
    segment = text[start:]
    try:
        value, _ = json.JSONDecoder().raw_decode(segment)
    except json.JSONDecodeError as exc:
        if not _looks_like_json(segment):
            return (
                f"{what} is not JSON: {_clip(segment.strip())!r}; give the arguments as a JSON "
                'object such as {"name": "value"}.'
            )
        return (
            f"{what} is not valid JSON: {exc.msg.removesuffix(' at')} at line {exc.lineno} "
            f"column {exc.colno} "
            f"(char {exc.pos}){_hint(segment, exc)}"
        )
    if isinstance(value, str):
        # A JSON string that holds the object ("{\"a\": 1}"), as some models write.
        try:
            inner = json.loads(value)
        except ValueError:
            inner = None
        if isinstance(inner, dict):
            return inner
    if not isinstance(value, dict):
        return f"{what} must be a JSON object of named arguments, not {_json_type(value)}."
    return value


def _looks_like_json(segment: str) -> bool:
    head = segment.lstrip()[:1]
    return head in ("{", "[", '"', "'", "-") or head.isdigit()


def _hint(segment: str, exc: json.JSONDecodeError) -> str:
    at = segment[exc.pos :].lstrip()
    before = segment[: exc.pos].rstrip()
    if at.startswith("'") or (before.endswith("'") and exc.msg.startswith("Expecting")):
        return "; use double quotes for keys and strings, not single quotes."
    if re.match(r"(True|False|None)\b", at):
        return "; write true, false and null in lower case (JSON, not Python)."
    if "trailing comma" in exc.msg.lower() or (before.endswith(",") and at[:1] in ("}", "]")):
        return "; remove the trailing comma before the closing bracket."
    if exc.msg.startswith("Unterminated string"):
        return '; close the string with a double quote (escape quotes inside it as \\").'
    if exc.msg.startswith("Invalid control character"):
        return "; write a line break inside a string as \\n."
    if exc.msg.startswith("Expecting") and not at:
        return "; the JSON ends too early: close every bracket and quote."
    if exc.msg.startswith("Expecting"):
        return "; check the commas, colons, brackets and quotes there."
    return "."


def _json_type(value: Any) -> str:
    names = {list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return names.get(type(value), type(value).__name__)


def _clip(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
