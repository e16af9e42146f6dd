"""Outcome checkers: did an episode reach the task's goal?

At episode end (and when scoring) the agent's final text is reduced to an *answer* by the task's
``answer_schema`` and handed, with the task, to the task's *checker*, which returns an
:class:`Outcome`. :func:`check_outcome` does both steps; :func:`outcome_reward` turns an outcome
into the number the reward layer uses.

Answer schemas (:func:`extract_answer`):

``answer_tag``
    The content of the LAST ``<answer>...</answer>`` pair (multi-line; the tag tolerates case and
    inner whitespace, e.g. ``< ANSWER >``). An unclosed tag does not count.
``boxed``
    The content of the LAST ``\\boxed{...}`` or ``\\fbox{...}``, braces matched by a scan, so
    ``\\boxed{\\frac{1}{2}}`` gives ``\\frac{1}{2}``. ``\\boxed 5`` (no braces) gives ``5``.
    An unbalanced (truncated) box does not count.
``last_line``
    The last non-empty line, stripped.
``raw``
    The whole text, stripped.
``auto``
    ``answer_tag``, else ``boxed``, else ``last_line``.

Every schema gives ``None`` when it finds nothing.

Built-in checkers (``fn(*, answer, task, run_result=None) -> Outcome``):

``exact``
    ``answer.strip() == str(expected_answer).strip()``. ``task.metadata["checker_options"]`` may
    set ``ignore_case`` and ``collapse_whitespace`` (runs of whitespace count as one space).
``number``
    Both sides parsed by :func:`parse_number` and compared with relative tolerance 1e-6 and
    absolute tolerance 1e-9 (``rel_tol`` / ``abs_tol`` in ``checker_options`` override them).
    Understood: ``42``, ``-3``, ``+3``, ``3.25``, ``.5``, ``1,234.5``, ``1 234`` (also thin and
    non-breaking spaces, LaTeX ``1{,}234`` and ``1\\,234``), ``1.5e-3``, ``1.5 \\times 10^{3}``,
    ``3/4``, ``\\frac{3}{4}`` / ``\\dfrac`` / ``\\tfrac`` / ``\\frac34``, with the answer possibly
    wrapped in ``$...$``, ``\\(...\\)``, ``\\[...\\]`` or ``\\boxed{...}``, and a leading
    currency sign (``$18``, ``-$3``, ``€5``) ignored.
    NOT understood, on purpose: percentages (``50%`` is neither 50 nor 0.5: say which you mean
    in the prompt), units and words (``42 apples``), decimal commas (``1,5``), mixed numbers
    (``1 3/4``), ``inf`` / ``nan``. An answer that does not parse is unsuccessful with a detail
    saying so.
``contains``
    ``expected_answer`` appears in the answer (with ``ignore_case`` in ``checker_options``). A list
    of expected strings must all appear; partial credit is the fraction that do. Its default
    answer schema is ``raw`` (the whole final text), not ``auto``.
``test_command``
    Decided by ``run_result = {"exit_code": int, "stdout": str, "stderr": str}`` from running the
    task's ``test_command``; the answer is not used. The pytest summary line (``3 passed,
    1 failed in 0.12s``) or unittest's ``Ran N tests`` / ``FAILED (failures=1)`` give the counts.
    Success iff the exit code is 0 and no test failed or errored. ``partial_credit`` is
    passed / (passed + failed + errors) when the counts are known (errors count as failures),
    except that a non-zero exit code with no failing test counted gives no partial credit (the
    command failed for another reason). ``score`` is the partial credit, else 1.0 / 0.0.
``any_of``
    ``expected_answer`` is a list of acceptable answers; one must match, by ``number`` when both
    it and the answer are numeric, else by ``exact`` (with the same options).
``final_state``
    tau-bench's check: ``run_result = {"database": ..., "said": [...]}`` from the environment;
    success iff the database equals ``metadata["expected_database"]`` (or ``database`` with
    ``expected_changes`` applied) and every
    ``metadata["required_outputs"]`` string was said (:mod:`trainer_core.tasks.final_state`).
``llm_judge`` (registered by the rewards layer, not here)
    An LLM decides whether the answer means the same as ``expected_answer`` (a reference answer),
    with the judge of ``task.metadata["judge"]`` (a judge config dict) or of the environment
    variables ``STEPLAB_JUDGE_KIND`` / ``STEPLAB_JUDGE_MODEL``: see
    :mod:`trainer_core.rewards.judge.checker`, which registers it when :mod:`trainer_core.rewards`
    is imported (this layer cannot import the judge). No judge configured raises ConfigError; an
    unreadable verdict raises PolicyError — never a guess.

The default checker of a task without ``checker``: ``any_of`` when ``expected_answer`` is a list,
``number`` when it is numeric (a number, or a string :func:`parse_number` understands),
``test_command`` when the task has a ``test_command``, else ``exact``.

Register your own with :func:`register_checker` (before loading task files that name it).
"""

