"""The drift check: are the tokens a trainer will see the tokens that were sampled?

Between sampling and training a trajectory is stored as text and rendered again by the trainer
(:func:`~trainer_core.policies.chat_format.tokenize`). The tokens can differ: the chat template
changed (another system prompt, another role header, a server applying the tokenizer's own
template), a BPE merge crossed the prompt/completion boundary (a prefill ``hel`` that the model
continued with ``lo`` trains as ``hello``), or the model sampled a non-canonical tokenization.
The trainer then learns on a sequence the policy never produced.

What is compared
    A conversation is the chat messages a trainer encodes (an SFT row's ``messages``, a DPO
    row's prompt + chosen and prompt + rejected, a GRPO row's prompt + each completion) and, per
    assistant turn ``k``, what sampling recorded (:class:`TurnIds`): the prompt's token ids and
    the sampled completion's. The trainer's tokens of turn ``k`` split the same way: its
    sequence before the turn, and the turn itself (its closing ``<|im_end|>`` included).

    **The prompt (the context) must be equal token for token**: what the policy was conditioned
    on is what the trainer conditions on. A difference — a changed template or system prompt, a
    prefill merged with the first sampled token, a tokenizer that is not the sampler's — is a
    **mismatch**: its first position is reported (:class:`Mismatch`: the conversation, the turn,
    the token index in the trainer's sequence, the ids expected and got from there and their
    decoded text) and it blocks a dataset export for that policy and the start of a training run.

    **The completion** is compared too, and a difference is counted and the first one reported,
    without blocking (``completions_differ``, ``first_completion``): the trainer can only train a
    text's canonical tokens, so a completion sampled as other tokens of the same text
    (``non_canonical``), as bytes that are not valid UTF-8 (``not_utf8``) or stored as another
    text than sampled (``rewritten``: a parser dropped text after the tool call) trains as the
    trainer tokenises it — train on the recorded ids (online or decoupled GRPO) where that
    matters. A rewritten turn that a sampler kept in its history shows up in the next turn's
    prompt, which blocks. A sampled turn that is the trainer's without its closing
    ``<|im_end|>`` was cut at ``max_new_tokens`` (the format closes it): counted (``cut``).

Where ids come from (:func:`step_ids`)
    A step's ``metadata["metrics"]``: ``prompt_token_ids`` and ``completion_token_ids`` (ATIF's
    names: what an ATIF log records and what Steplab's collect records for a local model or an
    inference-server sampler). A turn without them is **re-tokenised** when its trajectory was
    sampled here (a rollout): the prompt as a server would render it — the tokenizer's own chat
    template when it has one (else the one format's text) — encoded as one string, and the
    completion's text encoded after it (:func:`retokenised_ids`); this catches a tokenizer whose
    template is not the format's. A turn of an imported log without ids is **not checkable**
    (:data:`NOT_CHECKABLE`): nothing says how it was tokenised.

Results (:class:`DriftReport`)
    ``passed`` (every checkable turn's context equal), ``mismatch`` (the first context
    difference, which blocks), ``not_checkable`` (no turn had ids or could be re-tokenised). The
    counts say how many turns were compared with recorded ids, re-tokenised, or not checkable,
    how many were cut and how many completions differ.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from trainer_core.errors import ConfigError, InputError, PolicyError

__all__ = [
    "NOT_CHECKABLE",
    "RETOKENISE",
    "Conversation",
    "DriftReport",
    "Mismatch",
    "TurnIds",
    "check_conversations",
    "check_tokenizers",
    "dataset_conversations",
    "load_tokenizer",
    "retokenised_ids",
    "row_conversations",
    "row_step_ids",
    "step_ids",
    "turn_spans",
]

#: How many ids either side of a difference a :class:`Mismatch` keeps.
WINDOW = 6

PASSED, MISMATCH, NOT_CHECKABLE_STATUS = "passed", "mismatch", "not_checkable"


@dataclass(frozen=True)
class TurnIds:
    """What sampling recorded for one assistant turn: the prompt's ids and the sampled ids."""

    prompt: list[int]
    completion: list[int]


