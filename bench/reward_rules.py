"""Rule-layer throughput: steps/s of ``step_rule_scores`` on coding trajectories.

    .venv/bin/python bench/reward_rules.py [--repeats 7] [--seed 0] [--peer]

Trajectories of 10, 100, 1,000 and 10,000 steps, generated like a coding agent's: reads of
files (observations are numbered source lines), greps (``path:line: text`` hits), edits and
full writes (a few reverted), bash runs of pytest (failures naming tests, files and errors),
directory listings; observations of a few hundred characters full of paths and identifiers.
Prints the best-of-``--repeats`` steps/s per length, whether the goal of the rewards issue
(>= 100,000 steps/s at every length) is met, and the 10,000 vs 10 steps/s ratio (about 1 for
linear cost; knowlyr-reward's quadratic checks fall towards 0). ``--peer`` also times the
quadratic algorithm knowlyr-reward uses (redundancy + regression + info use, re-implemented
here in its shape for comparison: list membership and backward scans) up to 1,000 steps.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trainer_core.envs.profiles import get_profile  # noqa: E402
from trainer_core.recording.schema import Step  # noqa: E402
from trainer_core.rewards.rules import RuleContext, step_rule_scores  # noqa: E402

GOAL = 100_000
LENGTHS = (10, 100, 1_000, 10_000)

MODULES = ["parser", "loader", "config", "models", "utils", "cache", "client", "server", "views"]
PACKAGES = ["src/app", "src/core", "lib/io", "pkg/net"]
FUNCS = [
    "load_config",
    "parse_header",
    "read_chunk",
    "build_index",
    "flush_cache",
    "open_session",
    "resolve_path",
    "encode_token",
    "render_page",
    "split_lines",
    "merge_items",
    "validate_input",
]
CLASSES = [
    "ConfigLoader",
    "HeaderParser",
    "ChunkReader",
    "IndexBuilder",
    "SessionPool",
    "TokenCodec",
]
ERRORS = ["AttributeError", "KeyError", "ValueError", "TypeError", "AssertionError"]


def _file(rng: random.Random) -> str:
    return f"{rng.choice(PACKAGES)}/{rng.choice(MODULES)}.py"


def _source(rng: random.Random, start: int, lines: int) -> str:
    out = []
    for n in range(start, start + lines):
        kind = rng.random()
        if kind < 0.3:
            line = f"def {rng.choice(FUNCS)}(self, path, size=4096):"
        elif kind < 0.5:
            line = f"    return {rng.choice(CLASSES)}(path).{rng.choice(FUNCS)}()"
        elif kind < 0.7:
            line = f"    self.{rng.choice(FUNCS)}_count += 1  # see {_file(rng)}"
        else:
            line = f"    value = data[{n}] if {rng.choice(FUNCS)}(x) else None"
        out.append(f"{n:>4}\t{line}")
    return "\n".join(out)


def make_steps(n: int, seed: int = 0) -> list[Step]:
    rng = random.Random(seed)
    steps: list[Step] = []
    edits: list[tuple[str, str, str]] = []
    for i in range(n):
        roll = rng.random()
        if roll < 0.30:
            path = _file(rng)
            start = rng.choice((1, 1, 40, 80))
            params = {"file_path": path}
            if start > 1:
                params.update(start_line=start, end_line=start + 40)
            step = Step(
                index=i,
                tool=rng.choice(("read_file", "read_file", "cat", "Read")),
                params=params,
                observation=_source(rng, start, rng.randint(5, 9)),
            )
        elif roll < 0.50:
            func = rng.choice(FUNCS)
            hits = "\n".join(
                f"{_file(rng)}:{rng.randint(1, 400)}:    {func}(self.{rng.choice(FUNCS)})"
                for _ in range(rng.randint(3, 7))
            )
            step = Step(
                index=i,
                tool="grep",
                params={"pattern": func, "path": rng.choice(PACKAGES)},
                observation=hits,
            )
        elif roll < 0.68:
            path = _file(rng)
            if edits and rng.random() < 0.1:  # revert an earlier edit
                path, old, new = rng.choice(edits)
                old, new = new, old
            else:
                old = f"return {rng.choice(FUNCS)}(path)"
                new = f"return {rng.choice(FUNCS)}(path, size={rng.randint(1, 9)})"
                edits.append((path, old, new))
            step = Step(
                index=i,
                tool="edit_file",
                params={"file_path": path, "old_string": old, "new_string": new},
                observation=f"The file {path} has been edited: 1 replacement.",
            )
        elif roll < 0.73:
            path = _file(rng)
            step = Step(
                index=i,
                tool="write_file",
                params={"file_path": path, "content": _source(rng, 1, 6)},
                observation=f"Wrote 6 lines to {path}.",
            )
        elif roll < 0.93:
            fails = "\n".join(
                f"FAILED tests/test_{rng.choice(MODULES)}.py::test_{rng.choice(FUNCS)} - "
                f"{rng.choice(ERRORS)}: '{rng.choice(CLASSES)}' object has no attribute "
                f"'{rng.choice(FUNCS)}'"
                for _ in range(rng.randint(1, 3))
            )
            command = rng.choice(("python -m pytest -q", "pytest -x tests", "pytest -q"))
            step = Step(
                index=i,
                tool="bash",
                params={"command": command},
                observation=f"{fails}\n=== {rng.randint(1, 4)} failed, "
                f"{rng.randint(5, 60)} passed in 0.{rng.randint(10, 99)}s ===",
                exit_code=1,
            )
        else:
            package = rng.choice(PACKAGES)
            listing = "  ".join(f"{m}.py" for m in rng.sample(MODULES, 6))
            step = Step(
                index=i,
                tool="list_dir",
                params={"path": package},
                observation=f"{package}/:\n{listing}\n__init__.py  README.md",
            )
        steps.append(step)
    return steps


def best_rate(fn, steps, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        reps = max(1, 20_000 // max(1, len(steps)))  # at least ~20k steps per timing
        start = time.perf_counter()
        for _ in range(reps):
            fn(steps)
        best = min(best, (time.perf_counter() - start) / reps)
    return len(steps) / best


# --- knowlyr-reward's algorithm, in its shape (quadratic), for comparison ------------------------

_K_READ = ("read_file", "Read", "cat", "grep", "Grep", "Glob")
_K_EDIT = ("Edit", "edit_file", "Write", "write_file")


def _knowlyr_like(steps: list[Step]) -> None:
    seen_calls: list[tuple[str, str]] = []
    for i, step in enumerate(steps):
        key = (step.tool, str(sorted(step.params.items())))
        path = step.params.get("file_path", step.params.get("path", ""))
        edited = False
        if step.tool in _K_READ and path:
            last_edit = next(
                (
                    j
                    for j in range(i - 1, -1, -1)
                    if steps[j].tool in _K_EDIT and steps[j].params.get("file_path") == path
                ),
                None,
            )
            last_read = next(
                (
                    j
                    for j in range(i - 1, -1, -1)
                    if steps[j].tool in _K_READ[:3] and steps[j].params.get("file_path") == path
                ),
                None,
            )
            edited = last_edit is not None and (last_read is None or last_edit > last_read)
        _ = key in seen_calls and not edited
        seen_calls.append(key)
    edits: list[tuple] = []
    for step in steps:
        if step.tool in _K_EDIT and "old_string" in step.params:
            p = step.params
            _ = any(e == (p["file_path"], p["new_string"], p["old_string"]) for e in edits)
            edits.append((p["file_path"], p["old_string"], p["new_string"]))
    info: set[str] = set()
    for step in steps:
        if step.tool in ("edit_file", "write_file", "bash"):
            text = str(step.params).lower()
            _ = any(piece.lower() in text for piece in info)
        for word in step.observation.split():
            if "/" in word and len(word) > 3:
                info.add(word.strip(".,;:()[]{}\"'`"))
            if "_" in word and len(word) > 3 and word.isidentifier():
                info.add(word)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--peer", action="store_true", help="also time knowlyr's algorithm")
    args = parser.parse_args()

    ctx = RuleContext.from_profile(get_profile("coding"))
    print("rule layer: step_rule_scores (redundancy, regression, info use) on coding trajectories")
    print(f"goal: >= {GOAL:,} steps/s at every length; best of {args.repeats} repeats\n")
    print(f"{'steps':>8}  {'obs chars/step':>14}  {'steps/s':>12}  goal", end="")
    print(f"  {'knowlyr-shaped steps/s':>22}" if args.peer else "")
    rates: dict[int, float] = {}
    for n in LENGTHS:
        steps = make_steps(n, args.seed)
        chars = sum(len(s.observation) for s in steps) / n
        rate = best_rate(lambda s: step_rule_scores(s, ctx), steps, args.repeats)
        rates[n] = rate
        line = f"{n:>8,}  {chars:>14.0f}  {rate:>12,.0f}  {'met' if rate >= GOAL else 'MISSED'}"
        if args.peer:
            peer = best_rate(_knowlyr_like, steps, 3) if n <= 1_000 else None
            line += f"  {peer:>22,.0f}" if peer else f"  {'(skipped: quadratic)':>22}"
        print(line)
    sample = step_rule_scores(make_steps(1_000, args.seed), ctx)
    fired = {
        rule: sum(x[rule] < 1.0 for x in sample)
        for rule in ("redundancy", "regression", "info_use")
    }
    print(
        "\nsteps scoring below 1.0 in the 1,000-step trajectory: "
        + ", ".join(f"{rule} {count}" for rule, count in fired.items())
    )
    ratio = rates[LENGTHS[-1]] / rates[LENGTHS[0]]
    print(f"steps/s at {LENGTHS[-1]:,} vs {LENGTHS[0]:,} steps: {ratio:.2f} (1.0 = linear)")
    met = all(r >= GOAL for r in rates.values())
    print(f"goal >= {GOAL:,} steps/s at every length: {'MET' if met else 'NOT MET'}")


if __name__ == "__main__":
    main()
