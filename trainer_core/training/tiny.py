"""Tiny local models: a byte-level BPE tokenizer trained on the spot and a random-weight Llama,
saved as a Hugging Face model directory. Nothing is downloaded. For tests, benchmarks, demos and
the web app's first training run::

    path = build_tiny_model("var/models/tiny")   # ~1M parameters, a second or two on a CPU

The tokenizer is trained on :func:`default_corpus` (the chat format with the tool-arithmetic
tools' system prompt, reference episodes of the arithmetic train split, JSON) and holds the chat
format's special tokens, pad token and chat template
(:func:`~trainer_core.policies.chat_format.ensure_special_tokens`); digits are split one per token
(``split_digits``), so numbers never seen in training still tokenize like the ones seen.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

__all__ = [
    "arithmetic_tools",
    "build_tiny_model",
    "build_tiny_tokenizer",
    "count_parameters",
    "default_corpus",
]


def arithmetic_tools() -> list[Any]:
    """The tools of ``steplab/arithmetic`` (calculator, submit) as the environment lists them."""
    from trainer_core.envs.registry import make

    with make("steplab/arithmetic") as env:
        return list(env.available_tools)


def default_corpus(*, n_episodes: int = 100) -> list[str]:
    """Text for the tokenizer: the chat format with the arithmetic tools' system prompt and
    ``n_episodes`` reference episodes of the arithmetic train split, plus JSON and plain text."""
    from trainer_core.envs.arithmetic import arithmetic_tasks, evaluate
    from trainer_core.policies import chat_format
    from trainer_core.policies.base import Turn

    tools = arithmetic_tools()
    system = chat_format.system_prompt(tools)
    texts = [system]
    for task in arithmetic_tasks("train", n=n_episodes):
        turns = []
        for call in task.reference_solution or []:
            if call.tool == "calculator":
                expression = call.params["expression"]
                observation = f"{expression} = {evaluate(expression)}"
            else:
                observation = f"Submitted: {call.params.get('answer')!r} — correct."
            action = {"tool": call.tool, "params": dict(call.params), "thought": call.thought}
            turns.append(Turn(action=action, observation=observation))
        messages = chat_format.to_messages(prompt=task.prompt, history=turns, system=system)
        texts.append(chat_format.render(messages))
    texts.append(json.dumps({"a": [1, 2.5, True, None, "x"], "b": {"c": "d"}}))
    texts.append("The quick brown fox jumps over the lazy dog. 0123456789 +-*/=()[]{}<>\"':,.")
    return texts


def build_tiny_tokenizer(
    corpus: Iterable[str] | None = None, *, vocab_size: int = 512, split_digits: bool = True
) -> Any:
    """A byte-level BPE ``PreTrainedTokenizerFast`` trained on ``corpus`` (default:
    :func:`default_corpus`) holding the chat format's tokens, pad token and chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from trainer_core.policies import chat_format

    texts = list(corpus) if corpus is not None else default_corpus()
    backend = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    if split_digits:
        backend.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Digits(individual_digits=True), byte_level]
        )
    else:
        backend.pre_tokenizer = byte_level
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=1,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    backend.train_from_iterator(texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, clean_up_tokenization_spaces=False
    )
    chat_format.ensure_special_tokens(tokenizer)
    return tokenizer


