"""Tool arithmetic (``steplab/arithmetic``): compute an expression with the calculator, then
submit the number. The environment and its calculator live here; its tasks, generated from a
seed with disjoint train and held-out splits, come from ``trainer_core.tasks.suites.arithmetic``.
"""

from __future__ import annotations

import ast
import operator
from typing import Any

from trainer_core.envs.core import TimeStep
from trainer_core.envs.toolenv import ProfileEnv
from trainer_core.errors import ConfigError
from trainer_core.tasks.model import Task
from trainer_core.tasks.suites.arithmetic import SPLITS, arithmetic_task, format_number

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}


class CalculatorError(ValueError):
    pass


def evaluate(expression: str) -> int | float:
    """Evaluate an arithmetic expression safely: numbers, + - * / // % **, parentheses."""
    if len(expression) > 200:
        raise CalculatorError("expression too long (200 characters at most)")
    try:
        tree = ast.parse(expression.replace("×", "*").replace("÷", "/"), mode="eval")
    except SyntaxError:
        raise CalculatorError(
            f"cannot parse {expression!r}; use numbers, + - * / // % ** and parentheses"
        ) from None

    def ev(node: ast.AST) -> int | float:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool)
        ):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > 1e6):
                raise CalculatorError("exponent too large")
            try:
                return _BINARY[type(node.op)](left, right)
            except ZeroDivisionError:
                raise CalculatorError("division by zero") from None
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](ev(node.operand))
        raise CalculatorError(
            f"unsupported expression element {type(node).__name__}; use numbers and + - * / // % **"
        )

    value = ev(tree)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return value


class ArithmeticEnv(ProfileEnv):
    profile_name = "arithmetic"

    def __init__(self, split: str = "train"):
        super().__init__()
        if split not in SPLITS:
            raise ConfigError(f"unknown split {split!r}; use {', '.join(SPLITS)}")
        self.split = split

    def _reset(self, *, task: Task | None, seed: int | None) -> TimeStep:
        if task is None:
            task = arithmetic_task(SPLITS[self.split][0] + (seed or 0), self.split)
            self.task = task
        return TimeStep(observation=task.prompt, info={"task_id": task.id})

    def tool_calculator(self, expression: str) -> TimeStep:
        try:
            value = evaluate(expression)
        except CalculatorError as exc:
            return TimeStep(observation=f"Error: {exc}", info={"error": "calculator_error"})
        return TimeStep(observation=f"{expression} = {format_number(value)}")

    def tool_submit(self, answer: Any = None) -> TimeStep:
        return self.finish_with_answer(None if answer is None else str(answer))
