"""Reading the judge's answer. Parsing is strict; nothing is made up.

A score counts when it is a JSON number (not a bool, not a string) within 0..1; a value outside
0..1 is *not clamped*: that rubric is unscored and ``error`` says why. ``null`` means the judge
found the rubric not applicable: unscored, no error. Repairs: surrounding prose and
```` ```json ```` fences are dropped (the first balanced JSON object that parses is taken); an
answer cut off mid-way (``max_tokens``) is closed after its last complete member, so the rubrics
that got a whole number are scored and the rest unscored (a number at the very end of a cut
answer is not trusted: ``0.7`` may have been ``0.75``). An answer with no readable object leaves
every rubric unscored with ``error`` saying why; there is no default score, ever
(knowlyr-reward's 0.5 is what we do not do).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class ParsedAnswer:
    """A JSON object found in a model's answer; ``repaired``: it was cut off at the end of the
    answer and closed after its last complete member."""

    value: dict[str, Any]
    repaired: bool = False


def _scan_object(text: str, start: int) -> tuple[int | None, list[str], bool]:
    """From the ``{`` at ``start``: the index after its matching ``}`` (None when the text ends
    first), the brackets still open at the end and whether the end is inside a string."""
    stack: list[str] = []
    in_string = escaped = False
    for i in range(start, len(text)):
        char = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]":
            if not stack or stack[-1] != char:
                return None, [], False  # mismatched: not JSON from here
            stack.pop()
            if not stack:
                return i + 1, [], False
    return None, stack, in_string


def _close(prefix: str) -> str | None:
    """``prefix`` (a cut JSON object) closed: an open string ended, open brackets closed, a
    dangling ``,`` or ``:`` dropped. None when it ends where no value can be completed."""
    end, stack, in_string = _scan_object(prefix, 0)
    if end is not None:
        return prefix[:end]
    text = prefix + ('"' if in_string else "")
    if not in_string:
        text = text.rstrip()
        while text and text[-1] in ",:":
            text = text[:-1].rstrip()
        _, stack, _ = _scan_object(text, 0)
    return text + "".join(reversed(stack))


def _repair_truncated(text: str) -> dict[str, Any] | None:
    """The longest prefix of a cut-off object that closes into valid JSON, cut only where no
    member is half-kept: before a ``,``, after a bracket or a closing quote, or at the very end
    unless the text ends in the middle of a number or a literal."""
    cuts: list[int] = []
    tail = text.rstrip()
    if tail and not (tail[-1].isalnum() or tail[-1] in ".-+"):
        cuts.append(len(text))
    in_string = escaped = False
    for i, char in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
                cuts.append(i + 1)
            continue
        if char == '"':
            in_string = True
        elif char == ",":
            cuts.append(i)
        elif char in "{[}]":
            cuts.append(i + 1)
    if in_string:
        cuts.append(len(text))  # cut inside a string: keep what it has (a rationale's start)
    for cut in sorted(set(cuts), reverse=True):
        closed = _close(text[:cut])
        if not closed:
            continue
        try:
            value = json.loads(closed)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def extract_json_object(text: str, *, required_key: str | None = None) -> ParsedAnswer | None:
    """The first JSON object in ``text`` that parses (surrounding prose and code fences are
    ignored), preferring one holding ``required_key``; else an object cut off at the end of the
    text, closed after its last complete member (``repaired=True``); else None."""
    if not isinstance(text, str):
        return None
    starts = [i for i, char in enumerate(text) if char == "{"]
    fallback: dict[str, Any] | None = None
    truncated_from: int | None = None
    for start in starts:
        end, _, _ = _scan_object(text, start)
        if end is None:
            if truncated_from is None:
                truncated_from = start
            continue
        try:
            value = json.loads(text[start:end])
        except ValueError:
            continue
        if not isinstance(value, dict):
            continue
        if required_key is None or required_key in value:
            return ParsedAnswer(value)
        if fallback is None:
            fallback = value
    if truncated_from is not None:
        for start in [s for s in starts if s >= truncated_from]:
            if _scan_object(text, start)[0] is not None:
                continue
            repaired = _repair_truncated(text[start:])
            if repaired is not None and (required_key is None or required_key in repaired):
                return ParsedAnswer(repaired, repaired=True)
    return ParsedAnswer(fallback) if fallback is not None else None


def score_value(value: Any) -> tuple[float | None, str | None]:
    """A score as the judge gave it → (0..1 or None, the problem or None)."""
    if value is None:
        return None, None  # the judge says the rubric does not apply here
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None, f"{clip_inline(json.dumps(value, default=str))} is not a number"
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        return None, f"{value!r} is outside 0..1"
    return float(value), None


def parse_scores(
    text: str, rubric_ids: Sequence[str], *, cut_off: bool = False
) -> tuple[dict[str, float | None], str, str | None, bool]:
    """The judge's answer → (scores per rubric id, rationale, error, parseable).

    ``parseable``: a ``{"scores": {...}}`` object was found (possibly repaired); only such
    answers are cached. ``cut_off``: the server said the answer hit ``max_tokens``.
    """
    empty: dict[str, float | None] = {rid: None for rid in rubric_ids}
    found = extract_json_object(text or "", required_key="scores")
    if found is None:
        if not (text or "").strip():
            why = "the judge's answer is empty"
        elif "{" not in text:
            why = "the judge's answer holds no JSON object"
        else:
            why = "the judge's answer is not valid JSON"
        if cut_off:
            why += " (it was cut off at max_tokens)"
        return empty, "", f"{why}: {clip_inline(text or '')!r}; every rubric is unscored", False
    obj = found.value
    raw_scores = obj.get("scores")
    if not isinstance(raw_scores, dict):
        what = "no 'scores' object" if raw_scores is None else "'scores' that is not an object"
        return (
            empty,
            rationale_text(obj),
            f"the judge's answer has {what}; every rubric is unscored",
            False,
        )
    scores: dict[str, float | None] = {}
    problems: list[str] = []
    missing: list[str] = []
    for rid in rubric_ids:
        if rid not in raw_scores:
            scores[rid] = None
            missing.append(rid)
            continue
        scores[rid], problem = score_value(raw_scores[rid])
        if problem:
            problems.append(f"{rid}: {problem} (unscored)")
    if missing:
        if found.repaired:
            problems.append(f"the answer was cut off; no score for {', '.join(missing)} (unscored)")
        else:
            problems.append(f"no score for {', '.join(missing)} (unscored)")
    rationale = rationale_text(obj)
    if found.repaired and "rationale" in obj and not missing:
        rationale += " […cut off]"
    return scores, rationale, "; ".join(problems) or None, True


def rationale_text(obj: Mapping[str, Any]) -> str:
    """The ``rationale`` of an answer object, as text."""
    value = obj.get("rationale", "")
    if isinstance(value, str):
        return value.strip()
    return json.dumps(value, ensure_ascii=False, default=str) if value is not None else ""


def clip_inline(text: str, limit: int = 120) -> str:
    """``text`` on one line (whitespace runs as one space), cut to ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
