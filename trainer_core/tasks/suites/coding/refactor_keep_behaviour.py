"""Coding tasks of kind ``refactor_keep_behaviour``: a restructuring that must keep the
behaviour (the hidden tests check both).

Each task is built by one function from the repository (``*_FILES``) and the hidden
unit tests (``*_HIDDEN_TESTS``) defined just above it; the larger refactors also keep the code
their edits replace and put there (``*_BEFORE``, ``*_AFTER``, ``*_WRONG_AFTER``) as constants."""

from __future__ import annotations

from trainer_core.tasks.model import Task
from trainer_core.tasks.suites.coding.common import coding_task, dedent_block, python_check

EXTRACT_HELPER_FILES = {
    "reports/__init__.py": "from reports.rows import admin_row, user_row\n",
    "reports/rows.py": dedent_block(
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
}

EXTRACT_HELPER_HIDDEN_TESTS = {
    "test_rows.py": dedent_block(
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
}


# the code both the fix and the wrong patch replace, then what each puts there
EXTRACT_HELPER_BEFORE = dedent_block(
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
)

EXTRACT_HELPER_AFTER = dedent_block(
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
)

EXTRACT_HELPER_WRONG_AFTER = dedent_block(
    r"""
    def format_row(cells, widths):
        padded = [str(cell).ljust(width) for cell, width in zip(cells, widths)]
        return " | ".join(padded).rstrip()


    def user_row(user):
        return format_row([user["name"], user["email"]], [20, 30])


    def admin_row(admin):
        return format_row([admin["name"], admin["email"], admin["role"]], [20, 30, 10])
    """
)


def _refactor_extract_helper() -> Task:
    return coding_task(
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
        files=EXTRACT_HELPER_FILES,
        hidden=EXTRACT_HELPER_HIDDEN_TESTS,
        fix=[("reports/rows.py", EXTRACT_HELPER_BEFORE, EXTRACT_HELPER_AFTER)],
        why="One helper does the cutting, padding and joining; both rows pass cells and widths.",
        check=python_check(
            """
            from reports import admin_row, user_row
            from reports.rows import format_row
            print(repr(user_row({"name": "Ada", "email": "ada@example.org"})))
            assert format_row(["ab", 7], [3, 2]) == "ab  | 7"
            assert admin_row({"name": "N" * 25, "email": "e", "role": "r"}).startswith("N" * 20 + " | e")
            """
        ),
        wrong=[("reports/rows.py", EXTRACT_HELPER_BEFORE, EXTRACT_HELPER_WRONG_AFTER)],
    )


RENAME_FILES = {
    "geometry/__init__.py": "from geometry.triangles import calc, perimeter\n",
    "geometry/triangles.py": dedent_block(
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
    "geometry/cli.py": dedent_block(
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
}

RENAME_HIDDEN_TESTS = {
    "test_geometry.py": dedent_block(
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
}


def _refactor_rename() -> Task:
    return coding_task(
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
        files=RENAME_FILES,
        hidden=RENAME_HIDDEN_TESTS,
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


CONSTANT_FILES = {
    "invoicing/__init__.py": "from invoicing.tax import gross, net_from_gross, vat\n",
    "invoicing/tax.py": dedent_block(
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
}

CONSTANT_HIDDEN_TESTS = {
    "test_tax.py": dedent_block(
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
}


def _refactor_constant() -> Task:
    return coding_task(
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
        files=CONSTANT_FILES,
        hidden=CONSTANT_HIDDEN_TESTS,
        fix=[
            (
                "invoicing/tax.py",
                dedent_block(
                    r"""
                    def vat(net):
                        return round(net * 0.2, 2)


                    def gross(net):
                        return round(net * 1.2, 2)


                    def net_from_gross(gross_amount):
                        return round(gross_amount / 1.2, 2)
                    """
                ),
                dedent_block(
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
        check=python_check(
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


LOOKUP_TABLE_FILES = {
    "measure/__init__.py": "from measure.length import convert, from_meters, to_meters\n",
    "measure/length.py": dedent_block(
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
}

LOOKUP_TABLE_HIDDEN_TESTS = {
    "test_length.py": dedent_block(
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
}


# the code both the fix and the wrong patch replace, then what each puts there
LOOKUP_TABLE_BEFORE = dedent_block(
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
)

LOOKUP_TABLE_AFTER = dedent_block(
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
)

LOOKUP_TABLE_WRONG_AFTER = dedent_block(
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
)


def _refactor_lookup_table() -> Task:
    return coding_task(
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
        files=LOOKUP_TABLE_FILES,
        hidden=LOOKUP_TABLE_HIDDEN_TESTS,
        fix=[("measure/length.py", LOOKUP_TABLE_BEFORE, LOOKUP_TABLE_AFTER)],
        why="One table; a small lookup helper keeps the ValueError for unknown units.",
        check=python_check(
            """
            from measure import convert
            print(convert(1.5, "km", "m"), convert(25, "mm", "cm"))
            assert abs(convert(25, "mm", "cm") - 2.5) < 1e-9
            """
        ),
        wrong=[("measure/length.py", LOOKUP_TABLE_BEFORE, LOOKUP_TABLE_WRONG_AFTER)],
    )


# The builders of this kind, in the order their tasks appear in the suite.
BUILDERS = (
    _refactor_extract_helper,
    _refactor_rename,
    _refactor_constant,
    _refactor_lookup_table,
)
