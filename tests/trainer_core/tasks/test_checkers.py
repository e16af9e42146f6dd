"""Outcome checkers: answer extraction, number normalisation, the built-ins, the registry."""

from __future__ import annotations

from fractions import Fraction

import pytest

from trainer_core.errors import ConfigError
from trainer_core.tasks import checkers
from trainer_core.tasks.checkers import (
    Outcome,
    check_outcome,
    extract_answer,
    get_checker,
    list_checkers,
    outcome_reward,
    parse_number,
    parse_test_summary,
    register_checker,
)
from trainer_core.tasks.model import Task

# --------------------------------------------------------------------------------------------
# extraction
# --------------------------------------------------------------------------------------------


class TestAnswerTag:
    def test_single(self):
        assert extract_answer("thinking...\n<answer>42</answer>", "answer_tag") == "42"

    def test_last_of_several(self):
        text = "<answer>1</answer> then I changed my mind <answer>2</answer>"
        assert extract_answer(text, "answer_tag") == "2"

    def test_multiline_and_tag_whitespace_and_case(self):
        text = "<ANSWER>\n  line one\n  line two\n</Answer >"
        assert extract_answer(text, "answer_tag") == "line one\n  line two"
        assert extract_answer("< answer >7</ answer>", "answer_tag") == "7"

    def test_missing_or_unclosed(self):
        assert extract_answer("no tags here", "answer_tag") is None
        assert extract_answer("<answer>truncated", "answer_tag") is None

    def test_empty_tag_gives_empty_string(self):
        assert extract_answer("<answer>  </answer>", "answer_tag") == ""


class TestBoxed:
    def test_simple(self):
        assert extract_answer(r"so \boxed{42}.", "boxed") == "42"

    def test_nested_braces(self):
        assert extract_answer(r"$\boxed{\frac{1}{2}}$", "boxed") == r"\frac{1}{2}"
        assert (
            extract_answer(r"\boxed{\sqrt{\frac{a}{b^{2}}}}", "boxed") == r"\sqrt{\frac{a}{b^{2}}}"
        )

    def test_last_of_several_and_fbox(self):
        assert extract_answer(r"\boxed{1} wait, \fbox{ 2 }", "boxed") == "2"

    def test_escaped_braces_do_not_count(self):
        assert extract_answer(r"\boxed{\{1, 2\}}", "boxed") == r"\{1, 2\}"

    def test_unbraced_form(self):
        assert extract_answer(r"$\boxed 5$", "boxed") == "5"

    def test_missing_or_unbalanced(self):
        assert extract_answer("no box", "boxed") is None
        assert extract_answer(r"\boxed{\frac{1}{2}", "boxed") is None
        assert extract_answer(r"\boxedfoo{1}", "boxed") is None

    def test_unbalanced_last_falls_back_to_earlier_complete_box(self):
        assert extract_answer(r"\boxed{3} and then \boxed{4", "boxed") == "3"


class TestOtherSchemas:
    def test_last_line(self):
        assert extract_answer("first\n  the answer is 9  \n\n   \n", "last_line") == (
            "the answer is 9"
        )
        assert extract_answer("\n \n", "last_line") is None

    def test_raw(self):
        assert extract_answer("  all of\nit \n", "raw") == "all of\nit"
        assert extract_answer("   ", "raw") is None

    def test_auto_prefers_tag_then_box_then_last_line(self):
        assert extract_answer(r"\boxed{1}" + "\n<answer>2</answer>\nbye", "auto") == "2"
        assert extract_answer(r"\boxed{1}" + "\nbye", "auto") == "1"
        assert extract_answer("a\nb", "auto") == "b"
        assert extract_answer("", "auto") is None

    def test_none_text(self):
        assert extract_answer(None, "auto") is None

    def test_unknown_schema(self):
        with pytest.raises(ConfigError, match="did you mean 'boxed'"):
            extract_answer("x", "boxd")


