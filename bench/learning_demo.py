"""The loop, measured: `steplab demo` through the app's jobs and database, timed end to end.

A tiny model built locally goes base → SFT (on reference trajectories collected by the scripted
policy) → GRPO (on groups of its own samples), each stage a child job of a pipeline on a real
Celery worker (started here when none is running). Printed: held-out success of base, after SFT
and after GRPO, with 95% Wilson intervals; the exact McNemar test on the same held-out episodes
for each step (base → SFT, SFT → GRPO, base → GRPO); the wall time. Needs the database and the
broker the app uses (`python3 run.py` sets them up)::

    OMP_NUM_THREADS=1 .venv/bin/python bench/learning_demo.py [--name NAME] [--seed 0]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--config", default=None, help="a pipeline YAML instead of the demo's")
    args = parser.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    argv = [sys.executable, "-m", "webapp.cli", "demo", "--seed", str(args.seed)]
    argv += ["--name", args.name or f"bench-{time.strftime('%Y%m%d-%H%M%S')}"]
    if args.config:
        argv += ["--config", args.config]
    started = time.perf_counter()
    code = subprocess.call(argv, cwd=ROOT, env=env)  # noqa: S603 - our own CLI
    print(f"bench wall time: {time.perf_counter() - started:.0f} s (exit {code})")
    sys.exit(code)


if __name__ == "__main__":
    main()
