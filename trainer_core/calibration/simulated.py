"""A simulated annotator: a scripted labeller of trajectory steps, and the AUROC of step scores
against its truth.

It stands in for a person in experiments that run the real calibration path (annotation queue →
labels → fit → apply) without people. Like a careful human with the answer key, **it may read the
task's reference solution**; the rule layer it calibrates never does (the rules score a step from
the trajectory alone), so fitting on these labels is fitting to an outside judgement.

Truth: a step is good when it and every step before it match the reference call at the same
position (same tool; the same parameters after :func:`normalise`), else bad — the first deviation
and everything after it are bad, as are steps beyond the end of the reference.

Given labels: each truth label flipped with probability ``error_rate``, from a
``random.Random`` seeded by ``(seed, trajectory key, step index)``, so the same inputs always give
the same labels, whatever order trajectories are labelled in.

This module sits in ``trainer_core.calibration``, below ``recording`` and ``tasks`` in the
package layers, so it takes trajectories and reference calls by shape (objects with ``steps`` /
``tool`` / ``params``, or their dicts: a ``recording.schema.Trajectory`` and ``tasks.model.ToolCall``
both fit) rather than importing their classes.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from trainer_core.errors import InputError

__all__ = ["SimulatedLabels", "auroc", "normalise", "same_call", "simulate_labels", "truth_labels"]

_SPACES = re.compile(r"\s+")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def _is_id_key(key: str) -> bool:
    """``id``, ``*_id``, ``*-id``, ``*Id`` / ``*ID`` (camel case)."""
    k = key.strip()
    return (
        k.lower() == "id" or k.lower().endswith(("_id", "-id", ".id")) or k.endswith(("Id", "ID"))
    )


def _as_number(value: Any) -> Fraction | None:
    """A number (or a string that is exactly one, e.g. " 42 ", "4.50", "1e3") as a Fraction."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(value) if math.isfinite(value) else None
    if isinstance(value, str) and _NUMBER.fullmatch(value.strip().replace(",", "")):
        try:
            return Fraction(value.strip().replace(",", ""))
        except (ValueError, ZeroDivisionError):
            return None
    return None


def normalise(value: Any, *, key: str = "") -> Any:
    """A parameter value in a comparable form: numbers (and numeric strings) as exact fractions,
    strings stripped with runs of whitespace made one space, values of id parameters (``id``,
    ``*_id``, ``userId``) compared case-insensitively; dicts and lists recursively."""
    number = _as_number(value)
    if number is not None:
        return ("number", number)
    if isinstance(value, str):
        text = _SPACES.sub(" ", value.strip())
        return ("text", text.casefold() if _is_id_key(key) else text)
    if isinstance(value, Mapping):
        return ("dict", tuple(sorted((str(k), normalise(v, key=str(k))) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return ("list", tuple(normalise(v, key=key) for v in value))
    return ("other", value)


def _tool_and_params(call: Any, what: str) -> tuple[str, Mapping[str, Any]]:
    if isinstance(call, Mapping):
        tool, params = call.get("tool"), call.get("params") or {}
    else:
        tool, params = getattr(call, "tool", None), getattr(call, "params", None) or {}
    if not isinstance(tool, str) or not isinstance(params, Mapping):
        raise InputError(f"{what} needs a tool name and a params mapping, got {call!r:.200}")
    return tool, params


def same_call(step: Any, reference: Any) -> bool:
    """Does ``step`` (a trajectory step) make the reference call? Same tool (case and surrounding
    space ignored), same parameters after :func:`normalise`."""
    tool, params = _tool_and_params(step, "a step")
    ref_tool, ref_params = _tool_and_params(reference, "a reference call")
    if tool.strip().casefold() != ref_tool.strip().casefold():
        return False
    return normalise(dict(params)) == normalise(dict(ref_params))


def _steps(trajectory: Any) -> list[Any]:
    steps = trajectory.get("steps") if isinstance(trajectory, Mapping) else trajectory.steps
    if steps is None:
        raise InputError("a trajectory needs its steps")
    return sorted(
        steps,
        key=lambda s: s.get("index", 0) if isinstance(s, Mapping) else getattr(s, "index", 0),
    )


def truth_labels(trajectory: Any, reference: Sequence[Any]) -> list[bool]:
    """For each step in order: True (good) while the trajectory is still on the reference path
    (this step and all before it match the reference call at their position), else False."""
    labels: list[bool] = []
    on_path = True
    for position, step in enumerate(_steps(trajectory)):
        on_path = on_path and position < len(reference) and same_call(step, reference[position])
        labels.append(on_path)
    return labels


@dataclass(frozen=True)
class SimulatedLabels:
    """A trajectory's labels: ``truth`` (the reference says), ``given`` (what the annotator
    reports, after its errors) and the positions it got wrong (``flipped``)."""

    truth: list[bool]
    given: list[bool]
    flipped: list[int] = field(default_factory=list)


def _check_rate(error_rate: float) -> float:
    if isinstance(error_rate, bool) or not isinstance(error_rate, int | float):
        raise InputError(f"error_rate must be a number from 0 to 1, not {error_rate!r}")
    if not 0.0 <= float(error_rate) <= 1.0:
        raise InputError(f"error_rate must be from 0 to 1, not {error_rate}")
    return float(error_rate)


def simulate_labels(
    trajectory: Any,
    reference: Sequence[Any],
    *,
    error_rate: float = 0.0,
    seed: int = 0,
    key: str | int = "",
) -> SimulatedLabels:
    """The truth labels of ``trajectory``'s steps against ``reference`` and the labels the
    simulated annotator gives: each truth label flipped with probability ``error_rate``, drawn
    from ``random.Random(f"{seed}:{key}:{index}")`` (``key``: the trajectory's id, so two
    trajectories get independent errors and relabelling one gives the same labels)."""
    rate = _check_rate(error_rate)
    truth = truth_labels(trajectory, reference)
    given: list[bool] = []
    flipped: list[int] = []
    for index, label in enumerate(truth):
        draw = random.Random(f"steplab-simulated-annotator:{seed}:{key}:{index}").random()
        flip = draw < rate
        given.append(label != flip)
        if flip:
            flipped.append(index)
    return SimulatedLabels(truth=truth, given=given, flipped=flipped)


def auroc(scores: Sequence[float | None], labels: Sequence[bool]) -> float | None:
    """The area under the ROC curve of ``scores`` for the positive (True) ``labels``: the
    probability that a random good step scores above a random bad one, ties counting one half
    (the Mann–Whitney U statistic over n_good × n_bad). Pairs with a None score are left out;
    None when either class is empty."""
    if len(scores) != len(labels):
        raise InputError(f"{len(scores)} scores but {len(labels)} labels")
    pairs = [
        (float(s), bool(lb))
        for s, lb in zip(scores, labels, strict=True)
        if s is not None and not (isinstance(s, float) and math.isnan(s))
    ]
    positives = sum(1 for _, lb in pairs if lb)
    negatives = len(pairs) - positives
    if positives == 0 or negatives == 0:
        return None
    pairs.sort(key=lambda p: p[0])
    rank_sum = 0.0  # of the positives, with tied scores sharing their mean rank (1-based)
    i = 0
    while i < len(pairs):
        j = i
        while j < len(pairs) and pairs[j][0] == pairs[i][0]:
            j += 1
        mean_rank = (i + 1 + j) / 2
        rank_sum += mean_rank * sum(1 for _, lb in pairs[i:j] if lb)
        i = j
    u = rank_sum - positives * (positives + 1) / 2
    return u / (positives * negatives)
