#!/usr/bin/env python3
"""Print the shape of the source tree: the figures the architecture issue asks for.

    python scripts/code_shape.py [--pylint PATH]

- the 25 largest source files (webapp, workers, trainer_core; migrations aside);
- the 25 longest functions (tests and bench included: none may exceed 100 lines);
- in-function imports in webapp, the lazy imports of the heavy libraries left out;
- with --pylint: the duplicate-code pairs pylint finds (R0801, default settings) in the
  source packages, migrations and tests aside.

Standard library only (ast), so it runs with any Python 3.11.
"""

from __future__ import annotations

import argparse
import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ("webapp", "workers", "trainer_core")
ALL = (*SOURCE, "tests", "bench", "scripts")
# Lazy on purpose: `import trainer_core` stays torch-free and the CLI starts fast.
HEAVY = ("torch", "transformers", "peft", "accelerate", "datasets", "playwright", "trl")


def _files(roots: tuple[str, ...]) -> list[Path]:
    out = []
    for root in roots:
        for path in sorted((ROOT / root).rglob("*.py")):
            if "migrations" in path.parts or ".venv" in path.parts:
                continue
            out.append(path)
    return out


def _functions(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node


def _in_function_imports(tree: ast.AST) -> list[ast.stmt]:
    found = []
    for fn in _functions(tree):
        for node in ast.walk(fn):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            names = (
                [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            )
            if all(n.split(".")[0] in HEAVY for n in names):
                continue
            found.append(node)
    # a nested function's imports are walked twice (outer and inner): count each node once
    return list({id(n): n for n in found}.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pylint", help="path of a pylint executable for the duplicate-code check")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()

    sizes = []
    for path in _files(SOURCE):
        sizes.append((len(path.read_text().splitlines()), path.relative_to(ROOT)))
    sizes.sort(reverse=True)
    print(f"largest source files ({args.top}):")
    for n, path in sizes[: args.top]:
        print(f"  {n:6d}  {path}")

    functions = []
    imports = []
    for path in _files(ALL):
        tree = ast.parse(path.read_text())
        rel = path.relative_to(ROOT)
        for fn in _functions(tree):
            functions.append((fn.end_lineno - fn.lineno + 1, f"{rel}:{fn.lineno} {fn.name}"))
        if rel.parts[0] == "webapp":
            imports += [(rel, node.lineno) for node in _in_function_imports(tree)]
    functions.sort(reverse=True)
    print(f"\nlongest functions ({args.top}):")
    for n, where in functions[: args.top]:
        print(f"  {n:6d}  {where}")
    over = [f for f in functions if f[0] > 100]
    print(f"  functions over 100 lines: {len(over)}")
    big = [s for s in sizes if s[0] > 900 and "suites" not in s[1].parts]
    print(f"  source files over 900 lines (suites aside): {len(big)}")

    print(f"\nin-function imports in webapp (lazy {', '.join(HEAVY)} left out): {len(imports)}")

    if args.pylint:
        cmd = [
            args.pylint,
            "--disable=all",
            "--enable=R0801",
            "--ignore=migrations",
            "--score=n",
            *SOURCE,
        ]
        result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)  # noqa: S603
        pairs = [line for line in result.stdout.splitlines() if "R0801" in line]
        print(f"\nduplicate-code pairs (pylint R0801, default settings): {len(pairs)}")
        for line in result.stdout.splitlines():
            if line.startswith("==") or "R0801" in line:
                print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
