"""Coding tasks of kind ``off_by_one``: a loop bound, slice end or count that is one off.

Each task is built by one function from the repository (``*_FILES``) and the hidden
unit tests (``*_HIDDEN_TESTS``) defined just above it."""

from __future__ import annotations

from trainer_core.tasks.model import Task
from trainer_core.tasks.suites.coding.common import coding_task, dedent_block, python_check

PAGES_FILES = {
    "pager/__init__.py": dedent_block(
        r"""
        from pager.pages import get_page, page_count

        __all__ = ["get_page", "page_count"]
        """
    ),
    "pager/pages.py": dedent_block(
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
}

PAGES_HIDDEN_TESTS = {
    "test_pages.py": dedent_block(
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
}


def _off_by_one_pages() -> Task:
    return coding_task(
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
        files=PAGES_FILES,
        hidden=PAGES_HIDDEN_TESTS,
        fix=[
            (
                "pager/pages.py",
                "    end = start + per_page - 1\n",
                "    end = start + per_page\n",
            )
        ],
        why="A slice end is exclusive, so the end of a page is start + per_page.",
        check=python_check(
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


TRUNCATE_FILES = {
    "textutil/__init__.py": "from textutil.shorten import truncate\n",
    "textutil/shorten.py": dedent_block(
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
}

TRUNCATE_HIDDEN_TESTS = {
    "test_truncate.py": dedent_block(
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
}


def _off_by_one_truncate() -> Task:
    return coding_task(
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
        files=TRUNCATE_FILES,
        hidden=TRUNCATE_HIDDEN_TESTS,
        fix=[
            (
                "textutil/shorten.py",
                "    if len(text) < width:\n",
                "    if len(text) <= width:\n",
            )
        ],
        why="Text of exactly `width` characters fits, so the comparison must include it.",
        check=python_check(
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


MOVING_AVERAGE_FILES = {
    "signals/__init__.py": "from signals.smooth import moving_average\n",
    "signals/smooth.py": dedent_block(
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
}

MOVING_AVERAGE_HIDDEN_TESTS = {
    "test_smooth.py": dedent_block(
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
}


def _off_by_one_moving_average() -> Task:
    return coding_task(
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
        files=MOVING_AVERAGE_FILES,
        hidden=MOVING_AVERAGE_HIDDEN_TESTS,
        fix=[
            (
                "signals/smooth.py",
                "    for i in range(len(values) - size):\n",
                "    for i in range(len(values) - size + 1):\n",
            )
        ],
        why="There are len(values) - size + 1 windows; the range stopped one short.",
        check=python_check(
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


QUARTER_FILES = {
    "fiscal/__init__.py": "from fiscal.periods import quarter, quarter_label\n",
    "fiscal/periods.py": dedent_block(
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
}

QUARTER_HIDDEN_TESTS = {
    "test_periods.py": dedent_block(
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
}


def _off_by_one_quarter() -> Task:
    return coding_task(
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
        files=QUARTER_FILES,
        hidden=QUARTER_HIDDEN_TESTS,
        fix=[
            (
                "fiscal/periods.py",
                "    return month // MONTHS_PER_QUARTER + 1\n",
                "    return (month - 1) // MONTHS_PER_QUARTER + 1\n",
            )
        ],
        why="Months are numbered from 1; shift to 0-based before dividing into quarters.",
        check=python_check(
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


LINE_RANGE_FILES = {
    "snippets/__init__.py": "from snippets.lines import count_lines, line_range\n",
    "snippets/lines.py": dedent_block(
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
}

LINE_RANGE_HIDDEN_TESTS = {
    "test_lines.py": dedent_block(
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
}


def _off_by_one_line_range() -> Task:
    return coding_task(
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
        files=LINE_RANGE_FILES,
        hidden=LINE_RANGE_HIDDEN_TESTS,
        fix=[
            (
                "snippets/lines.py",
                "    return lines[first:last]\n",
                "    return lines[first - 1 : last]\n",
            )
        ],
        why="Line n is lines[n - 1]; the slice end `last` is exclusive, which includes line last.",
        check=python_check(
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


RETRIES_FILES = {
    "netutil/__init__.py": "from netutil.retry import call_with_retries\n",
    "netutil/retry.py": dedent_block(
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
}

RETRIES_HIDDEN_TESTS = {
    "test_retry.py": dedent_block(
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
}


def _off_by_one_retries() -> Task:
    return coding_task(
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
        files=RETRIES_FILES,
        hidden=RETRIES_HIDDEN_TESTS,
        fix=[
            (
                "netutil/retry.py",
                "    for _attempt in range(retries):\n",
                "    for _attempt in range(retries + 1):\n",
            )
        ],
        why="The first call is not a retry: there are retries + 1 attempts in all.",
        check=python_check(
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


# The builders of this kind, in the order their tasks appear in the suite.
BUILDERS = (
    _off_by_one_pages,
    _off_by_one_truncate,
    _off_by_one_moving_average,
    _off_by_one_quarter,
    _off_by_one_line_range,
    _off_by_one_retries,
)