class _Marker:
    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


#: The turn has no recorded ids and was sampled here: re-tokenise its text.
RETOKENISE = _Marker("RETOKENISE")
#: The turn has no recorded ids and comes from an imported log: it cannot be checked.
NOT_CHECKABLE = _Marker("NOT_CHECKABLE")

TurnSource = TurnIds | _Marker | None  # None: not a turn of this check (a shared prompt's)


@dataclass(frozen=True)
class Conversation:
    """One sequence a trainer encodes: its messages and, per assistant turn, what sampling
    recorded (shorter than the turns: the rest are None)."""

    where: str  # "row 3", "train row 3 chosen", "row 2 completion 1"
    messages: list[dict[str, Any]]
    turns: list[TurnSource]
    row: int | None = None  # the dataset row it comes from
    split: str = ""  # and its split, when known


@dataclass(frozen=True)
class Mismatch:
    """The first position where the trainer's tokens and the sampled ones differ."""

    where: str
    turn: int  # 0-based assistant turn of the conversation
    position: int  # token index in the trainer's sequence
    part: str  # "prompt" or "completion" (of that turn's sampled sequence)
    source: str  # "recorded" or "retokenised"
    expected: list[int]  # the trainer's ids from ``position`` (a few)
    got: list[int]  # the sampled ids from ``position`` (a few)
    expected_text: str
    got_text: str
    before_text: str  # decoded text of the few tokens before ``position`` (both agree on it)
    kind: str = "context"  # see COMPLETION_KINDS; "context": the prompt differs
    row: int | None = None  # the dataset row (Conversation.row), to open its token view
    split: str = ""

    def message(self) -> str:
        what = COMPLETION_KINDS.get(self.kind, "the context differs")
        return (
            f"{self.where}, assistant turn {self.turn}, token {self.position} "
            f"(in the {self.part}, {self.source} ids; {what}): after {self.before_text!r} the "
            f"trainer has {self.expected} {self.expected_text!r} but sampling had {self.got} "
            f"{self.got_text!r}"
        )


#: How a sampled completion can differ from the trainer's tokens of it (reported, not blocking).
COMPLETION_KINDS = {
    "non_canonical": "the same text in other tokens",
    "not_utf8": "sampled bytes that are not valid UTF-8 text",
    "rewritten": "the stored text is not the sampled text",
}


@dataclass
class DriftReport:
    """The result of a drift check (see the module docstring)."""

    status: str = NOT_CHECKABLE_STATUS
    conversations: int = 0
    recorded: int = 0  # turns compared with recorded ids
    retokenised: int = 0  # turns compared after re-tokenising their text
    not_checkable: int = 0  # turns of imported logs without ids
    cut: int = 0  # turns sampled without their closing <|im_end|> (cut at max_new_tokens)
    completions_differ: int = 0  # completions the trainer tokenises otherwise (not blocking)
    tokenizer: str = ""
    first: Mismatch | None = None  # the first context difference (blocks)
    first_completion: Mismatch | None = None  # the first completion difference
    notes: list[str] = field(default_factory=list)

    @property
    def blocks(self) -> bool:
        return self.status == MISMATCH

    def summary(self) -> str:
        counts = (
            f"{self.recorded} turn(s) with recorded ids, {self.retokenised} re-tokenised, "
            f"{self.not_checkable} not checkable, in {self.conversations} sequence(s)"
        )
        if self.cut:
            counts += (
                f"; {self.cut} turn(s) were cut at max_new_tokens: the trainer closes them with "
                "an <|im_end|> they did not sample"
            )
        if self.completions_differ and self.first_completion is not None:
            counts += (
                f"; {self.completions_differ} sampled completion(s) the trainer tokenises "
                f"otherwise, first: {self.first_completion.message()}"
            )
        if self.status == MISMATCH and self.first is not None:
            return f"Token drift: {self.first.message()}. ({counts})"
        if self.status == PASSED:
            return f"Tokens match: {counts}."
        return f"Not checkable: no turn has recorded token ids ({counts})."

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "summary": self.summary()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DriftReport:
        mismatches = ("first", "first_completion")
        fields = {k: data[k] for k in cls.__dataclass_fields__ if k in data and k not in mismatches}
        found = {
            k: Mismatch(**data[k]) if isinstance(data.get(k), Mapping) else None for k in mismatches
        }
        return cls(**fields, **found)