# --------------------------------------------------------------------------------------------
# numbers
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", Fraction(42)),
        ("-3", Fraction(-3)),
        ("+3", Fraction(3)),
        ("\u22127", Fraction(-7)),
        ("3.25", Fraction(13, 4)),
        (".5", Fraction(1, 2)),
        ("42.", Fraction(42)),
        ("1,234.5", Fraction(24690, 20)),
        ("1,234,567", Fraction(1234567)),
        ("1 234", Fraction(1234)),
        ("12\u202f345", Fraction(12345)),
        ("1{,}234", Fraction(1234)),
        ("1.5e-3", Fraction(3, 2000)),
        ("2E6", Fraction(2_000_000)),
        (r"1.5 \times 10^{3}", Fraction(1500)),
        ("3/4", Fraction(3, 4)),
        ("-3 / 4", Fraction(-3, 4)),
        (r"\frac{3}{4}", Fraction(3, 4)),
        (r"-\dfrac{3}{4}", Fraction(-3, 4)),
        (r"\frac34", Fraction(3, 4)),
        (r"$\boxed{\frac{1}{2}}$", Fraction(1, 2)),
        (r"\( 7 \)", Fraction(7)),
        ("$18", Fraction(18)),
        ("-$3.50", Fraction(-7, 2)),
        ("  12  ", Fraction(12)),
        (7, Fraction(7)),
        (0.5, Fraction(1, 2)),
    ],
)
def test_parse_number(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "50%",
        "42 apples",
        "forty-two",
        "1,5",
        "1,23",
        "1 3/4",
        "3/0",
        r"\frac{1}{0}",
        "inf",
        "nan",
        "1e99999",
        "",
        "--3",
        "1.2.3",
        None,
        True,
        float("nan"),
    ],
)
def test_parse_number_rejects(text):
    assert parse_number(text) is None


def _task(**fields) -> Task:
    return Task(prompt="q", **fields)


class TestNumberChecker:
    @pytest.mark.parametrize(
        ("answer", "expected"),
        [
            ("1,234", 1234),
            ("0.75", "3/4"),
            (r"\frac{3}{4}", 0.75),
            ("1e3", "1000"),
            ("0.3333333", "1/3"),  # relative tolerance 1e-6
            ("1e-10", 0),  # absolute tolerance 1e-9
            ("+5", "5.0"),
        ],
    )
    def test_matches(self, answer, expected):
        outcome = check_outcome(_task(expected_answer=expected, checker="number"), answer=answer)
        assert outcome.success, outcome.detail

    @pytest.mark.parametrize(("answer", "expected"), [("0.333", "1/3"), ("-5", 5), ("1e-8", 0)])
    def test_mismatch(self, answer, expected):
        outcome = check_outcome(_task(expected_answer=expected, checker="number"), answer=answer)
        assert not outcome.success
        assert outcome.score == 0.0
        assert "expected" in outcome.detail

    def test_percent_is_not_a_number(self):
        outcome = check_outcome(_task(expected_answer=0.5), answer="50%")
        assert not outcome.success
        assert "could not parse" in outcome.detail

    def test_non_numeric_answer(self):
        outcome = check_outcome(_task(expected_answer=42), answer="about forty")
        assert not outcome.success
        assert "could not parse the answer 'about forty' as a number" in outcome.detail

    def test_tolerance_options(self):
        task = _task(expected_answer=100, metadata={"checker_options": {"rel_tol": 0.05}})
        assert check_outcome(task, answer="104").success
        assert not check_outcome(task, answer="106").success

    def test_expected_not_numeric(self):
        outcome = get_checker("number")(answer="3", task=_task(expected_answer="three"))
        assert not outcome.success
        assert "is not a number" in outcome.detail


# --------------------------------------------------------------------------------------------
# exact, contains, any_of
# --------------------------------------------------------------------------------------------


