"""What one GRPO group looked like to the trainer, step by step: for the group view (issue 21).

Every figure here comes from the trainer's own code, so what a page shows is what was trained:

* :func:`step_advantages` — per completion, per step (assistant turn), the advantage the step's
  tokens were trained with: :func:`~trainer_core.training.grpo.advantage_rows` (the run's
  estimator, :mod:`~trainer_core.training.advantages`) spread over the tokens by
  :func:`~trainer_core.training.grpo.token_advantages`, read back at the step's first token that
  carries loss. A step none of whose tokens carries loss (cut by ``max_length``) has None: it was
  not trained.
* :func:`estimator_settings` — the estimator options of a run's stored config (options stored
  before the estimators were corrected are upgraded as the trainer upgrades them).
* :func:`offline_group` — a row of an exported GRPO dataset as the offline trainer encodes it
  (:func:`~trainer_core.training.grpo.encode_group`, with the run's tokenizer: the same
  truncation, the same steps); without a tokenizer, one step per assistant message (exact unless
  ``max_length`` cut the row, which the result then cannot say — ``exact`` is False).
* :func:`load_tokenizer` — the run's tokenizer (transformers, imported only when called).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer_core.training.data import Encoded
from trainer_core.training.episodes import Completion, Group
from trainer_core.training.grpo import GRPOConfig, advantage_rows, encode_group, token_advantages
from trainer_core.training.modelling import IGNORE_INDEX

__all__ = [
    "EstimatorSettings",
    "estimator_settings",
    "load_tokenizer",
    "offline_group",
    "step_advantages",
]


@dataclass(frozen=True)
class EstimatorSettings:
    """The options :func:`~trainer_core.training.grpo.advantage_rows` and
    :func:`~trainer_core.training.grpo.encode_group` read (a GRPOConfig's fields of the same
    names)."""

    advantage: str = "outcome"
    process_weight: float = 1.0
    scale_rewards: bool = True
    group_size: int = 4
    max_length: int = 1024
    observation_masking: bool = True


def estimator_settings(options: Mapping[str, Any]) -> EstimatorSettings:
    """The estimator options of a run's stored config (a GRPOConfig or DecoupledConfig as a
    dict), upgraded as the trainer loads them; missing ones take GRPOConfig's defaults."""
    data = GRPOConfig.upgrade_options(options or {})
    defaults = EstimatorSettings(
        group_size=GRPOConfig.group_size,
        max_length=GRPOConfig.max_length,
    )
    return EstimatorSettings(
        advantage=str(data.get("advantage", defaults.advantage)),
        process_weight=float(data.get("process_weight", defaults.process_weight)),
        scale_rewards=bool(data.get("scale_rewards", defaults.scale_rewards)),
        group_size=int(data.get("group_size", defaults.group_size)),
        max_length=int(data.get("max_length", defaults.max_length)),
        observation_masking=bool(data.get("observation_masking", defaults.observation_masking)),
    )


def _steps_of(completion: Completion) -> int:
    turns = len(completion.turns) if completion.turns else 0
    return max(turns, max(completion.encoded.step_ids, default=-1) + 1, 0)


def step_advantages(group: Group, settings: Any) -> list[list[float | None]]:
    """Per completion of ``group``, per step, the advantage its tokens were trained with (None:
    none of its tokens carried loss). ``settings``: a GRPOConfig, DecoupledConfig or
    :class:`EstimatorSettings`."""
    out = []
    for completion, row in zip(group.completions, advantage_rows(group, settings), strict=True):
        per_token = token_advantages(completion, row)
        steps: list[float | None] = [None] * _steps_of(completion)
        encoded = completion.encoded
        for s, label, value in zip(encoded.step_ids, encoded.labels, per_token, strict=True):
            if 0 <= s < len(steps) and steps[s] is None and label != IGNORE_INDEX:
                steps[s] = value
        out.append(steps)
    return out


def _turn_encoded(messages: Sequence[Mapping[str, Any]]) -> Encoded:
    """One stand-in token per assistant message (step ``t``), carrying loss."""
    turns = sum(1 for m in messages if isinstance(m, Mapping) and m.get("role") == "assistant")
    turns = max(turns, 1)
    ids = list(range(turns))
    return Encoded(ids, list(ids), list(ids), [1.0] * turns)


def offline_group(
    row: Mapping[str, Any], index: int, settings: Any, tokenizer: Any = None
) -> tuple[Group, bool]:
    """A GRPO dataset row as the offline trainer's group, and whether it is exact: with the run's
    ``tokenizer``, :func:`~trainer_core.training.grpo.encode_group` itself (exact); without,
    the same rewards and one step per assistant message (not exact where ``max_length`` cut the
    row)."""
    if tokenizer is not None:
        return encode_group(row, index, tokenizer, settings), True
    return encode_group(row, index, None, settings, encode=_encode_by_turns), False


def _encode_by_turns(prompt, continuation, tokenizer, *, max_length, observation_masking):
    """:func:`~trainer_core.training.dpo.encode_continuation`'s stand-in without a tokenizer."""
    return _turn_encoded(continuation)


@functools.lru_cache(maxsize=4)
def load_tokenizer(model_dir: str) -> Any:
    """The tokenizer of a local model directory with the chat format's tokens, as the trainer
    loads it (None when there is none to load)."""
    from trainer_core.policies import chat_format

    if not (Path(model_dir) / "tokenizer_config.json").is_file():
        return None
    try:
        import transformers

        tokenizer = transformers.AutoTokenizer.from_pretrained(model_dir, local_files_only=True)
    except Exception:  # noqa: BLE001 - any failure: the page falls back and says so
        return None
    chat_format.ensure_special_tokens(tokenizer)
    return tokenizer
