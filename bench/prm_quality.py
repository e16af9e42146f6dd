"""Process-reward quality of the rule layer: how well its step totals tell good steps from bad.

    .venv/bin/python bench/prm_quality.py [--noisy 3] [--tasks 60] [--seed 0] [--bootstrap 1000]

For each suite (arithmetic, coding, conversation, and lookup when it is built) the scripted
policy plays every task's reference solution (clean episodes) and the builtin ``scripted-noisy``
policy (``webapp/rollouts/services.py``, ``BUILTIN_POLICIES``) plays it ``--noisy`` more times
with its mistakes, all recorded by ``trainer_core.rollouts.collect.run_episode`` as Steplab
records any rollout. On lookup, whose decisive mistake is fetching the near-duplicate twin record,
the mix also has ``follow_decoy`` (:data:`DECOY_RATE`), which the builtin mix lacks. Steps are
labelled from what the benchmark knows:

* good: the steps of clean episodes, and the steps of noisy episodes before their first mistake
  that equal the reference call at that position;
* bad: every mistake the noisy policy injected (its ``mistakes_made``), and every failing tool
  call (the environment's ``error`` on the step) that comes before a mistake;
* left out: the other steps after a mistake (their state is off the reference path).

The scores never see those labels: each trajectory is scored by ``score_trajectory`` with a
rules-only ``RewardConfig`` of the suite's domain profile (its rule-evaluated rubrics and their
weights), from the trajectory alone — steps, task prompt, profile. No judge, no reference, no
list of mistakes (no oracle).

Printed per suite: episodes, n good, n bad, the AUROC of step totals (good above bad; the
Mann–Whitney U statistic over n_good · n_bad, ties counting half) with a 95% bootstrap interval
(episodes resampled), and the mean step total of each kind of step. Goal: AUROC >= 0.9 on every
suite. Runs in well under 2 minutes on 2 cores (the coding episodes start sandboxes).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainer_core.envs import make  # noqa: E402
from trainer_core.envs.profiles import get_profile  # noqa: E402
from trainer_core.policies.scripted import ScriptedPolicy  # noqa: E402
from trainer_core.rewards.rubrics import rubric_set  # noqa: E402
from trainer_core.rewards.scoring import RewardConfig, score_trajectory  # noqa: E402
from trainer_core.rollouts.collect import EpisodeSpec, run_episode  # noqa: E402
from trainer_core.tasks.model import Task  # noqa: E402

GOAL = 0.9
#: how often the noisy policy follows a lookup task's decoy (fetches the near-duplicate twin
#: record): the builtin ``scripted-noisy`` mix has no ``follow_decoy``, and on lookup tasks it is
#: the mistake that decides an episode, so the bench adds it there, as often as ``wrong_answer``
DECOY_RATE = 0.3


@dataclass
class Suite:
    name: str
    profile: str  # the domain profile whose rule rubrics score it
    environment: str
    tasks: list[Task]
    #: mistakes added to the builtin noisy mix for this suite (the suite's own kind of mistake)
    extra_mistakes: dict[str, float] = field(default_factory=dict)


def _arithmetic(n: int) -> Suite:
    from trainer_core.tasks.suites.arithmetic import arithmetic_tasks

    return Suite("arithmetic", "arithmetic", "steplab/arithmetic", arithmetic_tasks("train", n))


def _coding(n: int) -> Suite:
    from trainer_core.tasks.suites.coding import coding_tasks

    return Suite("coding", "coding", "steplab/sandbox", coding_tasks()[:n])


def _conversation(n: int) -> Suite:
    from trainer_core.tasks.suites.dialogue import dialogue_suites

    suite = next(s for s in dialogue_suites() if s.name == "conversation")
    return Suite("conversation", suite.domain, suite.environment, suite.tasks[:n])


def _lookup(n: int) -> Suite | None:
    try:
        from trainer_core.tasks.suites.lookup import lookup_tasks
    except ImportError:
        return None  # not built yet
    tasks = lookup_tasks("validation", n)
    return Suite("lookup", "lookup", "steplab/lookup", tasks, {"follow_decoy": DECOY_RATE})


#: the suites, in the order they are printed: a new suite is one more line here
SUITES: dict[str, Callable[[int], Suite | None]] = {
    "arithmetic": _arithmetic,
    "coding": _coding,
    "conversation": _conversation,
    "lookup": _lookup,
}


def noisy_mistakes() -> dict[str, float]:
    """The mistake probabilities of the builtin ``scripted-noisy`` policy (their one owner is
    ``webapp.rollouts.services.BUILTIN_POLICIES``; Django is set up only to read them)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.config.settings")
    import django

    django.setup()
    from webapp.rollouts.services import BUILTIN_POLICIES

    noisy = next(p for p in BUILTIN_POLICIES if p["name"] == "scripted-noisy")
    return dict(noisy["parameters"]["mistakes"])