from __future__ import annotations

import difflib
import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from decimal import Decimal
from fractions import Fraction
from importlib.metadata import entry_points
from typing import Any, Protocol

from trainer_core.errors import ConfigError
from trainer_core.tasks.final_state import final_state
from trainer_core.tasks.harbor import harbor_outcome
from trainer_core.tasks.model import Task

__all__ = [
    "ANSWER_SCHEMAS",
    "Checker",
    "Outcome",
    "TestSummary",
    "check_outcome",
    "default_answer_schema",
    "default_checker_name",
    "extract_answer",
    "get_checker",
    "is_numeric",
    "list_checkers",
    "numbers_match",
    "outcome_reward",
    "parse_number",
    "parse_test_summary",
    "register_checker",
    "unregister_checker",
]


# --------------------------------------------------------------------------------------------
# Outcome
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Outcome:
    """What a checker decided about one episode.

    success: the task's goal was reached.
    score: a 0..1 grade (None when the checker gives none).
    tests_passed / tests_failed: test counts (test_command; failed includes errors).
    partial_credit: a 0..1 fraction of the goal reached (None when not meaningful).
    extracted_answer: the answer the checker looked at (set by :func:`check_outcome`).
    detail: one human-readable line explaining the decision.
    metadata: anything else the checker wants to record.
    """

    success: bool
    score: float | None = None
    tests_passed: int | None = None
    tests_failed: int | None = None
    partial_credit: float | None = None
    extracted_answer: str | None = None
    detail: str = ""
    metadata: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("score", "partial_credit"):
            value = getattr(self, name)
            if value is not None and not (0.0 <= value <= 1.0):
                raise ValueError(f"Outcome.{name} must be within 0..1, not {value!r}")


def outcome_reward(outcome: Outcome) -> float:
    """The reward of an outcome: partial credit, else score, else 1.0 / 0.0 by success."""
    if outcome.partial_credit is not None:
        return float(outcome.partial_credit)
    if outcome.score is not None:
        return float(outcome.score)
    return 1.0 if outcome.success else 0.0


# --------------------------------------------------------------------------------------------
# Answer extraction
# --------------------------------------------------------------------------------------------

ANSWER_SCHEMAS: tuple[str, ...] = ("answer_tag", "boxed", "last_line", "raw", "auto")

_ANSWER_TAG = re.compile(r"<\s*answer\s*>(.*?)<\s*/\s*answer\s*>", re.IGNORECASE | re.DOTALL)
_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")


def _extract_answer_tag(text: str) -> str | None:
    matches = _ANSWER_TAG.findall(text)
    return matches[-1].strip() if matches else None


def _match_braces(text: str, open_index: int) -> int | None:
    """Index of the ``}`` closing the ``{`` at ``open_index`` (``\\{`` / ``\\}`` skipped)."""
    depth = 0
    i = open_index
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2  # an escaped character, e.g. \{ or \}, never opens or closes a group
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def _box_content(text: str, start: int) -> str | None:
    """The argument of a ``\\boxed`` whose name ends at ``start``, or None if incomplete."""
    i = start
    while i < len(text) and text[i] in " \t":
        i += 1
    if i < len(text) and text[i] == "{":
        close = _match_braces(text, i)
        return None if close is None else text[i + 1 : close].strip()
    if i > start:  # "\boxed 5": one token up to whitespace or a math delimiter
        token = re.match(r"[^\s$]+", text[i:])
        return token.group(0) if token else None
    return None


