"""Cutting a long trajectory into training sequences at step boundaries, by token counts
(SFT's ``chunk_max_tokens``, knowlyr-trainer's ``chunk_long_trajectories``).

A trajectory is its prompt (the messages before the first assistant turn: system and task) and
its steps (an assistant message and the observations after it, up to the next assistant
message), tokenized once, message by message, with the chat format (:func:`split_steps`).
:func:`plan_chunks` cuts the steps greedily into chunks of at most ``max_tokens`` tokens: each
chunk is the prompt, then up to ``overlap`` steps before its own as context, then as many of its
own steps as fit (at most ``max_steps`` of them). Only its own steps carry loss
(:func:`encode_chunk`), so every token is trained in one chunk only. The oldest context steps
give way when a chunk's first step would not fit with them; a step that does not fit even alone
with the prompt is a chunk of its own, cut at ``max_tokens`` (its tail is lost, and the trainer
counts it). A sequence ends at its last supervised token (under observation masking the rest
cannot change the loss), so the budget counts the last step only that far.

Lengths are exact: the chat format encodes message by message, so the tokens of a chunk are the
concatenation of its messages' tokens, and the planner works on token counts alone.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from trainer_core.training.data import Encoded, encode_tokens, tokenize_messages
from trainer_core.training.modelling import IGNORE_INDEX

__all__ = [
    "Chunk",
    "Piece",
    "chunk_length",
    "encode_chunk",
    "plan_chunks",
    "split_steps",
    "trim",
    "turn_starts",
]


def turn_starts(messages: Sequence[Mapping[str, Any]]) -> list[int]:
    """Indices of the assistant messages (where each step starts)."""
    return [i for i, m in enumerate(messages) if m.get("role") == "assistant"]


@dataclass(frozen=True)
class Piece:
    """Tokens of consecutive messages: their ids and the mask of the policy's own tokens."""

    ids: list[int]
    own: list[int]  # 1 on the policy's own tokens (assistant content and its <|im_end|>)

    def trained_length(self, masking: bool) -> int:
        """Its length when a sequence ends with it: under observation masking up to its last own
        token (what follows cannot change the loss), else all of it."""
        if not masking:
            return len(self.ids)
        return max((i + 1 for i, m in enumerate(self.own) if m), default=0)


def split_steps(messages: Sequence[Mapping[str, Any]], tokenizer: Any) -> tuple[Piece, list[Piece]]:
    """The trajectory's tokens as its prompt (the messages before the first assistant turn; all
    of them when there is none) and its steps (an assistant message and the messages after it,
    up to the next assistant message); together, token for token, the whole trajectory."""
    pieces = tokenize_messages(messages, tokenizer)
    starts = turn_starts(messages)
    bounds = [*starts, len(messages)] if starts else [len(messages)]

    def join(lo: int, hi: int) -> Piece:
        ids = [t for p in pieces[lo:hi] for t in p.input_ids]
        return Piece(ids, [m for p in pieces[lo:hi] for m in p.assistant_mask])

    return join(0, bounds[0]), [join(bounds[k], bounds[k + 1]) for k in range(len(starts))]


@dataclass(frozen=True)
class Chunk:
    """Steps ``first .. end - 1`` of a trajectory, trained in one sequence after the prompt and
    the context steps ``context .. first - 1`` (shown, without loss)."""

    context: int
    first: int
    end: int


def chunk_length(chunk: Chunk, prompt: int, steps: Sequence[int], trained: Sequence[int]) -> int:
    """Tokens of a chunk's sequence: the prompt, the context and its steps in full except the
    last, which counts only up to ``trained`` (lengths as :func:`plan_chunks` takes them)."""
    if chunk.end == chunk.first:
        return prompt
    return prompt + sum(steps[chunk.context : chunk.end - 1]) + trained[chunk.end - 1]


def plan_chunks(
    prompt: int,
    steps: Sequence[int],
    trained: Sequence[int],
    *,
    max_tokens: int,
    max_steps: int = 0,
    overlap: int = 0,
) -> list[Chunk]:
    """Cut a trajectory at step boundaries, greedily, into chunks of at most ``max_tokens``
    tokens (0: no limit) and ``max_steps`` steps (0: no limit), each after up to ``overlap``
    context steps. Lengths in tokens: ``prompt``, the prompt's; ``steps[k]``, step ``k``'s;
    ``trained[k]``, step ``k``'s when a chunk ends with it. The oldest context steps give way
    when the chunk's first step would not fit; a first step that does not fit alone is a chunk
    of its own (its sequence is then longer than ``max_tokens``, and cut). A trajectory that
    fits is one chunk; one without steps is ``[Chunk(0, 0, 0)]``, the prompt alone."""
    n = len(steps)
    if n == 0:
        return [Chunk(0, 0, 0)]
    limit = max_tokens if max_tokens > 0 else math.inf

    def fits(context: int, first: int, end: int) -> bool:
        return chunk_length(Chunk(context, first, end), prompt, steps, trained) <= limit

    chunks: list[Chunk] = []
    first = 0
    while first < n:
        context = max(0, first - overlap)
        while context < first and not fits(context, first, first + 1):
            context += 1  # the oldest context step gives way to the chunk's own first step
        end = first + 1
        while (
            end < n
            and (max_steps <= 0 or end - first < max_steps)
            and fits(context, first, end + 1)
        ):
            end += 1
        chunks.append(Chunk(context, first, end))
        first = end
    return chunks


def trim(encoded: Encoded) -> None:
    """Drop the tokens after the last supervised one (a causal model's loss is the same without
    them: the final observation of a trajectory costs compute and teaches nothing)."""
    last = max((i for i, t in enumerate(encoded.labels) if t != IGNORE_INDEX), default=-1)
    for name in ("input_ids", "labels", "step_ids", "weights"):
        setattr(encoded, name, getattr(encoded, name)[: last + 1])


def encode_chunk(
    prompt: Piece, steps: Sequence[Piece], chunk: Chunk, *, masking: bool, limit: int
) -> tuple[Encoded, int]:
    """The sequence of ``chunk`` — prompt, context steps, its own steps — with loss on its own
    steps only (``masking``: on their policy tokens; off: on every token, and on the prompt too
    in a trajectory's first chunk, its first token aside), cut at ``limit`` tokens and ending
    at its last supervised token. Returns it and how many tokens that carry loss the cut lost.
    ``step_ids`` number the chunk's own assistant turns from 0."""
    context = [t for s in steps[chunk.context : chunk.first] for t in s.ids]
    own_steps = steps[chunk.first : chunk.end]
    ids = prompt.ids + context + [t for s in own_steps for t in s.ids]
    own = prompt.own + [0] * len(context) + [m for s in own_steps for m in s.own]
    if masking:
        supervised = own
    else:
        start = 1 if chunk.first == 0 else len(prompt.ids) + len(context)
        supervised = [0] * start + [1] * (len(ids) - start)
    encoded = encode_tokens(ids, own, max_length=limit)
    encoded.labels = [
        t if s else IGNORE_INDEX for t, s in zip(encoded.input_ids, supervised, strict=False)
    ]
    trim(encoded)
    return encoded, sum(supervised[limit:])
