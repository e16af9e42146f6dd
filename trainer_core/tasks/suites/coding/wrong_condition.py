"""Coding tasks of kind ``wrong_condition``: a comparison or boolean condition that is wrong.

Each task is built by one function from the repository (``*_FILES``) and the hidden
unit tests (``*_HIDDEN_TESTS``) defined just above it."""

from __future__ import annotations

from trainer_core.tasks.model import Task
from trainer_core.tasks.suites.coding.common import coding_task, dedent_block, python_check

DISCOUNT_FILES = {
    "shop/__init__.py": "from shop.pricing import discount_rate, price_after_discount\n",
    "shop/pricing.py": dedent_block(
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
}

DISCOUNT_HIDDEN_TESTS = {
    "test_pricing.py": dedent_block(
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
}


def _wrong_condition_discount() -> Task:
    return coding_task(
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
        files=DISCOUNT_FILES,
        hidden=DISCOUNT_HIDDEN_TESTS,
        fix=[
            (
                "shop/pricing.py",
                "    if member or total >= 100:\n",
                "    if member and total >= 100:\n",
            )
        ],
        why="The member rate needs both conditions: a member AND an order of 100 or more.",
        check=python_check(
            """
            from shop import discount_rate
            cases = [(150, False), (50, True), (250, False), (150, True)]
            print([discount_rate(total, member) for total, member in cases])
            assert [discount_rate(t, m) for t, m in cases] == [0.0, 0.0, 0.05, 0.10]
            """
        ),
        wrong=[("shop/pricing.py", "    if member or total >= 100:\n", "    if member:\n")],
    )


USERNAME_FILES = {
    "accounts/__init__.py": "from accounts.usernames import is_valid_username, normalise\n",
    "accounts/usernames.py": dedent_block(
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
}

USERNAME_HIDDEN_TESTS = {
    "test_usernames.py": dedent_block(
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
}


def _wrong_condition_username() -> Task:
    return coding_task(
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
        files=USERNAME_FILES,
        hidden=USERNAME_HIDDEN_TESTS,
        fix=[
            (
                "accounts/usernames.py",
                '    return any(ch.isalnum() or ch == "_" for ch in name)\n',
                '    return all(ch.isalnum() or ch == "_" for ch in name)\n',
            )
        ],
        why="Every character must be allowed, so the check is all(), not any().",
        check=python_check(
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


OVERDUE_FILES = {
    "billing/__init__.py": "from billing.invoices import outstanding, overdue\n",
    "billing/invoices.py": dedent_block(
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
}

OVERDUE_HIDDEN_TESTS = {
    "test_invoices.py": dedent_block(
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
}


def _wrong_condition_overdue() -> Task:
    return coding_task(
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
        files=OVERDUE_FILES,
        hidden=OVERDUE_HIDDEN_TESTS,
        fix=[
            (
                "billing/invoices.py",
                '    late = [inv for inv in invoices if inv["paid"] and inv["due"] < today]\n',
                '    late = [inv for inv in invoices if not inv["paid"] and inv["due"] < today]\n',
            )
        ],
        why="Overdue means NOT paid; the paid check was inverted.",
        check=python_check(
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


LOG_LEVEL_FILES = {
    "logkit/__init__.py": dedent_block(
        r"""
        from logkit.levels import filter_records, level_number, should_log

        __all__ = ["filter_records", "level_number", "should_log"]
        """
    ),
    "logkit/levels.py": dedent_block(
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
}

LOG_LEVEL_HIDDEN_TESTS = {
    "test_levels.py": dedent_block(
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
}


def _wrong_condition_log_level() -> Task:
    return coding_task(
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
        files=LOG_LEVEL_FILES,
        hidden=LOG_LEVEL_HIDDEN_TESTS,
        fix=[
            (
                "logkit/levels.py",
                "    return level_number(level) <= level_number(threshold)\n",
                "    return level_number(level) >= level_number(threshold)\n",
            )
        ],
        why="A record passes when its level is at least the threshold: the comparison was reversed.",
        check=python_check(
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


OPENING_HOURS_FILES = {
    "hours/__init__.py": "from hours.schedule import is_open\n",
    "hours/schedule.py": dedent_block(
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
}

OPENING_HOURS_HIDDEN_TESTS = {
    "test_schedule.py": dedent_block(
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
}


def _wrong_condition_opening_hours() -> Task:
    return coding_task(
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
        files=OPENING_HOURS_FILES,
        hidden=OPENING_HOURS_HIDDEN_TESTS,
        fix=[
            (
                "hours/schedule.py",
                "    return hour >= OPEN_HOUR or hour < CLOSE_HOUR\n",
                "    return OPEN_HOUR <= hour < CLOSE_HOUR\n",
            )
        ],
        why="The hour must be within both bounds: and, not or.",
        check=python_check(
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


VERSION_COMPAT_FILES = {
    "deps/__init__.py": "from deps.compat import is_compatible, parse_version\n",
    "deps/compat.py": dedent_block(
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
}

VERSION_COMPAT_HIDDEN_TESTS = {
    "test_compat.py": dedent_block(
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
}


def _wrong_condition_version_compat() -> Task:
    return coding_task(
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
        files=VERSION_COMPAT_FILES,
        hidden=VERSION_COMPAT_HIDDEN_TESTS,
        fix=[
            (
                "deps/compat.py",
                "    return inst >= req\n",
                "    return inst[0] == req[0] and inst >= req\n",
            )
        ],
        why="A different major version is never compatible; within one, newer or equal is fine.",
        check=python_check(
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


# The builders of this kind, in the order their tasks appear in the suite.
BUILDERS = (
    _wrong_condition_discount,
    _wrong_condition_username,
    _wrong_condition_overdue,
    _wrong_condition_log_level,
    _wrong_condition_opening_hours,
    _wrong_condition_version_compat,
)