def _extract_boxed(text: str) -> str | None:
    found = None
    for match in _BOX_COMMAND.finditer(text):
        content = _box_content(text, match.end())
        if content is not None:
            found = content
    return found


def _extract_last_line(text: str) -> str | None:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()
    return None


def _extract_raw(text: str) -> str | None:
    stripped = text.strip()
    return stripped or None


def extract_answer(text: str | None, schema: str = "auto") -> str | None:
    """The answer in ``text`` by ``schema`` (see the module docstring), or None if none is found.

    An unknown schema raises :class:`~trainer_core.errors.ConfigError`.
    """
    schema = (schema or "auto").strip()
    if schema not in ANSWER_SCHEMAS:
        raise ConfigError(f"unknown answer schema {schema!r}{_suggest(schema, ANSWER_SCHEMAS)}")
    if text is None:
        return None
    if schema == "answer_tag":
        return _extract_answer_tag(text)
    if schema == "boxed":
        return _extract_boxed(text)
    if schema == "last_line":
        return _extract_last_line(text)
    if schema == "raw":
        return _extract_raw(text)
    for extract in (_extract_answer_tag, _extract_boxed, _extract_last_line):
        found = extract(text)
        if found is not None:
            return found
    return None


# --------------------------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------------------------

_PLAIN = r"(?:\d+(?:\.\d*)?|\.\d+)"
_PLAIN_NUMBER = re.compile(rf"[+-]?{_PLAIN}(?:[eE][+-]?\d+)?")
_GROUPED_NUMBER = re.compile(r"[+-]?\d{1,3}(?:(?P<sep>[, ])\d{3})(?:(?P=sep)\d{3})*(?:\.\d+)?")
_TIMES_TEN = re.compile(
    rf"(?P<mantissa>[+-]?{_PLAIN})\s*(?:\\times|\\cdot|×|·|\*|x)\s*10\s*\^\s*"
    r"(?:\{\s*(?P<exp1>[+-]?\d+)\s*\}|(?P<exp2>[+-]?\d+))"
)
_LATEX_FRAC = re.compile(
    r"(?P<sign>[+-]?)\s*\\[dt]?frac\s*(?:\{(?P<num>[^{}]+)\}\s*\{(?P<den>[^{}]+)\}"
    r"|(?P<num1>\d)\s*(?P<den1>\d))"
)
_SLASH_FRAC = re.compile(rf"(?P<num>[+-]?{_PLAIN})\s*/\s*(?P<den>[+-]?{_PLAIN})")
_WRAPPERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
_MAX_EXPONENT = 1000  # Fraction("1e999999999") would build a gigantic integer
_DEFAULT_REL_TOL = Fraction(1, 10**6)
_DEFAULT_ABS_TOL = Fraction(1, 10**9)


def _unwrap(text: str) -> str:
    """Strip math delimiters and a whole-answer ``\\boxed{...}`` (repeatedly)."""
    while True:
        before = text
        text = text.strip()
        for left, right in _WRAPPERS:
            if (
                len(text) >= len(left) + len(right)
                and text.startswith(left)
                and text.endswith(right)
            ):
                text = text[len(left) : len(text) - len(right)].strip()
                break
        box = _BOX_COMMAND.match(text)
        if box:
            brace = text.find("{", box.end())
            if brace != -1 and not text[box.end() : brace].strip():
                close = _match_braces(text, brace)
                if close == len(text) - 1:
                    text = text[brace + 1 : close].strip()
        if text == before:
            return text


def _parse_plain(text: str) -> Fraction | None:
    text = text.strip()
    if _PLAIN_NUMBER.fullmatch(text):
        exponent = re.search(r"[eE]([+-]?\d+)$", text)
        if exponent and abs(int(exponent.group(1))) > _MAX_EXPONENT:
            return None
        try:
            return Fraction(text)
        except (ValueError, ZeroDivisionError):  # e.g. more digits than int() converts
            return None
    if _GROUPED_NUMBER.fullmatch(text):
        return _parse_plain(text.replace(",", "").replace(" ", ""))
    return None


