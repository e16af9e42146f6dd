"""The one chat / tool-call format: how a trajectory becomes chat messages, text and tokens.

This module is the **single definition** of the format. The local-model policy prompts with it,
and the datasets and training code render stored trajectories with exactly the same functions, so
what a model is trained on is exactly what it is prompted with. Do not re-implement any part of it
elsewhere; call these functions.

Messages
    :func:`to_messages` turns an episode (the prompt and the earlier :class:`~.base.Turn` objects)
    into messages in the OpenAI chat schema: ``system`` (optional), ``user`` (the prompt), then per
    turn an ``assistant`` message whose ``tool_calls`` hold the action (``id`` ``call_<i>``, ``i``
    the 0-based turn index; ``arguments`` a JSON string) and a ``tool`` message with the
    observation. A turn whose output was not an action (``Turn.action is None``) becomes an
    ``assistant`` message with the raw text and a ``user`` message with the observation (the error).
    :func:`trajectory_to_messages` does the same for a stored
    :class:`~trainer_core.recording.schema.Trajectory`; its message steps (schema 1.1) are
    messages of their own role in their place (an assistant message: its thought, then its
    text), and its system message steps at the start are the system message unless ``system`` is
    given.

Text (for local models; ChatML with Hermes/Qwen-style tool-call tags)::

    <|im_start|>system
    {system prompt}<|im_end|>
    <|im_start|>user
    {prompt}<|im_end|>
    <|im_start|>assistant
    {thought}
    <tool_call>{"name": "calculator", "arguments": {"expression": "2+3"}}</tool_call><|im_end|>
    <|im_start|>tool
    5<|im_end|>
    <|im_start|>assistant
    <tool_call>{"name": "submit", "arguments": {"answer": "5"}}</tool_call><|im_end|>

Every message is ``<|im_start|>{role}\\n{content}<|im_end|>\\n``. An assistant message with tool
calls renders its content (the thought, omitted when empty, then a newline) followed by each call
as ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` (several calls: one per line; the
arguments are written as the message holds them: a JSON string verbatim, an object as
``json.dumps``). A tool result is a ``tool`` turn. The generation prompt is
``<|im_start|>assistant\\n``; the model ends its turn with ``<|im_end|>``. Leading whitespace of a
message's content is dropped, so the boundary after the role header is a token boundary in every
tokenizer. :data:`CHAT_TEMPLATE` is the same format as a Jinja chat template, for servers (vLLM,
SGLang) that serve a Steplab checkpoint.

Tokens
    :data:`SPECIAL_TOKENS` are the tokens a tokenizer needs (``<|im_start|>`` and ``<|im_end|>`` as
    special tokens, the two tool-call tags as added tokens); :func:`ensure_special_tokens` adds the
    missing ones and a pad token. :func:`tokenize` encodes messages segment by segment (control
    tokens, role headers, contents) and returns the ids with an ``assistant_mask`` that is 1
    exactly on the tokens the policy produced: each assistant message's content including its
    closing ``<|im_end|>`` (never the role headers, the newline between messages, nor system, user
    or tool content). The ids equal ``tokenizer.encode(render(messages))`` for byte-level BPE
    tokenizers (GPT-2, Llama 3, Qwen and the tiny test tokenizers), except that special-token text
    inside system, user and tool content is encoded as plain text (an observation cannot open a
    new role), and :func:`tokenize` is what training and the local policy use.

Parsing
    :func:`parse_assistant` turns a generated assistant turn back into an action
    ``{"tool", "params", "thought"}``, or returns a message saying what was wrong.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from trainer_core.errors import ConfigError, InputError

if TYPE_CHECKING:
    from trainer_core.policies.base import Turn
    from trainer_core.recording.schema import Step, Trajectory
    from trainer_core.tasks.model import ToolSpec

__all__ = [
    "CHAT_TEMPLATE",
    "IM_END",
    "IM_START",
    "PAD_TOKEN",
    "SPECIAL_TOKENS",
    "TOOL_CALL_END",
    "TOOL_CALL_START",
    "Tokenized",
    "ensure_special_tokens",
    "parse_assistant",
    "render",
    "render_tool_call",
    "step_to_turn",
    "system_prompt",
    "to_messages",
    "tokenize",
    "trajectory_to_messages",
]

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
TOOL_CALL_START = "<tool_call>"
TOOL_CALL_END = "</tool_call>"
#: The tokens of the format; a tokenizer must hold each as a single token (see
#: :func:`ensure_special_tokens`). ``<|im_end|>`` ends every turn, so it is the stop token.
SPECIAL_TOKENS: tuple[str, ...] = (IM_START, IM_END, TOOL_CALL_START, TOOL_CALL_END)
#: The pad token added to a tokenizer that has none (the same as Qwen's).
PAD_TOKEN = "<|endoftext|>"

ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")

DEFAULT_INSTRUCTIONS = "You are an agent that completes tasks by calling tools."

#: The format as a Jinja chat template (``tokenizer.chat_template``); renders exactly as
#: :func:`render` for messages with string contents. The policy's own tokens (an assistant
#: message's content and tool calls, and its closing ``<|im_end|>``) sit inside
#: ``{% generation %}`` markers, so ``apply_chat_template(..., return_assistant_tokens_mask=True)``
#: (TRL's ``assistant_only_loss``) gives the same mask as :func:`tokenize`.
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- set content = message['content'] if message['content'] is string else '' -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['role'] == 'assistant' -%}"
    "{%- generation -%}"
    "{{- content.lstrip() -}}"
    "{%- if message['tool_calls'] is defined and message['tool_calls'] -%}"
    "{%- for call in message['tool_calls'] -%}"
    "{%- set fn = call['function'] if call['function'] is defined else call -%}"
    "{%- if content.lstrip() or not loop.first -%}{{- '\\n' -}}{%- endif -%}"
    "{{- '<tool_call>{\"name\": ' + (fn['name'] | tojson) + ', \"arguments\": ' -}}"
    "{%- if fn['arguments'] is string -%}{{- fn['arguments'] -}}"
    "{%- elif fn['arguments'] is defined -%}{{- fn['arguments'] | tojson -}}"
    "{%- else -%}{{- '{}' -}}{%- endif -%}"
    "{{- '}</tool_call>' -}}"
    "{%- endfor -%}"
    "{%- endif -%}"
    "{{- '<|im_end|>' -}}"
    "{%- endgeneration -%}"
    "{%- else -%}"
    "{{- content.lstrip() + '<|im_end|>' -}}"
    "{%- endif -%}"
    "{{- '\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


# --------------------------------------------------------------------------- messages


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def to_messages(
    *, prompt: str, history: Sequence[Turn], system: str | None = None
) -> list[dict[str, Any]]:
    """The episode so far as chat messages (OpenAI schema); see the module docstring."""
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": prompt})
    for i, turn in enumerate(history):
        action = turn.action
        if action is None:
            messages.append({"role": "assistant", "content": turn.raw or ""})
            messages.append({"role": "user", "content": turn.observation})
            continue
        tool = str(action.get("tool", ""))
        call_id = f"call_{i}"
        messages.append(
            {
                "role": "assistant",
                "content": action.get("thought") or "",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": tool, "arguments": _json(action.get("params") or {})},
                    }
                ],
            }
        )
        messages.append(
            {"role": "tool", "tool_call_id": call_id, "name": tool, "content": turn.observation}
        )
    return messages


def step_to_turn(step: Step) -> Turn:
    """A stored step as the policy saw it. A step with an empty ``tool`` or with
    ``error == "malformed_output"`` was a model output that was not an action: it becomes a turn
    without action whose raw text is ``step.metadata["raw"]`` (else the thought)."""
    from trainer_core.policies.base import Turn

    if not step.tool.strip() or step.error == "malformed_output":
        raw = step.metadata.get("raw")
        return Turn(
            action=None,
            observation=step.observation,
            raw=raw if isinstance(raw, str) else step.thought,
            error=step.error or "malformed_output",
        )
    return Turn(
        action={"tool": step.tool, "params": dict(step.params), "thought": step.thought},
        observation=step.observation,
    )


def trajectory_to_messages(
    trajectory: Trajectory, *, system: str | None = None
) -> list[dict[str, Any]]:
    """A stored trajectory as chat messages: ``task.prompt``, then each step as a turn (see
    :func:`step_to_turn`). Pass the same ``system`` the policy was prompted with (for a local
    model, ``system_prompt(tools)``) so training sees what the policy saw.

    With message steps (schema 1.1) the dialogue is rendered as it happened: each message step is
    a message of its role in its place — an assistant message's content is its thought and its
    text, like the thought before a tool call — and each tool step an ``assistant`` message with
    its tool call and a ``tool`` message with the observation (``call_<i>``, ``i`` counting the
    tool steps). The system message steps before everything else are the system message, unless
    ``system`` is given (it replaces them); the task's prompt opens the dialogue only when no
    user message comes first. An assistant message a rollout's policy sent with a tool (a
    ``respond`` to a simulated user, ``metadata["tool"]``) is rendered as that tool call, and
    the user's reply as its result, as the policy saw them (:func:`_dialogue_items`)."""
    steps = sorted(trajectory.steps, key=lambda s: s.index)
    if not any(s.kind == "message" for s in steps):
        return to_messages(
            prompt=trajectory.task.prompt,
            history=[step_to_turn(s) for s in steps],
            system=system,
        )
    lead = 0
    while lead < len(steps) and steps[lead].kind == "message" and steps[lead].role == "system":
        lead += 1
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    else:
        messages += [{"role": "system", "content": s.text} for s in steps[:lead]]
    rest = steps[lead:]
    if not (rest and rest[0].kind == "message" and rest[0].role == "user"):
        messages.append({"role": "user", "content": trajectory.task.prompt})
    items = _dialogue_items(rest)
    turns = [item for item in items if not isinstance(item, dict)]
    tool_messages = iter(_pairs(to_messages(prompt="", history=turns)[1:]))
    for item in items:
        messages += [item] if isinstance(item, dict) else next(tool_messages)
    return messages