class TestExact:
    def test_strip_only_by_default(self):
        task = _task(expected_answer="Paris")
        assert check_outcome(task, answer="  Paris \n").success
        assert not check_outcome(task, answer="paris").success

    def test_options(self):
        task = _task(
            expected_answer="New  York",
            metadata={"checker_options": {"ignore_case": True, "collapse_whitespace": True}},
        )
        assert check_outcome(task, answer="new york").success
        assert check_outcome(task, answer="NEW\tYORK").success
        assert not check_outcome(task, answer="newyork").success

    def test_empty_and_missing_answers_are_unsuccessful(self):
        task = _task(expected_answer="x")
        for kwargs in ({"answer": ""}, {"answer": "   "}, {"final_text": ""}, {}):
            outcome = check_outcome(task, **kwargs)
            assert not outcome.success
            assert outcome_reward(outcome) == 0.0

    def test_no_expected_answer(self):
        outcome = check_outcome(_task(checker="exact"), answer="x")
        assert not outcome.success
        assert "no expected_answer" in outcome.detail


class TestContains:
    def test_substring_of_whole_text_by_default(self):
        task = _task(expected_answer="HTTP 503", checker="contains")
        text = "The logs show HTTP 503 from the gateway.\nRestart it."
        outcome = check_outcome(task, final_text=text)
        assert outcome.success
        assert outcome.extracted_answer == text.strip()  # raw schema, not the last line
        assert not check_outcome(task, final_text="http 503").success

    def test_ignore_case(self):
        task = _task(
            expected_answer="HTTP 503",
            checker="contains",
            metadata={"checker_options": {"ignore_case": True}},
        )
        assert check_outcome(task, final_text="got http 503").success

    def test_list_all_must_appear_with_partial_credit(self):
        task = _task(expected_answer=["disk", "full", "db"], checker="contains")
        outcome = check_outcome(task, final_text="the disk is full")
        assert not outcome.success
        assert outcome.partial_credit == pytest.approx(2 / 3)
        assert "'db'" in outcome.detail
        assert check_outcome(task, final_text="db disk full").success


class TestAnyOf:
    def test_numeric_and_text_choices(self):
        task = _task(expected_answer=["11", "eleven"])
        assert check_outcome(task, answer="11.0").success  # by number
        assert check_outcome(task, answer="eleven").success  # by exact
        assert not check_outcome(task, answer="Eleven").success
        assert not check_outcome(task, answer="12").success

    def test_matched_index_and_options(self):
        task = _task(
            expected_answer=[3, "three"],
            checker="any_of",
            metadata={"checker_options": {"ignore_case": True}},
        )
        outcome = check_outcome(task, answer="THREE")
        assert outcome.success
        assert outcome.metadata["matched_index"] == 1


# --------------------------------------------------------------------------------------------
# test_command
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("output", "passed", "failed", "errors"),
    [
        ("==== 3 passed, 1 failed in 0.12s ====", 3, 1, 0),
        ("===== 1 failed, 3 passed in 0.12s =====", 3, 1, 0),
        ("2 passed in 0.01s", 2, 0, 0),
        ("1 error in 0.1s", 0, 0, 1),
        ("==== 2 errors in 0.30s ====", 0, 0, 2),
        ("=== 1 failed, 2 passed, 1 skipped, 3 warnings, 1 error in 0.50s ===", 2, 1, 1),
        ("\x1b[32m===== 5 passed, 1 xfailed in 1.02s (0:00:01) =====\x1b[0m", 5, 0, 0),
        ("5 passed in 3.2 seconds", 5, 0, 0),
        ("Ran 4 tests in 0.001s\n\nFAILED (failures=1, errors=1)", 2, 1, 1),
        ("Ran 3 tests in 0.001s\n\nOK", 3, 0, 0),
    ],
)
def test_parse_test_summary(output, passed, failed, errors):
    summary = parse_test_summary("collected 4 items\n\ntest_x.py ..F.\n" + output + "\n")
    assert (summary.passed, summary.failed, summary.errors) == (passed, failed, errors)


