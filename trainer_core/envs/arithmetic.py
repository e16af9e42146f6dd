"""Tool arithmetic (``steplab/arithmetic``): compute an expression with the calculator, then
submit the number. Tasks are generated from a seed, in any number, with disjoint train and
held-out splits (by seed range and by operand range) — simple enough for a tiny model to
learn, which later issues use to show that training makes a policy better."""

from __future__ import annotations

import ast
import operator
import random
from typing import Any

from trainer_core.envs.core import TimeStep
from trainer_core.envs.toolenv import ProfileEnv
from trainer_core.errors import ConfigError
from trainer_core.tasks.model import Task, ToolCall

# split -> (first seed, last seed exclusive, smallest operand, largest operand)
SPLITS: dict[str, tuple[int, int, int, int]] = {
    "train": (0, 1_000_000, 2, 49),
    "heldout": (1_000_000, 2_000_000, 50, 99),
    # operands 2-49 or 100-499 (never 50-99): every digit pair of a held-out number occurs in
    # training (52 inside 152), its value never does — held out by seed and by number range
    "train_wide": (2_000_000, 3_000_000, 2, 499),
}
# splits whose operands come from several ranges (each operand: a range at random, then a number)
OPERAND_RANGES: dict[str, tuple[tuple[int, int], ...]] = {
    "train_wide": ((2, 49), (100, 499)),
}

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


def _format(value: int | float) -> str:
    return str(value) if isinstance(value, int) else f"{value:.10g}"


def arithmetic_task(seed: int, split: str = "train") -> Task:
    """The task of ``seed`` in ``split``. Seeds of a split are its own: train 0..999999,
    heldout 1000000..1999999; operands 2..49 (train) and 50..99 (heldout)."""
    if split not in SPLITS:
        raise ConfigError(f"unknown split {split!r}; use {', '.join(SPLITS)}")
    first, last, lo, hi = SPLITS[split]
    if not first <= seed < last:
        raise ConfigError(f"seed {seed} is not in the {split} split (seeds {first}..{last - 1})")
    rng = random.Random(f"steplab-arithmetic:{seed}")
    n_ops = rng.choice((1, 2))
    ranges = OPERAND_RANGES.get(split)
    if ranges is None:
        numbers = [rng.randint(lo, hi) for _ in range(n_ops + 1)]
    else:
        numbers = [rng.randint(*rng.choice(ranges)) for _ in range(n_ops + 1)]
    ops = [rng.choice(("+", "-", "*")) for _ in range(n_ops)]
    expression = str(numbers[0])
    for op, number in zip(ops, numbers[1:], strict=True):
        expression += f" {op} {number}"
    value = evaluate(expression)
    return Task(
        id=f"arith-{split}-{seed:07d}",
        prompt=f"What is {expression}? Use the calculator tool, then submit the answer.",
        domain="arithmetic",
        environment="steplab/arithmetic",
        expected_answer=value,
        checker="number",
        answer_schema="raw",
        reference_solution=[
            ToolCall(
                tool="calculator",
                params={"expression": expression},
                thought="Compute it with the calculator.",
            ),
            ToolCall(
                tool="submit", params={"answer": _format(value)}, thought="Submit the result."
            ),
        ],
        reference_steps=2,
        metadata={
            "split": split,
            "seed": seed,
            "expression": expression,
            "task_set": f"arithmetic-{split}",
        },
    )


def arithmetic_tasks(split: str = "train", n: int = 100, start: int | None = None) -> list[Task]:
    first = SPLITS[split][0] if start is None else start
    return [arithmetic_task(seed, split) for seed in range(first, first + n)]


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
        return TimeStep(observation=f"{expression} = {_format(value)}")

    def tool_submit(self, answer: Any = None) -> TimeStep:
        return self.finish_with_answer(None if answer is None else str(answer))