# --- episodes and labels ---------------------------------------------------------------------


@dataclass
class Labelled:
    """The labelled steps of one suite: per step its episode, label and rule-layer total."""

    episodes: int = 0
    episode: list[int] = field(default_factory=list)
    label: list[str] = field(default_factory=list)  # "good", "failed" or a mistake kind
    score: list[float] = field(default_factory=list)


def step_labels(steps: list[Any], mistakes: list[dict[str, Any]], task: Task) -> list[str | None]:
    """Each step's label (see the module doc): "good", a mistake kind, "failed", or None."""
    made = {m["step"] - 1: m["kind"] for m in mistakes if m.get("action") is not None}
    first = min((m["step"] - 1 for m in mistakes), default=len(steps))
    reference = task.reference_solution
    labels: list[str | None] = []
    for position, step in enumerate(steps):
        if position in made:
            labels.append(made[position])
        elif position > first:
            labels.append(None)
        elif step.error:
            labels.append("failed")
        elif position < len(reference) and (step.tool, step.params) == (
            reference[position].tool,
            dict(reference[position].params),
        ):
            labels.append("good")
        else:
            labels.append(None)
    return labels


def rules_only(profile_name: str) -> RewardConfig:
    """The suite's rule-evaluated rubrics, with their weights (the judge's rubrics left out)."""
    profile = get_profile(profile_name)
    rubrics = [
        r for r in rubric_set(profile.name, profile.rubric_weights or None) if r.evaluator == "rule"
    ]
    return RewardConfig(rubrics=rubrics, profile=profile.name)


def collect_suite(suite: Suite, noisy: int, mistakes: dict[str, float], seed: int) -> Labelled:
    """Play the suite's tasks (one clean episode and ``noisy`` noisy ones each), score every
    trajectory with the rule layer, and keep the labelled steps."""
    config = rules_only(suite.profile)
    profile = get_profile(suite.profile)
    out = Labelled()
    clean = ScriptedPolicy(seed=seed)
    noisy_policy = ScriptedPolicy(mistakes={**mistakes, **suite.extra_mistakes}, seed=seed)
    env = make(suite.environment)
    try:
        for number, task in enumerate(suite.tasks):
            for episode in range(1 + noisy):
                policy = clean if episode == 0 else noisy_policy
                spec = EpisodeSpec(task, episode, seed + number * 100 + episode)
                result = run_episode(env, policy, spec, max_steps=30)
                trajectory = result.trajectory
                labels = step_labels(trajectory.steps, policy.mistakes_made, task)
                scored = score_trajectory(trajectory, config, profile=profile)
                for label, step_score in zip(labels, scored.steps, strict=True):
                    if label is not None and step_score.total is not None:
                        out.episode.append(out.episodes)
                        out.label.append(label)
                        out.score.append(step_score.total)
                out.episodes += 1
    finally:
        env.close()
    return out


# --- AUROC ---------------------------------------------------------------------------------------