# --------------------------------------------------------------------------- tokenizer


@functools.lru_cache(maxsize=4)
def _load(path: str, mtime: float) -> Any:
    from trainer_core.policies import chat_format

    try:
        import transformers
    except ImportError as exc:  # pragma: no cover - the training extra is installed
        raise ConfigError(f"the drift check needs transformers ({exc}); install it") from None
    try:
        tokenizer = transformers.AutoTokenizer.from_pretrained(path, local_files_only=True)
    except Exception as exc:
        raise PolicyError(f"could not load the tokenizer in {path!r}: {exc}") from None
    chat_format.ensure_special_tokens(tokenizer)  # as training loads it
    return tokenizer


def load_tokenizer(path: str | Path) -> Any:
    """The tokenizer of a local model directory as the trainer loads it (the chat format's
    tokens added); cached while the directory's ``tokenizer.json`` is unchanged."""
    directory = Path(path).expanduser()
    if not directory.is_dir():
        raise PolicyError(f"{str(directory)!r} is not a directory with a tokenizer")
    marker = directory / "tokenizer.json"
    mtime = marker.stat().st_mtime if marker.exists() else 0.0
    return _load(str(directory.resolve()), mtime)


# --------------------------------------------------------------------------- ids


def _int_list(value: Any) -> list[int] | None:
    if not isinstance(value, list) or not value:
        return None
    if not all(isinstance(t, int) and not isinstance(t, bool) for t in value):
        return None
    return value


def step_ids(metadata: Mapping[str, Any] | None, *, imported: bool) -> TurnSource:
    """What a stored step says about its turn's tokens: :class:`TurnIds` from
    ``metadata["metrics"]`` (``prompt_token_ids``, ``completion_token_ids``), else
    :data:`RETOKENISE` for a step sampled here, :data:`NOT_CHECKABLE` for an imported one."""
    metrics = (metadata or {}).get("metrics")
    if isinstance(metrics, Mapping):
        prompt = _int_list(metrics.get("prompt_token_ids"))
        completion = _int_list(metrics.get("completion_token_ids"))
        if prompt is not None and completion is not None:
            return TurnIds(prompt=prompt, completion=completion)
    return NOT_CHECKABLE if imported else RETOKENISE


def turn_spans(mask: Sequence[int]) -> list[tuple[int, int]]:
    """``(start, end)`` of each run of 1s in an assistant mask: the assistant turns' tokens."""
    spans: list[tuple[int, int]] = []
    start = None
    for i, m in enumerate([*mask, 0]):
        if m and start is None:
            start = i
        elif not m and start is not None:
            spans.append((start, i))
            start = None
    return spans