def _dialogue_items(steps: Sequence[Step]) -> list[Any]:
    """The steps after the opening as messages (dicts) and turns (:class:`~.base.Turn`), in
    order. A tool step is a turn; so is an assistant message the policy sent with a tool (a
    ``respond`` to a simulated user: ``metadata["tool"]`` and ``metadata["params"]``, as the
    episode runner records it) together with the user message answering it — so that a rollout
    renders exactly as its policy was prompted. Any other message step is a message."""
    from trainer_core.policies.base import Turn

    items: list[Any] = []
    position = 0
    while position < len(steps):
        step = steps[position]
        tool = step.metadata.get("tool") if step.kind == "message" else None
        params = step.metadata.get("params")
        if step.kind != "message":
            items.append(step_to_turn(step))
        elif step.role == "assistant" and isinstance(tool, str) and isinstance(params, dict):
            reply = steps[position + 1] if position + 1 < len(steps) else None
            answered = reply is not None and reply.kind == "message" and reply.role == "user"
            action = {"tool": tool, "params": dict(params), "thought": step.thought}
            items.append(Turn(action=action, observation=reply.text if answered else ""))
            position += 1 if answered else 0
        else:
            items.append({"role": step.role, "content": _message_content(step)})
        position += 1
    return items


def _message_content(step: Step) -> str:
    if step.role == "assistant" and step.thought:
        return f"{step.thought}\n{step.text}" if step.text else step.thought
    return step.text


