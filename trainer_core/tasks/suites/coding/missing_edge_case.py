"""Coding tasks of kind ``missing_edge_case``: an input (empty, zero, one item...) the code
does not handle.

Each task is built by one function from the repository (``*_FILES``) and the hidden
unit tests (``*_HIDDEN_TESTS``) defined just above it."""

from __future__ import annotations

from trainer_core.tasks.model import Task
from trainer_core.tasks.suites.coding.common import coding_task, dedent_block, python_check

SUMMARY_FILES = {
    "metrics/__init__.py": "from metrics.summary import summarize\n",
    "metrics/summary.py": dedent_block(
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
}

SUMMARY_HIDDEN_TESTS = {
    "test_summary.py": dedent_block(
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
}


def _edge_case_summary() -> Task:
    return coding_task(
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
        files=SUMMARY_FILES,
        hidden=SUMMARY_HIDDEN_TESTS,
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
        check=python_check(
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


SPLIT_NAME_FILES = {
    "people/__init__.py": "from people.names import display_name, split_name\n",
    "people/names.py": dedent_block(
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
}

SPLIT_NAME_HIDDEN_TESTS = {
    "test_names.py": dedent_block(
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
}


def _edge_case_split_name() -> Task:
    return coding_task(
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
        files=SPLIT_NAME_FILES,
        hidden=SPLIT_NAME_HIDDEN_TESTS,
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
        check=python_check(
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


PERCENT_CHANGE_FILES = {
    "finance/__init__.py": "from finance.change import format_change, percent_change\n",
    "finance/change.py": dedent_block(
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
}

PERCENT_CHANGE_HIDDEN_TESTS = {
    "test_change.py": dedent_block(
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
}


def _edge_case_percent_change() -> Task:
    return coding_task(
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
        files=PERCENT_CHANGE_FILES,
        hidden=PERCENT_CHANGE_HIDDEN_TESTS,
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
        check=python_check(
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


INITIALS_FILES = {
    "badges/__init__.py": "from badges.letters import initials\n",
    "badges/letters.py": dedent_block(
        r'''
        def initials(name, max_letters=3):
            """The upper-case first letters of the words of ``name``, at most ``max_letters``."""
            letters = [word[0].upper() for word in name.split(" ")]
            return "".join(letters[:max_letters])
        '''
    ),
}

INITIALS_HIDDEN_TESTS = {
    "test_letters.py": dedent_block(
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
}


def _edge_case_initials() -> Task:
    return coding_task(
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
        files=INITIALS_FILES,
        hidden=INITIALS_HIDDEN_TESTS,
        fix=[
            (
                "badges/letters.py",
                '    letters = [word[0].upper() for word in name.split(" ")]\n',
                "    letters = [word[0].upper() for word in name.split()]\n",
            )
        ],
        why="split() without an argument never yields empty words.",
        check=python_check(
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


LAST_N_FILES = {
    "seqtools/__init__.py": "from seqtools.tail import last_n\n",
    "seqtools/tail.py": dedent_block(
        r'''
        def last_n(items, n):
            """The last ``n`` items of the list ``items``, as a new list."""
            return items[-n:]
        '''
    ),
}

LAST_N_HIDDEN_TESTS = {
    "test_tail.py": dedent_block(
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
}


def _edge_case_last_n() -> Task:
    return coding_task(
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
        files=LAST_N_FILES,
        hidden=LAST_N_HIDDEN_TESTS,
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
        check=python_check(
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


WITHDRAW_FILES = {
    "bank/__init__.py": "from bank.account import Account, InsufficientFunds\n",
    "bank/account.py": dedent_block(
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
}

WITHDRAW_HIDDEN_TESTS = {
    "test_account.py": dedent_block(
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
}


def _edge_case_withdraw() -> Task:
    return coding_task(
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
        files=WITHDRAW_FILES,
        hidden=WITHDRAW_HIDDEN_TESTS,
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
        check=python_check(
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


# The builders of this kind, in the order their tasks appear in the suite.
BUILDERS = (
    _edge_case_summary,
    _edge_case_split_name,
    _edge_case_percent_change,
    _edge_case_initials,
    _edge_case_last_n,
    _edge_case_withdraw,
)
