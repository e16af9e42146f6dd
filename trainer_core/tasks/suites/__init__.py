"""Built-in verifiable task suites, loaded as task sets by the run command.

Each suite is a named list of tasks with a domain and an environment id. The modules that
build them are imported lazily (``builtin_suites()``), so importing trainer_core stays light.
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


def builtin_suites() -> dict[str, TaskSuite]:
    from trainer_core.tasks.suites.arithmetic import arithmetic_tasks

    suites = [
        TaskSuite(
            "arithmetic-train",
            "arithmetic",
            "steplab/arithmetic",
            "Tool arithmetic, train split (seeds 0.., operands 2-49). Generate more with any seed.",
            arithmetic_tasks("train", n=200),
        ),
        TaskSuite(
            "arithmetic-heldout",
            "arithmetic",
            "steplab/arithmetic",
            "Tool arithmetic, held-out split (seeds 1000000.., operands 50-99).",
            arithmetic_tasks("heldout", n=100),
        ),
    ]
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
