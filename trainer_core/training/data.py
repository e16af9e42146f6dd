"""The data side of training: a dataset's rows, their encoding with the one chat format, and
batches.

Rows
    :func:`read_rows` reads the rows of a split: ``dataset`` names an exported JSONL file or a
    dataset directory, resolved by :func:`trainer_core.datasets.layout.find_split` (the dataset
    writer's ``data/<split>.jsonl`` first, then ``<split>.jsonl``).

Encoding
    :func:`encode_messages` tokenizes chat messages with the one chat format
    (:func:`~trainer_core.policies.chat_format.tokenize`): ``labels`` hold the policy's own tokens
    (every assistant turn's content and its closing ``<|im_end|>``) and ``-100`` elsewhere,
    ``step_ids`` say which assistant turn (0-based) each token belongs to, ``weights`` are per-token
    loss weights. **Truncation**: a sequence longer than ``max_length`` keeps its first
    ``max_length`` tokens (the end is cut, so late turns lose their tokens; split long
    trajectories at step boundaries instead where that matters — SFT's ``chunk_max_tokens``).
    :func:`tokenize_messages` tokenizes each message on its own (the chat format encodes message
    by message, so the pieces concatenate to the whole), for cutting a trajectory at message
    boundaries by token counts; :func:`encode_tokens` turns ids and a mask into
    :class:`Encoded`. :func:`collate` pads a batch on the right.

Batches
    :func:`batch_indices`: which items micro-batch ``i`` takes, a function of the seed and ``i``
    only (so a resumed run sees the same batches as one that never stopped).
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer_core.datasets.layout import find_split, read_jsonl
from trainer_core.errors import ConfigError, InputError
from trainer_core.training.modelling import IGNORE_INDEX, require_torch

__all__ = [
    "Encoded",
    "batch_indices",
    "collate",
    "encode_messages",
    "encode_tokens",
    "process_share",
    "read_rows",
    "to_device",
    "tokenize_messages",
    "with_tools_system",
]


# --------------------------------------------------------------------------- rows


def read_rows(dataset: str | Path, *, split: str = "train") -> list[dict[str, Any]]:
    """Rows of a JSONL file, or of ``split`` of a dataset directory (the writer's
    ``data/<split>.jsonl``, else ``<split>.jsonl``); ConfigError when there is no such file,
    InputError for a bad line or a file without rows."""
    path = find_split(dataset, split)
    rows = read_jsonl(path)
    if not rows:
        raise InputError(f"{path} holds no rows")
    return rows


# --------------------------------------------------------------------------- encoding


@dataclass
class Encoded:
    """One training sequence."""

    input_ids: list[int]
    labels: list[int]  # the token where the policy produced it, IGNORE_INDEX elsewhere
    step_ids: list[int]  # 0-based assistant turn of each token of the policy's own, -1 elsewhere
    weights: list[float]  # per-token loss weight (1.0 unless a trainer sets it)

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def num_label_tokens(self) -> int:
        return sum(1 for t in self.labels if t != IGNORE_INDEX)


def with_tools_system(
    messages: list[dict[str, Any]], row: Mapping[str, Any], index: int
) -> list[dict[str, Any]]:
    """``messages`` with ``system_prompt(tools)`` first when the row lists ``tools`` (a list, or
    the exporters' JSON text) and the messages have no system message: the prompt the
    local-model policy uses, so training sees what the policy is prompted with."""
    from trainer_core.policies import chat_format

    tools = row.get("tools")
    if isinstance(tools, str):  # the exporters' tools column is JSON text
        if not tools.strip():
            return list(messages)
        try:
            tools = json.loads(tools)
        except ValueError:
            raise InputError(
                f"row {index}: 'tools' is not valid JSON; write it as a JSON list of tool specs"
            ) from None
    first = messages[0] if messages else None
    if tools and not (isinstance(first, Mapping) and first.get("role") == "system"):
        return [{"role": "system", "content": chat_format.system_prompt(tools)}, *messages]
    return list(messages)


def encode_messages(
    messages: Sequence[Mapping[str, Any]], tokenizer: Any, *, max_length: int
) -> Encoded:
    """Chat messages → :class:`Encoded`, with the one chat format's exact mask of the policy's
    tokens. Assistant turn ``k`` (the k-th assistant message) is the k-th run of masked tokens.
    Longer than ``max_length``: the first ``max_length`` tokens are kept."""
    from trainer_core.policies import chat_format

    tokens = chat_format.tokenize(messages, tokenizer)
    return encode_tokens(tokens.input_ids, tokens.assistant_mask, max_length=max_length)


def tokenize_messages(messages: Sequence[Mapping[str, Any]], tokenizer: Any) -> list[Any]:
    """One ``chat_format.Tokenized`` per message. The chat format encodes message by message, so
    their concatenation is ``chat_format.tokenize(messages, tokenizer)`` token for token; a bad
    message is an InputError naming its index."""
    from trainer_core.policies import chat_format

    chat_format.render(messages)  # validates every message, naming its index
    return [chat_format.tokenize([message], tokenizer) for message in messages]


def encode_tokens(ids: Sequence[int], mask: Sequence[int], *, max_length: int) -> Encoded:
    """Token ids and the mask of the policy's own tokens → :class:`Encoded` (labels where the
    mask is 1; assistant turn ``k`` is the k-th run of 1s). Longer than ``max_length``: the first
    ``max_length`` tokens are kept."""
    ids, mask = list(ids[:max_length]), list(mask[:max_length])
    step_ids: list[int] = []
    turn = -1
    previous = 0
    for m in mask:
        if m and not previous:
            turn += 1
        step_ids.append(turn if m else -1)
        previous = m
    labels = [t if m else IGNORE_INDEX for t, m in zip(ids, mask, strict=True)]
    return Encoded(input_ids=ids, labels=labels, step_ids=step_ids, weights=[1.0] * len(ids))


def collate(batch: Sequence[Encoded], pad_id: int) -> dict[str, Any]:
    """Right-padded tensors: ``input_ids`` (pad_id), ``attention_mask``, ``labels`` (-100),
    ``weights`` (0.0) and ``step_ids`` (-1), each (batch, longest)."""
    torch = require_torch()
    if not batch:
        raise ConfigError("collate needs at least one example")
    width = max(len(e) for e in batch)

    def pad(rows: list[list[Any]], value: Any, dtype: Any) -> Any:
        return torch.tensor([r + [value] * (width - len(r)) for r in rows], dtype=dtype)

    return {
        "input_ids": pad([e.input_ids for e in batch], pad_id, torch.long),
        "attention_mask": pad([[1] * len(e) for e in batch], 0, torch.long),
        "labels": pad([e.labels for e in batch], IGNORE_INDEX, torch.long),
        "weights": pad([e.weights for e in batch], 0.0, torch.float32),
        "step_ids": pad([e.step_ids for e in batch], -1, torch.long),
    }


# --------------------------------------------------------------------------- batches


@functools.lru_cache(maxsize=4)
def _epoch_order(n: int, seed: int, epoch: int) -> tuple[int, ...]:
    order = list(range(n))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return tuple(order)


def batch_indices(n: int, size: int, index: int, seed: int) -> list[int]:
    """Indices of micro-batch ``index`` (of ``size`` items out of ``n``): positions
    ``index*size ..`` of the concatenated seeded per-epoch permutations, a function of the seed
    and the index only (so a resumed run sees the same batches)."""
    positions = range(index * size, (index + 1) * size)
    return [_epoch_order(n, seed, p // n)[p % n] for p in positions]


def process_share(items: Sequence[Any], rank: int, per_process: int) -> list[Any]:
    """Process ``rank``'s share of a micro-batch: its ``per_process`` consecutive items."""
    return list(items[rank * per_process : (rank + 1) * per_process])


def to_device(batch: Mapping[str, Any], device: Any) -> dict[str, Any]:
    """The tensors of a collated batch moved to ``device``."""
    return {k: v.to(device) for k, v in batch.items()}
