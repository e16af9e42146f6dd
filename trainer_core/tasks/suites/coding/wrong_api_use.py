"""Coding tasks of kind ``wrong_api_use``: a standard-library call used the wrong way.

Each task is built by one function from the repository (``*_FILES``) and the hidden
unit tests (``*_HIDDEN_TESTS``) defined just above it."""

from __future__ import annotations

from trainer_core.tasks.model import Task
from trainer_core.tasks.suites.coding.common import coding_task, dedent_block, python_check

SORT_RETURNS_NONE_FILES = {
    "leaderboard/__init__.py": "from leaderboard.board import best, ranked, top\n",
    "leaderboard/board.py": dedent_block(
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
}

SORT_RETURNS_NONE_HIDDEN_TESTS = {
    "test_board.py": dedent_block(
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
}


def _api_sort_returns_none() -> Task:
    return coding_task(
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
        files=SORT_RETURNS_NONE_FILES,
        hidden=SORT_RETURNS_NONE_HIDDEN_TESTS,
        fix=[
            (
                "leaderboard/board.py",
                "    ordered = scores.sort(reverse=True)\n",
                "    ordered = sorted(scores, reverse=True)\n",
            )
        ],
        why="list.sort() sorts in place and returns None; sorted() returns a new list.",
        check=python_check(
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


DICT_GET_DEFAULT_FILES = {
    "appconfig/__init__.py": "from appconfig.settings import DEFAULTS, effective, get_setting\n",
    "appconfig/settings.py": dedent_block(
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
}

DICT_GET_DEFAULT_HIDDEN_TESTS = {
    "test_settings.py": dedent_block(
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
}


def _api_dict_get_default() -> Task:
    return coding_task(
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
        files=DICT_GET_DEFAULT_FILES,
        hidden=DICT_GET_DEFAULT_HIDDEN_TESTS,
        fix=[
            (
                "appconfig/settings.py",
                "    return config.get(name) or DEFAULTS[name]\n",
                "    return config.get(name, DEFAULTS[name])\n",
            )
        ],
        why="`or` replaces every falsy value; dict.get's default only applies to missing keys.",
        check=python_check(
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


SPLIT_LINES_FILES = {
    "envfile/__init__.py": "from envfile.parse import parse_env\n",
    "envfile/parse.py": dedent_block(
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
}

SPLIT_LINES_HIDDEN_TESTS = {
    "test_parse.py": dedent_block(
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
}


def _api_split_lines() -> Task:
    return coding_task(
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
        files=SPLIT_LINES_FILES,
        hidden=SPLIT_LINES_HIDDEN_TESTS,
        fix=[
            (
                "envfile/parse.py",
                '    for line in text.split("\\n"):\n',
                "    for line in text.splitlines():\n",
            )
        ],
        why="splitlines() splits on \\n, \\r\\n and \\r and drops the line endings.",
        check=python_check(
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


SORT_KEY_FILES = {
    "releases/__init__.py": "from releases.versions import latest, sort_versions\n",
    "releases/versions.py": dedent_block(
        r'''
        def sort_versions(versions):
            """Version strings like "1.10.2", oldest first."""
            return sorted(versions, key=str)


        def latest(versions):
            """The newest version, or None when there is none."""
            return sort_versions(versions)[-1] if versions else None
        '''
    ),
}

SORT_KEY_HIDDEN_TESTS = {
    "test_versions.py": dedent_block(
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
}


def _api_sort_key() -> Task:
    return coding_task(
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
        files=SORT_KEY_FILES,
        hidden=SORT_KEY_HIDDEN_TESTS,
        fix=[
            (
                "releases/versions.py",
                "    return sorted(versions, key=str)\n",
                '    return sorted(versions, key=lambda v: tuple(int(part) for part in v.split(".")))\n',
            )
        ],
        why="Sort by a tuple of integers, one per dot-separated part, not by the text.",
        check=python_check(
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


STRPTIME_FORMAT_FILES = {
    "dates/__init__.py": "from dates.days import days_between, format_day, parse_day\n",
    "dates/days.py": dedent_block(
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
}

STRPTIME_FORMAT_HIDDEN_TESTS = {
    "test_days.py": dedent_block(
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
}


def _api_strptime_format() -> Task:
    return coding_task(
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
        files=STRPTIME_FORMAT_FILES,
        hidden=STRPTIME_FORMAT_HIDDEN_TESTS,
        fix=[("dates/days.py", 'ISO_FORMAT = "%Y-%M-%d"\n', 'ISO_FORMAT = "%Y-%m-%d"\n')],
        why="%M is minutes; the month directive is %m.",
        check=python_check(
            """
            from dates import days_between, parse_day
            print(parse_day("2024-03-15"), days_between("2024-02-01", "2024-03-01"))
            assert parse_day("2024-03-15").month == 3
            """
        ),
        wrong=[("dates/days.py", 'ISO_FORMAT = "%Y-%M-%d"\n', 'ISO_FORMAT = "%y-%m-%d"\n')],
    )


RSTRIP_SUFFIX_FILES = {
    "filenames/__init__.py": "from filenames.names import change_suffix, strip_suffix\n",
    "filenames/names.py": dedent_block(
        r'''
        def strip_suffix(name, suffix):
            """``name`` without ``suffix`` at its end."""
            return name.rstrip(suffix)


        def change_suffix(name, old, new):
            return strip_suffix(name, old) + new
        '''
    ),
}

RSTRIP_SUFFIX_HIDDEN_TESTS = {
    "test_names.py": dedent_block(
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
}


def _api_rstrip_suffix() -> Task:
    return coding_task(
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
        files=RSTRIP_SUFFIX_FILES,
        hidden=RSTRIP_SUFFIX_HIDDEN_TESTS,
        fix=[
            (
                "filenames/names.py",
                "    return name.rstrip(suffix)\n",
                "    return name.removesuffix(suffix)\n",
            )
        ],
        why="rstrip() removes any of the given characters; removesuffix() removes the string.",
        check=python_check(
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


# The builders of this kind, in the order their tasks appear in the suite.
BUILDERS = (
    _api_sort_returns_none,
    _api_dict_get_default,
    _api_split_lines,
    _api_sort_key,
    _api_strptime_format,
    _api_rstrip_suffix,
)
