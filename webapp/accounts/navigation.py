"""The main navigation: its areas in order, and the context processor that gives every page
the areas and what the signed-in user may do (``can.read``, ``can.operate``...)."""

from __future__ import annotations

from dataclasses import dataclass

from webapp.accounts.permissions import Need, user_can


@dataclass(frozen=True)
class Area:
    key: str
    label: str
    url_name: str
    summary: str


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


def navigation(request):
    """Context processor (settings.TEMPLATES): the areas, and the user's permissions."""
    user = getattr(request, "user", None)
    return {
        "nav_areas": AREAS,
        "can": {need.value: user_can(user, need) for need in Need},
    }