def parse_number(text: str | int | float | Decimal | Fraction | None) -> Fraction | None:
    """``text`` as an exact number, or None when it is not one of the forms listed above.

    Numbers (not bools) pass through; NaN and infinities are not numbers here.
    """
    if text is None or isinstance(text, bool):
        return None
    if isinstance(text, Fraction):
        return text
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float | Decimal):
        return Fraction(text) if math.isfinite(text) else None
    if not isinstance(text, str):
        return None
    s = _unwrap(text.replace("\u2212", "-"))  # U+2212 MINUS SIGN
    s = s.replace("{,}", ",").replace("\\,", " ").replace("\\!", "")
    s = re.sub(r"[\u00a0\u2009\u202f]", " ", s).strip()
    if s.startswith("+"):
        s = s[1:].lstrip()
    elif s.startswith("-"):
        s = "-" + s[1:].lstrip()

    if currency := re.match(r"(-?)\s*[$€£]\s*(?=[\d.])", s):  # "$18", "-$3"
        s = currency.group(1) + s[currency.end() :]
    value = _parse_plain(s)
    if value is not None:
        return value
    if m := _TIMES_TEN.fullmatch(s):
        exponent = int(m.group("exp1") or m.group("exp2"))
        mantissa = _parse_plain(m.group("mantissa"))
        if mantissa is None or abs(exponent) > _MAX_EXPONENT:
            return None
        return mantissa * Fraction(10) ** exponent
    if m := _LATEX_FRAC.fullmatch(s):
        num = _parse_plain(m.group("num") or m.group("num1"))
        den = _parse_plain(m.group("den") or m.group("den1"))
        if num is None or den is None or den == 0:
            return None
        return -num / den if m.group("sign") == "-" else num / den
    if m := _SLASH_FRAC.fullmatch(s):
        num, den = _parse_plain(m.group("num")), _parse_plain(m.group("den"))
        if num is None or den is None or den == 0:
            return None
        return num / den
    return None


def numbers_match(
    a: Fraction,
    b: Fraction,
    *,
    rel_tol: Fraction | float = _DEFAULT_REL_TOL,
    abs_tol: Fraction | float = _DEFAULT_ABS_TOL,
) -> bool:
    """``|a - b| <= max(rel_tol * max(|a|, |b|), abs_tol)``, computed exactly."""
    if a == b:
        return True
    rel, absolute = Fraction(rel_tol), Fraction(abs_tol)
    return abs(a - b) <= max(rel * max(abs(a), abs(b)), absolute)


def is_numeric(value: Any) -> bool:
    """A number (not a bool) or a string :func:`parse_number` understands."""
    return parse_number(value) is not None