def _pairs(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The messages of :func:`to_messages` after the prompt, two per turn."""
    return [messages[i : i + 2] for i in range(0, len(messages), 2)]


def _tool_dict(tool: Any) -> dict[str, Any]:
    if hasattr(tool, "as_dict"):
        return tool.as_dict()
    if isinstance(tool, Mapping):
        if "function" in tool and isinstance(tool["function"], Mapping):  # OpenAI tool shape
            tool = tool["function"]
        out = {
            "name": tool.get("name"),
            "description": tool.get("description", ""),
            "parameters": tool.get("parameters")
            or tool.get("input_schema")
            or {"type": "object", "properties": {}},
        }
        if not isinstance(out["name"], str) or not out["name"]:
            raise ConfigError(f"a tool needs a non-empty 'name'; got {dict(tool)!r}")
        return out
    raise ConfigError(
        f"a tool is a ToolSpec or a dict with name, description and parameters, "
        f"not {type(tool).__name__}"
    )


def system_prompt(
    tools: Sequence[ToolSpec | Mapping[str, Any]],
    *,
    prompt_format: str = "native",
    instructions: str | None = None,
) -> str:
    """The default system prompt: ``instructions``, the tools (name, description, JSON-schema
    parameters) and how to call them in ``prompt_format``. ``native``: the tool-call tags of this
    format, after ``instructions`` or a one-line default; ``react``: ``instructions`` (when
    given) and then :func:`trainer_core.policies.react.react_instructions`, which lists the
    tools itself."""
    from trainer_core.policies.base import PROMPT_FORMATS

    if prompt_format not in PROMPT_FORMATS:
        raise ConfigError(
            f"unknown prompt format {prompt_format!r}; use one of {', '.join(PROMPT_FORMATS)}"
        )
    if prompt_format == "react":
        try:
            from trainer_core.policies.react import react_instructions
        except ImportError as exc:
            raise ConfigError(
                "the react prompt format needs trainer_core.policies.react, which could not be "
                f"imported ({exc}); use prompt_format='native'"
            ) from None
        parts = [instructions.strip()] if instructions and instructions.strip() else []
        return "\n\n".join([*parts, react_instructions(tools)])
    head = (instructions or DEFAULT_INSTRUCTIONS).strip()
    specs = [_tool_dict(t) for t in tools]
    listing = "\n".join(_json(s) for s in specs)
    return (
        f"{head}\n\n"
        "# Tools\n\n"
        "You can call these tools; each line is a JSON object with a tool's name, description "
        "and parameters (a JSON schema):\n"
        f"<tools>\n{listing}\n</tools>\n\n"
        "In each turn, think briefly if it helps, then call exactly one tool: write a JSON object "
        f"with the tool's name and arguments between {TOOL_CALL_START} and {TOOL_CALL_END}, "
        "like this:\n"
        f'{TOOL_CALL_START}{{"name": "<tool name>", "arguments": {{"<parameter>": <value>}}}}'
        f"{TOOL_CALL_END}\n"
        "The tool's result comes back in the next message."
    )


# --------------------------------------------------------------------------- text


def render_tool_call(name: str, arguments: str | Mapping[str, Any] | None) -> str:
    """One tool call as text: ``<tool_call>{"name": ..., "arguments": ...}</tool_call>``."""
    if arguments is None:
        args = "{}"
    elif isinstance(arguments, str):
        args = arguments
    else:
        args = _json(dict(arguments))
    return f'{TOOL_CALL_START}{{"name": {_json(name)}, "arguments": {args}}}{TOOL_CALL_END}'


def _content(message: Mapping[str, Any], index: int) -> str:
    content = message.get("content")
    if content is None:
        return ""
    if not isinstance(content, str):
        raise InputError(
            f"message {index}: 'content' must be a string (or null), not {type(content).__name__}"
        )
    return content.lstrip()


def _assistant_body(message: Mapping[str, Any], index: int) -> str:
    body = _content(message, index)
    calls = message.get("tool_calls") or []
    if not isinstance(calls, Sequence) or isinstance(calls, str):
        raise InputError(f"message {index}: 'tool_calls' must be a list")
    rendered = []
    for call in calls:
        fn = call.get("function", call) if isinstance(call, Mapping) else None
        if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
            raise InputError(
                f"message {index}: a tool call needs a function with a string 'name', got {call!r}"
            )
        rendered.append(render_tool_call(fn["name"], fn.get("arguments")))
    if rendered:
        body = (body + "\n" if body else "") + "\n".join(rendered)
    return body


def _segments(
    messages: Sequence[Mapping[str, Any]], add_generation_prompt: bool
) -> list[tuple[str, str]]:
    """The text as (kind, text) pieces. Kinds: ``control`` (a format token), ``text`` (template
    text: role headers, the newline between messages), ``content`` (system/user/tool content),
    ``assistant`` (what the policy produced; the ``control`` after it is the policy's too)."""
    segments: list[tuple[str, str]] = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise InputError(f"message {i}: expected an object, not {type(message).__name__}")
        role = message.get("role")
        if role not in ROLES:
            raise InputError(f"message {i}: unknown role {role!r}; use one of {', '.join(ROLES)}")
        segments.append(("control", IM_START))
        segments.append(("text", f"{role}\n"))
        if role == "assistant":
            segments.append(("assistant", _assistant_body(message, i)))
        else:
            segments.append(("content", _content(message, i)))
        segments.append(("control", IM_END))
        segments.append(("text", "\n"))
    if add_generation_prompt:
        segments.append(("control", IM_START))
        segments.append(("text", "assistant\n"))
    return segments


def render(messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = False) -> str:
    """The messages as text in this format (see the module docstring)."""
    return "".join(text for _, text in _segments(messages, add_generation_prompt))


# --------------------------------------------------------------------------- tokens


@dataclass(frozen=True)
class Tokenized:
    """Token ids of rendered messages, and which of them the policy produced."""

    input_ids: list[int]
    assistant_mask: list[int]  # 1 on the policy's own tokens (assistant content + <|im_end|>)

    def __len__(self) -> int:
        return len(self.input_ids)

    def labels(self, ignore_index: int = -100) -> list[int]:
        """Training labels: the ids where the mask is 1, ``ignore_index`` elsewhere."""
        pairs = zip(self.input_ids, self.assistant_mask, strict=True)
        return [t if m else ignore_index for t, m in pairs]


def ensure_special_tokens(tokenizer: Any, *, chat_template: bool = True) -> int:
    """Add the format's tokens a Hugging Face tokenizer lacks (``<|im_start|>``, ``<|im_end|>`` as
    special tokens; ``<tool_call>``, ``</tool_call>`` as added tokens), a pad token
    (:data:`PAD_TOKEN`) when it has none, ``<|im_end|>`` as its eos token when it has none, and
    (``chat_template``) :data:`CHAT_TEMPLATE` when it has no chat template.

    Returns how many tokens were new to the vocabulary; when that is above 0 the caller must
    resize the model's embeddings (``model.resize_token_embeddings(len(tokenizer))``).
    """
    from tokenizers import AddedToken

    before = len(tokenizer)
    added = set(tokenizer.added_tokens_encoder)
    special = [
        AddedToken(t, special=True, normalized=False) for t in (IM_START, IM_END) if t not in added
    ]
    if special:
        tokenizer.add_special_tokens(
            {"extra_special_tokens": special}, replace_extra_special_tokens=False
        )
    tags = [
        AddedToken(t, special=False, normalized=False)
        for t in (TOOL_CALL_START, TOOL_CALL_END)
        if t not in added
    ]
    if tags:
        tokenizer.add_tokens(tags)
    if tokenizer.pad_token is None:
        tokenizer.add_special_tokens({"pad_token": AddedToken(PAD_TOKEN, special=True)})
    if tokenizer.eos_token is None:
        tokenizer.eos_token = IM_END
    if chat_template and not getattr(tokenizer, "chat_template", None):
        tokenizer.chat_template = CHAT_TEMPLATE
    return len(tokenizer) - before


def _token_id(tokenizer: Any, token: str) -> int:
    ids = tokenizer.encode(token, add_special_tokens=False)
    if len(ids) != 1:
        raise ConfigError(
            f"the tokenizer does not hold {token} as one token; call "
            "chat_format.ensure_special_tokens(tokenizer) and resize the model's embeddings"
        )
    return ids[0]


class _Encoder:
    """Encodes segments of the format with one tokenizer (ids of format tokens cached)."""

    def __init__(self, tokenizer: Any):
        self.tokenizer = tokenizer
        self.control = {t: _token_id(tokenizer, t) for t in (IM_START, IM_END)}
        self.newline = tokenizer.encode("\n", add_special_tokens=False)

    def encode(self, text: str, *, as_text: bool) -> list[int]:
        """``text`` as it tokenizes after a newline (so a SentencePiece tokenizer adds no prefix
        space); ``as_text``: special-token strings in it are plain text."""
        if not text:
            return []
        kwargs = {"add_special_tokens": False, "split_special_tokens": as_text}
        ids = self.tokenizer.encode("\n" + text, **kwargs)
        n = len(self.newline)
        if ids[:n] == self.newline:
            return ids[n:]
        return self.tokenizer.encode(text, **kwargs)


def tokenize(
    messages: Sequence[Mapping[str, Any]], tokenizer: Any, *, add_generation_prompt: bool = False
) -> Tokenized:
    """Token ids of the rendered messages with the mask of the policy's own tokens, encoded
    segment by segment (see the module docstring). ``tokenizer`` is a Hugging Face tokenizer that
    holds the format's tokens (:func:`ensure_special_tokens`)."""
    encoder = _Encoder(tokenizer)
    ids: list[int] = []
    mask: list[int] = []
    after_assistant = False
    for kind, text in _segments(messages, add_generation_prompt):
        if kind == "control":
            piece = [encoder.control[text]]
            own = after_assistant and text == IM_END
        else:
            piece = encoder.encode(text, as_text=kind == "content")
            own = kind == "assistant"
        after_assistant = kind == "assistant"
        ids.extend(piece)
        mask.extend([1 if own else 0] * len(piece))
    return Tokenized(input_ids=ids, assistant_mask=mask)


# --------------------------------------------------------------------------- parsing

_FENCE_OPEN = re.compile(r"```[\w+-]*[ \t]*\n?\s*$")
_FENCE_BODY = re.compile(r"^```[\w+-]*[ \t]*\n?(.*?)\n?[ \t]*```$", re.DOTALL)
_CALL_SHAPE = f'{TOOL_CALL_START}{{"name": "<tool>", "arguments": {{...}}}}{TOOL_CALL_END}'


def _kind(value: Any) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def is_plain_text(text: str, finish_reason: str | None = None) -> bool:
    """Whether a generated assistant turn is plain text: something written, no trace of a tool
    call, and not cut off at the token limit (see :func:`~trainer_core.policies.base.text_reply`)."""
    if not isinstance(text, str) or finish_reason == "length":
        return False
    end = text.find(IM_END)
    body = (text[:end] if end >= 0 else text).strip()
    return bool(body) and TOOL_CALL_START not in body and TOOL_CALL_END not in body


def parse_assistant(text: str) -> dict[str, Any] | str:
    """A generated assistant turn → the action ``{"tool", "params", "thought"}``, or a message
    saying what is wrong (ready for :func:`~trainer_core.policies.base.invalid_output_observation`).

    Accepts the call with or without surrounding whitespace, inside a code fence, with the JSON
    inside a code fence, and text after ``<|im_end|>`` is ignored. The thought is the text before
    the call. ``arguments`` may also be named ``parameters``, or be a JSON string of an object.
    """
    if not isinstance(text, str):
        return f"the output must be text, not {type(text).__name__}."
    end = text.find(IM_END)
    if end >= 0:
        text = text[:end]
    text = text.strip()
    if not text:
        return f"the output is empty; write the call as {_CALL_SHAPE}."
    starts = text.count(TOOL_CALL_START)
    if starts == 0:
        if TOOL_CALL_END in text:
            return f"it has {TOOL_CALL_END} without an opening {TOOL_CALL_START}."
        return f"it contains no tool call; write the call as {_CALL_SHAPE}."
    if starts > 1:
        return f"it contains {starts} tool calls; call exactly one tool per turn."
    before, _, rest = text.partition(TOOL_CALL_START)
    if TOOL_CALL_END not in rest:
        return (
            f"the tool call is not terminated: {TOOL_CALL_START} has no closing {TOOL_CALL_END} "
            "(the output may have been cut off; keep the call short)."
        )
    body = rest.partition(TOOL_CALL_END)[0].strip()
    fenced = _FENCE_BODY.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body:
        return f"the tool call is empty; write it as {_CALL_SHAPE}."
    try:
        call = json.loads(body)
    except json.JSONDecodeError as exc:
        return (
            f"the tool call is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno} "
            f"(character {exc.pos} of the call)."
        )
    if not isinstance(call, dict):
        return (
            f'the tool call must be a JSON object with "name" and "arguments", not {_kind(call)}.'
        )
    name = call.get("name")
    if not isinstance(name, str) or not name.strip():
        return 'the tool call has no "name" (a non-empty string naming the tool).'
    arguments = call.get("arguments", call.get("parameters", {}))
    if arguments is None:
        arguments = {}
    if isinstance(arguments, str):
        try:
            decoded = json.loads(arguments)
        except json.JSONDecodeError:
            decoded = None
        if isinstance(decoded, dict):
            arguments = decoded
    if not isinstance(arguments, dict):
        return f'the "arguments" of the tool call must be a JSON object, not {_kind(arguments)}.'
    thought = _FENCE_OPEN.sub("", before).strip()
    return {"tool": name.strip(), "params": arguments, "thought": thought}
