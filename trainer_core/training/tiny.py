"""Tiny local models: a byte-level BPE tokenizer trained on the spot and a random-weight Llama,
saved as a Hugging Face model directory. Nothing is downloaded. For tests, benchmarks, demos and
the web app's first training run::

    path = build_tiny_model("var/models/tiny")   # ~1M parameters, a second or two on a CPU

The tokenizer is trained on :func:`default_corpus` (the chat format with the tool-arithmetic
tools' system prompt, reference episodes of the arithmetic train split, JSON) and holds the chat
format's special tokens, pad token and chat template
(:func:`~trainer_core.policies.chat_format.ensure_special_tokens`); digits are one token each, so
numbers never seen in training still tokenize like the ones seen.

The proof of learning (:func:`learnability`, printed by ``bench/learnability.py``): SFT of a
tiny model on reference episodes of the ``steplab/arithmetic`` train split, evaluated by greedy
decoding on the held-out split (other seeds, operands 50-99 where training saw 2-49).
"""

from __future__ import annotations

import dataclasses
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
    "lookup_corpus",
]


def arithmetic_tools() -> list[Any]:
    """The tools of ``steplab/arithmetic`` (calculator, submit) as the environment lists them."""
    from trainer_core.envs.registry import make

    with make("steplab/arithmetic") as env:
        return list(env.available_tools)


def default_corpus(*, n_episodes: int = 100) -> list[str]:
    """Text for the tokenizer: the chat format with the arithmetic tools' system prompt and
    ``n_episodes`` reference episodes of the arithmetic train split, plus JSON and plain text."""
    from trainer_core.envs.arithmetic import evaluate
    from trainer_core.policies import chat_format
    from trainer_core.policies.base import Turn
    from trainer_core.tasks.suites.arithmetic import arithmetic_tasks

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


def _name_words() -> frozenset[str]:
    """Every first name, surname and city name of the lookup generator's pools (all splits),
    with their near-duplicate spellings."""
    from trainer_core.tasks.suites import lookup

    words = set(lookup.FIRST_NAMES) | set(lookup.SURNAMES)
    words |= {stem + ending for stem in lookup.CITY_STEMS for ending in lookup.CITY_ENDINGS}
    for word in list(words):
        words.update(lookup.near_variants(word))
    return frozenset(words)


def lookup_corpus(
    *, n_episodes: int = 300, system: str | None = None, start: int = 500_000, names: bool = False
) -> list[str]:
    """Text for a tokenizer of ``steplab/lookup``: ``n_episodes`` reference episodes (the
    scripted policy in the environment, so the observations are real) of train-split tasks from
    seed ``start``, in the chat format with ``system`` (None: no system message), plus JSON and
    plain text.

    ``names=False`` (the default) deletes every name of the generator's pools from the text, so
    that the tokenizer learns no merge inside a name: names are spelled in letters and short
    pieces seen everywhere, and a name of the held-out splits (their own pools) tokenizes like
    the training ones, as ``digits="single"`` does for numbers. With merges learned on the names
    themselves, about 2% of a validation episode's tokens never occur in the training episodes,
    exactly the ones a search has to copy."""
    import re

    from trainer_core.policies import chat_format
    from trainer_core.policies.scripted import ScriptedPolicy
    from trainer_core.rollouts.collect import collect
    from trainer_core.tasks.suites.lookup import lookup_tasks

    results = collect(
        "steplab/lookup",
        lookup_tasks("train", n=n_episodes, start=start),
        lambda s: ScriptedPolicy(seed=s),
        max_steps=8,
    )
    texts = [
        chat_format.render(chat_format.trajectory_to_messages(r.trajectory, system=system))
        for r in results
    ]
    if not names:
        pool = _name_words()
        word = re.compile(r"\b[A-Z][a-z]+\b")
        texts = [word.sub(lambda m: "" if m.group(0) in pool else m.group(0), t) for t in texts]
    texts.append(json.dumps({"a": [1, 2.5, True, None, "x"], "b": {"c": "d"}}))
    texts.append("The quick brown fox jumps over the lazy dog. 0123456789 +-*/=()[]{}<>\"':,.")
    return texts


DIGITS = ("pairs", "single", "bpe")


