"""The built-in coding suite: small Python repositories with one bug or missing piece each.

Every task is a tiny repository (a package and a module or two) described by an issue report.
Hidden ``unittest`` tests (``metadata["hidden_files"]``) are written into the workspace when the
agent submits and run with ``python3 -m unittest -q`` inside the sandbox (standard library
only), so a half-right fix earns partial credit (passed / (passed + failed)).

Each task also carries:

* ``reference_solution``: read the file, edit it, try the fix with ``bash``, submit;
* ``metadata["kind"]``: the kind of problem (``off_by_one``, ``wrong_condition``,
  ``missing_edge_case``, ``wrong_api_use``, ``missing_feature``, ``refactor_keep_behaviour``,
  ``mutable_default``);
* ``metadata["wrong_patch"]``: tool calls (as dicts) applying a plausible but wrong fix, which
  fails at least one hidden test: a negative example for checking rewards and checkers.

Everything here is fixed text: no randomness, no network, no third-party packages.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable

from trainer_core.tasks.model import Task, ToolCall
from trainer_core.tasks.suites import TaskSuite

ENVIRONMENT = "steplab/sandbox"
TEST_COMMAND = "python3 -m unittest -q"
KINDS = (
    "off_by_one",
    "wrong_condition",
    "missing_edge_case",
    "wrong_api_use",
    "missing_feature",
    "refactor_keep_behaviour",
    "mutable_default",
)
FOOTER = (
    "Work in the repository (your working directory). When you submit, hidden unit tests run "
    "with `python3 -m unittest` (Python 3.11, standard library only)."
)
REFACTOR_FOOTER = (
    "Change the code in the repository (your working directory). When you submit, hidden unit "
    "tests check both the behaviour and the new structure; they run with `python3 -m unittest` "
    "(Python 3.11, standard library only)."
)

Edit = tuple[str, str, str]  # (file_path, old_string, new_string)


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _d(text: str) -> str:
    """A dedented block of file content, without the leading newline."""
    return textwrap.dedent(text).lstrip("\n")


def _py(code: str) -> str:
    """A bash command running a short Python snippet (the snippet has no single quotes)."""
    if "'" in code:
        raise ValueError("a check snippet must not contain single quotes")
    return f"python3 -c '{_d(code).strip()}'"


def _edit_calls(edits: list[Edit], thought: str | None = None) -> list[ToolCall]:
    calls = []
    for index, (path, old, new) in enumerate(edits):
        calls.append(
            ToolCall(
                tool="edit_file",
                params={"file_path": path, "old_string": old, "new_string": new},
                thought=thought if index == 0 else None,
            )
        )
    return calls


def _reference(read: str, edits: list[Edit], check: str, why: str) -> list[ToolCall]:
    """The standard solution: read the file, edit it, try it out, submit."""
    return [
        ToolCall(
            tool="read_file",
            params={"file_path": read},
            thought="Read the code the issue is about first.",
        ),
        *_edit_calls(edits, why),
        ToolCall(tool="bash", params={"command": check}, thought="Check the fix by running it."),
        ToolCall(tool="submit", params={}),
    ]


def _wrong_patch(edits: list[Edit]) -> list[dict]:
    calls = [*_edit_calls(edits), ToolCall(tool="submit", params={})]
    return [call.model_dump(exclude_none=True) for call in calls]


def _task(
    kind: str,
    number: int,
    *,
    title: str,
    issue: str,
    files: dict[str, str],
    hidden: dict[str, str],
    fix: list[Edit],
    check: str,
    wrong: list[Edit],
    why: str,
    read: str | None = None,
) -> Task:
    if kind not in KINDS:
        raise ValueError(f"unknown task kind {kind!r}")
    footer = REFACTOR_FOOTER if kind == "refactor_keep_behaviour" else FOOTER
    reference = _reference(read or fix[0][0], fix, check, why)
    return Task(
        id=f"coding-{kind.replace('_', '-')}-{number:02d}",
        prompt=f"{title}\n\n{_d(issue).strip()}\n\n{footer}",
        domain="coding",
        environment=ENVIRONMENT,
        checker="test_command",
        files=files,
        test_command=TEST_COMMAND,
        reference_solution=reference,
        reference_steps=len(reference),
        metadata={
            "task_set": "coding",
            "kind": kind,
            "hidden_files": hidden,
            "wrong_patch": _wrong_patch(wrong),
        },
    )


# --------------------------------------------------------------------------------------------
# off_by_one
# --------------------------------------------------------------------------------------------


def _off_by_one_pages() -> Task:
    return _task(
        "off_by_one",
        1,
        title="get_page() returns one item too few",
        issue="""
            Every full page from `pager.get_page()` is one item short, so some items never
            show up on any page.

            To reproduce:

                >>> from pager import get_page
                >>> get_page(list(range(10)), 1, 3)
                [0, 1]

            Expected `[0, 1, 2]`: page 1 of 3 items a page holds items 0, 1 and 2, page 2
            holds 3, 4 and 5, and so on. Pages are numbered from 1.
        """,
        files={
            "pager/__init__.py": _d(
                r"""
                from pager.pages import get_page, page_count

                __all__ = ["get_page", "page_count"]
                """
            ),
            "pager/pages.py": _d(
                r'''
                """Split a list of items into numbered pages."""


                def page_count(total, per_page):
                    """How many pages ``total`` items fill at ``per_page`` items a page."""
                    if per_page <= 0:
                        raise ValueError("per_page must be positive")
                    return (total + per_page - 1) // per_page


                def get_page(items, page, per_page):
                    """The items on page ``page`` (pages are numbered from 1)."""
                    if page < 1:
                        raise ValueError("pages are numbered from 1")
                    start = (page - 1) * per_page
                    end = start + per_page - 1
                    return items[start:end]
                '''
            ),
        },
        hidden={
            "test_pages.py": _d(
                r"""
                import unittest

                from pager import get_page, page_count


                class PageCountTest(unittest.TestCase):
                    def test_rounds_up(self):
                        self.assertEqual(page_count(10, 3), 4)

                    def test_rejects_a_zero_page_size(self):
                        with self.assertRaises(ValueError):
                            page_count(10, 0)


                class GetPageTest(unittest.TestCase):
                    items = list(range(10))

                    def test_first_page_is_full(self):
                        self.assertEqual(get_page(self.items, 1, 3), [0, 1, 2])

                    def test_middle_page(self):
                        self.assertEqual(get_page(self.items, 2, 3), [3, 4, 5])

                    def test_last_page_may_be_partial(self):
                        self.assertEqual(get_page(self.items, 4, 3), [9])

                    def test_a_page_past_the_end_is_empty(self):
                        self.assertEqual(get_page(self.items, 5, 3), [])

                    def test_pages_hold_every_item_once(self):
                        pages = [get_page(self.items, n, 3) for n in range(1, 5)]
                        self.assertEqual([x for page in pages for x in page], self.items)
                """
            )
        },
        fix=[
            (
                "pager/pages.py",
                "    end = start + per_page - 1\n",
                "    end = start + per_page\n",
            )
        ],
        why="A slice end is exclusive, so the end of a page is start + per_page.",
        check=_py(
            """
            from pager import get_page
            items = list(range(10))
            print([get_page(items, n, 3) for n in range(1, 5)])
            assert get_page(items, 1, 3) == [0, 1, 2]
            """
        ),
        wrong=[
            (
                "pager/pages.py",
                "    end = start + per_page - 1\n",
                "    end = start + per_page + 1\n",
            )
        ],
    )


def _off_by_one_truncate() -> Task:
    return _task(
        "off_by_one",
        2,
        title="truncate() shortens text that already fits",
        issue="""
            `textutil.truncate(text, width)` should leave text of at most `width` characters
            alone and only cut longer text (ending it with the suffix, "..." by default, so the
            result is exactly `width` characters long).

            Text of exactly `width` characters is cut although it fits:

                >>> from textutil import truncate
                >>> truncate("hello", 5)
                'he...'

            Expected `'hello'`.
        """,
        files={
            "textutil/__init__.py": "from textutil.shorten import truncate\n",
            "textutil/shorten.py": _d(
                r'''
                def truncate(text, width, suffix="..."):
                    """``text`` cut to at most ``width`` characters, ending in ``suffix`` when cut."""
                    if width < len(suffix):
                        raise ValueError("width is smaller than the suffix")
                    if len(text) < width:
                        return text
                    return text[: width - len(suffix)] + suffix
                '''
            ),
        },
        hidden={
            "test_truncate.py": _d(
                r"""
                import unittest

                from textutil import truncate


                class TruncateTest(unittest.TestCase):
                    def test_short_text_is_unchanged(self):
                        self.assertEqual(truncate("hi", 5), "hi")

                    def test_text_of_exactly_the_width_is_unchanged(self):
                        self.assertEqual(truncate("hello", 5), "hello")

                    def test_exact_width_with_a_custom_suffix(self):
                        self.assertEqual(truncate("abcdef", 6, suffix="~"), "abcdef")

                    def test_one_character_too_long_is_cut(self):
                        self.assertEqual(truncate("abcdefg", 6), "abc...")

                    def test_long_text_is_cut_to_the_width(self):
                        self.assertEqual(truncate("abcdefghijkl", 8), "abcde...")

                    def test_custom_suffix(self):
                        self.assertEqual(truncate("abcdefgh", 5, suffix="~"), "abcd~")

                    def test_width_below_the_suffix_is_an_error(self):
                        with self.assertRaises(ValueError):
                            truncate("abcdef", 2)
                """
            )
        },
        fix=[
            (
                "textutil/shorten.py",
                "    if len(text) < width:\n",
                "    if len(text) <= width:\n",
            )
        ],
        why="Text of exactly `width` characters fits, so the comparison must include it.",
        check=_py(
            """
            from textutil import truncate
            print(truncate("hello", 5), truncate("hello!", 5))
            assert truncate("hello", 5) == "hello" and truncate("hello!", 5) == "he..."
            """
        ),
        wrong=[
            (
                "textutil/shorten.py",
                "    if len(text) < width:\n",
                "    if len(text) <= width + 1:\n",
            )
        ],
    )


def _off_by_one_moving_average() -> Task:
    return _task(
        "off_by_one",
        3,
        title="moving_average() drops the last window",
        issue="""
            `signals.moving_average(values, size)` should return the average of every run of
            `size` consecutive values, but the last window is always missing:

                >>> from signals import moving_average
                >>> moving_average([1, 2, 3, 4], 2)
                [1.5, 2.5]

            Expected `[1.5, 2.5, 3.5]`. With `size == len(values)` the result is even empty,
            where it should hold the one average of all the values.
        """,
        files={
            "signals/__init__.py": "from signals.smooth import moving_average\n",
            "signals/smooth.py": _d(
                r'''
                """Smoothing of numeric series."""


                def moving_average(values, size):
                    """The averages of every run of ``size`` consecutive values, in order."""
                    if size < 1:
                        raise ValueError("size must be at least 1")
                    averages = []
                    for i in range(len(values) - size):
                        window = values[i : i + size]
                        averages.append(sum(window) / size)
                    return averages
                '''
            ),
        },
        hidden={
            "test_smooth.py": _d(
                r"""
                import unittest

                from signals import moving_average


                class MovingAverageTest(unittest.TestCase):
                    def test_every_window_is_averaged(self):
                        self.assertEqual(moving_average([1, 2, 3, 4], 2), [1.5, 2.5, 3.5])

                    def test_one_window_when_size_is_the_length(self):
                        self.assertEqual(moving_average([1, 2, 3], 3), [2.0])

                    def test_number_of_windows(self):
                        self.assertEqual(len(moving_average(list(range(10)), 4)), 7)

                    def test_no_window_when_size_is_larger(self):
                        self.assertEqual(moving_average([1, 2], 3), [])

                    def test_empty_input(self):
                        self.assertEqual(moving_average([], 1), [])

                    def test_size_zero_is_an_error(self):
                        with self.assertRaises(ValueError):
                            moving_average([1, 2, 3], 0)
                """
            )
        },
        fix=[
            (
                "signals/smooth.py",
                "    for i in range(len(values) - size):\n",
                "    for i in range(len(values) - size + 1):\n",
            )
        ],
        why="There are len(values) - size + 1 windows; the range stopped one short.",
        check=_py(
            """
            from signals import moving_average
            print(moving_average([1, 2, 3, 4], 2))
            assert moving_average([1, 2, 3, 4], 2) == [1.5, 2.5, 3.5]
            assert moving_average([1, 2, 3], 3) == [2.0]
            """
        ),
        wrong=[
            (
                "signals/smooth.py",
                "    for i in range(len(values) - size):\n"
                "        window = values[i : i + size]\n"
                "        averages.append(sum(window) / size)\n",
                "    for i in range(len(values)):\n"
                "        window = values[i : i + size]\n"
                "        averages.append(sum(window) / len(window))\n",
            )
        ],
    )


def _off_by_one_quarter() -> Task:
    return _task(
        "off_by_one",
        4,
        title="quarter() puts March in Q2 and December in Q5",
        issue="""
            `fiscal.quarter(month)` gives the wrong quarter for the last month of each quarter:

                >>> from fiscal import quarter
                >>> quarter(3), quarter(12)
                (2, 5)

            Expected `(1, 4)`. January-March is Q1, April-June Q2, July-September Q3 and
            October-December Q4. `quarter_label()` shows the same wrong quarters.
        """,
        files={
            "fiscal/__init__.py": "from fiscal.periods import quarter, quarter_label\n",
            "fiscal/periods.py": _d(
                r'''
                MONTHS_PER_QUARTER = 3


                def quarter(month):
                    """The calendar quarter (1-4) of ``month`` (1 = January ... 12 = December)."""
                    if not 1 <= month <= 12:
                        raise ValueError(f"month must be 1-12, got {month}")
                    return month // MONTHS_PER_QUARTER + 1


                def quarter_label(year, month):
                    """A label like "2024-Q2"."""
                    return f"{year}-Q{quarter(month)}"
                '''
            ),
        },
        hidden={
            "test_periods.py": _d(
                r"""
                import unittest

                from fiscal import quarter, quarter_label


                class QuarterTest(unittest.TestCase):
                    def test_january(self):
                        self.assertEqual(quarter(1), 1)

                    def test_march_ends_the_first_quarter(self):
                        self.assertEqual(quarter(3), 1)

                    def test_april(self):
                        self.assertEqual(quarter(4), 2)

                    def test_july(self):
                        self.assertEqual(quarter(7), 3)

                    def test_every_month(self):
                        quarters = [quarter(month) for month in range(1, 13)]
                        self.assertEqual(quarters, [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4])

                    def test_label(self):
                        self.assertEqual(quarter_label(2024, 11), "2024-Q4")

                    def test_month_13_is_an_error(self):
                        with self.assertRaises(ValueError):
                            quarter(13)
                """
            )
        },
        fix=[
            (
                "fiscal/periods.py",
                "    return month // MONTHS_PER_QUARTER + 1\n",
                "    return (month - 1) // MONTHS_PER_QUARTER + 1\n",
            )
        ],
        why="Months are numbered from 1; shift to 0-based before dividing into quarters.",
        check=_py(
            """
            from fiscal import quarter
            quarters = [quarter(m) for m in range(1, 13)]
            print(quarters)
            assert quarters == [1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4]
            """
        ),
        wrong=[
            (
                "fiscal/periods.py",
                "    return month // MONTHS_PER_QUARTER + 1\n",
                "    return month // (MONTHS_PER_QUARTER + 1) + 1\n",
            )
        ],
    )


def _off_by_one_line_range() -> Task:
    return _task(
        "off_by_one",
        5,
        title="line_range() starts one line late",
        issue="""
            `snippets.line_range(text, first, last)` is meant to work like `sed -n 'first,last p'`:
            lines are numbered from 1 and both ends are included. It returns the wrong lines:

                >>> from snippets import line_range
                >>> line_range("one\\ntwo\\nthree\\n", 1, 2)
                ['two']

            Expected `['one', 'two']`.
        """,
        files={
            "snippets/__init__.py": "from snippets.lines import count_lines, line_range\n",
            "snippets/lines.py": _d(
                r'''
                """Pick lines out of a text."""


                def count_lines(text):
                    return len(text.splitlines())


                def line_range(text, first, last):
                    """Lines ``first`` to ``last`` of ``text``, both included, numbered from 1."""
                    if first < 1:
                        raise ValueError("lines are numbered from 1")
                    lines = text.splitlines()
                    return lines[first:last]
                '''
            ),
        },
        hidden={
            "test_lines.py": _d(
                r"""
                import unittest

                from snippets import count_lines, line_range

                TEXT = "one\ntwo\nthree\nfour\n"


                class LineRangeTest(unittest.TestCase):
                    def test_count(self):
                        self.assertEqual(count_lines(TEXT), 4)

                    def test_a_single_line(self):
                        self.assertEqual(line_range(TEXT, 1, 1), ["one"])

                    def test_both_ends_are_included(self):
                        self.assertEqual(line_range(TEXT, 2, 3), ["two", "three"])

                    def test_last_past_the_end(self):
                        self.assertEqual(line_range(TEXT, 3, 10), ["three", "four"])

                    def test_first_after_last_is_empty(self):
                        self.assertEqual(line_range(TEXT, 3, 2), [])

                    def test_line_zero_is_an_error(self):
                        with self.assertRaises(ValueError):
                            line_range(TEXT, 0, 2)
                """
            )
        },
        fix=[
            (
                "snippets/lines.py",
                "    return lines[first:last]\n",
                "    return lines[first - 1 : last]\n",
            )
        ],
        why="Line n is lines[n - 1]; the slice end `last` is exclusive, which includes line last.",
        check=_py(
            r"""
            from snippets import line_range
            print(line_range("one\ntwo\nthree\n", 1, 2))
            assert line_range("one\ntwo\nthree\n", 1, 2) == ["one", "two"]
            """
        ),
        wrong=[
            (
                "snippets/lines.py",
                "    return lines[first:last]\n",
                "    return lines[first - 1 : last - 1]\n",
            )
        ],
    )


def _off_by_one_retries() -> Task:
    return _task(
        "off_by_one",
        6,
        title="call_with_retries() makes one attempt too few",
        issue="""
            `netutil.call_with_retries(func, retries=3)` should call `func` once and, when it
            raises, try again up to `retries` more times. It gives up one attempt early, and with
            `retries=0` it never calls `func` at all:

                >>> from netutil import call_with_retries
                >>> call_with_retries(lambda: "ok", retries=0)
                TypeError: exceptions must derive from BaseException

            Expected `'ok'`. A function that fails twice and then works should succeed with
            `retries=2`, but today it raises.
        """,
        files={
            "netutil/__init__.py": "from netutil.retry import call_with_retries\n",
            "netutil/retry.py": _d(
                r'''
                def call_with_retries(func, retries=3, exceptions=(Exception,)):
                    """Call ``func()``; when it raises one of ``exceptions``, try again, up to
                    ``retries`` more times. Returns func's result or re-raises the last error."""
                    last_error = None
                    for _attempt in range(retries):
                        try:
                            return func()
                        except exceptions as exc:
                            last_error = exc
                    raise last_error
                '''
            ),
        },
        hidden={
            "test_retry.py": _d(
                r"""
                import unittest

                from netutil import call_with_retries


                class Flaky:
                    def __init__(self, failures):
                        self.failures = failures
                        self.calls = 0

                    def __call__(self):
                        self.calls += 1
                        if self.calls <= self.failures:
                            raise ConnectionError(f"attempt {self.calls} failed")
                        return "ok"


                class RetryTest(unittest.TestCase):
                    def test_success_on_the_first_attempt(self):
                        func = Flaky(0)
                        self.assertEqual(call_with_retries(func, retries=3), "ok")
                        self.assertEqual(func.calls, 1)

                    def test_no_retries_still_calls_once(self):
                        func = Flaky(0)
                        self.assertEqual(call_with_retries(func, retries=0), "ok")

                    def test_succeeds_on_the_last_retry(self):
                        func = Flaky(2)
                        self.assertEqual(call_with_retries(func, retries=2), "ok")
                        self.assertEqual(func.calls, 3)

                    def test_gives_up_after_all_retries(self):
                        func = Flaky(10)
                        with self.assertRaises(ConnectionError):
                            call_with_retries(func, retries=2)
                        self.assertEqual(func.calls, 3)

                    def test_other_exceptions_are_not_retried(self):
                        func = Flaky(5)
                        with self.assertRaises(ConnectionError):
                            call_with_retries(func, retries=3, exceptions=(KeyError,))
                        self.assertEqual(func.calls, 1)
                """
            )
        },
        fix=[
            (
                "netutil/retry.py",
                "    for _attempt in range(retries):\n",
                "    for _attempt in range(retries + 1):\n",
            )
        ],
        why="The first call is not a retry: there are retries + 1 attempts in all.",
        check=_py(
            """
            from netutil import call_with_retries
            print(call_with_retries(lambda: "ok", retries=0))
            calls = []
            def flaky():
                calls.append(1)
                if len(calls) < 3:
                    raise OSError("down")
                return "up"
            assert call_with_retries(flaky, retries=2) == "up" and len(calls) == 3
            """
        ),
        wrong=[
            (
                "netutil/retry.py",
                "    for _attempt in range(retries):\n",
                "    for _attempt in range(max(retries, 1)):\n",
            )
        ],
    )


# --------------------------------------------------------------------------------------------
# wrong_condition
# --------------------------------------------------------------------------------------------


def _wrong_condition_discount() -> Task:
    return _task(
        "wrong_condition",
        1,
        title="Everybody gets the member discount",
        issue="""
            The pricing rules are: members get 10% off orders of 100 or more; everybody (members
            or not) gets 5% off orders of 200 or more; a member ordering 200 or more gets the
            better 10%. Otherwise there is no discount.

            `shop.discount_rate()` gives non-members 10% on any order of 100 or more, and
            members 10% even on small orders:

                >>> from shop import discount_rate
                >>> discount_rate(150, member=False), discount_rate(50, member=True)
                (0.1, 0.1)

            Expected `(0.0, 0.0)`.
        """,
        files={
            "shop/__init__.py": "from shop.pricing import discount_rate, price_after_discount\n",
            "shop/pricing.py": _d(
                r'''
                MEMBER_RATE = 0.10
                BULK_RATE = 0.05


                def discount_rate(total, member):
                    """The discount (a fraction) on an order of ``total``."""
                    if member or total >= 100:
                        return MEMBER_RATE
                    if total >= 200:
                        return BULK_RATE
                    return 0.0


                def price_after_discount(total, member):
                    return round(total * (1 - discount_rate(total, member)), 2)
                '''
            ),
        },
        hidden={
            "test_pricing.py": _d(
                r"""
                import unittest

                from shop import discount_rate, price_after_discount


                class DiscountTest(unittest.TestCase):
                    def test_member_over_100(self):
                        self.assertEqual(discount_rate(150, member=True), 0.10)

                    def test_member_over_200_keeps_the_better_rate(self):
                        self.assertEqual(discount_rate(250, member=True), 0.10)

                    def test_small_member_order(self):
                        self.assertEqual(discount_rate(50, member=True), 0.0)

                    def test_non_member_over_100(self):
                        self.assertEqual(discount_rate(150, member=False), 0.0)

                    def test_non_member_over_200(self):
                        self.assertEqual(discount_rate(250, member=False), 0.05)

                    def test_small_non_member_order(self):
                        self.assertEqual(discount_rate(50, member=False), 0.0)

                    def test_price(self):
                        self.assertEqual(price_after_discount(300, member=False), 285.0)
                """
            )
        },
        fix=[
            (
                "shop/pricing.py",
                "    if member or total >= 100:\n",
                "    if member and total >= 100:\n",
            )
        ],
        why="The member rate needs both conditions: a member AND an order of 100 or more.",
        check=_py(
            """
            from shop import discount_rate
            cases = [(150, False), (50, True), (250, False), (150, True)]
            print([discount_rate(total, member) for total, member in cases])
            assert [discount_rate(t, m) for t, m in cases] == [0.0, 0.0, 0.05, 0.10]
            """
        ),
        wrong=[("shop/pricing.py", "    if member or total >= 100:\n", "    if member:\n")],
    )


def _wrong_condition_username() -> Task:
    return _task(
        "wrong_condition",
        2,
        title="Usernames with spaces and symbols are accepted",
        issue="""
            A username must be 3-16 characters long, start with a letter, and contain only
            letters, digits and underscores. `accounts.is_valid_username()` lets through names
            with any other characters as long as one character is allowed:

                >>> from accounts import is_valid_username
                >>> is_valid_username("bob smith"), is_valid_username("root!")
                (True, True)

            Expected `(False, False)`.
        """,
        files={
            "accounts/__init__.py": "from accounts.usernames import is_valid_username, normalise\n",
            "accounts/usernames.py": _d(
                r'''
                MIN_LENGTH, MAX_LENGTH = 3, 16


                def normalise(name):
                    return name.strip().lower()


                def is_valid_username(name):
                    """3-16 letters, digits and underscores, starting with a letter."""
                    if not MIN_LENGTH <= len(name) <= MAX_LENGTH:
                        return False
                    if not name[0].isalpha():
                        return False
                    return any(ch.isalnum() or ch == "_" for ch in name)
                '''
            ),
        },
        hidden={
            "test_usernames.py": _d(
                r"""
                import unittest

                from accounts import is_valid_username, normalise


                class UsernameTest(unittest.TestCase):
                    def test_plain_name(self):
                        self.assertTrue(is_valid_username("alice"))

                    def test_underscores_and_digits(self):
                        self.assertTrue(is_valid_username("a_b_c1"))

                    def test_too_short_or_too_long(self):
                        self.assertFalse(is_valid_username("al"))
                        self.assertFalse(is_valid_username("x" * 17))

                    def test_must_start_with_a_letter(self):
                        self.assertFalse(is_valid_username("1alice"))

                    def test_no_spaces(self):
                        self.assertFalse(is_valid_username("bob smith"))

                    def test_no_symbols(self):
                        self.assertFalse(is_valid_username("root!"))
                        self.assertFalse(is_valid_username("bob-smith"))

                    def test_normalise(self):
                        self.assertEqual(normalise("  Alice "), "alice")
                """
            )
        },
        fix=[
            (
                "accounts/usernames.py",
                '    return any(ch.isalnum() or ch == "_" for ch in name)\n',
                '    return all(ch.isalnum() or ch == "_" for ch in name)\n',
            )
        ],
        why="Every character must be allowed, so the check is all(), not any().",
        check=_py(
            """
            from accounts import is_valid_username
            names = ["alice", "a_b_c1", "bob smith", "root!"]
            print([is_valid_username(n) for n in names])
            assert [is_valid_username(n) for n in names] == [True, True, False, False]
            """
        ),
        wrong=[
            (
                "accounts/usernames.py",
                '    return any(ch.isalnum() or ch == "_" for ch in name)\n',
                "    return all(ch.isalnum() for ch in name)\n",
            )
        ],
    )


def _wrong_condition_overdue() -> Task:
    return _task(
        "wrong_condition",
        3,
        title="overdue() lists the invoices that were paid",
        issue="""
            `billing.overdue(invoices, today)` should return the unpaid invoices whose due date
            is before `today`, oldest first. It returns the paid ones instead, so the reminder
            job writes to customers who have paid and skips those who have not.

                >>> from datetime import date
                >>> from billing import overdue
                >>> invoices = [{"id": "A", "due": date(2024, 3, 1), "paid": False, "amount": 100},
                ...             {"id": "B", "due": date(2024, 2, 1), "paid": True, "amount": 50}]
                >>> [inv["id"] for inv in overdue(invoices, date(2024, 3, 10))]
                ['B']

            Expected `['A']`. An invoice due today is not overdue yet.
        """,
        files={
            "billing/__init__.py": "from billing.invoices import outstanding, overdue\n",
            "billing/invoices.py": _d(
                r'''
                """Invoices are dicts with "id", "due" (a date), "paid" (a bool) and "amount"."""


                def outstanding(invoices):
                    """The total amount not paid yet."""
                    return sum(inv["amount"] for inv in invoices if not inv["paid"])


                def overdue(invoices, today):
                    """Unpaid invoices whose due date is before ``today``, oldest first."""
                    late = [inv for inv in invoices if inv["paid"] and inv["due"] < today]
                    return sorted(late, key=lambda inv: inv["due"])
                '''
            ),
        },
        hidden={
            "test_invoices.py": _d(
                r"""
                import unittest
                from datetime import date

                from billing import outstanding, overdue

                INVOICES = [
                    {"id": "A", "due": date(2024, 3, 1), "paid": False, "amount": 100},
                    {"id": "B", "due": date(2024, 2, 1), "paid": True, "amount": 50},
                    {"id": "C", "due": date(2024, 3, 10), "paid": False, "amount": 70},
                    {"id": "D", "due": date(2024, 2, 15), "paid": False, "amount": 30},
                ]


                def ids(invoices):
                    return [inv["id"] for inv in invoices]


                class OverdueTest(unittest.TestCase):
                    def test_outstanding(self):
                        self.assertEqual(outstanding(INVOICES), 200)

                    def test_unpaid_past_due_invoices_oldest_first(self):
                        self.assertEqual(ids(overdue(INVOICES, date(2024, 3, 10))), ["D", "A"])

                    def test_paid_invoices_are_never_overdue(self):
                        self.assertNotIn("B", ids(overdue(INVOICES, date(2024, 12, 31))))

                    def test_due_today_is_not_overdue(self):
                        self.assertNotIn("C", ids(overdue(INVOICES, date(2024, 3, 10))))

                    def test_nothing_to_check(self):
                        self.assertEqual(overdue([], date(2024, 3, 10)), [])
                """
            )
        },
        fix=[
            (
                "billing/invoices.py",
                '    late = [inv for inv in invoices if inv["paid"] and inv["due"] < today]\n',
                '    late = [inv for inv in invoices if not inv["paid"] and inv["due"] < today]\n',
            )
        ],
        why="Overdue means NOT paid; the paid check was inverted.",
        check=_py(
            """
            from datetime import date
            from billing import overdue
            invoices = [
                {"id": "A", "due": date(2024, 3, 1), "paid": False, "amount": 100},
                {"id": "B", "due": date(2024, 2, 1), "paid": True, "amount": 50},
            ]
            late = [inv["id"] for inv in overdue(invoices, date(2024, 3, 10))]
            print(late)
            assert late == ["A"]
            """
        ),
        wrong=[
            (
                "billing/invoices.py",
                '    late = [inv for inv in invoices if inv["paid"] and inv["due"] < today]\n',
                '    late = [inv for inv in invoices if not inv["paid"] and inv["due"] <= today]\n',
            )
        ],
    )


def _wrong_condition_log_level() -> Task:
    return _task(
        "wrong_condition",
        4,
        title="Log filter keeps debug records and drops errors",
        issue="""
            A handler with threshold "info" should keep records at info level or above (info,
            warning, error) and drop debug records. `logkit.should_log()` does the opposite:

                >>> from logkit import should_log
                >>> should_log("error", "info"), should_log("debug", "info")
                (False, True)

            Expected `(True, False)`. `filter_records()` has the same problem.
        """,
        files={
            "logkit/__init__.py": _d(
                r"""
                from logkit.levels import filter_records, level_number, should_log

                __all__ = ["filter_records", "level_number", "should_log"]
                """
            ),
            "logkit/levels.py": _d(
                r'''
                LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40}


                def level_number(name):
                    try:
                        return LEVELS[name.lower()]
                    except KeyError:
                        raise ValueError(f"unknown level {name!r}") from None


                def should_log(level, threshold="info"):
                    """True when a record at ``level`` passes a handler set to ``threshold``."""
                    return level_number(level) <= level_number(threshold)


                def filter_records(records, threshold="info"):
                    return [record for record in records if should_log(record["level"], threshold)]
                '''
            ),
        },
        hidden={
            "test_levels.py": _d(
                r"""
                import unittest

                from logkit import filter_records, level_number, should_log


                class LevelTest(unittest.TestCase):
                    def test_level_names_ignore_case(self):
                        self.assertEqual(level_number("WARNING"), 30)

                    def test_unknown_level(self):
                        with self.assertRaises(ValueError):
                            level_number("loud")

                    def test_the_threshold_level_itself_passes(self):
                        self.assertTrue(should_log("info", "info"))

                    def test_higher_levels_pass(self):
                        self.assertTrue(should_log("error", "info"))
                        self.assertTrue(should_log("warning", "warning"))

                    def test_lower_levels_are_dropped(self):
                        self.assertFalse(should_log("debug", "info"))

                    def test_filter_records(self):
                        records = [{"level": name} for name in ("debug", "info", "error")]
                        kept = filter_records(records, "warning")
                        self.assertEqual([r["level"] for r in kept], ["error"])
                """
            )
        },
        fix=[
            (
                "logkit/levels.py",
                "    return level_number(level) <= level_number(threshold)\n",
                "    return level_number(level) >= level_number(threshold)\n",
            )
        ],
        why="A record passes when its level is at least the threshold: the comparison was reversed.",
        check=_py(
            """
            from logkit import should_log
            print(should_log("error", "info"), should_log("debug", "info"))
            assert should_log("error", "info") and not should_log("debug", "info")
            assert should_log("info", "info")
            """
        ),
        wrong=[
            (
                "logkit/levels.py",
                "    return level_number(level) <= level_number(threshold)\n",
                "    return level_number(level) > level_number(threshold)\n",
            )
        ],
    )


def _wrong_condition_opening_hours() -> Task:
    return _task(
        "wrong_condition",
        5,
        title="The shop is shown as open at night",
        issue="""
            The shop opens Monday to Friday from 9:00 and closes at 17:00. `hours.is_open()`
            says it is open at any hour of a weekday:

                >>> from hours import is_open
                >>> is_open(weekday=2, hour=22), is_open(weekday=0, hour=8)
                (True, True)

            Expected `(False, False)`. Weekdays are 0 (Monday) to 6 (Sunday); `hour` is 0-23,
            and the shop is closed from 17:00 on.
        """,
        files={
            "hours/__init__.py": "from hours.schedule import is_open\n",
            "hours/schedule.py": _d(
                r'''
                OPEN_HOUR, CLOSE_HOUR = 9, 17
                SATURDAY = 5


                def is_open(weekday, hour):
                    """weekday: 0 = Monday ... 6 = Sunday; hour: 0-23."""
                    if weekday >= SATURDAY:
                        return False
                    return hour >= OPEN_HOUR or hour < CLOSE_HOUR
                '''
            ),
        },
        hidden={
            "test_schedule.py": _d(
                r"""
                import unittest

                from hours import is_open


                class OpeningHoursTest(unittest.TestCase):
                    def test_monday_morning(self):
                        self.assertTrue(is_open(0, 10))

                    def test_friday_afternoon(self):
                        self.assertTrue(is_open(4, 16))

                    def test_weekend(self):
                        self.assertFalse(is_open(5, 10))
                        self.assertFalse(is_open(6, 12))

                    def test_before_opening(self):
                        self.assertFalse(is_open(0, 8))

                    def test_closed_from_five(self):
                        self.assertFalse(is_open(1, 17))

                    def test_night(self):
                        self.assertFalse(is_open(2, 22))
                """
            )
        },
        fix=[
            (
                "hours/schedule.py",
                "    return hour >= OPEN_HOUR or hour < CLOSE_HOUR\n",
                "    return OPEN_HOUR <= hour < CLOSE_HOUR\n",
            )
        ],
        why="The hour must be within both bounds: and, not or.",
        check=_py(
            """
            from hours import is_open
            print([is_open(2, h) for h in (8, 9, 16, 17, 22)])
            assert [is_open(2, h) for h in (8, 9, 16, 17, 22)] == [False, True, True, False, False]
            """
        ),
        wrong=[
            (
                "hours/schedule.py",
                "    return hour >= OPEN_HOUR or hour < CLOSE_HOUR\n",
                "    return OPEN_HOUR <= hour <= CLOSE_HOUR\n",
            )
        ],
    )


def _wrong_condition_version_compat() -> Task:
    return _task(
        "wrong_condition",
        6,
        title="is_compatible() accepts a new major version",
        issue="""
            With semantic versioning, an installed version satisfies a requirement when it has
            the same major version and is not older. `deps.is_compatible()` accepts any newer
            version, including a new major version with breaking changes:

                >>> from deps import is_compatible
                >>> is_compatible("1.2.0", "2.0.0")
                True

            Expected `False`. `is_compatible("1.2.0", "1.4.1")` is and should stay `True`.
        """,
        files={
            "deps/__init__.py": "from deps.compat import is_compatible, parse_version\n",
            "deps/compat.py": _d(
                r'''
                def parse_version(text):
                    """ "1.4.2" -> (1, 4, 2)"""
                    major, minor, patch = (int(part) for part in text.split("."))
                    return major, minor, patch


                def is_compatible(required, installed):
                    """True when version ``installed`` satisfies requirement ``required``."""
                    req, inst = parse_version(required), parse_version(installed)
                    return inst >= req
                '''
            ),
        },
        hidden={
            "test_compat.py": _d(
                r"""
                import unittest

                from deps import is_compatible


                class CompatTest(unittest.TestCase):
                    def test_same_version(self):
                        self.assertTrue(is_compatible("1.2.0", "1.2.0"))

                    def test_newer_minor(self):
                        self.assertTrue(is_compatible("1.2.0", "1.4.1"))

                    def test_newer_patch(self):
                        self.assertTrue(is_compatible("1.2.3", "1.2.7"))

                    def test_older_patch(self):
                        self.assertFalse(is_compatible("1.2.5", "1.2.3"))

                    def test_older_minor(self):
                        self.assertFalse(is_compatible("1.4.0", "1.2.9"))

                    def test_newer_major(self):
                        self.assertFalse(is_compatible("1.2.0", "2.0.0"))
                        self.assertFalse(is_compatible("1.2.0", "3.5.1"))

                    def test_older_major(self):
                        self.assertFalse(is_compatible("2.0.0", "1.9.9"))
                """
            )
        },
        fix=[
            (
                "deps/compat.py",
                "    return inst >= req\n",
                "    return inst[0] == req[0] and inst >= req\n",
            )
        ],
        why="A different major version is never compatible; within one, newer or equal is fine.",
        check=_py(
            """
            from deps import is_compatible
            print(is_compatible("1.2.0", "2.0.0"), is_compatible("1.2.0", "1.4.1"))
            assert not is_compatible("1.2.0", "2.0.0") and is_compatible("1.2.0", "1.4.1")
            """
        ),
        wrong=[
            (
                "deps/compat.py",
                "    return inst >= req\n",
                "    return inst[0] == req[0] and inst[1] >= req[1]\n",
            )
        ],
    )


# --------------------------------------------------------------------------------------------
# missing_edge_case
# --------------------------------------------------------------------------------------------


def _edge_case_summary() -> Task:
    return _task(
        "missing_edge_case",
        1,
        title="summarize() crashes on an empty list",
        issue="""
            The dashboard calls `metrics.summarize(values)` for every sensor, and a sensor without
            readings crashes it:

                >>> from metrics import summarize
                >>> summarize([])
                ZeroDivisionError: division by zero

            For no values it should return `{"count": 0, "mean": None, "min": None, "max": None}`
            (any empty sequence, also a tuple).
        """,
        files={
            "metrics/__init__.py": "from metrics.summary import summarize\n",
            "metrics/summary.py": _d(
                r'''
                def summarize(values):
                    """count, mean, min and max of ``values``."""
                    return {
                        "count": len(values),
                        "mean": sum(values) / len(values),
                        "min": min(values),
                        "max": max(values),
                    }
                '''
            ),
        },
        hidden={
            "test_summary.py": _d(
                r"""
                import unittest

                from metrics import summarize

                EMPTY = {"count": 0, "mean": None, "min": None, "max": None}


                class SummarizeTest(unittest.TestCase):
                    def test_values(self):
                        self.assertEqual(
                            summarize([2, 4, 9]), {"count": 3, "mean": 5.0, "min": 2, "max": 9}
                        )

                    def test_one_value(self):
                        self.assertEqual(summarize([7])["mean"], 7.0)

                    def test_negative_values(self):
                        self.assertEqual(summarize([-3, -1])["min"], -3)

                    def test_empty_list(self):
                        self.assertEqual(summarize([]), EMPTY)

                    def test_empty_tuple(self):
                        self.assertEqual(summarize(()), EMPTY)
                """
            )
        },
        fix=[
            (
                "metrics/summary.py",
                '    """count, mean, min and max of ``values``."""\n',
                '    """count, mean, min and max of ``values``."""\n'
                "    if not values:\n"
                '        return {"count": 0, "mean": None, "min": None, "max": None}\n',
            )
        ],
        why="Return the documented empty summary before dividing by the count.",
        check=_py(
            """
            from metrics import summarize
            print(summarize([]), summarize([1, 2]))
            assert summarize(()) == {"count": 0, "mean": None, "min": None, "max": None}
            """
        ),
        wrong=[
            (
                "metrics/summary.py",
                '    """count, mean, min and max of ``values``."""\n',
                '    """count, mean, min and max of ``values``."""\n'
                "    if not values:\n"
                "        return None\n",
            )
        ],
    )


def _edge_case_split_name() -> Task:
    return _task(
        "missing_edge_case",
        2,
        title="split_name() fails for one-word names and odd spacing",
        issue="""
            `people.split_name(full_name)` returns (first name, the rest). It breaks on names
            that are not exactly "First Last" with single spaces:

                >>> from people import split_name
                >>> split_name("Cher")
                ValueError: not enough values to unpack (expected 2, got 1)
                >>> split_name("  Ada   Lovelace ")
                ('Ada', '  Lovelace')

            Expected `('Cher', '')` and `('Ada', 'Lovelace')`. Words may be separated by any
            whitespace (tabs too); the rest is joined with single spaces. An empty or blank name
            is a ValueError.
        """,
        files={
            "people/__init__.py": "from people.names import display_name, split_name\n",
            "people/names.py": _d(
                r'''
                def split_name(full_name):
                    """(first name, the rest) of a full name."""
                    first, rest = full_name.strip().split(" ", 1)
                    return first, rest


                def display_name(first, rest):
                    """ "LOVELACE, Ada", or just the first name."""
                    return f"{rest.upper()}, {first}" if rest else first
                '''
            ),
        },
        hidden={
            "test_names.py": _d(
                r"""
                import unittest

                from people import display_name, split_name


                class SplitNameTest(unittest.TestCase):
                    def test_first_and_last(self):
                        self.assertEqual(split_name("Ada Lovelace"), ("Ada", "Lovelace"))

                    def test_three_words(self):
                        self.assertEqual(split_name("Jean Luc Picard"), ("Jean", "Luc Picard"))

                    def test_one_word(self):
                        self.assertEqual(split_name("Cher"), ("Cher", ""))

                    def test_extra_spaces(self):
                        self.assertEqual(split_name("  Ada   Lovelace "), ("Ada", "Lovelace"))

                    def test_tabs(self):
                        self.assertEqual(split_name("Grace\tHopper"), ("Grace", "Hopper"))

                    def test_empty_name(self):
                        with self.assertRaises(ValueError):
                            split_name("")

                    def test_display_name(self):
                        self.assertEqual(display_name("Ada", "Lovelace"), "LOVELACE, Ada")
                """
            )
        },
        fix=[
            (
                "people/names.py",
                '    first, rest = full_name.strip().split(" ", 1)\n    return first, rest\n',
                "    words = full_name.split()\n"
                "    if not words:\n"
                '        raise ValueError("empty name")\n'
                '    return words[0], " ".join(words[1:])\n',
            )
        ],
        why="split() with no argument splits on any run of whitespace and drops the ends.",
        check=_py(
            r"""
            from people import split_name
            names = ["Cher", "  Ada   Lovelace ", "Grace\tHopper"]
            print([split_name(n) for n in names])
            assert [split_name(n) for n in names] == [
                ("Cher", ""), ("Ada", "Lovelace"), ("Grace", "Hopper")]
            """
        ),
        wrong=[
            (
                "people/names.py",
                '    first, rest = full_name.strip().split(" ", 1)\n',
                '    if " " not in full_name.strip():\n'
                '        return full_name.strip(), ""\n'
                '    first, rest = full_name.strip().split(" ", 1)\n',
            )
        ],
    )


def _edge_case_percent_change() -> Task:
    return _task(
        "missing_edge_case",
        3,
        title="percent_change() crashes for a zero base and flips the sign for negative ones",
        issue="""
            `finance.percent_change(old, new)` fails for some inputs:

                >>> from finance import percent_change
                >>> percent_change(0, 0)
                ZeroDivisionError: division by zero
                >>> percent_change(-50, -25)
                -50.0

            Expected: `0.0` when both are 0; `None` when `old` is 0 and `new` is not (the
            change is undefined; `format_change()` then shows "n/a"); and `50.0` for -50 ->
            -25, which is an increase (divide by the size of the old value).
        """,
        files={
            "finance/__init__.py": "from finance.change import format_change, percent_change\n",
            "finance/change.py": _d(
                r'''
                def percent_change(old, new):
                    """The change from ``old`` to ``new`` in percent, rounded to 2 places."""
                    return round((new - old) / old * 100, 2)


                def format_change(old, new):
                    change = percent_change(old, new)
                    if change is None:
                        return "n/a"
                    return f"{change:+.2f}%"
                '''
            ),
        },
        hidden={
            "test_change.py": _d(
                r"""
                import unittest

                from finance import format_change, percent_change


                class PercentChangeTest(unittest.TestCase):
                    def test_increase(self):
                        self.assertEqual(percent_change(100, 150), 50.0)

                    def test_decrease(self):
                        self.assertEqual(percent_change(200, 150), -25.0)

                    def test_format(self):
                        self.assertEqual(format_change(100, 150), "+50.00%")

                    def test_zero_to_zero(self):
                        self.assertEqual(percent_change(0, 0), 0.0)

                    def test_from_zero_is_undefined(self):
                        self.assertIsNone(percent_change(0, 10))
                        self.assertEqual(format_change(0, 10), "n/a")

                    def test_negative_base(self):
                        self.assertEqual(percent_change(-50, -25), 50.0)
                """
            )
        },
        fix=[
            (
                "finance/change.py",
                "    return round((new - old) / old * 100, 2)\n",
                "    if old == 0:\n"
                "        return 0.0 if new == 0 else None\n"
                "    return round((new - old) / abs(old) * 100, 2)\n",
            )
        ],
        why="Handle a zero base before dividing, and divide by abs(old) so the sign is right.",
        check=_py(
            """
            from finance import percent_change
            print(percent_change(0, 0), percent_change(0, 5), percent_change(-50, -25))
            assert (percent_change(0, 0), percent_change(0, 5)) == (0.0, None)
            assert percent_change(-50, -25) == 50.0
            """
        ),
        wrong=[
            (
                "finance/change.py",
                "    return round((new - old) / old * 100, 2)\n",
                "    if old == 0:\n        return None\n    return round((new - old) / old * 100, 2)\n",
            )
        ],
    )


def _edge_case_initials() -> Task:
    return _task(
        "missing_edge_case",
        4,
        title="initials() crashes on double spaces and empty names",
        issue="""
            `badges.initials(name)` builds the letters on a name badge. Names typed with extra
            spaces, or left empty, crash it:

                >>> from badges import initials
                >>> initials("ada  lovelace")
                IndexError: string index out of range

            Expected `'AL'`. `initials("")` should be `''` and leading or trailing spaces should
            not matter.
        """,
        files={
            "badges/__init__.py": "from badges.letters import initials\n",
            "badges/letters.py": _d(
                r'''
                def initials(name, max_letters=3):
                    """The upper-case first letters of the words of ``name``, at most ``max_letters``."""
                    letters = [word[0].upper() for word in name.split(" ")]
                    return "".join(letters[:max_letters])
                '''
            ),
        },
        hidden={
            "test_letters.py": _d(
                r"""
                import unittest

                from badges import initials


                class InitialsTest(unittest.TestCase):
                    def test_two_words(self):
                        self.assertEqual(initials("ada lovelace"), "AL")

                    def test_at_most_three_letters(self):
                        self.assertEqual(initials("Grace Brewster Murray Hopper"), "GBM")

                    def test_max_letters(self):
                        self.assertEqual(initials("Alan Turing", max_letters=1), "A")

                    def test_double_space(self):
                        self.assertEqual(initials("ada  lovelace"), "AL")

                    def test_spaces_around(self):
                        self.assertEqual(initials("  alan turing "), "AT")

                    def test_empty(self):
                        self.assertEqual(initials(""), "")
                """
            )
        },
        fix=[
            (
                "badges/letters.py",
                '    letters = [word[0].upper() for word in name.split(" ")]\n',
                "    letters = [word[0].upper() for word in name.split()]\n",
            )
        ],
        why="split() without an argument never yields empty words.",
        check=_py(
            """
            from badges import initials
            print(repr(initials("ada  lovelace")), repr(initials("")))
            assert initials("  ada  lovelace ") == "AL" and initials("") == ""
            """
        ),
        wrong=[
            (
                "badges/letters.py",
                '    letters = [word[0].upper() for word in name.split(" ")]\n',
                '    letters = [word[0].upper() for word in name.strip().split(" ")]\n',
            )
        ],
    )


def _edge_case_last_n() -> Task:
    return _task(
        "missing_edge_case",
        5,
        title="last_n(items, 0) returns every item",
        issue="""
            `seqtools.last_n(items, n)` returns the last `n` items of a list. Asking for none
            returns all of them, and a negative `n` silently returns something odd:

                >>> from seqtools import last_n
                >>> last_n([1, 2, 3], 0)
                [1, 2, 3]
                >>> last_n([1, 2, 3, 4, 5], -2)
                [3, 4, 5]

            Expected `[]` for `n == 0`, and a ValueError for a negative `n`. When the list has
            fewer than `n` items, all of them are returned (as today).
        """,
        files={
            "seqtools/__init__.py": "from seqtools.tail import last_n\n",
            "seqtools/tail.py": _d(
                r'''
                def last_n(items, n):
                    """The last ``n`` items of the list ``items``, as a new list."""
                    return items[-n:]
                '''
            ),
        },
        hidden={
            "test_tail.py": _d(
                r"""
                import unittest

                from seqtools import last_n


                class LastNTest(unittest.TestCase):
                    def test_last_two(self):
                        self.assertEqual(last_n([1, 2, 3, 4, 5], 2), [4, 5])

                    def test_more_than_there_are(self):
                        self.assertEqual(last_n([1, 2], 5), [1, 2])

                    def test_all_of_them(self):
                        self.assertEqual(last_n([1, 2, 3], 3), [1, 2, 3])

                    def test_a_new_list(self):
                        items = [1, 2, 3]
                        self.assertIsNot(last_n(items, 3), items)

                    def test_none(self):
                        self.assertEqual(last_n([1, 2, 3], 0), [])

                    def test_negative_is_an_error(self):
                        with self.assertRaises(ValueError):
                            last_n([1, 2, 3, 4, 5], -2)
                """
            )
        },
        fix=[
            (
                "seqtools/tail.py",
                "    return items[-n:]\n",
                "    if n < 0:\n"
                '        raise ValueError("n must not be negative")\n'
                "    return items[len(items) - n :] if n else []\n",
            )
        ],
        why="items[-0:] is items[0:], the whole list: handle 0 (and reject negatives) first.",
        check=_py(
            """
            from seqtools import last_n
            print(last_n([1, 2, 3], 0), last_n([1, 2, 3], 2), last_n([1], 4))
            assert last_n([1, 2, 3], 0) == [] and last_n([1], 4) == [1]
            """
        ),
        wrong=[
            (
                "seqtools/tail.py",
                "    return items[-n:]\n",
                "    if n == 0:\n        return []\n    return items[-n:]\n",
            )
        ],
    )


def _edge_case_withdraw() -> Task:
    return _task(
        "missing_edge_case",
        6,
        title="withdraw() accepts negative amounts",
        issue="""
            `Account.withdraw(amount)` checks for overdrafts but not for the amount itself, so a
            negative withdrawal raises the balance:

                >>> from bank import Account
                >>> account = Account("ann", balance=100)
                >>> account.withdraw(-50)
                150

            Withdrawing a negative amount or zero must raise ValueError and leave the balance
            alone, like `deposit()` does for its amount.
        """,
        files={
            "bank/__init__.py": "from bank.account import Account, InsufficientFunds\n",
            "bank/account.py": _d(
                r"""
                class InsufficientFunds(Exception):
                    pass


                class Account:
                    def __init__(self, owner, balance=0):
                        self.owner = owner
                        self.balance = balance

                    def deposit(self, amount):
                        if amount <= 0:
                            raise ValueError("a deposit must be positive")
                        self.balance += amount
                        return self.balance

                    def withdraw(self, amount):
                        if amount > self.balance:
                            raise InsufficientFunds(f"the balance is {self.balance}")
                        self.balance -= amount
                        return self.balance
                """
            ),
        },
        hidden={
            "test_account.py": _d(
                r"""
                import unittest

                from bank import Account, InsufficientFunds


                class AccountTest(unittest.TestCase):
                    def setUp(self):
                        self.account = Account("ann", balance=100)

                    def test_deposit(self):
                        self.assertEqual(self.account.deposit(50), 150)

                    def test_withdraw(self):
                        self.assertEqual(self.account.withdraw(30), 70)

                    def test_withdraw_everything(self):
                        self.assertEqual(self.account.withdraw(100), 0)

                    def test_overdraft(self):
                        with self.assertRaises(InsufficientFunds):
                            self.account.withdraw(101)
                        self.assertEqual(self.account.balance, 100)

                    def test_negative_withdrawal(self):
                        with self.assertRaises(ValueError):
                            self.account.withdraw(-50)
                        self.assertEqual(self.account.balance, 100)

                    def test_zero_withdrawal(self):
                        with self.assertRaises(ValueError):
                            self.account.withdraw(0)
                """
            )
        },
        fix=[
            (
                "bank/account.py",
                "    def withdraw(self, amount):\n",
                "    def withdraw(self, amount):\n"
                "        if amount <= 0:\n"
                '            raise ValueError("a withdrawal must be positive")\n',
            )
        ],
        why="Validate the amount first, the same way deposit() does.",
        check=_py(
            """
            from bank import Account
            account = Account("ann", balance=100)
            for amount in (-50, 0):
                try:
                    account.withdraw(amount)
                except ValueError as exc:
                    print("refused:", exc)
            assert account.balance == 100 and account.withdraw(40) == 60
            """
        ),
        wrong=[
            (
                "bank/account.py",
                "    def withdraw(self, amount):\n",
                "    def withdraw(self, amount):\n"
                "        if amount < 0:\n"
                '            raise ValueError("a withdrawal must be positive")\n',
            )
        ],
    )


# --------------------------------------------------------------------------------------------
# wrong_api_use
# --------------------------------------------------------------------------------------------


def _api_sort_returns_none() -> Task:
    return _task(
        "wrong_api_use",
        1,
        title="ranked() returns None and reorders the caller's list",
        issue="""
            `leaderboard.ranked(scores)` should return a new list from best to worst score and
            leave the list it was given alone. Instead:

                >>> from leaderboard import ranked
                >>> scores = [3, 9, 4]
                >>> print(ranked(scores))
                None
                >>> scores
                [9, 4, 3]

            `top(scores)` crashes with `TypeError: 'NoneType' object is not subscriptable`.
        """,
        files={
            "leaderboard/__init__.py": "from leaderboard.board import best, ranked, top\n",
            "leaderboard/board.py": _d(
                r'''
                def ranked(scores):
                    """The scores from best to worst, as a new list (``scores`` is left alone)."""
                    ordered = scores.sort(reverse=True)
                    return ordered


                def top(scores, n=3):
                    return ranked(scores)[:n]


                def best(scores):
                    return max(scores) if scores else None
                '''
            ),
        },
        hidden={
            "test_board.py": _d(
                r"""
                import unittest

                from leaderboard import best, ranked, top


                class BoardTest(unittest.TestCase):
                    def test_best(self):
                        self.assertEqual(best([3, 9, 4]), 9)

                    def test_best_of_nothing(self):
                        self.assertIsNone(best([]))

                    def test_ranked(self):
                        self.assertEqual(ranked([3, 9, 4]), [9, 4, 3])

                    def test_ranked_leaves_the_argument_alone(self):
                        scores = [3, 9, 4]
                        ranked(scores)
                        self.assertEqual(scores, [3, 9, 4])

                    def test_top(self):
                        self.assertEqual(top([5, 1, 8, 7, 2], n=2), [8, 7])

                    def test_top_of_a_short_list(self):
                        self.assertEqual(top([5], n=3), [5])
                """
            )
        },
        fix=[
            (
                "leaderboard/board.py",
                "    ordered = scores.sort(reverse=True)\n",
                "    ordered = sorted(scores, reverse=True)\n",
            )
        ],
        why="list.sort() sorts in place and returns None; sorted() returns a new list.",
        check=_py(
            """
            from leaderboard import ranked, top
            scores = [3, 9, 4]
            print(ranked(scores), top(scores, 2), scores)
            assert ranked(scores) == [9, 4, 3] and scores == [3, 9, 4]
            """
        ),
        wrong=[
            (
                "leaderboard/board.py",
                "    ordered = scores.sort(reverse=True)\n    return ordered\n",
                "    scores.sort(reverse=True)\n    return scores\n",
            )
        ],
    )


def _api_dict_get_default() -> Task:
    return _task(
        "wrong_api_use",
        2,
        title="Settings set to 0, False or an empty string are ignored",
        issue="""
            A setting given in the config should always win over the default, but falsy values
            are replaced by the defaults:

                >>> from appconfig import get_setting
                >>> get_setting({"timeout": 0, "color": False}, "timeout")
                30
                >>> get_setting({"color": False}, "color")
                True

            Expected `0` and `False`. The same goes for `log_file=""` (log to stderr) and for
            `effective()`. Asking for a setting that does not exist must still raise KeyError.
        """,
        files={
            "appconfig/__init__.py": "from appconfig.settings import DEFAULTS, effective, get_setting\n",
            "appconfig/settings.py": _d(
                r'''
                DEFAULTS = {"timeout": 30, "retries": 3, "color": True, "log_file": "app.log"}


                def get_setting(config, name):
                    """Setting ``name`` from ``config`` when it is there, else its default."""
                    return config.get(name) or DEFAULTS[name]


                def effective(config):
                    """Every setting, with the config's values over the defaults."""
                    return {name: get_setting(config, name) for name in DEFAULTS}
                '''
            ),
        },
        hidden={
            "test_settings.py": _d(
                r"""
                import unittest

                from appconfig import effective, get_setting


                class SettingsTest(unittest.TestCase):
                    def test_default(self):
                        self.assertEqual(get_setting({}, "timeout"), 30)

                    def test_configured_value(self):
                        self.assertEqual(get_setting({"timeout": 10}, "timeout"), 10)

                    def test_unknown_setting(self):
                        with self.assertRaises(KeyError):
                            get_setting({}, "colour")

                    def test_zero(self):
                        self.assertEqual(get_setting({"timeout": 0}, "timeout"), 0)

                    def test_false(self):
                        self.assertIs(get_setting({"color": False}, "color"), False)

                    def test_empty_string(self):
                        self.assertEqual(get_setting({"log_file": ""}, "log_file"), "")

                    def test_effective(self):
                        self.assertEqual(
                            effective({"retries": 0}),
                            {"timeout": 30, "retries": 0, "color": True, "log_file": "app.log"},
                        )
                """
            )
        },
        fix=[
            (
                "appconfig/settings.py",
                "    return config.get(name) or DEFAULTS[name]\n",
                "    return config.get(name, DEFAULTS[name])\n",
            )
        ],
        why="`or` replaces every falsy value; dict.get's default only applies to missing keys.",
        check=_py(
            """
            from appconfig import get_setting
            print(get_setting({"timeout": 0}, "timeout"), get_setting({}, "timeout"))
            assert get_setting({"color": False}, "color") is False
            """
        ),
        wrong=[
            (
                "appconfig/settings.py",
                "    return config.get(name) or DEFAULTS[name]\n",
                "    return config.get(name, DEFAULTS.get(name))\n",
            )
        ],
    )


def _api_split_lines() -> Task:
    return _task(
        "wrong_api_use",
        3,
        title="parse_env() keeps carriage returns from Windows files",
        issue="""
            `envfile.parse_env(text)` reads `KEY=value` lines (blank lines and `#` comments are
            skipped). Files saved on Windows end their lines with `\\r\\n`, and the values come
            back with a trailing `\\r`; blank lines even turn into a key:

                >>> from envfile import parse_env
                >>> parse_env("A=1\\r\\n\\r\\nB=2\\r\\n")
                {'A': '1\\r', '\\r': '', 'B': '2\\r'}

            Expected `{'A': '1', 'B': '2'}`. Spaces inside values must be kept as they are.
        """,
        files={
            "envfile/__init__.py": "from envfile.parse import parse_env\n",
            "envfile/parse.py": _d(
                r'''
                def parse_env(text):
                    """The KEY=value pairs of an env file; blank lines and # comments are skipped."""
                    result = {}
                    for line in text.split("\n"):
                        if not line or line.startswith("#"):
                            continue
                        key, _, value = line.partition("=")
                        result[key] = value
                    return result
                '''
            ),
        },
        hidden={
            "test_parse.py": _d(
                r"""
                import unittest

                from envfile import parse_env


                class ParseEnvTest(unittest.TestCase):
                    def test_unix_lines(self):
                        self.assertEqual(parse_env("A=1\nB=two\n"), {"A": "1", "B": "two"})

                    def test_comments_and_blank_lines(self):
                        self.assertEqual(parse_env("# settings\n\nA=1\n"), {"A": "1"})

                    def test_no_final_newline(self):
                        self.assertEqual(parse_env("A=1\nB=2"), {"A": "1", "B": "2"})

                    def test_equals_sign_in_the_value(self):
                        self.assertEqual(parse_env("URL=a=b\n"), {"URL": "a=b"})

                    def test_windows_lines(self):
                        self.assertEqual(parse_env("A=1\r\nB=2\r\n"), {"A": "1", "B": "2"})

                    def test_windows_blank_lines(self):
                        self.assertEqual(parse_env("A=1\r\n\r\nB=2\r\n"), {"A": "1", "B": "2"})

                    def test_spaces_in_values_are_kept(self):
                        self.assertEqual(parse_env("GREETING= hi \r\n"), {"GREETING": " hi "})
                """
            )
        },
        fix=[
            (
                "envfile/parse.py",
                '    for line in text.split("\\n"):\n',
                "    for line in text.splitlines():\n",
            )
        ],
        why="splitlines() splits on \\n, \\r\\n and \\r and drops the line endings.",
        check=_py(
            r"""
            from envfile import parse_env
            print(parse_env("A=1\r\n\r\nB=2\r\n"))
            assert parse_env("A=1\r\n\r\nB=2\r\n") == {"A": "1", "B": "2"}
            """
        ),
        wrong=[
            (
                "envfile/parse.py",
                "        result[key] = value\n",
                "        result[key] = value.strip()\n",
            )
        ],
    )


def _api_sort_key() -> Task:
    return _task(
        "wrong_api_use",
        4,
        title="sort_versions() puts 1.10 before 1.9",
        issue="""
            `releases.sort_versions()` sorts version strings as text, so "1.10.0" comes before
            "1.9.0" and `latest()` picks the wrong release:

                >>> from releases import latest, sort_versions
                >>> sort_versions(["1.10.0", "1.9.0", "1.2.0"])
                ['1.10.0', '1.2.0', '1.9.0']
                >>> latest(["1.9.0", "1.10.0"])
                '1.9.0'

            Expected `['1.2.0', '1.9.0', '1.10.0']` and `'1.10.0'`: each dot-separated part
            compares as a number.
        """,
        files={
            "releases/__init__.py": "from releases.versions import latest, sort_versions\n",
            "releases/versions.py": _d(
                r'''
                def sort_versions(versions):
                    """Version strings like "1.10.2", oldest first."""
                    return sorted(versions, key=str)


                def latest(versions):
                    """The newest version, or None when there is none."""
                    return sort_versions(versions)[-1] if versions else None
                '''
            ),
        },
        hidden={
            "test_versions.py": _d(
                r"""
                import unittest

                from releases import latest, sort_versions


                class VersionsTest(unittest.TestCase):
                    def test_single_digits(self):
                        self.assertEqual(sort_versions(["1.2", "1.0", "1.1"]), ["1.0", "1.1", "1.2"])

                    def test_nothing(self):
                        self.assertIsNone(latest([]))

                    def test_minor_ten_after_nine(self):
                        self.assertEqual(
                            sort_versions(["1.10.0", "1.9.0", "1.2.0"]), ["1.2.0", "1.9.0", "1.10.0"]
                        )

                    def test_major_ten_after_nine(self):
                        self.assertEqual(sort_versions(["10.0", "9.1"]), ["9.1", "10.0"])

                    def test_patch_numbers(self):
                        self.assertEqual(sort_versions(["1.2.10", "1.2.9"]), ["1.2.9", "1.2.10"])

                    def test_latest(self):
                        self.assertEqual(latest(["1.9.0", "1.10.0"]), "1.10.0")
                """
            )
        },
        fix=[
            (
                "releases/versions.py",
                "    return sorted(versions, key=str)\n",
                '    return sorted(versions, key=lambda v: tuple(int(part) for part in v.split(".")))\n',
            )
        ],
        why="Sort by a tuple of integers, one per dot-separated part, not by the text.",
        check=_py(
            """
            from releases import latest, sort_versions
            print(sort_versions(["1.10.0", "1.9.0", "1.2.0"]))
            assert latest(["1.9.0", "1.10.0", "1.2.10"]) == "1.10.0"
            """
        ),
        wrong=[
            (
                "releases/versions.py",
                "    return sorted(versions, key=str)\n",
                '    return sorted(versions, key=lambda v: v.split("."))\n',
            )
        ],
    )


def _api_strptime_format() -> Task:
    return _task(
        "wrong_api_use",
        5,
        title="parse_day() reads every date as January",
        issue="""
            `dates.parse_day("2024-03-15")` returns the wrong month, and nonsense months are
            accepted:

                >>> from dates import parse_day
                >>> parse_day("2024-03-15")
                datetime.date(2024, 1, 15)
                >>> parse_day("2024-13-01")
                datetime.date(2024, 1, 1)

            Expected `date(2024, 3, 15)` and a ValueError. `days_between()` is wrong for any
            dates outside January because of this.
        """,
        files={
            "dates/__init__.py": "from dates.days import days_between, format_day, parse_day\n",
            "dates/days.py": _d(
                r'''
                from datetime import datetime

                ISO_FORMAT = "%Y-%M-%d"


                def parse_day(text):
                    """A ``date`` from ISO text like "2024-03-15"."""
                    return datetime.strptime(text, ISO_FORMAT).date()


                def format_day(day):
                    """ "15.03.2024" """
                    return day.strftime("%d.%m.%Y")


                def days_between(start, end):
                    return (parse_day(end) - parse_day(start)).days
                '''
            ),
        },
        hidden={
            "test_days.py": _d(
                r"""
                import unittest
                from datetime import date

                from dates import days_between, format_day, parse_day


                class DaysTest(unittest.TestCase):
                    def test_january(self):
                        self.assertEqual(parse_day("2024-01-15"), date(2024, 1, 15))

                    def test_march(self):
                        self.assertEqual(parse_day("2024-03-15"), date(2024, 3, 15))

                    def test_format(self):
                        self.assertEqual(format_day(date(2024, 3, 5)), "05.03.2024")

                    def test_days_in_january(self):
                        self.assertEqual(days_between("2024-01-01", "2024-01-31"), 30)

                    def test_days_across_february(self):
                        self.assertEqual(days_between("2024-02-01", "2024-03-01"), 29)

                    def test_month_13_is_an_error(self):
                        with self.assertRaises(ValueError):
                            parse_day("2024-13-01")
                """
            )
        },
        fix=[("dates/days.py", 'ISO_FORMAT = "%Y-%M-%d"\n', 'ISO_FORMAT = "%Y-%m-%d"\n')],
        why="%M is minutes; the month directive is %m.",
        check=_py(
            """
            from dates import days_between, parse_day
            print(parse_day("2024-03-15"), days_between("2024-02-01", "2024-03-01"))
            assert parse_day("2024-03-15").month == 3
            """
        ),
        wrong=[("dates/days.py", 'ISO_FORMAT = "%Y-%M-%d"\n', 'ISO_FORMAT = "%y-%m-%d"\n')],
    )


def _api_rstrip_suffix() -> Task:
    return _task(
        "wrong_api_use",
        6,
        title="strip_suffix() eats letters of the file name",
        issue="""
            `filenames.strip_suffix(name, suffix)` should remove `suffix` from the end of `name`
            (and leave names that do not end with it alone). It removes too much:

                >>> from filenames import change_suffix, strip_suffix
                >>> strip_suffix("report.txt", ".txt")
                'repor'
                >>> change_suffix("draft.txt", ".txt", ".md")
                'draf.md'

            Expected `'report'` and `'draft.md'`. Only the suffix at the very end is removed;
            the same text elsewhere in the name stays.
        """,
        files={
            "filenames/__init__.py": "from filenames.names import change_suffix, strip_suffix\n",
            "filenames/names.py": _d(
                r'''
                def strip_suffix(name, suffix):
                    """``name`` without ``suffix`` at its end."""
                    return name.rstrip(suffix)


                def change_suffix(name, old, new):
                    return strip_suffix(name, old) + new
                '''
            ),
        },
        hidden={
            "test_names.py": _d(
                r"""
                import unittest

                from filenames import change_suffix, strip_suffix


                class SuffixTest(unittest.TestCase):
                    def test_notes(self):
                        self.assertEqual(strip_suffix("notes.txt", ".txt"), "notes")

                    def test_other_suffix_is_kept(self):
                        self.assertEqual(strip_suffix("data.csv", ".txt"), "data.csv")

                    def test_report(self):
                        self.assertEqual(strip_suffix("report.txt", ".txt"), "report")

                    def test_name_made_of_suffix_letters(self):
                        self.assertEqual(strip_suffix("text.txt", ".txt"), "text")

                    def test_only_the_end(self):
                        self.assertEqual(strip_suffix("a.txt.bak.txt", ".txt"), "a.txt.bak")

                    def test_change_suffix(self):
                        self.assertEqual(change_suffix("draft.txt", ".txt", ".md"), "draft.md")
                """
            )
        },
        fix=[
            (
                "filenames/names.py",
                "    return name.rstrip(suffix)\n",
                "    return name.removesuffix(suffix)\n",
            )
        ],
        why="rstrip() removes any of the given characters; removesuffix() removes the string.",
        check=_py(
            """
            from filenames import change_suffix, strip_suffix
            print(strip_suffix("report.txt", ".txt"), change_suffix("draft.txt", ".txt", ".md"))
            assert strip_suffix("text.txt", ".txt") == "text"
            """
        ),
        wrong=[
            (
                "filenames/names.py",
                "    return name.rstrip(suffix)\n",
                '    return name.replace(suffix, "")\n',
            )
        ],
    )


# --------------------------------------------------------------------------------------------
# missing_feature
# --------------------------------------------------------------------------------------------


def _feature_top_words() -> Task:
    return _task(
        "missing_feature",
        1,
        title="Implement top_words()",
        issue="""
            `textstats.top_words(text, n=3)` is still a stub that raises NotImplementedError.

            It should return the `n` most frequent words of `text` as `(word, count)` pairs,
            most frequent first; words with the same count come in alphabetical order. Words are
            what `words()` returns (lower-cased, without punctuation). For example:

                >>> from textstats import top_words
                >>> top_words("the cat and the hat", 2)
                [('the', 2), ('and', 1)]
        """,
        files={
            "textstats/__init__.py": "from textstats.words import top_words, word_count, words\n",
            "textstats/words.py": _d(
                r'''
                import re

                _WORD = re.compile(r"[a-z0-9']+")


                def words(text):
                    """The words of ``text``, lower-cased, without punctuation."""
                    return _WORD.findall(text.lower())


                def word_count(text):
                    return len(words(text))


                def top_words(text, n=3):
                    """The ``n`` most frequent words as (word, count) pairs."""
                    raise NotImplementedError("top_words")
                '''
            ),
        },
        hidden={
            "test_words.py": _d(
                r"""
                import unittest

                from textstats import top_words, word_count, words


                class WordsTest(unittest.TestCase):
                    def test_words(self):
                        self.assertEqual(words("Hello, world! It's me."), ["hello", "world", "it's", "me"])

                    def test_word_count(self):
                        self.assertEqual(word_count("one two  three"), 3)

                    def test_top_words(self):
                        self.assertEqual(top_words("the cat and the hat", 1), [("the", 2)])

                    def test_ties_are_alphabetical(self):
                        self.assertEqual(
                            top_words("b a b a c", 3), [("a", 2), ("b", 2), ("c", 1)]
                        )

                    def test_fewer_words_than_n(self):
                        self.assertEqual(top_words("Go go GO", 5), [("go", 3)])

                    def test_no_words(self):
                        self.assertEqual(top_words("", 3), [])
                """
            )
        },
        fix=[
            ("textstats/words.py", "import re\n", "import re\nfrom collections import Counter\n"),
            (
                "textstats/words.py",
                '    raise NotImplementedError("top_words")\n',
                "    counts = Counter(words(text))\n"
                "    ranked = sorted(counts.items(), key=lambda item: (-item[1], item[0]))\n"
                "    return ranked[:n]\n",
            ),
        ],
        why="Count with a Counter, then sort by (-count, word) so ties are alphabetical.",
        check=_py(
            """
            from textstats import top_words
            print(top_words("the cat and the hat", 2))
            assert top_words("the cat and the hat", 2) == [("the", 2), ("and", 1)]
            """
        ),
        wrong=[
            ("textstats/words.py", "import re\n", "import re\nfrom collections import Counter\n"),
            (
                "textstats/words.py",
                '    raise NotImplementedError("top_words")\n',
                "    return Counter(words(text)).most_common(n)\n",
            ),
        ],
    )


def _feature_slug_max_length() -> Task:
    return _task(
        "missing_feature",
        2,
        title="Support max_length in slugify()",
        issue="""
            `slugs.slugify(title, max_length=None)` accepts `max_length` but raises
            NotImplementedError when it is given.

            With `max_length`, the slug must be at most that many characters, cut at a word
            boundary (whole words only, never ending in "-"). When even the first word is too
            long, it is cut to `max_length` characters. A slug that already fits is unchanged:

                >>> from slugs import slugify
                >>> slugify("The quick brown fox", max_length=12)
                'the-quick'
                >>> slugify("Supercalifragilistic", max_length=5)
                'super'
        """,
        files={
            "slugs/__init__.py": "from slugs.slugify import slugify\n",
            "slugs/slugify.py": _d(
                r'''
                import re


                def slugify(title, max_length=None):
                    """URL slug of ``title``: lower-case ASCII words joined by "-"."""
                    slug = "-".join(re.findall(r"[a-z0-9]+", title.lower()))
                    if max_length is not None:
                        raise NotImplementedError("max_length")
                    return slug
                '''
            ),
        },
        hidden={
            "test_slugify.py": _d(
                r"""
                import unittest

                from slugs import slugify


                class SlugifyTest(unittest.TestCase):
                    def test_plain(self):
                        self.assertEqual(slugify("Hello, World!"), "hello-world")

                    def test_no_limit(self):
                        self.assertEqual(slugify("The quick brown fox"), "the-quick-brown-fox")

                    def test_limit_that_fits(self):
                        self.assertEqual(slugify("Hello World", max_length=50), "hello-world")

                    def test_cut_at_a_word_boundary(self):
                        self.assertEqual(slugify("The quick brown fox", max_length=12), "the-quick")

                    def test_exact_fit(self):
                        self.assertEqual(
                            slugify("The quick brown fox", max_length=15), "the-quick-brown"
                        )

                    def test_never_ends_with_a_dash(self):
                        self.assertEqual(slugify("ab cd ef", max_length=6), "ab-cd")

                    def test_one_long_word(self):
                        self.assertEqual(slugify("Supercalifragilistic", max_length=5), "super")
                """
            )
        },
        fix=[
            (
                "slugs/slugify.py",
                '        raise NotImplementedError("max_length")\n',
                '        while len(slug) > max_length and "-" in slug:\n'
                '            slug = slug.rsplit("-", 1)[0]\n'
                "        slug = slug[:max_length]\n",
            )
        ],
        why="Drop whole words from the end until the slug fits; cut a lone word hard.",
        check=_py(
            """
            from slugs import slugify
            print(slugify("The quick brown fox", max_length=12))
            assert slugify("The quick brown fox", max_length=12) == "the-quick"
            assert slugify("Supercalifragilistic", max_length=5) == "super"
            """
        ),
        wrong=[
            (
                "slugs/slugify.py",
                '        raise NotImplementedError("max_length")\n',
                '        slug = slug[:max_length].rstrip("-")\n',
            )
        ],
    )


def _feature_from_roman() -> Task:
    return _task(
        "missing_feature",
        3,
        title="Implement from_roman()",
        issue="""
            `numerals.to_roman()` works, but its inverse `numerals.from_roman(text)` is a stub
            raising NotImplementedError.

            It should return the integer value of a roman numeral, ignoring case and using the
            subtractive rule (a smaller numeral before a larger one is subtracted):

                >>> from numerals import from_roman
                >>> from_roman("MCMXCIV"), from_roman("xiv")
                (1994, 14)

            Text that is empty or has other characters than I, V, X, L, C, D and M raises
            ValueError. `from_roman(to_roman(n)) == n` for every n from 1 to 3999.
        """,
        files={
            "numerals/__init__.py": "from numerals.roman import from_roman, to_roman\n",
            "numerals/roman.py": _d(
                r'''
                NUMERALS = [
                    (1000, "M"), (900, "CM"), (500, "D"), (400, "CD"), (100, "C"), (90, "XC"),
                    (50, "L"), (40, "XL"), (10, "X"), (9, "IX"), (5, "V"), (4, "IV"), (1, "I"),
                ]
                VALUES = {"I": 1, "V": 5, "X": 10, "L": 50, "C": 100, "D": 500, "M": 1000}


                def to_roman(number):
                    if not 0 < number < 4000:
                        raise ValueError("only 1-3999 can be written in roman numerals")
                    parts = []
                    for value, letters in NUMERALS:
                        count, number = divmod(number, value)
                        parts.append(letters * count)
                    return "".join(parts)


                def from_roman(text):
                    """The integer value of a roman numeral such as "MCMXCIV"."""
                    raise NotImplementedError("from_roman")
                '''
            ),
        },
        hidden={
            "test_roman.py": _d(
                r"""
                import unittest

                from numerals import from_roman, to_roman


                class RomanTest(unittest.TestCase):
                    def test_to_roman(self):
                        self.assertEqual(to_roman(1994), "MCMXCIV")

                    def test_to_roman_range(self):
                        with self.assertRaises(ValueError):
                            to_roman(0)

                    def test_additive(self):
                        self.assertEqual(from_roman("MDCLXVI"), 1666)

                    def test_subtractive(self):
                        self.assertEqual(from_roman("MCMXCIV"), 1994)

                    def test_lower_case(self):
                        self.assertEqual(from_roman("xiv"), 14)

                    def test_round_trip(self):
                        for number in range(1, 4000):
                            self.assertEqual(from_roman(to_roman(number)), number)

                    def test_invalid(self):
                        for text in ("", "ABC", "X1"):
                            with self.assertRaises(ValueError):
                                from_roman(text)
                """
            )
        },
        fix=[
            (
                "numerals/roman.py",
                '    raise NotImplementedError("from_roman")\n',
                "    text = text.upper()\n"
                "    if not text or any(ch not in VALUES for ch in text):\n"
                '        raise ValueError(f"not a roman numeral: {text!r}")\n'
                "    total = 0\n"
                '    for ch, after in zip(text, text[1:] + " "):\n'
                "        value = VALUES[ch]\n"
                "        total += -value if VALUES.get(after, 0) > value else value\n"
                "    return total\n",
            )
        ],
        why="Add each numeral's value, subtracting it when a larger numeral follows.",
        check=_py(
            """
            from numerals import from_roman, to_roman
            print(from_roman("MCMXCIV"), from_roman("xiv"))
            assert all(from_roman(to_roman(n)) == n for n in range(1, 4000))
            """
        ),
        wrong=[
            (
                "numerals/roman.py",
                '    raise NotImplementedError("from_roman")\n',
                "    text = text.upper()\n"
                "    if not text or any(ch not in VALUES for ch in text):\n"
                '        raise ValueError(f"not a roman numeral: {text!r}")\n'
                "    return sum(VALUES[ch] for ch in text)\n",
            )
        ],
    )


def _feature_cart_remove() -> Task:
    return _task(
        "missing_feature",
        4,
        title="Implement Cart.remove()",
        issue="""
            `store.Cart.remove(sku, quantity=None)` raises NotImplementedError; the "remove"
            button on the basket page needs it.

            It should take `quantity` units of `sku` out of the cart, or all of them when
            `quantity` is None. A line that reaches 0 disappears from the cart (and from
            `total()`). Removing a sku that is not in the cart raises KeyError; removing more
            units than there are raises ValueError and leaves the cart as it was.

                >>> from store import Cart
                >>> cart = Cart()
                >>> cart.add("apple", 0.5, quantity=4)
                >>> cart.remove("apple", 1)
                >>> cart.quantity("apple"), cart.total()
                (3, 1.5)
        """,
        files={
            "store/__init__.py": "from store.cart import Cart\n",
            "store/cart.py": _d(
                r'''
                class Cart:
                    def __init__(self):
                        self._quantities = {}
                        self._prices = {}

                    def add(self, sku, price, quantity=1):
                        if quantity < 1:
                            raise ValueError("quantity must be at least 1")
                        self._prices[sku] = price
                        self._quantities[sku] = self._quantities.get(sku, 0) + quantity

                    def quantity(self, sku):
                        return self._quantities.get(sku, 0)

                    def remove(self, sku, quantity=None):
                        """Remove ``quantity`` units of ``sku`` (all of them when None)."""
                        raise NotImplementedError("Cart.remove")

                    def total(self):
                        return round(sum(self._prices[s] * q for s, q in self._quantities.items()), 2)

                    def __len__(self):
                        return sum(self._quantities.values())
                '''
            ),
        },
        hidden={
            "test_cart.py": _d(
                r"""
                import unittest

                from store import Cart


                class CartTest(unittest.TestCase):
                    def setUp(self):
                        self.cart = Cart()
                        self.cart.add("apple", 0.5, quantity=4)
                        self.cart.add("pear", 2.0)

                    def test_total_and_length(self):
                        self.assertEqual(self.cart.total(), 4.0)
                        self.assertEqual(len(self.cart), 5)

                    def test_remove_some(self):
                        self.cart.remove("apple", 1)
                        self.assertEqual(self.cart.quantity("apple"), 3)
                        self.assertEqual(self.cart.total(), 3.5)

                    def test_remove_all_of_a_line(self):
                        self.cart.remove("apple")
                        self.assertEqual(self.cart.quantity("apple"), 0)
                        self.assertEqual(len(self.cart), 1)

                    def test_removing_down_to_zero_drops_the_line(self):
                        self.cart.remove("pear", 1)
                        self.assertEqual(self.cart.total(), 2.0)
                        self.assertEqual(len(self.cart), 4)

                    def test_remove_too_many(self):
                        with self.assertRaises(ValueError):
                            self.cart.remove("apple", 5)
                        self.assertEqual(self.cart.quantity("apple"), 4)

                    def test_remove_unknown(self):
                        with self.assertRaises(KeyError):
                            self.cart.remove("plum")
                """
            )
        },
        fix=[
            (
                "store/cart.py",
                '        raise NotImplementedError("Cart.remove")\n',
                "        have = self._quantities[sku]\n"
                "        if quantity is None:\n"
                "            quantity = have\n"
                "        if quantity > have:\n"
                '            raise ValueError(f"only {have} of {sku} in the cart")\n'
                "        if quantity == have:\n"
                "            del self._quantities[sku]\n"
                "            del self._prices[sku]\n"
                "        else:\n"
                "            self._quantities[sku] = have - quantity\n",
            )
        ],
        why="Look the line up (KeyError if missing), check the quantity, then shrink or drop it.",
        check=_py(
            """
            from store import Cart
            cart = Cart()
            cart.add("apple", 0.5, quantity=4)
            cart.remove("apple", 1)
            print(cart.quantity("apple"), cart.total())
            cart.remove("apple")
            assert len(cart) == 0 and cart.total() == 0
            """
        ),
        wrong=[
            (
                "store/cart.py",
                '        raise NotImplementedError("Cart.remove")\n',
                "        del self._quantities[sku]\n        del self._prices[sku]\n",
            )
        ],
    )


def _feature_kelvin() -> Task:
    return _task(
        "missing_feature",
        5,
        title="Add Kelvin to the temperature converter",
        issue="""
            `units.convert(value, from_unit, to_unit)` handles "C" and "F"; "K" (kelvin) is
            recognised but raises NotImplementedError in both directions.

            Please support kelvin (K = °C + 273.15) for conversions to and from every unit:

                >>> from units import convert
                >>> convert(0, "C", "K"), convert(300, "K", "F")
                (273.15, 80.33)

            Results are rounded to 2 decimal places, as for the other units.
        """,
        files={
            "units/__init__.py": "from units.temperature import convert\n",
            "units/temperature.py": _d(
                r'''
                def to_celsius(value, unit):
                    if unit == "C":
                        return value
                    if unit == "F":
                        return (value - 32) * 5 / 9
                    if unit == "K":
                        raise NotImplementedError("kelvin")
                    raise ValueError(f"unknown unit {unit!r}")


                def from_celsius(value, unit):
                    if unit == "C":
                        return value
                    if unit == "F":
                        return value * 9 / 5 + 32
                    if unit == "K":
                        raise NotImplementedError("kelvin")
                    raise ValueError(f"unknown unit {unit!r}")


                def convert(value, from_unit, to_unit):
                    """``value`` in ``from_unit`` converted to ``to_unit``, rounded to 2 places."""
                    return round(from_celsius(to_celsius(value, from_unit), to_unit), 2)
                '''
            ),
        },
        hidden={
            "test_temperature.py": _d(
                r"""
                import unittest

                from units import convert


                class ConvertTest(unittest.TestCase):
                    def test_celsius_to_fahrenheit(self):
                        self.assertEqual(convert(100, "C", "F"), 212.0)

                    def test_fahrenheit_to_celsius(self):
                        self.assertEqual(convert(-40, "F", "C"), -40.0)

                    def test_unknown_unit(self):
                        with self.assertRaises(ValueError):
                            convert(1, "C", "R")

                    def test_celsius_to_kelvin(self):
                        self.assertEqual(convert(0, "C", "K"), 273.15)

                    def test_kelvin_to_celsius(self):
                        self.assertEqual(convert(373.15, "K", "C"), 100.0)

                    def test_kelvin_to_fahrenheit(self):
                        self.assertEqual(convert(300, "K", "F"), 80.33)

                    def test_absolute_zero(self):
                        self.assertEqual(convert(0, "K", "F"), -459.67)
                """
            )
        },
        fix=[
            (
                "units/temperature.py",
                "        return (value - 32) * 5 / 9\n"
                '    if unit == "K":\n'
                '        raise NotImplementedError("kelvin")\n',
                "        return (value - 32) * 5 / 9\n"
                '    if unit == "K":\n'
                "        return value - 273.15\n",
            ),
            (
                "units/temperature.py",
                "        return value * 9 / 5 + 32\n"
                '    if unit == "K":\n'
                '        raise NotImplementedError("kelvin")\n',
                "        return value * 9 / 5 + 32\n"
                '    if unit == "K":\n'
                "        return value + 273.15\n",
            ),
        ],
        why="Kelvin is Celsius shifted by 273.15: subtract it going to C, add it coming from C.",
        check=_py(
            """
            from units import convert
            print(convert(0, "C", "K"), convert(300, "K", "F"), convert(0, "K", "F"))
            assert convert(373.15, "K", "C") == 100.0
            """
        ),
        wrong=[
            (
                "units/temperature.py",
                "        return (value - 32) * 5 / 9\n"
                '    if unit == "K":\n'
                '        raise NotImplementedError("kelvin")\n',
                "        return (value - 32) * 5 / 9\n"
                '    if unit == "K":\n'
                "        return value + 273.15\n",
            ),
            (
                "units/temperature.py",
                "        return value * 9 / 5 + 32\n"
                '    if unit == "K":\n'
                '        raise NotImplementedError("kelvin")\n',
                "        return value * 9 / 5 + 32\n"
                '    if unit == "K":\n'
                "        return value + 273.15\n",
            ),
        ],
    )


def _feature_build_query() -> Task:
    return _task(
        "missing_feature",
        6,
        title="Implement build_query()",
        issue="""
            `urltools.parse_query()` exists but its inverse `urltools.build_query(params)` raises
            NotImplementedError.

            It should return `key=value` pairs joined by "&", with keys in sorted order and keys
            and values percent-encoded (a space becomes `%20`, "&" becomes `%26`, "/" becomes
            `%2F`). Values are turned into strings; keys whose value is None are left out:

                >>> from urltools import build_query
                >>> build_query({"q": "fish & chips", "page": 2, "debug": None})
                'page=2&q=fish%20%26%20chips'

            `parse_query(build_query(d))` gives `d` back for a dict of strings.
        """,
        files={
            "urltools/__init__.py": "from urltools.query import build_query, parse_query\n",
            "urltools/query.py": _d(
                r'''
                from urllib.parse import parse_qsl, quote


                def parse_query(query):
                    """ "a=1&b=x%20y" -> {"a": "1", "b": "x y"} (a leading "?" is ignored)."""
                    return dict(parse_qsl(query.lstrip("?"), keep_blank_values=True))


                def build_query(params):
                    """The query string of the dict ``params``."""
                    raise NotImplementedError("build_query")
                '''
            ),
        },
        hidden={
            "test_query.py": _d(
                r"""
                import unittest

                from urltools import build_query, parse_query


                class QueryTest(unittest.TestCase):
                    def test_parse(self):
                        self.assertEqual(parse_query("?a=1&b=x%20y"), {"a": "1", "b": "x y"})

                    def test_parse_blank_value(self):
                        self.assertEqual(parse_query("a="), {"a": ""})

                    def test_sorted_keys(self):
                        self.assertEqual(build_query({"b": 2, "a": 1}), "a=1&b=2")

                    def test_escaping(self):
                        self.assertEqual(
                            build_query({"q": "fish & chips", "path": "a/b"}),
                            "path=a%2Fb&q=fish%20%26%20chips",
                        )

                    def test_none_is_left_out(self):
                        self.assertEqual(build_query({"a": 1, "debug": None}), "a=1")

                    def test_round_trip(self):
                        params = {"name": "Zoë", "note": "50% off?", "x": ""}
                        self.assertEqual(parse_query(build_query(params)), params)
                """
            )
        },
        fix=[
            (
                "urltools/query.py",
                '    raise NotImplementedError("build_query")\n',
                "    pairs = []\n"
                "    for key in sorted(params):\n"
                "        if params[key] is not None:\n"
                '            pairs.append(quote(str(key), safe="") + "=" + quote(str(params[key]), safe=""))\n'
                '    return "&".join(pairs)\n',
            )
        ],
        why='Percent-encode keys and values with quote(..., safe="") so "/" is encoded too.',
        check=_py(
            """
            from urltools import build_query, parse_query
            query = build_query({"q": "fish & chips", "page": 2, "debug": None})
            print(query)
            assert parse_query(query) == {"q": "fish & chips", "page": "2"}
            """
        ),
        wrong=[
            (
                "urltools/query.py",
                '    raise NotImplementedError("build_query")\n',
                '    return "&".join(\n'
                '        f"{key}={quote(str(params[key]))}"\n'
                "        for key in sorted(params)\n"
                "        if params[key] is not None\n"
                "    )\n",
            )
        ],
    )


# --------------------------------------------------------------------------------------------
# refactor_keep_behaviour
# --------------------------------------------------------------------------------------------


def _refactor_extract_helper() -> Task:
    return _task(
        "refactor_keep_behaviour",
        1,
        title="Refactor: remove the duplicated padding code in reports/rows.py",
        issue="""
            `user_row()` and `admin_row()` in `reports/rows.py` both cut and pad their cells by
            hand. Please extract a public helper `format_row(cells, widths)` in the same module:
            each cell (made a string) is cut to its width and padded with spaces to it, the cells
            are joined with " | ", and trailing spaces are removed. `user_row()` and
            `admin_row()` must then call `format_row()` and no longer call `ljust()` themselves.

            Their output must stay exactly the same, for example:

                >>> from reports import user_row
                >>> user_row({"name": "Ada", "email": "ada@example.org"})
                'Ada                  | ada@example.org'
        """,
        files={
            "reports/__init__.py": "from reports.rows import admin_row, user_row\n",
            "reports/rows.py": _d(
                r'''
                """Fixed-width text rows for the user report."""


                def user_row(user):
                    name = user["name"][:20].ljust(20)
                    email = user["email"][:30].ljust(30)
                    return f"{name} | {email}".rstrip()


                def admin_row(admin):
                    name = admin["name"][:20].ljust(20)
                    email = admin["email"][:30].ljust(30)
                    role = admin["role"][:10].ljust(10)
                    return f"{name} | {email} | {role}".rstrip()
                '''
            ),
        },
        hidden={
            "test_rows.py": _d(
                r"""
                import inspect
                import unittest

                from reports import admin_row, rows, user_row

                ADA = {"name": "Ada", "email": "ada@example.org", "role": "owner"}
                LONG = {"name": "N" * 25, "email": "e" * 40, "role": "superadministrator"}


                class BehaviourTest(unittest.TestCase):
                    def test_user_row(self):
                        self.assertEqual(user_row(ADA), "Ada" + " " * 17 + " | ada@example.org")

                    def test_admin_row(self):
                        expected = "Ada" + " " * 17 + " | ada@example.org" + " " * 15 + " | owner"
                        self.assertEqual(admin_row(ADA), expected)

                    def test_long_cells_are_cut(self):
                        expected = "N" * 20 + " | " + "e" * 30 + " | superadmin"
                        self.assertEqual(admin_row(LONG), expected)


                class StructureTest(unittest.TestCase):
                    def test_format_row(self):
                        self.assertEqual(rows.format_row(["ab", 7, "xyz"], [3, 2, 2]), "ab  | 7  | xy")

                    def test_rows_use_the_helper(self):
                        for func in (rows.user_row, rows.admin_row):
                            source = inspect.getsource(func)
                            self.assertIn("format_row(", source, func.__name__)
                            self.assertNotIn("ljust", source, func.__name__)
                """
            )
        },
        fix=[
            (
                "reports/rows.py",
                _d(
                    r"""
                    def user_row(user):
                        name = user["name"][:20].ljust(20)
                        email = user["email"][:30].ljust(30)
                        return f"{name} | {email}".rstrip()


                    def admin_row(admin):
                        name = admin["name"][:20].ljust(20)
                        email = admin["email"][:30].ljust(30)
                        role = admin["role"][:10].ljust(10)
                        return f"{name} | {email} | {role}".rstrip()
                    """
                ),
                _d(
                    r'''
                    def format_row(cells, widths):
                        """Each cell cut and padded to its width, joined by " | ", no trailing spaces."""
                        padded = [str(cell)[:width].ljust(width) for cell, width in zip(cells, widths)]
                        return " | ".join(padded).rstrip()


                    def user_row(user):
                        return format_row([user["name"], user["email"]], [20, 30])


                    def admin_row(admin):
                        return format_row([admin["name"], admin["email"], admin["role"]], [20, 30, 10])
                    '''
                ),
            )
        ],
        why="One helper does the cutting, padding and joining; both rows pass cells and widths.",
        check=_py(
            """
            from reports import admin_row, user_row
            from reports.rows import format_row
            print(repr(user_row({"name": "Ada", "email": "ada@example.org"})))
            assert format_row(["ab", 7], [3, 2]) == "ab  | 7"
            assert admin_row({"name": "N" * 25, "email": "e", "role": "r"}).startswith("N" * 20 + " | e")
            """
        ),
        wrong=[
            (
                "reports/rows.py",
                _d(
                    r"""
                    def user_row(user):
                        name = user["name"][:20].ljust(20)
                        email = user["email"][:30].ljust(30)
                        return f"{name} | {email}".rstrip()


                    def admin_row(admin):
                        name = admin["name"][:20].ljust(20)
                        email = admin["email"][:30].ljust(30)
                        role = admin["role"][:10].ljust(10)
                        return f"{name} | {email} | {role}".rstrip()
                    """
                ),
                _d(
                    r"""
                    def format_row(cells, widths):
                        padded = [str(cell).ljust(width) for cell, width in zip(cells, widths)]
                        return " | ".join(padded).rstrip()


                    def user_row(user):
                        return format_row([user["name"], user["email"]], [20, 30])


                    def admin_row(admin):
                        return format_row([admin["name"], admin["email"], admin["role"]], [20, 30, 10])
                    """
                ),
            )
        ],
    )


def _refactor_rename() -> Task:
    return _task(
        "refactor_keep_behaviour",
        2,
        title="Refactor: rename geometry's calc() to hypotenuse()",
        issue="""
            `geometry.triangles.calc(a, b)` computes the hypotenuse of a right triangle, but the
            name says nothing. Please rename it to `hypotenuse` everywhere: in
            `geometry/triangles.py`, in the package's exports (`geometry.hypotenuse`) and in the
            command line tool `geometry/cli.py` (`python3 -m geometry.cli 3 4` prints `5`).

            Do not keep `calc` around as an alias: nothing in the package should be called
            `calc` afterwards. Behaviour stays the same.
        """,
        files={
            "geometry/__init__.py": "from geometry.triangles import calc, perimeter\n",
            "geometry/triangles.py": _d(
                r'''
                import math


                def calc(a, b):
                    """The length of the long side of a right triangle with legs a and b."""
                    return math.sqrt(a * a + b * b)


                def perimeter(a, b):
                    """The perimeter of a right triangle with legs a and b."""
                    return a + b + calc(a, b)
                '''
            ),
            "geometry/cli.py": _d(
                r"""
                import sys

                from geometry.triangles import calc


                def main(argv=None):
                    args = sys.argv[1:] if argv is None else argv
                    a, b = (float(arg) for arg in args)
                    print(f"{calc(a, b):g}")
                    return 0


                if __name__ == "__main__":
                    sys.exit(main())
                """
            ),
        },
        hidden={
            "test_geometry.py": _d(
                r"""
                import ast
                import contextlib
                import io
                import pathlib
                import unittest

                import geometry
                from geometry import cli, triangles


                def names_in(path):
                    tree = ast.parse(pathlib.Path(path).read_text())
                    for node in ast.walk(tree):
                        if isinstance(node, ast.Name):
                            yield node.id
                        elif isinstance(node, ast.Attribute):
                            yield node.attr
                        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                            yield node.name
                        elif isinstance(node, ast.alias):
                            yield node.name
                            yield node.asname


                class BehaviourTest(unittest.TestCase):
                    def test_perimeter(self):
                        self.assertEqual(geometry.perimeter(3, 4), 12)

                    def test_cli(self):
                        out = io.StringIO()
                        with contextlib.redirect_stdout(out):
                            self.assertEqual(cli.main(["3", "4"]), 0)
                        self.assertEqual(out.getvalue(), "5\n")

                    def test_hypotenuse(self):
                        self.assertEqual(triangles.hypotenuse(5, 12), 13)


                class StructureTest(unittest.TestCase):
                    def test_exported(self):
                        self.assertIs(geometry.hypotenuse, triangles.hypotenuse)

                    def test_old_name_is_gone(self):
                        self.assertFalse(hasattr(triangles, "calc"))
                        self.assertFalse(hasattr(geometry, "calc"))

                    def test_no_calc_left_in_the_package(self):
                        package = pathlib.Path(geometry.__file__).parent
                        for path in sorted(package.glob("*.py")):
                            self.assertNotIn("calc", set(names_in(path)), path.name)
                """
            )
        },
        read="geometry/triangles.py",
        fix=[("geometry/triangles.py", "def calc(a, b):\n", "def hypotenuse(a, b):\n")],
        why="Rename the definition, then every use of the old name in the package.",
        check=(
            'sed -i -E "s/\\bcalc\\b/hypotenuse/g" geometry/*.py'
            " && grep -rn hypotenuse geometry && python3 -m geometry.cli 3 4"
        ),
        wrong=[
            ("geometry/triangles.py", "def calc(a, b):\n", "def hypotenuse(a, b):\n"),
            (
                "geometry/triangles.py",
                "def perimeter(a, b):\n",
                "calc = hypotenuse  # the old name keeps working\n\n\ndef perimeter(a, b):\n",
            ),
        ],
    )


def _refactor_constant() -> Task:
    return _task(
        "refactor_keep_behaviour",
        3,
        title="Refactor: one constant for the VAT rate",
        issue="""
            The 20% VAT rate is hard-coded three times in `invoicing/tax.py` (as 0.2 and 1.2),
            so the next rate change will be missed somewhere. Please introduce a module constant
            `VAT_RATE = 0.2` and compute `vat()`, `gross()` and `net_from_gross()` from it, so
            that changing the rate is a one-line change. No other float literals should remain in
            the functions.

            The results must stay exactly the same (e.g. `gross(19.99) == 23.99`).
        """,
        files={
            "invoicing/__init__.py": "from invoicing.tax import gross, net_from_gross, vat\n",
            "invoicing/tax.py": _d(
                r'''
                """VAT arithmetic; amounts are rounded to cents."""


                def vat(net):
                    return round(net * 0.2, 2)


                def gross(net):
                    return round(net * 1.2, 2)


                def net_from_gross(gross_amount):
                    return round(gross_amount / 1.2, 2)
                '''
            ),
        },
        hidden={
            "test_tax.py": _d(
                r"""
                import ast
                import inspect
                import textwrap
                import unittest

                from invoicing import gross, net_from_gross, tax, vat


                class BehaviourTest(unittest.TestCase):
                    def test_vat(self):
                        self.assertEqual(vat(100), 20.0)

                    def test_gross(self):
                        self.assertEqual(gross(100), 120.0)
                        self.assertEqual(gross(19.99), 23.99)

                    def test_net_from_gross(self):
                        self.assertEqual(net_from_gross(120), 100.0)
                        self.assertEqual(net_from_gross(23.99), 19.99)


                class StructureTest(unittest.TestCase):
                    def test_constant(self):
                        self.assertEqual(tax.VAT_RATE, 0.2)

                    def test_no_float_literals_in_the_functions(self):
                        for func in (tax.vat, tax.gross, tax.net_from_gross):
                            tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
                            floats = [
                                node.value
                                for node in ast.walk(tree)
                                if isinstance(node, ast.Constant) and isinstance(node.value, float)
                            ]
                            self.assertEqual(floats, [], func.__name__)

                    def test_the_rate_is_used_everywhere(self):
                        self.addCleanup(setattr, tax, "VAT_RATE", tax.VAT_RATE)
                        tax.VAT_RATE = 0.1
                        self.assertEqual(
                            (tax.vat(100), tax.gross(100), tax.net_from_gross(110)), (10.0, 110.0, 100.0)
                        )
                """
            )
        },
        fix=[
            (
                "invoicing/tax.py",
                _d(
                    r"""
                    def vat(net):
                        return round(net * 0.2, 2)


                    def gross(net):
                        return round(net * 1.2, 2)


                    def net_from_gross(gross_amount):
                        return round(gross_amount / 1.2, 2)
                    """
                ),
                _d(
                    r"""
                    VAT_RATE = 0.2


                    def vat(net):
                        return round(net * VAT_RATE, 2)


                    def gross(net):
                        return round(net * (1 + VAT_RATE), 2)


                    def net_from_gross(gross_amount):
                        return round(gross_amount / (1 + VAT_RATE), 2)
                    """
                ),
            )
        ],
        why="1 + VAT_RATE is exactly the float 1.2, so every result stays the same.",
        check=_py(
            """
            from invoicing import gross, net_from_gross, tax, vat
            print(vat(100), gross(19.99), net_from_gross(120))
            assert (vat(100), gross(19.99), net_from_gross(23.99)) == (20.0, 23.99, 19.99)
            assert tax.VAT_RATE == 0.2
            """
        ),
        wrong=[
            (
                "invoicing/tax.py",
                '"""VAT arithmetic; amounts are rounded to cents."""\n',
                '"""VAT arithmetic; amounts are rounded to cents."""\n\nVAT_RATE = 0.2\n',
            ),
            ("invoicing/tax.py", "net * 0.2, 2)", "net * VAT_RATE, 2)"),
            ("invoicing/tax.py", "net * 1.2, 2)", "net * (1 + VAT_RATE), 2)"),
        ],
    )


def _refactor_lookup_table() -> Task:
    return _task(
        "refactor_keep_behaviour",
        4,
        title="Refactor: one unit table instead of two if/elif chains",
        issue="""
            `measure/length.py` converts lengths with two if/elif chains, one in `to_meters()`
            and one in `from_meters()`, and every new unit has to be added to both. Please
            replace them with one module-level table `METERS_PER_UNIT` (unit -> meters in one
            unit: "mm", "cm", "m", "km") used by both functions, so that adding a unit is a
            single new table entry. The functions should no longer compare `unit` with unit
            names themselves.

            Behaviour stays the same, including the ValueError for an unknown unit:

                >>> from measure import convert
                >>> convert(1.5, "km", "m"), convert(25, "mm", "cm")
                (1500.0, 2.5)
        """,
        files={
            "measure/__init__.py": "from measure.length import convert, from_meters, to_meters\n",
            "measure/length.py": _d(
                r"""
                def to_meters(value, unit):
                    if unit == "mm":
                        return value / 1000
                    elif unit == "cm":
                        return value / 100
                    elif unit == "m":
                        return value
                    elif unit == "km":
                        return value * 1000
                    else:
                        raise ValueError(f"unknown unit {unit!r}")


                def from_meters(value, unit):
                    if unit == "mm":
                        return value * 1000
                    elif unit == "cm":
                        return value * 100
                    elif unit == "m":
                        return value
                    elif unit == "km":
                        return value / 1000
                    else:
                        raise ValueError(f"unknown unit {unit!r}")


                def convert(value, from_unit, to_unit):
                    return from_meters(to_meters(value, from_unit), to_unit)
                """
            ),
        },
        hidden={
            "test_length.py": _d(
                r"""
                import ast
                import inspect
                import textwrap
                import unittest

                from measure import convert, from_meters, length, to_meters


                class BehaviourTest(unittest.TestCase):
                    def test_to_meters(self):
                        self.assertAlmostEqual(to_meters(5, "km"), 5000)
                        self.assertAlmostEqual(to_meters(250, "cm"), 2.5)

                    def test_from_meters(self):
                        self.assertAlmostEqual(from_meters(2.5, "cm"), 250)
                        self.assertAlmostEqual(from_meters(1500, "km"), 1.5)

                    def test_convert(self):
                        self.assertAlmostEqual(convert(25, "mm", "cm"), 2.5)

                    def test_unknown_unit(self):
                        with self.assertRaises(ValueError):
                            to_meters(1, "yd")
                        with self.assertRaises(ValueError):
                            from_meters(1, "yd")


                class StructureTest(unittest.TestCase):
                    def test_table(self):
                        self.assertEqual(set(length.METERS_PER_UNIT), {"mm", "cm", "m", "km"})
                        self.assertAlmostEqual(length.METERS_PER_UNIT["km"], 1000)

                    def test_a_new_unit_is_one_table_entry(self):
                        length.METERS_PER_UNIT["in"] = 0.0254
                        self.addCleanup(length.METERS_PER_UNIT.pop, "in")
                        self.assertAlmostEqual(convert(1, "in", "cm"), 2.54)
                        self.assertAlmostEqual(convert(2.54, "cm", "in"), 1)

                    def test_no_unit_names_in_the_functions(self):
                        for func in (length.to_meters, length.from_meters):
                            tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
                            names = [
                                node.value
                                for node in ast.walk(tree)
                                if isinstance(node, ast.Constant) and node.value in ("mm", "cm", "m", "km")
                            ]
                            self.assertEqual(names, [], func.__name__)
                """
            )
        },
        fix=[
            (
                "measure/length.py",
                _d(
                    r"""
                    def to_meters(value, unit):
                        if unit == "mm":
                            return value / 1000
                        elif unit == "cm":
                            return value / 100
                        elif unit == "m":
                            return value
                        elif unit == "km":
                            return value * 1000
                        else:
                            raise ValueError(f"unknown unit {unit!r}")


                    def from_meters(value, unit):
                        if unit == "mm":
                            return value * 1000
                        elif unit == "cm":
                            return value * 100
                        elif unit == "m":
                            return value
                        elif unit == "km":
                            return value / 1000
                        else:
                            raise ValueError(f"unknown unit {unit!r}")
                    """
                ),
                _d(
                    r"""
                    METERS_PER_UNIT = {"mm": 0.001, "cm": 0.01, "m": 1, "km": 1000}


                    def _meters_per(unit):
                        try:
                            return METERS_PER_UNIT[unit]
                        except KeyError:
                            raise ValueError(f"unknown unit {unit!r}") from None


                    def to_meters(value, unit):
                        return value * _meters_per(unit)


                    def from_meters(value, unit):
                        return value / _meters_per(unit)
                    """
                ),
            )
        ],
        why="One table; a small lookup helper keeps the ValueError for unknown units.",
        check=_py(
            """
            from measure import convert
            print(convert(1.5, "km", "m"), convert(25, "mm", "cm"))
            assert abs(convert(25, "mm", "cm") - 2.5) < 1e-9
            """
        ),
        wrong=[
            (
                "measure/length.py",
                _d(
                    r"""
                    def to_meters(value, unit):
                        if unit == "mm":
                            return value / 1000
                        elif unit == "cm":
                            return value / 100
                        elif unit == "m":
                            return value
                        elif unit == "km":
                            return value * 1000
                        else:
                            raise ValueError(f"unknown unit {unit!r}")


                    def from_meters(value, unit):
                        if unit == "mm":
                            return value * 1000
                        elif unit == "cm":
                            return value * 100
                        elif unit == "m":
                            return value
                        elif unit == "km":
                            return value / 1000
                        else:
                            raise ValueError(f"unknown unit {unit!r}")
                    """
                ),
                _d(
                    r"""
                    METERS_PER_UNIT = {"mm": 0.001, "cm": 0.01, "m": 1, "km": 1000}


                    def _meters_per(unit):
                        try:
                            return METERS_PER_UNIT[unit]
                        except KeyError:
                            raise ValueError(f"unknown unit {unit!r}") from None


                    def to_meters(value, unit):
                        return value * _meters_per(unit)


                    def from_meters(value, unit):
                        return value * _meters_per(unit)
                    """
                ),
            )
        ],
    )


# --------------------------------------------------------------------------------------------
# mutable_default
# --------------------------------------------------------------------------------------------


def _mutable_default_tags() -> Task:
    return _task(
        "mutable_default",
        1,
        title="add_tag() leaks tags from one note into the next",
        issue="""
            `notes.add_tag(tag, tags=None)` is documented to start a new list when no list is
            given, but tags from earlier calls show up in later ones:

                >>> from notes import add_tag
                >>> add_tag("urgent")
                ['urgent']
                >>> add_tag("home")
                ['urgent', 'home']

            Expected `['home']`. When a list is passed, it is updated in place and returned (that
            part works and must keep working).
        """,
        files={
            "notes/__init__.py": "from notes.tags import add_tag\n",
            "notes/tags.py": _d(
                r'''
                def add_tag(tag, tags=[]):
                    """Add ``tag`` (lower-cased, once) to the list ``tags`` and return it.

                    Without ``tags``, a new list is started.
                    """
                    tag = tag.lower()
                    if tag not in tags:
                        tags.append(tag)
                    return tags
                '''
            ),
        },
        hidden={
            "test_tags.py": _d(
                r"""
                import unittest

                from notes import add_tag


                class AddTagTest(unittest.TestCase):
                    def test_given_list_is_updated_in_place(self):
                        tags = ["work"]
                        self.assertIs(add_tag("Urgent", tags), tags)
                        self.assertEqual(tags, ["work", "urgent"])

                    def test_no_duplicates(self):
                        self.assertEqual(add_tag("work", ["work"]), ["work"])

                    def test_a_new_list_each_time(self):
                        add_tag("urgent")
                        self.assertEqual(add_tag("home"), ["home"])

                    def test_returned_lists_are_independent(self):
                        first = add_tag("a")
                        first.append("junk")
                        self.assertEqual(add_tag("b"), ["b"])
                """
            )
        },
        fix=[
            (
                "notes/tags.py",
                "def add_tag(tag, tags=[]):\n",
                "def add_tag(tag, tags=None):\n",
            ),
            (
                "notes/tags.py",
                "    tag = tag.lower()\n",
                "    if tags is None:\n        tags = []\n    tag = tag.lower()\n",
            ),
        ],
        why="A default list is created once and shared by every call; use None and make a new one.",
        check=_py(
            """
            from notes import add_tag
            add_tag("urgent")
            print(add_tag("home"))
            assert add_tag("x") == ["x"]
            """
        ),
        wrong=[
            (
                "notes/tags.py",
                "def add_tag(tag, tags=[]):\n",
                "def add_tag(tag, tags=None):\n",
            ),
            (
                "notes/tags.py",
                "    tag = tag.lower()\n",
                "    tags = list(tags or [])\n    tag = tag.lower()\n",
            ),
        ],
    )


def _mutable_default_class_attribute() -> Task:
    return _task(
        "mutable_default",
        2,
        title="Handlers subscribed on one EventBus fire on every bus",
        issue="""
            Each `events.EventBus` should have its own subscribers, but a handler subscribed on
            one bus is called by all of them:

                >>> from events import EventBus
                >>> orders, audit = EventBus("orders"), EventBus("audit")
                >>> orders.subscribe("created", lambda payload: "sent mail")
                >>> audit.publish("created", {})
                ['sent mail']

            Expected `[]`. Creating a new bus must not affect the handlers of existing ones.
        """,
        files={
            "events/__init__.py": "from events.bus import EventBus\n",
            "events/bus.py": _d(
                r'''
                class EventBus:
                    handlers = {}

                    def __init__(self, name):
                        self.name = name

                    def subscribe(self, event, handler):
                        self.handlers.setdefault(event, []).append(handler)

                    def publish(self, event, payload):
                        """Call every handler of ``event``; returns their results in order."""
                        return [handler(payload) for handler in self.handlers.get(event, [])]
                '''
            ),
        },
        hidden={
            "test_bus.py": _d(
                r"""
                import unittest

                from events import EventBus


                class EventBusTest(unittest.TestCase):
                    def test_publish_calls_handlers_in_order(self):
                        bus = EventBus("main")
                        bus.subscribe("order-placed", lambda p: p["id"])
                        bus.subscribe("order-placed", lambda p: p["id"] * 2)
                        self.assertEqual(bus.publish("order-placed", {"id": 3}), [3, 6])

                    def test_a_new_bus_keeps_existing_handlers(self):
                        first = EventBus("first")
                        first.subscribe("user-joined", lambda p: "welcome")
                        EventBus("second")
                        self.assertEqual(first.publish("user-joined", {}), ["welcome"])

                    def test_buses_are_independent(self):
                        orders, audit = EventBus("orders"), EventBus("audit")
                        orders.subscribe("created", lambda p: "sent mail")
                        self.assertEqual(audit.publish("created", {}), [])

                    def test_each_bus_has_its_own_handlers(self):
                        self.assertIsNot(EventBus("a").handlers, EventBus("b").handlers)
                """
            )
        },
        fix=[
            (
                "events/bus.py",
                "    handlers = {}\n\n    def __init__(self, name):\n        self.name = name\n",
                "    def __init__(self, name):\n        self.name = name\n        self.handlers = {}\n",
            )
        ],
        why="A class attribute is shared by all instances; give each bus its own dict.",
        check=_py(
            """
            from events import EventBus
            orders, audit = EventBus("orders"), EventBus("audit")
            orders.subscribe("created", lambda payload: "sent mail")
            print(orders.publish("created", {}), audit.publish("created", {}))
            assert audit.publish("created", {}) == []
            """
        ),
        wrong=[
            (
                "events/bus.py",
                "    def __init__(self, name):\n        self.name = name\n",
                "    def __init__(self, name):\n        self.name = name\n        self.handlers.clear()\n",
            )
        ],
    )


# --------------------------------------------------------------------------------------------
# The suite
# --------------------------------------------------------------------------------------------

BUILDERS: tuple[Callable[[], Task], ...] = (
    _off_by_one_pages,
    _off_by_one_truncate,
    _off_by_one_moving_average,
    _off_by_one_quarter,
    _off_by_one_line_range,
    _off_by_one_retries,
    _wrong_condition_discount,
    _wrong_condition_username,
    _wrong_condition_overdue,
    _wrong_condition_log_level,
    _wrong_condition_opening_hours,
    _wrong_condition_version_compat,
    _edge_case_summary,
    _edge_case_split_name,
    _edge_case_percent_change,
    _edge_case_initials,
    _edge_case_last_n,
    _edge_case_withdraw,
    _api_sort_returns_none,
    _api_dict_get_default,
    _api_split_lines,
    _api_sort_key,
    _api_strptime_format,
    _api_rstrip_suffix,
    _feature_top_words,
    _feature_slug_max_length,
    _feature_from_roman,
    _feature_cart_remove,
    _feature_kelvin,
    _feature_build_query,
    _refactor_extract_helper,
    _refactor_rename,
    _refactor_constant,
    _refactor_lookup_table,
    _mutable_default_tags,
    _mutable_default_class_attribute,
)


def coding_tasks() -> list[Task]:
    """Every task of the coding suite, built fresh (same content every time)."""
    return [build() for build in BUILDERS]


def coding_suite() -> TaskSuite:
    return TaskSuite(
        "coding",
        "coding",
        ENVIRONMENT,
        "Small Python repositories with a bug, a missing feature or a refactoring to do, described "
        "as issue reports; hidden unittest tests run at submit and give partial credit.",
        coding_tasks(),
    )
