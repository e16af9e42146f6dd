"""Rewards: the rule layer, rubrics, the LLM judge, the combination of layers into step and
trajectory totals, and preference pairs. Each lives in its own module (import from there).

Importing this package (so: any of its modules) registers the judge's ``llm_judge`` outcome
checker in :mod:`trainer_core.tasks.checkers` (:mod:`trainer_core.rewards.judge.checker`): the
tasks layer below cannot import the judge, so the judge registers itself."""

from trainer_core.rewards.judge import checker as _llm_judge_checker  # noqa: F401 (registers it)