def build_tiny_model(
    path: str | Path,
    *,
    seed: int = 0,
    corpus: Iterable[str] | None = None,
    hidden_size: int = 128,
    num_layers: int = 4,
    num_heads: int = 4,
    num_kv_heads: int = 2,
    intermediate_size: int | None = None,
    vocab_size: int = 512,
    split_digits: bool = True,
    max_position_embeddings: int = 2048,
) -> Path:
    """Save a random-weight tiny ``LlamaForCausalLM`` (tied embeddings) and its tokenizer into
    ``path``; returns the path. Deterministic for a given seed, corpus and shape. The defaults
    give about 1M parameters; ``hidden_size=48, num_layers=2`` about 60k."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from trainer_core.policies import chat_format

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tiny_tokenizer(corpus, vocab_size=vocab_size, split_digits=split_digits)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 2 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids(chat_format.IM_END),
        pad_token_id=tokenizer.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlamaForCausalLM(config)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def count_parameters(model: Any) -> int:
    """Distinct parameters of a model (tied weights counted once)."""
    seen = {p.data_ptr(): p.numel() for p in model.parameters()}
    return sum(seen.values())


# --------------------------------------------------------------------------- proof of learning


def reference_trajectories(split: str, n: int, *, seed: int = 0) -> list[Any]:
    """``n`` episodes of the scripted policy playing the reference solutions of ``n`` tasks of
    the ``steplab/arithmetic`` split (``train`` or ``heldout``), as recorded trajectories."""
    from trainer_core.envs.arithmetic import arithmetic_tasks
    from trainer_core.policies.scripted import ScriptedPolicy
    from trainer_core.rollouts.collect import collect

    results = collect(
        "steplab/arithmetic",
        arithmetic_tasks(split, n=n),
        lambda s: ScriptedPolicy(seed=s),
        max_steps=6,
        seed=seed,
    )
    return [r.trajectory for r in results]


def _generate(model: Any, tokenizer: Any, conversations: list[Any], batch: int, limit: int) -> list:
    from trainer_core.policies.local_hf import LocalHFPolicy

    policy = LocalHFPolicy.from_model(model, tokenizer, temperature=0.0, max_new_tokens=limit)
    texts: list[str] = []
    for first in range(0, len(conversations), batch):
        texts.extend(g.text for g in policy.generate(conversations[first : first + batch]))
    return texts


def exact_actions(
    model: Any,
    tokenizer: Any,
    trajectories: list[Any],
    *,
    system: str | None,
    batch_size: int = 64,
    max_new_tokens: int = 64,
) -> tuple[int, int]:
    """Greedy decoding at every step of each reference trajectory, the history before it taken
    from the reference (teacher forcing): (actions whose tool and arguments equal the
    reference's, steps)."""
    from trainer_core.policies import chat_format

    conversations, expected = [], []
    for trajectory in trajectories:
        messages = chat_format.trajectory_to_messages(trajectory, system=system)
        for i, message in enumerate(messages):
            if message["role"] != "assistant":
                continue
            call = message["tool_calls"][0]["function"]
            conversations.append(messages[:i])
            expected.append((call["name"], json.loads(call["arguments"])))
    was_training = model.training
    model.eval()
    texts = _generate(model, tokenizer, conversations, batch_size, max_new_tokens)
    model.train(was_training)
    correct = 0
    for text, (tool, params) in zip(texts, expected, strict=True):
        action = chat_format.parse_assistant(text)
        if isinstance(action, dict) and action["tool"] == tool and action["params"] == params:
            correct += 1
    return correct, len(expected)


def play_greedy(
    model: Any,
    tokenizer: Any,
    tasks: list[Any],
    *,
    system: str | None,
    max_steps: int = 4,
    batch_size: int = 64,
    max_new_tokens: int = 64,
) -> list[bool]:
    """Play each task in ``steplab/arithmetic`` with greedy decoding, all episodes' turns decoded
    as one batch per step; the prompt is ``system`` (or none), the task prompt and the history in
    the chat format. Returns whether each episode succeeded."""
    from trainer_core.envs.registry import make
    from trainer_core.policies import chat_format
    from trainer_core.policies.base import Decision, Turn, play_step

    envs = [make("steplab/arithmetic") for _ in tasks]
    try:
        steps = [env.reset(task=task) for env, task in zip(envs, tasks, strict=True)]
        prompts = [ts.observation for ts in steps]
        histories: list[list[Turn]] = [[] for _ in tasks]
        success = [False] * len(tasks)
        was_training = model.training
        model.eval()
        for _ in range(max_steps):
            live = [i for i, ts in enumerate(steps) if not ts.done]
            if not live:
                break
            conversations = [
                chat_format.to_messages(prompt=prompts[i], history=histories[i], system=system)
                for i in live
            ]
            texts = _generate(model, tokenizer, conversations, batch_size, max_new_tokens)
            for i, text in zip(live, texts, strict=True):
                parsed = chat_format.parse_assistant(text)
                action = parsed if isinstance(parsed, dict) else None
                error = parsed if isinstance(parsed, str) else None
                ts = play_step(envs[i], Decision(action=action, error=error, raw=text))
                histories[i].append(Turn(action=action, observation=ts.observation, raw=text))
                steps[i] = ts
                if ts.done:
                    success[i] = bool((ts.info.get("outcome") or {}).get("success"))
        model.train(was_training)
        return success
    finally:
        for env in envs:
            env.close()
