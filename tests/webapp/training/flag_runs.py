"""A constructed offline GRPO run for the reward-hacking flag tests (webapp and browser): stored
trajectories with tool steps and process scores, a dataset whose rows name them, the run's
lineage (which rows each step trained on) and its metric history — what a real run leaves."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from django.conf import settings

from webapp.datasets.models import DatasetSnapshot
from webapp.jobs.models import Job, JobMetricPoint, JobStatus
from webapp.jobs.names import Kinds
from webapp.rewards.models import RewardModel, TrajectoryScore
from webapp.training.models import TrainingRun
from webapp.trajectories.models import Step, Trajectory

STEPS = 8
PER_STEP = 4  # one group of four trajectories per step, two of them failed


def build_run(*, hacked: bool, name: str = "", rising: bool = False) -> TrainingRun:
    """A GRPO run of STEPS steps; ``hacked``: its failed episodes score process 0.9 (the
    failed_high_process pattern), else 0.1; ``rising``: every episode's process score rises with
    the step (0.1 per step from 0.1) while success stays at one in two."""
    tag = uuid.uuid4().hex[:8]
    root = Path(settings.STEPLAB_DATA_DIR) / f"flag-run-{tag}"
    (root / "dataset").mkdir(parents=True)
    (root / "out").mkdir()
    reward_model = RewardModel.objects.create(domain=f"flags-{tag}", version=1, config={})
    rows, lineage = [], []
    for step in range(1, STEPS + 1):
        ids = []
        for i in range(PER_STEP):
            failed = i % 2 == 1
            t = Trajectory.objects.create(
                source=Trajectory.Source.ROLLOUT,
                task_ref=f"arith-{step}-{i}",
                success=not failed,
                reward=0.0 if failed else 1.0,
                step_count=2,
            )
            Step.objects.bulk_create(
                [
                    Step(trajectory=t, index=0, tool="calculator", params={"expression": "1+1"}),
                    Step(trajectory=t, index=1, tool="submit", params={"answer": "2"}),
                ]
            )
            process = (0.9 if hacked else 0.1) if failed else 0.8
            if rising:
                process = round(0.1 * step + 0.01 * i, 3)
            TrajectoryScore.objects.create(
                reward_model=reward_model, trajectory=t, process=process, total=process
            )
            ids.append(t.pk)
        lineage.append({"step": step, "consumed": [len(rows)], "dropped": []})
        rows.append({"trajectory_ids": [str(i) for i in ids]})
    (root / "dataset" / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    (root / "out" / "lineage.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lineage))
    dataset = DatasetSnapshot.objects.create(
        name=f"flags-{tag}", kind="grpo", directory=str(root / "dataset"), reward_model=reward_model
    )
    job = Job.objects.create(kind=Kinds.TRAIN, status=JobStatus.SUCCEEDED)
    JobMetricPoint.objects.bulk_create(
        [
            JobMetricPoint(job=job, step=s, values={"loss": 0.1, "reward": 0.5})
            for s in range(1, STEPS + 1)
        ]
    )
    return TrainingRun.objects.create(
        name=name or f"flag run {tag}",
        method=TrainingRun.Method.GRPO,
        dataset=dataset,
        base_model=str(root),
        config={"max_steps": STEPS},
        output_dir=str(root / "out"),
        job=job,
    )