def _assistant_positions(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    return [i for i, m in enumerate(messages) if m.get("role") == "assistant"]


def retokenised_ids(messages: Sequence[Mapping[str, Any]], turn: int, tokenizer: Any) -> TurnIds:
    """The ids a server would have sampled turn ``turn`` with, from the text: the prompt (the
    messages before that assistant message) rendered by the tokenizer's chat template (the one
    format's :func:`~trainer_core.policies.chat_format.render` when it has none) with the
    generation prompt, encoded as one string; the completion's text (its content, tool calls and
    ``<|im_end|>``) encoded on its own."""
    from trainer_core.policies import chat_format

    position = _assistant_positions(messages)[turn]
    head = [dict(m) for m in messages[:position]]
    template = getattr(tokenizer, "chat_template", None)
    if template:
        text = tokenizer.apply_chat_template(head, tokenize=False, add_generation_prompt=True)
    else:
        text = chat_format.render(head, add_generation_prompt=True)
    whole = chat_format.render([messages[position]])
    header = f"{chat_format.IM_START}assistant\n"
    body = whole[len(header) : len(whole) - 1]  # the content and <|im_end|>, not the newline
    encode = functools.partial(tokenizer.encode, add_special_tokens=False)
    return TurnIds(prompt=encode(text), completion=encode(body))


# --------------------------------------------------------------------------- comparing


def _decode(tokenizer: Any, ids: Sequence[int]) -> str:
    """The ids' text for a report (NUL shown as ␀: reports are stored as JSON in databases that
    refuse it)."""
    try:
        text = tokenizer.decode(list(ids), skip_special_tokens=False)
    except Exception:  # an id outside the vocabulary
        return "<?>"
    return text.replace("\x00", "\u2400")


def _first_difference(expected: Sequence[int], got: Sequence[int]) -> int | None:
    n = min(len(expected), len(got))
    for i in range(n):
        if expected[i] != got[i]:
            return i
    return None if len(expected) == len(got) else n


def _cut(expected: Sequence[int], got: Sequence[int], tokenizer: Any) -> bool:
    """Whether ``got`` is ``expected`` without its closing ``<|im_end|>``: a turn cut at
    ``max_new_tokens``, which the format closes (counted in :attr:`DriftReport.cut`)."""
    from trainer_core.policies import chat_format

    im_end = tokenizer.convert_tokens_to_ids(chat_format.IM_END)
    return len(got) == len(expected) - 1 and expected[-1] == im_end and list(expected[:-1]) == got


def _mismatch(
    conversation: Conversation,
    turn: int,
    source: str,
    trainer: Sequence[int],
    sampled: Sequence[int],
    *,
    at: tuple[int, int, int],
    part: str,
    kind: str,
    tokenizer: Any,
) -> Mismatch:
    """A difference at ``at = (position in the trainer's sequence, position in the sampled
    one, where the compared part starts in the trainer's)``; the ids shown run on from there."""
    position, sampled_position, lo = at
    exp = list(trainer[position : position + WINDOW])
    got = list(sampled[sampled_position : sampled_position + WINDOW])
    return Mismatch(
        where=conversation.where,
        turn=turn,
        position=position,
        part=part,
        source=source,
        expected=exp,
        got=got,
        expected_text=_decode(tokenizer, exp),
        got_text=_decode(tokenizer, got),
        before_text=_decode(tokenizer, trainer[max(lo, position - WINDOW) : position]),
        kind=kind,
        row=conversation.row,
        split=conversation.split,
    )


def _context_difference(
    trainer: Sequence[int],
    sampled: Sequence[int],
    spans: Sequence[tuple[int, int]],
    turn: int,
    faithful: Sequence[bool],
    im_end: int,
) -> tuple[int, int] | None:
    """Where turn ``turn``'s sampled prompt (``sampled[:prompt end]``) first differs from the
    trainer's tokens before the turn, as (trainer position, sampled position); None when equal.
    A difference inside an earlier turn whose own completion differed (``faithful[k]`` False:
    its text could not give back its sampled ids) is that turn's, already counted: the
    comparison skips to the end of that turn in both (its ``<|im_end|>``) and goes on."""
    start = spans[turn][0]
    i = j = 0
    while True:
        found = _first_difference(trainer[i:start], sampled[j:])
        if found is None:
            return None
        at, sampled_at = i + found, j + found
        earlier = next((k for k in range(turn) if spans[k][0] <= at < spans[k][1]), None)
        if earlier is None or faithful[earlier] or im_end not in sampled[sampled_at:]:
            return at, sampled_at
        i, j = spans[earlier][1], sampled.index(im_end, sampled_at) + 1


def _completion_kind(expected: Sequence[int], got: Sequence[int], tokenizer: Any) -> str:
    sampled = _decode(tokenizer, got)
    if "\ufffd" in sampled:
        return "not_utf8"
    return "non_canonical" if sampled == _decode(tokenizer, expected) else "rewritten"


def _compare_turn(
    report: DriftReport,
    conversation: Conversation,
    turn: int,
    ids: TurnIds,
    trainer: Sequence[int],
    spans: Sequence[tuple[int, int]],
    faithful: list[bool],
    tokenizer: Any,
    source: str,
) -> Mismatch | None:
    """Compare one turn: its prompt (the context: a difference blocks, returned) and its
    completion (a difference is counted into ``report``, the first one kept); appends to
    ``faithful`` whether its completion's text gives back its sampled ids."""
    from trainer_core.policies import chat_format

    start, end = spans[turn]
    prompt = list(ids.prompt)
    im_end = tokenizer.convert_tokens_to_ids(chat_format.IM_END)
    common = dict(tokenizer=tokenizer)
    context = _context_difference(trainer, prompt, spans, turn, faithful, im_end)
    if context is not None:
        sampled = [*prompt, *ids.completion]
        return _mismatch(
            conversation, turn, source, trainer, sampled,
            at=(*context, 0), part="prompt", kind="context", **common,
        )  # fmt: skip
    expected, got = list(trainer[start:end]), list(ids.completion)
    faithful.append(expected == got or _cut(expected, got, tokenizer))
    if expected == got:
        return None
    if faithful[-1]:
        report.cut += 1
        return None
    report.completions_differ += 1
    if report.first_completion is None:
        position = _first_difference(expected, got) or 0
        report.first_completion = _mismatch(
            conversation, turn, source, trainer, [*prompt, *got],
            at=(start + position, len(prompt) + position, start), part="completion",
            kind=_completion_kind(expected, got, tokenizer), **common,
        )  # fmt: skip
    return None


def check_conversations(
    conversations: Iterable[Conversation], tokenizer: Any, *, tokenizer_name: str = ""
) -> DriftReport:
    """Compare every conversation's recorded (or re-tokenised) turns with the trainer's tokens;
    stops at the first difference of a context (see the module docstring)."""
    from trainer_core.policies import chat_format

    report = DriftReport(tokenizer=tokenizer_name)
    for conversation in conversations:
        report.conversations += 1
        encoded = chat_format.tokenize(conversation.messages, tokenizer)
        spans = turn_spans(encoded.assistant_mask)
        faithful: list[bool] = []  # per turn so far: its text gives back its sampled ids
        for turn, source in enumerate(conversation.turns[: len(spans)]):
            if source is None or source is NOT_CHECKABLE:
                report.not_checkable += source is NOT_CHECKABLE
                faithful.append(False)  # unknown: a difference inside it is not held against
                continue
            if source is RETOKENISE:
                ids, kind = retokenised_ids(conversation.messages, turn, tokenizer), "retokenised"
                report.retokenised += 1
            else:
                ids, kind = source, "recorded"
                report.recorded += 1
            found = _compare_turn(
                report, conversation, turn, ids, encoded.input_ids, spans, faithful, tokenizer,
                kind,
            )  # fmt: skip
            if found is not None:
                report.status, report.first = MISMATCH, found
                return report
    if report.recorded or report.retokenised:
        report.status = PASSED
    return report


def check_tokenizers(
    messages: Sequence[Mapping[str, Any]],
    trainer: Any,
    sampler: Any,
    *,
    where: str = "probe",
    tokenizer_name: str = "",
) -> DriftReport:
    """Before a run whose samplers tokenise with their own tokenizer (an inference server's
    ``tokenizer_dir``): the ids the sampler would record for ``messages`` (its
    :func:`~trainer_core.policies.chat_format.tokenize`, turn by turn) against the trainer's."""
    from trainer_core.policies import chat_format

    encoded = chat_format.tokenize(messages, sampler)
    ids = encoded.input_ids
    turns: list[TurnSource] = [
        TurnIds(prompt=ids[:start], completion=ids[start:end])
        for start, end in turn_spans(encoded.assistant_mask)
    ]
    conversation = Conversation(where, [dict(m) for m in messages], turns)
    return check_conversations([conversation], trainer, tokenizer_name=tokenizer_name)


# --------------------------------------------------------------------------- dataset rows

#: Looks up the recorded ids of stored steps by id: ``{step_id: TurnSource}``.
StepLookup = Callable[[list[Any]], Mapping[Any, TurnSource]]


def _sources(ids: Any, lookup: Mapping[Any, TurnSource], earlier: int = 0) -> list[TurnSource]:
    turns: list[TurnSource] = [None] * earlier
    for step in ids if isinstance(ids, list) else []:
        turns.append(lookup.get(step, NOT_CHECKABLE))
    return turns


def row_step_ids(row: Mapping[str, Any]) -> list[Any]:
    """Every step id an exported row names (SFT, DPO and GRPO columns)."""
    out: list[Any] = []
    for key in ("step_ids", "chosen_step_ids", "rejected_step_ids"):
        value = row.get(key)
        if isinstance(value, list):
            out += [s for v in value for s in (v if isinstance(v, list) else [v])]
    return out


def row_conversations(
    row: Mapping[str, Any], index: int, lookup: Mapping[Any, TurnSource], *, split: str = ""
) -> list[Conversation]:
    """The sequences a trainer encodes from one exported row (SFT, DPO or GRPO; the trainers'
    own message functions, so a row with tools gets their system prompt), with each assistant
    turn's recorded ids from ``lookup`` by the row's step ids."""
    from trainer_core.training.dpo import _messages, prompt_messages
    from trainer_core.training.sft import row_messages

    name = f"{split} row {index}" if split else f"row {index}"
    at = {"row": index, "split": split}
    if "messages" in row:
        turns = _sources(row.get("step_ids"), lookup)
        return [Conversation(name, row_messages(row, index), turns, **at)]
    prompt = prompt_messages(row, index)
    earlier = len(_assistant_positions(prompt))
    if "chosen" in row:
        return [
            Conversation(
                f"{name} {side}",
                prompt + _messages(row, side, index),
                _sources(row.get(f"{side}_step_ids"), lookup, earlier),
                **at,
            )
            for side in ("chosen", "rejected")
        ]
    completions = row.get("completions")
    if not isinstance(completions, list):
        raise InputError(f"row {index}: neither messages, chosen/rejected nor completions")
    step_lists = row.get("step_ids") if isinstance(row.get("step_ids"), list) else []
    return [
        Conversation(
            f"{name} completion {i}",
            prompt + [dict(m) for m in completion],
            _sources(step_lists[i] if i < len(step_lists) else None, lookup, earlier),
            **at,
        )
        for i, completion in enumerate(completions)
    ]


def dataset_conversations(
    rows: Iterable[Mapping[str, Any]], lookup: StepLookup, *, split: str = "", batch: int = 200
) -> Iterable[Conversation]:
    """The conversations of ``rows`` (of ``split``, named in the reports; see
    :func:`row_conversations`), asking ``lookup`` for the recorded ids of ``batch`` rows' steps
    at a time."""
    pending: list[tuple[int, Mapping[str, Any]]] = []

    def flush() -> Iterable[Conversation]:
        found = lookup([s for _, r in pending for s in row_step_ids(r)])
        for index, row in pending:
            yield from row_conversations(row, index, found, split=split)

    for index, row in enumerate(rows):
        pending.append((index, row))
        if len(pending) >= batch:
            yield from flush()
            pending = []
    if pending:
        yield from flush()