def _format_number(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return f"{value} (≈{float(value):.10g})"


# --------------------------------------------------------------------------------------------
# Checker options and the built-in checkers
# --------------------------------------------------------------------------------------------


def _options(task: Task) -> dict[str, Any]:
    options = task.metadata.get("checker_options") if task.metadata else None
    return options if isinstance(options, dict) else {}


def _normalise_text(text: str, *, ignore_case: bool, collapse_whitespace: bool) -> str:
    text = text.strip()
    if collapse_whitespace:
        text = re.sub(r"\s+", " ", text)
    if ignore_case:
        text = text.casefold()
    return text


def _missing_expected(name: str) -> Outcome:
    return Outcome(
        success=False, score=0.0, detail=f"the task has no expected_answer for checker {name!r}"
    )


def _exact_equal(answer: str, expected: Any, options: dict[str, Any]) -> bool:
    kwargs = {
        "ignore_case": bool(options.get("ignore_case", False)),
        "collapse_whitespace": bool(options.get("collapse_whitespace", False)),
    }
    return _normalise_text(answer, **kwargs) == _normalise_text(str(expected), **kwargs)


def check_exact(*, answer: str | None, task: Task, run_result: dict | None = None) -> Outcome:
    """The answer equals ``expected_answer`` after stripping (options: see module docstring)."""
    if answer is None or not str(answer).strip():
        return Outcome(success=False, score=0.0, detail="empty answer")
    if task.expected_answer is None:
        return _missing_expected("exact")
    ok = _exact_equal(str(answer), task.expected_answer, _options(task))
    detail = "exact match" if ok else f"expected {str(task.expected_answer).strip()!r}"
    return Outcome(success=ok, score=1.0 if ok else 0.0, detail=detail)


def _tolerances(options: dict[str, Any]) -> dict[str, Fraction]:
    tolerances = {"rel_tol": _DEFAULT_REL_TOL, "abs_tol": _DEFAULT_ABS_TOL}
    for key in tolerances:
        value = parse_number(options.get(key))
        if value is not None and value >= 0:
            tolerances[key] = value
    return tolerances


def check_number(*, answer: str | None, task: Task, run_result: dict | None = None) -> Outcome:
    """The answer and ``expected_answer`` are the same number (within tolerance)."""
    if answer is None or not str(answer).strip():
        return Outcome(success=False, score=0.0, detail="empty answer")
    if task.expected_answer is None:
        return _missing_expected("number")
    expected = parse_number(task.expected_answer)
    if expected is None:
        return Outcome(
            success=False,
            score=0.0,
            detail=f"the expected_answer {task.expected_answer!r} is not a number",
        )
    got = parse_number(str(answer))
    if got is None:
        return Outcome(
            success=False,
            score=0.0,
            detail=f"could not parse the answer {_clip(str(answer))!r} as a number",
        )
    ok = numbers_match(got, expected, **_tolerances(_options(task)))
    if ok:
        detail = f"number match ({_format_number(got)})"
    else:
        detail = f"got {_format_number(got)}, expected {_format_number(expected)}"
    return Outcome(success=ok, score=1.0 if ok else 0.0, detail=detail)


def check_contains(*, answer: str | None, task: Task, run_result: dict | None = None) -> Outcome:
    """``expected_answer`` (a string, or a list of strings that must all appear) is in the answer."""
    if answer is None or not str(answer).strip():
        return Outcome(success=False, score=0.0, detail="empty answer")
    expected = task.expected_answer
    if expected is None or (isinstance(expected, list | tuple) and not expected):
        return _missing_expected("contains")
    wanted = (
        [str(item) for item in expected] if isinstance(expected, list | tuple) else [str(expected)]
    )
    ignore_case = bool(_options(task).get("ignore_case", False))
    haystack = str(answer).casefold() if ignore_case else str(answer)
    found = [w for w in wanted if (w.casefold() if ignore_case else w) in haystack]
    missing = [w for w in wanted if w not in found]
    ok = not missing
    if len(wanted) == 1:
        detail = "contains the expected text" if ok else f"{wanted[0]!r} not found"
        return Outcome(success=ok, score=1.0 if ok else 0.0, detail=detail)
    credit = len(found) / len(wanted)
    detail = f"{len(found)}/{len(wanted)} expected strings found"
    if missing:
        detail += f"; missing {', '.join(repr(m) for m in missing[:5])}"
    return Outcome(success=ok, score=credit, partial_credit=credit, detail=detail)


def check_any_of(*, answer: str | None, task: Task, run_result: dict | None = None) -> Outcome:
    """One of the answers in the ``expected_answer`` list matches (numbers by value)."""
    if answer is None or not str(answer).strip():
        return Outcome(success=False, score=0.0, detail="empty answer")
    expected = task.expected_answer
    if expected is None:
        return _missing_expected("any_of")
    choices = list(expected) if isinstance(expected, list | tuple) else [expected]
    options = _options(task)
    got = parse_number(str(answer))
    for index, choice in enumerate(choices):
        wanted = parse_number(choice)
        if wanted is not None and got is not None:
            ok = numbers_match(got, wanted, **_tolerances(options))
        else:
            ok = _exact_equal(str(answer), choice, options)
        if ok:
            return Outcome(
                success=True,
                score=1.0,
                detail=f"matches accepted answer {index + 1} of {len(choices)}",
                metadata={"matched_index": index},
            )
    return Outcome(
        success=False, score=0.0, detail=f"matches none of the {len(choices)} accepted answers"
    )


# --------------------------------------------------------------------------------------------
# Test commands
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TestSummary:
    """Counts from a test runner's summary. ``framework`` is 'pytest' or 'unittest'."""

    __test__ = False  # not a pytest test class

    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    framework: str = "pytest"


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_PYTEST_COUNT = re.compile(
    r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|warnings?|deselected|rerun)\b"
)
_PYTEST_LINE = re.compile(
    r"^(?:(?:\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|warnings?|deselected|rerun)"
    r"(?:, )?)+|no tests ran)"
    r"(?: in [\d.]+\s*(?:s|seconds)\b.*)$"
)
_UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in ")
_UNITTEST_RESULT = re.compile(r"^(OK|FAILED)\b(?:\s*\((.*)\))?")


