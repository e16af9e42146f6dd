"""What a trainer sees, token by token: for a dataset row or a stored training sample, each token
with its id, its text, whether it carries loss and which assistant turn (step) it belongs to, and
the rendered chat template text. The pages of the web app show these (escaped: token text is
untrusted).

A dataset row is encoded with the trainers' own functions: an SFT row as
:func:`~trainer_core.training.data.encode_messages` encodes its messages (observation masking on;
before chunking and ``max_length``), a DPO row's chosen and rejected sides and a GRPO row's
completions as :func:`~trainer_core.training.dpo.encode_continuation` does (only the
continuation carries loss). A training sample (a decoupled run's completion) is its stored ids,
labels, step ids and behaviour log-probs, as the trainer consumed them.

Bounded: a view holds at most ``limit`` tokens of a sequence from ``start`` (the caller pages
with ``start``), at most :data:`MAX_SEQUENCES` sequences, and :data:`MAX_TEXT` characters of
rendered text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from trainer_core.training.modelling import IGNORE_INDEX

__all__ = ["MAX_SEQUENCES", "MAX_TEXT", "SequenceView", "TokenRow", "row_views", "sequence_view"]

MAX_SEQUENCES = 8
MAX_TEXT = 60_000
#: An effectively unlimited length for encoding a whole row (the view pages through it).
WHOLE = 1 << 30


@dataclass(frozen=True)
class TokenRow:
    position: int
    id: int
    text: str
    loss: bool  # the token carries loss
    step: int  # 0-based assistant turn, -1 outside the turns
    logprob: float | None = None  # the behaviour log-prob recorded at sampling

    @property
    def band(self) -> int:
        """The colour band of its step (6 bands, repeating); -1 outside the steps."""
        return self.step % 6 if self.step >= 0 else -1


@dataclass
class SequenceView:
    title: str
    tokens: list[TokenRow]
    total: int  # tokens in the whole sequence
    start: int
    loss_tokens: int  # in the whole sequence
    steps: int  # assistant turns in the whole sequence
    text: str = ""  # the rendered chat template text (capped at MAX_TEXT)
    text_cut: bool = False
    notes: list[str] = field(default_factory=list)
    limit: int = 1000

    @property
    def end(self) -> int:
        return self.start + len(self.tokens)

    @property
    def previous(self) -> int:
        """Where the page before this one starts."""
        return max(0, self.start - self.limit)


def _pieces(tokenizer: Any, ids: Sequence[int]) -> list[str]:
    try:
        return list(tokenizer.batch_decode([[i] for i in ids], skip_special_tokens=False))
    except Exception:  # an id outside the vocabulary
        return [f"<{i}>" for i in ids]


def sequence_view(
    title: str,
    tokenizer: Any,
    *,
    input_ids: Sequence[int],
    labels: Sequence[int],
    step_ids: Sequence[int],
    logprobs: Sequence[float] | None = None,
    text: str | None = None,
    start: int = 0,
    limit: int = 1000,
) -> SequenceView:
    """One sequence's tokens ``start .. start + limit`` (see the module docstring); ``text``
    defaults to the decoded ids."""
    total = len(input_ids)
    start = max(0, min(start, max(total - 1, 0)))
    ids = list(input_ids[start : start + limit])
    texts = _pieces(tokenizer, ids)
    rows = [
        TokenRow(
            position=start + k,
            id=int(t),
            text=texts[k],
            loss=labels[start + k] != IGNORE_INDEX,
            step=int(step_ids[start + k]),
            logprob=None if logprobs is None else float(logprobs[start + k]),
        )
        for k, t in enumerate(ids)
    ]
    if text is None:
        text = tokenizer.decode(list(input_ids[:MAX_TEXT]), skip_special_tokens=False)
    return SequenceView(
        title=title,
        tokens=rows,
        total=total,
        start=start,
        loss_tokens=sum(1 for t in labels if t != IGNORE_INDEX),
        steps=len({s for s in step_ids if s >= 0}),
        text=text[:MAX_TEXT],
        text_cut=len(text) > MAX_TEXT,
        limit=limit,
    )


def _encoded_view(
    title: str, tokenizer: Any, encoded: Any, messages: Sequence[Mapping[str, Any]], **page: Any
) -> SequenceView:
    from trainer_core.policies import chat_format

    return sequence_view(
        title,
        tokenizer,
        input_ids=encoded.input_ids,
        labels=encoded.labels,
        step_ids=encoded.step_ids,
        text=chat_format.render(messages),
        **page,
    )


def row_views(
    row: Mapping[str, Any], index: int, tokenizer: Any, *, start: int = 0, limit: int = 1000
) -> list[SequenceView]:
    """The sequences a trainer encodes from one exported row (SFT, DPO or GRPO), each paged
    from ``start``; InputError for a row no trainer reads."""
    from trainer_core.errors import InputError
    from trainer_core.training.data import encode_messages
    from trainer_core.training.dpo import _messages, encode_continuation, prompt_messages
    from trainer_core.training.sft import row_messages

    page = {"start": start, "limit": limit}
    if "messages" in row:
        messages = row_messages(row, index)
        encoded = encode_messages(messages, tokenizer, max_length=WHOLE)
        view = _encoded_view("messages", tokenizer, encoded, messages, **page)
        view.notes.append(
            "As SFT encodes the row with observation masking on, before chunking "
            "(chunk_max_tokens) and the cut at max_length."
        )
        return [view]
    prompt = prompt_messages(row, index)
    if "chosen" in row:
        sides = [(side, _messages(row, side, index)) for side in ("chosen", "rejected")]
    elif isinstance(row.get("completions"), list):
        sides = [
            (f"completion {i}", [dict(m) for m in c])
            for i, c in enumerate(row["completions"][:MAX_SEQUENCES])
        ]
    else:
        raise InputError(f"row {index}: neither messages, chosen/rejected nor completions")
    views = []
    for title, continuation in sides:
        encoded = encode_continuation(
            prompt, continuation, tokenizer, max_length=WHOLE, observation_masking=True
        )
        view = _encoded_view(title, tokenizer, encoded, prompt + continuation, **page)
        view.notes.append(
            "Only the continuation carries loss (observation masking on), before the cut at "
            "max_length."
        )
        views.append(view)
    return views