def test_parse_test_summary_takes_the_last_summary_and_ignores_prose():
    assert parse_test_summary("I expect 3 passed\nall good") is None
    summary = parse_test_summary("1 failed, 1 passed in 0.1s\n...\n2 passed in 0.1s")
    assert (summary.passed, summary.failed) == (2, 0)


def _run(exit_code, stdout="", stderr=""):
    return {"exit_code": exit_code, "stdout": stdout, "stderr": stderr}


class TestTestCommand:
    task = Task(prompt="fix it", test_command="python -m pytest -q")

    def test_failures_give_partial_credit(self):
        out = "test_a.py ...F\n==== 3 passed, 1 failed in 0.12s ====\n"
        outcome = check_outcome(self.task, final_text="done", run_result=_run(1, out))
        assert not outcome.success
        assert (outcome.tests_passed, outcome.tests_failed) == (3, 1)
        assert outcome.partial_credit == pytest.approx(0.75)
        assert outcome.score == pytest.approx(0.75)
        assert outcome_reward(outcome) == pytest.approx(0.75)
        assert outcome.extracted_answer is None  # the answer plays no part

    def test_all_passed(self):
        outcome = check_outcome(self.task, run_result=_run(0, "2 passed in 0.01s"))
        assert outcome.success
        assert (outcome.tests_passed, outcome.tests_failed) == (2, 0)
        assert outcome.partial_credit == 1.0
        assert outcome_reward(outcome) == 1.0

    def test_collection_error_counts_as_failure(self):
        outcome = check_outcome(self.task, run_result=_run(2, "", "1 error in 0.1s"))
        assert not outcome.success
        assert outcome.tests_failed == 1
        assert outcome.partial_credit == 0.0

    @pytest.mark.parametrize(("exit_code", "success"), [(0, True), (1, False)])
    def test_no_summary_uses_the_exit_code(self, exit_code, success):
        outcome = check_outcome(self.task, run_result=_run(exit_code, "custom runner output"))
        assert outcome.success is success
        assert outcome.partial_credit is None
        assert outcome.score == (1.0 if success else 0.0)
        assert outcome.tests_passed is None
        assert "no test summary" in outcome.detail

    def test_nonzero_exit_with_all_tests_passing_gets_no_partial_credit(self):
        outcome = check_outcome(self.task, run_result=_run(1, "3 passed in 0.1s\nlint failed"))
        assert not outcome.success
        assert outcome.partial_credit is None
        assert outcome_reward(outcome) == 0.0

    def test_not_run_or_timed_out(self):
        assert not check_outcome(self.task).success
        timed_out = {**_run(0, "2 passed in 0.1s"), "timed_out": True}
        assert not check_outcome(self.task, run_result=timed_out).success
        assert not check_outcome(self.task, run_result={"stdout": "2 passed in 0.1s"}).success

    def test_default_checker_for_a_task_with_test_command(self):
        assert checkers.default_checker_name(self.task) == "test_command"


# --------------------------------------------------------------------------------------------
# registry, check_outcome, outcome_reward
# --------------------------------------------------------------------------------------------


@pytest.fixture
def custom_checker():
    calls = []

    def length_is_expected(*, answer, task, run_result=None):
        calls.append(answer)
        ok = len(answer) == task.expected_answer
        return Outcome(success=ok, detail=f"length {len(answer)}")

    register_checker("length_is", length_is_expected)
    yield length_is_expected, calls
    checkers.unregister_checker("length_is")


def test_builtins_are_listed():
    assert {"exact", "number", "contains", "test_command", "any_of"} <= set(list_checkers())
    assert list_checkers() == sorted(list_checkers())


def test_custom_checker_is_used_by_check_outcome(custom_checker):
    fn, calls = custom_checker
    assert get_checker("length_is") is fn
    assert "length_is" in list_checkers()
    task = _task(expected_answer=5, checker="length_is", answer_schema="answer_tag")
    outcome = check_outcome(task, final_text="<answer>hello</answer>")
    assert outcome.success
    assert outcome.extracted_answer == "hello"
    assert outcome.metadata["checker"] == "length_is"
    assert calls == ["hello"]
    # an empty answer never reaches a checker that needs one
    assert not check_outcome(task, final_text="no tag").success
    assert calls == ["hello"]