def parse_test_summary(output: str) -> TestSummary | None:
    """Counts from the last pytest summary line (else unittest's), or None when there is none.

    pytest: ``==== 3 passed, 1 failed in 0.12s ====``, ``2 passed in 0.01s``,
    ``1 error in 0.1s``, ``no tests ran in 0.01s``. unittest: ``Ran 4 tests in 0.001s`` followed
    by ``OK`` or ``FAILED (failures=1, errors=1, skipped=1)``.
    """
    lines = [_ANSI.sub("", line).strip().strip("=").strip() for line in output.splitlines()]
    for line in reversed(lines):
        if _PYTEST_LINE.match(line):
            counts: dict[str, int] = {}
            for number, word in _PYTEST_COUNT.findall(line.split(" in ")[0]):
                word = "errors" if word.startswith("error") else word
                counts[word] = counts.get(word, 0) + int(number)
            return TestSummary(
                passed=counts.get("passed", 0) + counts.get("xpassed", 0),
                failed=counts.get("failed", 0),
                errors=counts.get("errors", 0),
                skipped=counts.get("skipped", 0) + counts.get("xfailed", 0),
                framework="pytest",
            )
    for index in range(len(lines) - 1, -1, -1):
        ran = _UNITTEST_RAN.match(lines[index])
        if not ran:
            continue
        for line in lines[index + 1 :]:
            result = _UNITTEST_RESULT.match(line)
            if not result:
                continue
            details: dict[str, int] = {}
            for key, value in re.findall(r"([a-z ]+)=(\d+)", result.group(2) or ""):
                details[key.strip()] = int(value)
            failed, errors = details.get("failures", 0), details.get("errors", 0)
            skipped = details.get("skipped", 0) + details.get("expected failures", 0)
            passed = max(int(ran.group(1)) - failed - errors - skipped, 0)
            return TestSummary(
                passed=passed, failed=failed, errors=errors, skipped=skipped, framework="unittest"
            )
        return None
    return None


def check_test_command(
    *, answer: str | None, task: Task, run_result: dict | None = None
) -> Outcome:
    """Success iff the test command exited 0 and no test failed; see the module docstring."""
    if not run_result:
        return Outcome(success=False, score=0.0, detail="the test command was not run")
    exit_code = run_result.get("exit_code", run_result.get("returncode"))
    output = "\n".join(str(run_result.get(key) or "") for key in ("stdout", "stderr", "output"))
    summary = parse_test_summary(output)
    if run_result.get("timed_out"):
        detail = "the test command timed out"
    elif not isinstance(exit_code, int) or isinstance(exit_code, bool):
        detail = f"the test command has no exit code ({exit_code!r})"
        exit_code = None
    else:
        detail = f"exit code {exit_code}"
    if summary is None:
        ok = exit_code == 0 and not run_result.get("timed_out")
        return Outcome(
            success=ok, score=1.0 if ok else 0.0, detail=f"{detail}; no test summary found"
        )
    failing = summary.failed + summary.errors
    ok = exit_code == 0 and failing == 0 and not run_result.get("timed_out")
    total = summary.passed + failing
    partial = summary.passed / total if total else None
    if not ok and failing == 0:
        partial = None  # every counted test passed, yet the command failed: no partial credit
    counts = f"{summary.passed} passed, {summary.failed} failed"
    if summary.errors:
        counts += f", {summary.errors} errors"
    if summary.skipped:
        counts += f", {summary.skipped} skipped"
    if partial is not None:
        score = partial
    else:
        score = 1.0 if ok else 0.0
    return Outcome(
        success=ok,
        score=score,
        tests_passed=summary.passed,
        tests_failed=failing,
        partial_credit=partial,
        detail=f"{counts} ({detail})",
        metadata={"framework": summary.framework, "tests_skipped": summary.skipped},
    )


