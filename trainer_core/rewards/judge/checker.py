"""The ``llm_judge`` outcome checker: an LLM decides whether the agent's answer means the same as
the task's ``expected_answer`` (a reference answer).

The judge is the one of ``task.metadata["judge"]`` (a :class:`JudgeConfig` dict) or of the
environment variables ``STEPLAB_JUDGE_KIND``, ``STEPLAB_JUDGE_MODEL`` (and optionally
``STEPLAB_JUDGE_BASE_URL``, ``STEPLAB_JUDGE_API_KEY_ENV``). No judge configured: ConfigError; a
verdict that cannot be read: PolicyError. It never guesses.

Importing this module registers the checker as ``llm_judge`` in the registry of
:mod:`trainer_core.tasks.checkers` (the tasks layer knows nothing of the judge); importing
:mod:`trainer_core.rewards` (any of its modules) imports it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainer_core.errors import ConfigError
from trainer_core.rewards.judge.config import (
    ENV_API_KEY_ENV,
    ENV_BASE_URL,
    ENV_KIND,
    ENV_MODEL,
    JudgeConfig,
    judge_config_from_env,
)
from trainer_core.rewards.judge.core import Judge
from trainer_core.tasks.checkers import Outcome, register_checker

#: The name tasks give in their ``checker`` field.
CHECKER_NAME = "llm_judge"


def check_llm_judge(*, answer: str | None, task: Any, run_result: dict | None = None) -> Outcome:
    """The ``llm_judge`` outcome checker: an LLM decides whether ``answer`` matches the task's
    ``expected_answer``. Returns an :class:`~trainer_core.tasks.checkers.Outcome` with success,
    a 0..1 score and the judge's rationale as ``detail``."""
    metadata = getattr(task, "metadata", None) or {}
    raw = metadata.get("judge") if isinstance(metadata, Mapping) else None
    if raw is not None:
        config = JudgeConfig.from_dict(raw)
    else:
        config = judge_config_from_env()
    if config is None:
        raise ConfigError(
            "the llm_judge checker has no judge configured: set the task's metadata['judge'] "
            "to a judge config (e.g. {'kind': 'anthropic', 'model': 'claude-haiku-4-5'}) or the "
            f"environment variables {ENV_KIND} and {ENV_MODEL} (optionally {ENV_BASE_URL} and "
            f"{ENV_API_KEY_ENV})"
        )
    reference = getattr(task, "expected_answer", None)
    if reference is None or (isinstance(reference, str) and not reference.strip()):
        raise ConfigError(
            f"task {getattr(task, 'id', '') or '(no id)'!r} uses the llm_judge checker but has no "
            "expected_answer: give it the reference answer to compare with"
        )
    correct, score, rationale, usage = Judge(config).compare_answer(
        question=getattr(task, "prompt", "") or "", reference=reference, answer=answer or ""
    )
    return Outcome(
        success=correct,
        score=score,
        detail=f"LLM judge ({config.model}): {rationale or ('correct' if correct else 'wrong')}",
        metadata={"judge": {"model": config.model, "kind": config.kind, **usage.to_dict()}},
    )


register_checker(CHECKER_NAME, check_llm_judge)
