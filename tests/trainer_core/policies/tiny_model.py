"""Tiny local models for tests: a byte-level BPE tokenizer trained on the spot and a random-weight
Llama, saved as a Hugging Face model directory. Nothing is downloaded. The builders live in
:mod:`trainer_core.training.tiny`; this module keeps the small shape and corpus these tests use.

    path = build_tiny_model(tmp_path / "model")          # ~0.1 s, ~60k parameters
    train_tiny_model(path, [messages], steps=80)          # teach it conversations (CPU, seconds)

Both speak the one chat format (:mod:`trainer_core.policies.chat_format`): the tokenizer holds its
special tokens and chat template, and training uses ``chat_format.tokenize`` with the assistant
mask, so a trained model answers in the format the local policy parses.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from trainer_core.policies import chat_format
from trainer_core.policies.base import Turn
from trainer_core.tasks.model import ToolSpec
from trainer_core.training import tiny

CALCULATOR = ToolSpec(
    name="calculator",
    description="Evaluate an arithmetic expression.",
    parameters={
        "type": "object",
        "properties": {"expression": {"type": "string"}},
        "required": ["expression"],
    },
)
SUBMIT = ToolSpec(
    name="submit",
    description="Submit the final answer.",
    parameters={
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
    },
)
TOOLS = (CALCULATOR, SUBMIT)


def default_corpus() -> list[str]:
    """Text in the chat format (system prompt, prompts, tool calls, results) plus JSON and
    arithmetic, so the tokenizer learns merges for what the tests say."""
    texts = [chat_format.system_prompt(TOOLS)]
    for a in range(2, 12):
        for b in range(2, 12, 3):
            expression = f"{a}+{b}"
            turns = [
                Turn(
                    action={
                        "tool": "calculator",
                        "params": {"expression": expression},
                        "thought": "Compute it with the calculator.",
                    },
                    observation=str(a + b),
                ),
                Turn(
                    action={"tool": "submit", "params": {"answer": str(a + b)}, "thought": ""},
                    observation="Correct.",
                ),
            ]
            messages = chat_format.to_messages(
                prompt=f"What is {expression}? Use the calculator tool, then submit the answer.",
                history=turns,
            )
            texts.append(chat_format.render(messages))
    texts.append(json.dumps({"a": [1, 2.5, True, None, "x"], "b": {"c": "d"}}))
    texts.append("The quick brown fox jumps over the lazy dog. 0123456789 +-*/=()[]{}<>\"':,.")
    return texts


def build_tiny_tokenizer(corpus: Iterable[str] | None = None, *, vocab_size: int = 400) -> Any:
    """A byte-level BPE ``PreTrainedTokenizerFast`` trained on ``corpus`` (default:
    :func:`default_corpus`) with the chat format's tokens, pad token and chat template (built by
    :func:`trainer_core.training.tiny.build_tiny_tokenizer`; digits merge like other text here)."""
    texts = list(corpus) if corpus is not None else default_corpus()
    return tiny.build_tiny_tokenizer(texts, vocab_size=vocab_size, digits="bpe")


def build_tiny_model(
    path: str | Path,
    *,
    seed: int = 0,
    corpus: Iterable[str] | None = None,
    hidden_size: int = 48,
    num_layers: int = 2,
) -> Path:
    """Save a random-weight tiny ``LlamaForCausalLM`` and its tokenizer into ``path``; returns
    the path. Deterministic for a given ``seed`` and corpus (built by
    :func:`trainer_core.training.tiny.build_tiny_model`, with this module's corpus)."""
    texts = list(corpus) if corpus is not None else default_corpus()
    return tiny.build_tiny_model(
        path,
        seed=seed,
        corpus=texts,
        hidden_size=hidden_size,
        num_layers=num_layers,
        num_kv_heads=2,
        intermediate_size=2 * hidden_size,
        vocab_size=400,
        digits="bpe",
        initializer_range=0.02,
    )


def train_tiny_model(
    path: str | Path,
    conversations: Sequence[Sequence[Mapping[str, Any]]],
    *,
    steps: int = 80,
    lr: float = 1e-2,
    seed: int = 0,
) -> float:
    """Fit the model in ``path`` to ``conversations`` (lists of chat messages) with the loss on
    the assistant tokens only (``chat_format.tokenize``'s mask), and save it back. Returns the
    last loss. Meant to memorise a handful of conversations in seconds on a CPU."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(seed)
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.train()
    batch = [chat_format.tokenize(messages, tokenizer) for messages in conversations]
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    loss_value = float("nan")
    for step in range(steps):
        item = batch[step % len(batch)]
        input_ids = torch.tensor([item.input_ids])
        labels = torch.tensor([item.labels()])
        loss = model(input_ids=input_ids, labels=labels).loss
        optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        loss_value = float(loss.detach())
    model.eval()
    model.save_pretrained(path)
    return loss_value