def check_harbor(*, answer: str | None, task: Task, run_result: dict | None = None) -> Outcome:
    """The reward a Harbor task's verifier wrote (:mod:`trainer_core.tasks.harbor`); a run
    without one raises HarborVerifierError (an error, never a reward of 0)."""
    return Outcome(**harbor_outcome(run_result))


def check_final_state(*, answer: str | None, task: Task, run_result: dict | None = None) -> Outcome:
    """The final database and what the agent said, against the task's expected ones
    (:mod:`trainer_core.tasks.final_state`); the answer is not used."""
    return Outcome(**final_state(task, run_result))


# --------------------------------------------------------------------------------------------
# The registry
# --------------------------------------------------------------------------------------------


class Checker(Protocol):
    """The checker signature."""

    def __call__(
        self, *, answer: str | None, task: Task, run_result: dict | None = None
    ) -> Outcome: ...


@dataclass(frozen=True)
class _Entry:
    fn: Callable[..., Outcome]
    needs_answer: bool


_LOCK = threading.Lock()
_REGISTRY: dict[str, _Entry] = {}


def register_checker(
    name: str, fn: Callable[..., Outcome] | None = None, *, needs_answer: bool = True
):
    """Register ``fn`` as the checker ``name``; with no ``fn``, a decorator that does.

    ``needs_answer=False`` means the checker decides without an answer (like ``test_command``);
    otherwise :func:`check_outcome` returns an unsuccessful outcome for an empty answer without
    calling it. Registering the same function again is a no-op; another function under a taken
    name raises :class:`~trainer_core.errors.ConfigError`.
    """
    if fn is None:

        def decorator(func: Callable[..., Outcome]) -> Callable[..., Outcome]:
            register_checker(name, func, needs_answer=needs_answer)
            return func

        return decorator
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][\w.\-]*", name):
        raise ConfigError(f"a checker name is a word (letters, digits, _ . -), not {name!r}")
    if not callable(fn):
        raise ConfigError(f"checker {name!r} must be callable, not {type(fn).__name__}")
    entry = _Entry(fn=fn, needs_answer=needs_answer)
    with _LOCK:
        existing = _REGISTRY.get(name)
        if existing is not None and existing != entry:
            raise ConfigError(
                f"checker {name!r} is already registered ({_describe(existing.fn)}); "
                f"pick another name for {_describe(fn)}"
            )
        _REGISTRY[name] = entry
    return fn


def unregister_checker(name: str) -> None:
    """Forget the checker ``name`` (no error if it is not registered). Mostly for tests."""
    with _LOCK:
        _REGISTRY.pop(name, None)


#: Installed packages add checkers with an entry point in this group (``name = "module:function"``,
#: e.g. Steplab's own ``llm_judge`` in ``trainer_core.rewards``, a layer this module cannot
#: import). They are loaded the first time a name is not found, and by :func:`list_checkers`.
ENTRY_POINT_GROUP = "steplab.checkers"
_plugins_loaded = False


def _load_plugins() -> None:
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for point in entry_points(group=ENTRY_POINT_GROUP):
        with _LOCK:
            known = point.name in _REGISTRY
        if not known:
            fn = point.load()  # importing the module may register it already (a no-op again)
            register_checker(point.name, fn, needs_answer=getattr(fn, "needs_answer", True))


def _entry(name: str) -> _Entry:
    with _LOCK:
        entry = _REGISTRY.get(name)
    if entry is None:
        _load_plugins()
    with _LOCK:
        entry = _REGISTRY.get(name)
        names = sorted(_REGISTRY)
    if entry is None:
        raise ConfigError(f"unknown outcome checker {name!r}{_suggest(name, names)}")
    return entry


