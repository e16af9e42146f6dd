"""Rubrics: what a step is scored on, who scores it (a rule, the model judge, a human) and how
much it counts. Built-in sets follow knowlyr-reward's, so scores stay comparable; a domain
profile's ``rubric_weights`` override the weights.

Which rule scores which rule-evaluated rubric is in :data:`RULE_FOR_RUBRIC` (see
:mod:`trainer_core.rewards.rules`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

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
    "response_quality": ("Is the reply to the user accurate, complete and clear?", "model"),
    "evidence_quality": ("Are conclusions backed by evidence the agent actually found?", "model"),
    "advice_quality": ("Is the advice sound, specific and grounded in the sources?", "model"),
    "argument_quality": ("Are the arguments well reasoned and supported by sources?", "model"),
}

#: the rule (in rules.py) behind each rule-evaluated rubric
RULE_FOR_RUBRIC: dict[str, str] = {
    "info_utilization": "info_use",
    "non_redundancy": "non_redundancy",  # min(redundancy, regression)
}

_WEIGHTS: dict[str, dict[str, float]] = {
    "default": {
        "goal_progress": 0.30,
        "tool_selection": 0.20,
        "param_correctness": 0.20,
        "info_utilization": 0.15,
        "non_redundancy": 0.15,
    },
    "conversation": {
        "goal_progress": 0.25,
        "tool_selection": 0.15,
        "param_correctness": 0.15,
        "info_utilization": 0.15,
        "non_redundancy": 0.10,
        "response_quality": 0.20,
    },
    "engineering": {
        "goal_progress": 0.30,
        "tool_selection": 0.15,
        "param_correctness": 0.15,
        "info_utilization": 0.20,
        "non_redundancy": 0.10,
        "evidence_quality": 0.10,
    },
    "advisory": {
        "goal_progress": 0.25,
        "tool_selection": 0.10,
        "param_correctness": 0.10,
        "info_utilization": 0.20,
        "non_redundancy": 0.10,
        "advice_quality": 0.25,
    },
    "discussion": {
        "goal_progress": 0.25,
        "tool_selection": 0.10,
        "param_correctness": 0.10,
        "info_utilization": 0.20,
        "non_redundancy": 0.10,
        "argument_quality": 0.25,
    },
}
_WEIGHTS["coding"] = dict(_WEIGHTS["default"])


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
