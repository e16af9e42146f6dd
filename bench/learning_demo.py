"""The loop, measured: `steplab demo` through the app's jobs and database, timed end to end.

A tiny model built locally goes base → SFT (on reference trajectories collected by the scripted
policy) → GRPO (on groups of its own samples), one pipeline per training seed, each stage a child
job on a real Celery worker (started here when none is running). Printed: test-split success of
base, after SFT and after GRPO per seed and pooled, with 95% Wilson intervals; the pooled exact
McNemar tests (base → SFT, SFT → GRPO, base → GRPO, Holm-corrected); the wall time. Needs the
database and the broker the app uses (`python3 run.py` sets them up)::

    OMP_NUM_THREADS=1 .venv/bin/python bench/learning_demo.py [--seeds 0,1,2] [--split test]
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
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--split", default="test", choices=["test", "validation"])
    parser.add_argument("--eval-tasks", type=int, default=100)
    parser.add_argument("--config", default=None, help="a pipeline YAML instead of the demo's")
    args = parser.parse_args()
    env = dict(os.environ, OMP_NUM_THREADS=os.environ.get("OMP_NUM_THREADS", "1"))
    argv = [sys.executable, "-m", "webapp.cli", "demo", "--seeds", args.seeds, "--split"]
    argv += [args.split, "--eval-tasks", str(args.eval_tasks)]
    argv += ["--name", args.name or f"bench-{time.strftime('%Y%m%d-%H%M%S')}"]
    if args.config:
        argv += ["--config", args.config]
    started = time.perf_counter()
    code = subprocess.call(argv, cwd=ROOT, env=env)  # noqa: S603 - our own CLI
    print(f"bench wall time: {time.perf_counter() - started:.0f} s (exit {code})")
    sys.exit(code)


if __name__ == "__main__":
    main()