def get_checker(name: str) -> Callable[..., Outcome]:
    """The checker registered as ``name``; an unknown name raises ConfigError with suggestions."""
    return _entry(name).fn


def list_checkers() -> list[str]:
    """The registered checker names, sorted (installed plugins included)."""
    _load_plugins()
    with _LOCK:
        return sorted(_REGISTRY)


def _suggest(name: str, names) -> str:
    names = list(names)
    close = difflib.get_close_matches(str(name), names, n=3, cutoff=0.5)
    if close:
        return f"; did you mean {' or '.join(repr(c) for c in close)}? (known: {', '.join(names)})"
    return f"; known: {', '.join(names)}"


def _describe(fn: Callable[..., Any]) -> str:
    module = getattr(fn, "__module__", None) or "?"
    return f"{module}.{getattr(fn, '__qualname__', repr(fn))}"


def _clip(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


register_checker("exact", check_exact)
register_checker("number", check_number)
register_checker("contains", check_contains)
register_checker("test_command", check_test_command, needs_answer=False)
register_checker("any_of", check_any_of)
register_checker("final_state", check_final_state, needs_answer=False)
register_checker("harbor", check_harbor, needs_answer=False)  # reward files of Harbor tasks
# ``llm_judge`` is registered by the judge itself (trainer_core.rewards.judge.checker), found
# through its entry point when the rewards layer has not been imported yet.


# --------------------------------------------------------------------------------------------
# check_outcome
# --------------------------------------------------------------------------------------------


def default_checker_name(task: Task) -> str:
    """The checker of a task without ``checker`` (see the module docstring)."""
    if isinstance(task.expected_answer, list | tuple):
        return "any_of"
    if is_numeric(task.expected_answer):
        return "number"
    if task.test_command.strip():
        return "test_command"
    return "exact"


def default_answer_schema(checker: str) -> str:
    """The answer schema of a task without ``answer_schema``: ``raw`` for contains, else auto."""
    return "raw" if checker == "contains" else "auto"


def check_outcome(
    task: Task,
    *,
    final_text: str | None = None,
    answer: str | None = None,
    run_result: dict | None = None,
) -> Outcome:
    """Check one episode's outcome against ``task``.

    The checker is ``task.checker`` or :func:`default_checker_name`. Without ``answer``, the answer
    is extracted from ``final_text`` by ``task.answer_schema`` (default :func:`default_answer_schema`;
    skipped for checkers that need no answer unless the task names a schema). An empty or missing
    answer gives an unsuccessful outcome, never an exception. The returned outcome has
    ``extracted_answer`` set. An unknown checker or schema name raises ConfigError.
    """
    name = task.checker.strip() or default_checker_name(task)
    entry = _entry(name)
    schema = task.answer_schema.strip() or default_answer_schema(name)
    if answer is not None and not isinstance(answer, str):
        answer = str(answer)
    if answer is None and final_text is not None:
        if entry.needs_answer or task.answer_schema.strip():
            answer = extract_answer(final_text, schema)
    elif answer is None:
        extract_answer("", schema)  # still reject an unknown schema name
    if entry.needs_answer and (answer is None or not answer.strip()):
        if final_text is None and answer is None:
            detail = "no final text and no answer to check"
        elif answer is None:
            detail = f"no answer found in the final text (answer schema {schema!r})"
        else:
            detail = "empty answer"
        return Outcome(
            success=False,
            score=0.0,
            extracted_answer=answer,
            detail=detail,
            metadata={"checker": name},
        )
    outcome = entry.fn(answer=answer, task=task, run_result=run_result)
    if not isinstance(outcome, Outcome):
        raise ConfigError(
            f"checker {name!r} ({_describe(entry.fn)}) returned {type(outcome).__name__}, "
            "not an Outcome"
        )
    if outcome.extracted_answer is None and answer is not None:
        outcome = replace(outcome, extracted_answer=answer)
    if "checker" not in outcome.metadata:
        outcome = replace(outcome, metadata={**outcome.metadata, "checker": name})
    return outcome