def build_tiny_tokenizer(
    corpus: Iterable[str] | None = None, *, vocab_size: int = 512, digits: str = "single"
) -> Any:
    """A byte-level BPE ``PreTrainedTokenizerFast`` trained on ``corpus`` (default:
    :func:`default_corpus`) holding the chat format's tokens, pad token and chat template.

    ``digits``: ``single`` (one token per digit: a number never seen in training tokenizes like
    the ones seen, which is what lets a tiny model copy held-out numbers); ``pairs``: runs of
    digits cut into groups of two from the left (``2652`` → ``26`` ``52``), each of 0-99 its own
    token; ``bpe``: digits merge like any other text."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from trainer_core.policies import chat_format

    if digits not in DIGITS:
        raise ValueError(f"digits must be one of {', '.join(DIGITS)}, not {digits!r}")
    texts = list(corpus) if corpus is not None else default_corpus()
    backend = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    if digits == "pairs":
        texts.append(" ".join(f"{n} {n:02d}" for n in range(100)))
        split = pre_tokenizers.Split(Regex(r"[0-9]{1,2}"), behavior="isolated")
        backend.pre_tokenizer = pre_tokenizers.Sequence([split, byte_level])
    elif digits == "single":
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
    num_kv_heads: int = 4,
    intermediate_size: int | None = None,
    vocab_size: int = 512,
    digits: str = "single",
    initializer_range: float | None = None,
    max_position_embeddings: int = 2048,
) -> Path:
    """Save a random-weight tiny ``LlamaForCausalLM`` (tied embeddings) and its tokenizer into
    ``path``; returns the path. Deterministic for a given seed, corpus and shape. The defaults
    give about 1M parameters; ``hidden_size=48, num_layers=2`` about 60k.

    ``initializer_range`` (the std of the initial weights) defaults to ``hidden_size ** -0.5``,
    wider than Llama's 0.02 (tuned for wide models): on a tiny model its attention heads then
    specialise (copying numbers from the prompt) within a few hundred steps instead of a
    thousand or more."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from trainer_core.policies import chat_format

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tiny_tokenizer(corpus, vocab_size=vocab_size, digits=digits)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size or 4 * hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_kv_heads,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,
        bos_token_id=None,
        eos_token_id=tokenizer.convert_tokens_to_ids(chat_format.IM_END),
        pad_token_id=tokenizer.pad_token_id,
        initializer_range=initializer_range or hidden_size**-0.5,
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
    from trainer_core.policies.scripted import ScriptedPolicy
    from trainer_core.rollouts.collect import collect
    from trainer_core.tasks.suites.arithmetic import arithmetic_tasks

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
    max_new_tokens: int = 48,
) -> dict[str, Any]:
    """Greedy decoding at every step of each reference trajectory, the history before it taken
    from the reference (teacher forcing). Returns ``correct`` (actions whose tool and arguments
    equal the reference's), ``total`` and ``by_tool`` (tool → [correct, total])."""
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
    by_tool: dict[str, list[int]] = {}
    for text, (tool, params) in zip(texts, expected, strict=True):
        action = chat_format.parse_assistant(text)
        right = isinstance(action, dict) and action["tool"] == tool and action["params"] == params
        counts = by_tool.setdefault(tool, [0, 0])
        counts[0] += int(right)
        counts[1] += 1
    correct = sum(c for c, _ in by_tool.values())
    return {"correct": correct, "total": len(expected), "by_tool": by_tool}


def play_greedy(
    model: Any,
    tokenizer: Any,
    tasks: list[Any],
    *,
    system: str | None,
    max_steps: int = 4,
    batch_size: int = 64,
    max_new_tokens: int = 64,
    env_id: str = "steplab/arithmetic",
) -> list[bool]:
    """Play each task in ``env_id`` (default ``steplab/arithmetic``) with greedy decoding, all
    episodes' turns decoded as one batch per step; the prompt is ``system`` (or none), the task
    prompt and the history in the chat format. Returns whether each episode succeeded."""
    from trainer_core.envs.registry import make
    from trainer_core.policies import chat_format
    from trainer_core.policies.base import Decision, Turn, play_step

    envs = [make(env_id) for _ in tasks]
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


#: The system prompt of the proof of learning: short, so that sequences are short.
LEARNABILITY_SYSTEM = "Use the calculator, then submit the answer."


