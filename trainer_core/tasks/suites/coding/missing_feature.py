"""Coding tasks of kind ``missing_feature``: a small feature the issue asks for.

Each task is built by one function from the repository (``*_FILES``) and the hidden
unit tests (``*_HIDDEN_TESTS``) defined just above it."""

from __future__ import annotations

from trainer_core.tasks.model import Task
from trainer_core.tasks.suites.coding.common import coding_task, dedent_block, python_check

TOP_WORDS_FILES = {
    "textstats/__init__.py": "from textstats.words import top_words, word_count, words\n",
    "textstats/words.py": dedent_block(
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
}

TOP_WORDS_HIDDEN_TESTS = {
    "test_words.py": dedent_block(
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
}


def _feature_top_words() -> Task:
    return coding_task(
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
        files=TOP_WORDS_FILES,
        hidden=TOP_WORDS_HIDDEN_TESTS,
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
        check=python_check(
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


SLUG_MAX_LENGTH_FILES = {
    "slugs/__init__.py": "from slugs.slugify import slugify\n",
    "slugs/slugify.py": dedent_block(
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
}

SLUG_MAX_LENGTH_HIDDEN_TESTS = {
    "test_slugify.py": dedent_block(
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
}


def _feature_slug_max_length() -> Task:
    return coding_task(
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
        files=SLUG_MAX_LENGTH_FILES,
        hidden=SLUG_MAX_LENGTH_HIDDEN_TESTS,
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
        check=python_check(
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


FROM_ROMAN_FILES = {
    "numerals/__init__.py": "from numerals.roman import from_roman, to_roman\n",
    "numerals/roman.py": dedent_block(
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
}

FROM_ROMAN_HIDDEN_TESTS = {
    "test_roman.py": dedent_block(
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
}


def _feature_from_roman() -> Task:
    return coding_task(
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
        files=FROM_ROMAN_FILES,
        hidden=FROM_ROMAN_HIDDEN_TESTS,
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
        check=python_check(
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


CART_REMOVE_FILES = {
    "store/__init__.py": "from store.cart import Cart\n",
    "store/cart.py": dedent_block(
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
}

CART_REMOVE_HIDDEN_TESTS = {
    "test_cart.py": dedent_block(
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
}


def _feature_cart_remove() -> Task:
    return coding_task(
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
        files=CART_REMOVE_FILES,
        hidden=CART_REMOVE_HIDDEN_TESTS,
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
        check=python_check(
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


KELVIN_FILES = {
    "units/__init__.py": "from units.temperature import convert\n",
    "units/temperature.py": dedent_block(
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
}

KELVIN_HIDDEN_TESTS = {
    "test_temperature.py": dedent_block(
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
}


def _feature_kelvin() -> Task:
    return coding_task(
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
        files=KELVIN_FILES,
        hidden=KELVIN_HIDDEN_TESTS,
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
        check=python_check(
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


BUILD_QUERY_FILES = {
    "urltools/__init__.py": "from urltools.query import build_query, parse_query\n",
    "urltools/query.py": dedent_block(
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
}

BUILD_QUERY_HIDDEN_TESTS = {
    "test_query.py": dedent_block(
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
}


def _feature_build_query() -> Task:
    return coding_task(
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
        files=BUILD_QUERY_FILES,
        hidden=BUILD_QUERY_HIDDEN_TESTS,
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
        check=python_check(
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


# The builders of this kind, in the order their tasks appear in the suite.
BUILDERS = (
    _feature_top_words,
    _feature_slug_max_length,
    _feature_from_roman,
    _feature_cart_remove,
    _feature_kelvin,
    _feature_build_query,
)
