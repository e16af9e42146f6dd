"""The learning ablation of process rewards, run through the app's own jobs and printed as the
learning protocol asks.

    OMP_NUM_THREADS=1 .venv/bin/python bench/learning_ablation.py [--quick] [--suite arithmetic]
        [--seeds 0,1,2] [--arms outcome,process,calibrated] [--split test] [--eval-tasks 300]

Per arm and training seed one pipeline of the app (``webapp/evaluation/ablation.py``; the
pipeline form offers each arm as a preset): SFT on a small number of reference trajectories of
the suite's train split (the recipe chosen on validation, ``webapp/evaluation/demo.py``), then
GRPO on the same G samples per train task with (a) the outcome advantage, (b) the mixed
advantage of the rule layer's step scores, (c) the same after calibrating the rule layer's
rubrics through the real calibration path with a simulated annotator's labels (error rate 0.1)
of train-split trajectories. Printed: test success per arm, per seed and pooled with Wilson
intervals; exact McNemar tests pooled over (seed, task) pairs between the SFT start and each
arm and between arms, Holm-corrected; each arm's step AUROC against the simulated annotator's
truth (error-free labels) on the GRPO samples, with the reward-model version the arm trained on.

Full mode takes about an hour on 2 idle CPU cores (3 arms × 3 seeds × a demo-sized pipeline).
``--quick`` runs one seed with half the practice tasks and 100 test tasks (about 15 minutes on 2
idle cores); its table is labelled QUICK: one seed is not the experiment. ``--split validation`` is for choosing a recipe; the
test split is for the final one, once.

Needs the database and broker the app uses (``python3 run.py`` sets them up); a worker is
started when none is alive.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("OMP_NUM_THREADS", "1")

# the quick mode: one seed, half the practice tasks
QUICK_OVERRIDES = {"iterations.1.collect.num_tasks": 32}
QUICK_EVAL_TASKS = 100
QUICK_SEEDS = "0"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a ≤20-minute smoke run (labelled)")
    parser.add_argument("--suite", default=None)
    parser.add_argument("--seeds", default=None, help="default 0,1,2 (quick: 0)")
    parser.add_argument("--arms", default="outcome,process,calibrated")
    parser.add_argument("--split", default="test", choices=["test", "validation"])
    parser.add_argument("--eval-tasks", type=int, default=None)
    parser.add_argument("--name", default="")
    parser.add_argument("--timeout", type=float, default=6 * 3600)
    args = parser.parse_args()

    from webapp.cli.django_setup import setup_django

    setup_django()
    from webapp.cli.loop import _follow_pipelines, _start_demo_worker
    from webapp.cli.serving import stop
    from webapp.evaluation import selectors
    from webapp.evaluation.ablation import ablation_launch, ablation_report
    from webapp.evaluation.demo import PRIMARY_SUITE, TEST_TASKS
    from webapp.jobs.selectors import workers_online

    suite = args.suite or PRIMARY_SUITE
    seeds_text = args.seeds or (QUICK_SEEDS if args.quick else "0,1,2")
    seeds = [int(s) for s in seeds_text.split(",") if s.strip()]
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    eval_tasks = args.eval_tasks or (QUICK_EVAL_TASKS if args.quick else TEST_TASKS)
    started = time.monotonic()
    proc = None if any(w.online for w in workers_online()) else _start_demo_worker()
    try:
        launched = ablation_launch(
            suite=suite,
            arms=arms,
            seeds=seeds,
            split=args.split,
            eval_tasks=eval_tasks,
            name=args.name or f"ablation-{'quick-' if args.quick else ''}{time.strftime('%H%M%S')}",
            overrides=QUICK_OVERRIDES if args.quick else None,
        )
        everything = [p for ps in launched.values() for p in ps]
        _follow_pipelines(everything, timeout=args.timeout)
    finally:
        if proc is not None:
            stop([proc])
    launched = {arm: [selectors.pipeline_find(id=p.pk) for p in ps] for arm, ps in launched.items()}
    label = "QUICK (a smoke run, not the experiment): " if args.quick else ""
    print(f"\n{label}learning ablation on {suite}, {args.split} split, {eval_tasks} tasks")
    for line in ablation_report(pipelines=launched, suite=suite, split=args.split):
        print(line)
    print(f"wall time {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