def test_reregistering(custom_checker):
    fn, _ = custom_checker
    register_checker("length_is", fn)  # the same function again: fine
    with pytest.raises(ConfigError, match="already registered"):
        register_checker("length_is", lambda **kw: Outcome(success=True))
    with pytest.raises(ConfigError, match="already registered"):
        register_checker("exact", lambda **kw: Outcome(success=True))


def test_register_as_decorator_and_needs_answer_false():
    @register_checker("always_yes", needs_answer=False)
    def always_yes(*, answer, task, run_result=None):
        return Outcome(success=True, score=0.5)

    try:
        outcome = check_outcome(_task(checker="always_yes"))
        assert outcome.success
        assert outcome_reward(outcome) == 0.5
    finally:
        checkers.unregister_checker("always_yes")


def test_bad_registrations():
    with pytest.raises(ConfigError):
        register_checker("has space", lambda **kw: None)
    with pytest.raises(ConfigError):
        register_checker("not_callable", 42)


def test_checker_returning_something_else():
    register_checker("broken", lambda **kw: True)
    try:
        with pytest.raises(ConfigError, match="not an Outcome"):
            check_outcome(_task(checker="broken"), answer="x")
    finally:
        checkers.unregister_checker("broken")


def test_unknown_checker_suggests_the_closest():
    with pytest.raises(ConfigError) as info:
        get_checker("nubmer")
    assert "did you mean 'number'" in str(info.value)
    with pytest.raises(ConfigError, match="did you mean 'any_of'"):
        check_outcome(_task(checker="anyof"), answer="1")
    with pytest.raises(ConfigError, match="known: any_of, contains"):
        get_checker("zzzzzz")


@pytest.mark.parametrize(
    ("fields", "name"),
    [
        ({"expected_answer": 42}, "number"),
        ({"expected_answer": "3/4"}, "number"),
        ({"expected_answer": "Paris"}, "exact"),
        ({"expected_answer": ["a", "b"]}, "any_of"),
        ({"test_command": "pytest"}, "test_command"),
        ({}, "exact"),
        ({"expected_answer": True}, "exact"),
    ],
)
def test_default_checker(fields, name):
    assert checkers.default_checker_name(_task(**fields)) == name


def test_check_outcome_extracts_by_schema():
    task = _task(expected_answer=391)
    outcome = check_outcome(task, final_text="17*23 = 391, so\n" + r"\boxed{391}")
    assert outcome.success
    assert outcome.extracted_answer == "391"
    tagged = _task(expected_answer=7, answer_schema="answer_tag")
    outcome = check_outcome(tagged, final_text="7")
    assert not outcome.success
    assert "no answer found" in outcome.detail
    assert "answer_tag" in outcome.detail


def test_check_outcome_answer_wins_over_final_text():
    outcome = check_outcome(_task(expected_answer=2), final_text="<answer>3</answer>", answer="2")
    assert outcome.success
    assert outcome.extracted_answer == "2"


def test_check_outcome_number_answer_given_as_int():
    assert check_outcome(_task(expected_answer=2), answer=2).success


def test_outcome_validates_ranges():
    with pytest.raises(ValueError):
        Outcome(success=True, score=1.5)
    with pytest.raises(ValueError):
        Outcome(success=True, partial_credit=-0.1)


def test_outcome_reward_order():
    assert outcome_reward(Outcome(success=True)) == 1.0
    assert outcome_reward(Outcome(success=False)) == 0.0
    assert outcome_reward(Outcome(success=False, score=0.4)) == 0.4
    assert outcome_reward(Outcome(success=True, score=0.4)) == 0.4  # score before success
    assert outcome_reward(Outcome(success=False, score=0.9, partial_credit=0.25)) == 0.25
    assert outcome_reward(Outcome(success=True, score=1.0, partial_credit=0.0)) == 0.0