def _write_sft_rows(path: Path, trajectories: list[Any], system: str | None) -> Path:
    """The trajectories as SFT rows (``{"messages": ...}``, one JSON object per line) in
    ``path``."""
    from trainer_core.policies import chat_format

    with path.open("w", encoding="utf-8") as fh:
        for trajectory in trajectories:
            messages = chat_format.trajectory_to_messages(trajectory, system=system)
            fh.write(json.dumps({"messages": messages}) + "\n")
    return path


def _heldout_figures(
    model_dir: Path, heldout: list[Any], heldout_tasks: list[Any], system: str | None
) -> dict[str, Any]:
    """Exact-action accuracy (teacher-forced) and whole-episode success of the model in
    ``model_dir`` on the held-out trajectories and tasks, greedy decoding on the CPU."""
    from trainer_core.training.modelling import load_model_and_tokenizer

    model, tokenizer = load_model_and_tokenizer(model_dir, device="cpu")
    model.eval()
    exact = exact_actions(model, tokenizer, heldout, system=system)
    wins = play_greedy(model, tokenizer, heldout_tasks, system=system, max_new_tokens=48)
    return {
        "exact_actions": exact["correct"] / exact["total"],
        "actions": exact["total"],
        "by_tool": {tool: c / n for tool, (c, n) in exact["by_tool"].items()},
        "success": sum(wins) / len(wins),
        "episodes": len(wins),
    }


def learnability(
    workdir: str | Path,
    *,
    train_episodes: int = 3600,
    eval_episodes: int = 50,
    max_steps: int = 450,
    batch_size: int = 8,
    learning_rate: float = 2e-3,
    adam_beta2: float = 0.95,
    seed: int = 0,
    system: str | None = LEARNABILITY_SYSTEM,
    model: dict[str, Any] | None = None,
    train_options: dict[str, Any] | None = None,
    on_progress: Any = None,
) -> dict[str, Any]:
    """The proof of learning. Reference episodes of ``train_episodes`` tasks of the
    ``steplab/arithmetic`` train split (scripted policy) become SFT rows
    (``chat_format.trajectory_to_messages(trajectory, system=system)``); a ~1.1M-parameter tiny
    model built here is trained on them by :func:`trainer_core.training.sft.train`; before and
    after, greedy decoding on ``eval_episodes`` held-out tasks gives the exact-action accuracy
    (teacher-forced history, tool and arguments equal to the reference's) and the success rate
    of whole episodes played in the environment. ``model``: arguments of
    :func:`build_tiny_model`; ``train_options``: more :class:`SFTConfig` fields. Returns the
    figures and timings."""
    import time

    from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
    from trainer_core.training.modelling import load_model_and_tokenizer
    from trainer_core.training.sft import SFTConfig, train

    # 1. data and the base model, and their figures before training
    started = time.perf_counter()
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    reference = reference_trajectories("train", train_episodes, seed=seed)
    heldout = reference_trajectories("heldout", eval_episodes, seed=seed)
    heldout_tasks = arithmetic_tasks("heldout", n=eval_episodes)
    data = _write_sft_rows(workdir / "train.jsonl", reference, system)
    base = build_tiny_model(workdir / "base", seed=seed, **(model or {}))
    loaded, _ = load_model_and_tokenizer(base, device="cpu")
    parameters = count_parameters(loaded)
    del loaded
    before = _heldout_figures(base, heldout, heldout_tasks, system)
    setup_seconds = time.perf_counter() - started

    # 2. SFT, then the figures of its last checkpoint
    config = SFTConfig(
        model_dir=str(base),
        output_dir=str(workdir / "run"),
        dataset=str(data),
        seed=seed,
        max_steps=max_steps,
        batch_size=batch_size,
        learning_rate=learning_rate,
        adam_beta2=adam_beta2,
        warmup_steps=20,
        lr_schedule="cosine",
        max_length=256,
        device="cpu",
        log_every=10,
    )
    config = dataclasses.replace(config, **(train_options or {}))
    train_started = time.perf_counter()
    result = train(config, on_progress=on_progress)
    train_seconds = time.perf_counter() - train_started
    after = _heldout_figures(Path(result.checkpoint_dir), heldout, heldout_tasks, system)
    return {
        "parameters": parameters,
        "train_episodes": train_episodes,
        "steps": result.steps,
        "final_loss": result.final_loss,
        "before": before,
        "after": after,
        "setup_seconds": setup_seconds,
        "train_seconds": train_seconds,
        "total_seconds": time.perf_counter() - started,
        "checkpoint_dir": result.checkpoint_dir,
    }