def _midranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks of ``values``, ties sharing the mean of their ranks."""
    order = np.argsort(values, kind="mergesort")
    _, first, counts = np.unique(values[order], return_index=True, return_counts=True)
    ranks = np.empty(len(values))
    ranks[order] = np.repeat(first + (counts + 1) / 2.0, counts)
    return ranks


def auroc(good: np.ndarray, bad: np.ndarray) -> float:
    """P(a good step's total > a bad step's total) + ½ P(equal): the Mann–Whitney U statistic of
    the good steps divided by n_good · n_bad. NaN when either side is empty."""
    if len(good) == 0 or len(bad) == 0:
        return float("nan")
    ranks = _midranks(np.round(np.concatenate([good, bad]), 9))
    u = ranks[: len(good)].sum() - len(good) * (len(good) + 1) / 2.0
    return float(u / (len(good) * len(bad)))


def bootstrap_interval(data: Labelled, resamples: int, seed: int) -> tuple[float, float]:
    """The 95% percentile interval of the AUROC over ``resamples`` resamplings of the episodes
    (with replacement; an episode's steps stay together)."""
    episode = np.asarray(data.episode)
    score = np.asarray(data.score)
    good = np.asarray([label == "good" for label in data.label])
    per_episode = [
        (score[(episode == e) & good], score[(episode == e) & ~good]) for e in range(data.episodes)
    ]
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(resamples):
        picked = [per_episode[i] for i in rng.integers(0, data.episodes, data.episodes)]
        value = auroc(
            np.concatenate([g for g, _ in picked]), np.concatenate([b for _, b in picked])
        )
        if not np.isnan(value):
            values.append(value)
    if not values:
        return float("nan"), float("nan")
    low, high = np.percentile(values, [2.5, 97.5])
    return float(low), float(high)


# --- the report ----------------------------------------------------------------------------------


def kind_means(data: Labelled) -> str:
    """``kind mean (n)`` of every kind of labelled step, good first."""
    kinds: dict[str, list[float]] = {}
    for label, score in zip(data.label, data.score, strict=True):
        kinds.setdefault(label, []).append(score)
    order = sorted(kinds, key=lambda k: (k != "good", k))
    return ", ".join(f"{k} {np.mean(kinds[k]):.2f} ({len(kinds[k])})" for k in order)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--noisy", type=int, default=3, help="noisy episodes per task")
    parser.add_argument("--tasks", type=int, default=60, help="tasks per suite at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--bootstrap", type=int, default=1000, help="bootstrap resamples")
    parser.add_argument("--suites", default=",".join(SUITES), help="comma-separated names")
    args = parser.parse_args()

    started = time.perf_counter()
    mistakes = noisy_mistakes()
    print("rule layer as a step classifier: AUROC of step totals, good steps above bad ones")
    print(f"noisy policy: scripted-noisy {mistakes}; {args.noisy} noisy episodes per task")
    print("scores: rules-only RewardConfig of each suite's profile; labels never reach them\n")
    header = f"{'suite':<13}{'episodes':>9}{'good':>7}{'bad':>6}{'AUROC':>8}  {'95% CI':<15}goal"
    print(header)
    details = []
    for name in args.suites.split(","):
        suite = SUITES[name](args.tasks)
        if suite is None:
            print(f"{name:<13}(not built yet)")
            continue
        data = collect_suite(suite, args.noisy, mistakes, args.seed)
        score = np.asarray(data.score)
        good = np.asarray([label == "good" for label in data.label])
        value = auroc(score[good], score[~good])
        low, high = bootstrap_interval(data, args.bootstrap, args.seed)
        verdict = "met" if value >= GOAL else "MISSED"
        print(
            f"{name:<13}{data.episodes:>9}{int(good.sum()):>7}{int((~good).sum()):>6}"
            f"{value:>8.3f}  [{low:.3f}, {high:.3f}]  {verdict}"
        )
        extra = "".join(f" (noisy mix + {k} {v})" for k, v in suite.extra_mistakes.items())
        details.append(f"  {name}{extra}: {kind_means(data)}")
    print("\nmean step total by kind of step (n):")
    print("\n".join(details))
    print(f"\n{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
