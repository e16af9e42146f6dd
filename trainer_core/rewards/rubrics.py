"""Rubrics: what a step is scored on, who scores it (a rule, the model judge, a human) and how
much it counts. Built-in sets follow knowlyr-reward's, so scores stay comparable; their weights
are the built-in domain profiles' (:mod:`trainer_core.envs.profiles` owns them), and a domain
profile's ``rubric_weights`` override the weights.

Which rule scores which rule-evaluated rubric is in :data:`RULE_FOR_RUBRIC` (see
:mod:`trainer_core.rewards.rules`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

from trainer_core.envs.profiles import (
    ADVISORY_WEIGHTS,
    CODING_WEIGHTS,
    CONVERSATION_WEIGHTS,
    DISCUSSION_WEIGHTS,
    ENGINEERING_WEIGHTS,
)

Evaluator = Literal["rule", "model", "human"]
EVALUATORS: tuple[str, ...] = ("rule", "model", "human")


@dataclass(frozen=True)
class Rubric:
    id: str
    description: str
    evaluator: Evaluator
    weight: float

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "description": self.description,
            "evaluator": self.evaluator,
            "weight": self.weight,
        }


DESCRIPTIONS: dict[str, tuple[str, Evaluator]] = {
    "goal_progress": (
        "Does this step move the task toward its goal (new information, a needed change, the "
        "answer)?",
        "model",
    ),
    "tool_selection": ("Is this the right tool for what the step tries to do?", "model"),
    "param_correctness": (
        "Are the tool's parameters correct and complete (paths, names, values)?",
        "model",
    ),
    "info_utilization": (
        "Does the step use what earlier observations revealed (paths, identifiers, values)?",
        "rule",
    ),
    "non_redundancy": (
        "Does the step avoid repeating earlier work or undoing an earlier change?",
        "rule",
    ),
    "tool_success": (
        "Did the tool call succeed (no error, no failing exit code, no error in its output)?",
        "rule",
    ),
    "response_quality": ("Is the reply to the user accurate, complete and clear?", "model"),
    "evidence_quality": ("Are conclusions backed by evidence the agent actually found?", "model"),
    "advice_quality": ("Is the advice sound, specific and grounded in the sources?", "model"),
    "argument_quality": ("Are the arguments well reasoned and supported by sources?", "model"),
}

#: the rule (in rules.py) behind each rule-evaluated rubric
RULE_FOR_RUBRIC: dict[str, str] = {
    "info_utilization": "info_use",
    "non_redundancy": "non_redundancy",  # min(redundancy, regression)
    "tool_success": "success",  # not in the built-in sets: a profile may weigh it
}

#: the built-in weights of each rubric set: the built-in domain profiles' default rubric weights
#: (their one owner is :mod:`trainer_core.envs.profiles`); ``default`` is the coding set
_WEIGHTS: dict[str, dict[str, float]] = {
    "default": CODING_WEIGHTS,
    "conversation": CONVERSATION_WEIGHTS,
    "engineering": ENGINEERING_WEIGHTS,
    "advisory": ADVISORY_WEIGHTS,
    "discussion": DISCUSSION_WEIGHTS,
    "coding": CODING_WEIGHTS,
}


def rubric_set(name: str, weights: Mapping[str, float] | None = None) -> list[Rubric]:
    """The rubrics of a domain: the built-in set for ``name`` (``default`` when unknown), with
    ``weights`` (a profile's ``rubric_weights``) replacing the built-in weights when given. A
    rubric id with no built-in description is model-evaluated."""
    base = _WEIGHTS.get(name, _WEIGHTS["default"])
    chosen = dict(weights) if weights else dict(base)
    rubrics = []
    for rubric_id, weight in chosen.items():
        description, evaluator = DESCRIPTIONS.get(
            rubric_id, (rubric_id.replace("_", " ").capitalize() + "?", "model")
        )
        rubrics.append(Rubric(rubric_id, description, evaluator, float(weight)))
    return rubrics


def builtin_rubric_sets() -> dict[str, list[Rubric]]:
    return {name: rubric_set(name) for name in _WEIGHTS}


def with_weight(rubric: Rubric, weight: float) -> Rubric:
    return replace(rubric, weight=float(weight))
