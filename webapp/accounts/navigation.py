"""The areas in the main navigation, in order. Later issues replace the placeholder pages."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Area:
    key: str
    label: str
    url_name: str
    summary: str
    arrives_with: str = ""


AREAS: list[Area] = [
    Area(
        "tasks",
        "Tasks",
        "tasks:sets",
        "Agent tasks, task sets and domain profiles.",
    ),
    Area(
        "trajectories",
        "Trajectories",
        "trajectories:list",
        "Browse, search and diff trajectories; import agent logs.",
    ),
    Area(
        "rollouts",
        "Rollouts",
        "rollouts:runs",
        "Policies and collect runs: episodes of a policy on a task set, live.",
    ),
    Area(
        "rewards",
        "Rewards",
        "rewards:overview",
        "Rubrics, reward-model versions, scoring runs and preference pairs.",
    ),
    Area(
        "annotate",
        "Annotate",
        "calibration:queues",
        "Annotation queues, the step grid, agreement and calibration.",
    ),
    Area(
        "datasets",
        "Datasets",
        "datasets:list",
        "SFT, DPO, GRPO and PRM dataset snapshots.",
    ),
    Area(
        "training",
        "Training",
        "training:list",
        "Training runs and checkpoints; a checkpoint becomes a policy.",
    ),
    Area(
        "leaderboards",
        "Leaderboards",
        "evaluation:index",
        "Evaluation runs, leaderboards with honest statistics, pipelines (the online loop).",
    ),
    Area("jobs", "Jobs", "jobs:list", "Every long-running piece of work, live."),
]

AREAS_BY_KEY = {area.key: area for area in AREAS}
