"""The LLM judge: a model scores each step of a trajectory on the model-evaluated rubrics.

::

    judge = Judge(JudgeConfig(kind="anthropic", model="claude-haiku-4-5"), cache=FileCache(path))
    judge.check_ready()                      # no key: PolicyError naming the variable, no call made
    judgements, usage = judge.judge_trajectory(trajectory, rubrics, should_stop=over_budget)

This package is the judge's public entry: import from here. Its modules, by what they hold:

- :mod:`.config`: :class:`JudgeConfig`, :class:`StepJudgement`, :class:`JudgeUsage`, and
  :func:`judge_config_from_env` (the ``STEPLAB_JUDGE_*`` variables);
- :mod:`.prompts`: the step prompt (task, window, step, rubrics, anchored scale, the JSON to
  answer; the agent's text fenced as untrusted data) and the answer-check prompt;
- :mod:`.parsing`: strict reading of the answer (:func:`parse_scores`,
  :func:`extract_json_object`, the repair of a cut-off answer; unscored, never a default score);
- :mod:`.cache`: :class:`MemoryCache` and :class:`FileCache` (SQLite);
- :mod:`.client`: the SDK calls (Anthropic Messages API or any OpenAI-compatible server);
- :mod:`.core`: :class:`Judge` (one call per judged step on ``concurrency`` threads, sampling of
  long trajectories with interpolation, the cache, ``should_stop``, failures);
- :mod:`.checker`: the ``llm_judge`` outcome checker (:func:`check_llm_judge`), registered in
  :mod:`trainer_core.tasks.checkers` when this package is imported.
"""

from trainer_core.rewards.judge.cache import FileCache, JudgeCache, MemoryCache
from trainer_core.rewards.judge.checker import check_llm_judge
from trainer_core.rewards.judge.config import (
    ENV_API_KEY_ENV,
    ENV_BASE_URL,
    ENV_KIND,
    ENV_MODEL,
    KINDS,
    JudgeConfig,
    JudgeUsage,
    StepJudgement,
    judge_config_from_env,
)
from trainer_core.rewards.judge.core import Judge, interpolate, sample_positions
from trainer_core.rewards.judge.parsing import ParsedAnswer, extract_json_object, parse_scores
from trainer_core.rewards.judge.prompts import PROMPT_VERSION

__all__ = [
    "ENV_API_KEY_ENV",
    "ENV_BASE_URL",
    "ENV_KIND",
    "ENV_MODEL",
    "KINDS",
    "PROMPT_VERSION",
    "FileCache",
    "Judge",
    "JudgeCache",
    "JudgeConfig",
    "JudgeUsage",
    "MemoryCache",
    "ParsedAnswer",
    "StepJudgement",
    "check_llm_judge",
    "extract_json_object",
    "interpolate",
    "judge_config_from_env",
    "parse_scores",
    "sample_positions",
]
