"""Built-in verifiable task suites, loaded as task sets by the run command.

Each suite is a named list of tasks with a domain and an environment id. The modules that
build them are imported lazily (``builtin_suites()``), so importing trainer_core stays light.
The suites used for learning (arithmetic, lookup) come as disjoint train / validation / test
task sets: no task text or answer (for lookup: no record, name or id either) in common.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from trainer_core.tasks.model import Task


@dataclass(frozen=True)
class TaskSuite:
    name: str
    domain: str
    environment: str
    description: str
    tasks: list[Task] = field(default_factory=list)


#: how many tasks of each lookup split the built-in task sets hold: the whole validation and test
#: splits, and the first 500 of the 2000 train tasks (generate more with
#: ``trainer_core.tasks.suites.lookup.lookup_tasks("train", n=..., start=...)`` and import them)
LOOKUP_BUILTIN_SIZES: dict[str, int] = {"train": 500, "validation": 300, "test": 300}


def _arithmetic_suites() -> list[TaskSuite]:
    from trainer_core.tasks.suites.arithmetic import arithmetic_tasks

    def suite(split: str, n: int, what: str) -> TaskSuite:
        tasks = arithmetic_tasks(split, n=n)
        name = f"arithmetic-{split}"
        return TaskSuite(
            name, "arithmetic", "steplab/arithmetic", f"Tool arithmetic, {what}", tasks
        )

    return [
        suite("train", 200, "train split (seeds 0.., operands 2-49). Generate more with any seed."),
        suite("heldout", 100, "held-out split (seeds 1000000.., operands 50-99)."),
        suite(
            "validation",
            300,
            "validation split (seeds 3000000.., operands 50-99 or 500-999): no task text or "
            "answer in common with train_wide (the learning train split) or test.",
        ),
        suite(
            "test",
            300,
            "test split (seeds 4000000.., operands 50-99 or 500-999): no task text or answer "
            "in common with train_wide (the learning train split) or validation.",
        ),
    ]


def _lookup_suites() -> list[TaskSuite]:
    from trainer_core.tasks.suites.lookup import DEFAULT_SIZES, SPLITS, lookup_tasks

    suites = []
    for split, n in LOOKUP_BUILTIN_SIZES.items():
        first = SPLITS[split][0]
        description = (
            f"Directory lookup, {split} split: multi-hop questions (3-6 tool calls) with "
            f"near-duplicate names; seeds {first}..{first + n - 1} of the split's "
            f"{DEFAULT_SIZES[split]}. Its own world: no record, name, id, task text or answer "
            "in common with the other splits."
        )
        suites.append(
            TaskSuite(
                f"lookup-{split}", "lookup", "steplab/lookup", description, lookup_tasks(split, n)
            )
        )
    return suites


def builtin_suites() -> dict[str, TaskSuite]:
    suites = [*_arithmetic_suites(), *_lookup_suites()]
    try:
        from trainer_core.tasks.suites.coding import coding_suite
    except ImportError:
        pass
    else:
        suites.append(coding_suite())
    try:
        from trainer_core.tasks.suites.dialogue import dialogue_suites
    except ImportError:
        pass
    else:
        suites.extend(dialogue_suites())
    return {suite.name: suite for suite in suites}
