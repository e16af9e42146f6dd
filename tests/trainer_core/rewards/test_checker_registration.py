"""The ``llm_judge`` outcome checker is the judge's: importing the rewards layer registers it in
the tasks layer's registry, and the tasks layer never imports the rewards layer (it finds the
judge's checker through its entry point when a task asks for it). Fresh interpreters, so that nothing imported by other tests hides a missing import."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def _run(code: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_tasks_layer_alone_imports_no_rewards_until_the_judge_is_asked_for():
    seen = _run(
        "import json, sys\n"
        "from trainer_core.tasks import checkers\n"
        "from trainer_core.tasks.files import load_tasks\n"
        "rewards = lambda: sorted(m for m in sys.modules if m.startswith('trainer_core.rewards'))\n"
        "before = rewards(); exact = checkers.get_checker('exact').__name__\n"
        "still = rewards(); names = checkers.list_checkers()\n"
        "print(json.dumps({'before': before, 'still': still, 'checkers': names}))\n"
    )
    assert seen["before"] == [] and seen["still"] == []  # the built-in checkers need no plugin
    # asking for every checker finds the judge's through its entry point (steplab.checkers)
    assert {"exact", "number", "contains", "test_command", "any_of", "llm_judge"} <= set(
        seen["checkers"]
    )


def test_importing_any_rewards_module_registers_the_judge_checker(tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        json.dumps({"id": "q1", "prompt": "Capital of France?", "expected_answer": "Paris",
                    "checker": "llm_judge"}) + "\n",
        encoding="utf-8",
    )  # fmt: skip
    seen = _run(
        "import json\n"
        "import trainer_core.rewards.rubrics\n"
        "from trainer_core.tasks.checkers import get_checker, list_checkers\n"
        "from trainer_core.tasks.files import load_tasks\n"
        f"loaded = load_tasks({str(tasks)!r})\n"
        "print(json.dumps({'checkers': list_checkers(), 'module': "
        "get_checker('llm_judge').__module__, 'task_checker': loaded.tasks[0].checker}))\n"
    )
    assert "llm_judge" in seen["checkers"]
    assert seen["module"] == "trainer_core.rewards.judge.checker"
    assert seen["task_checker"] == "llm_judge"


def test_the_checkers_module_has_no_import_of_the_rewards_layer():
    source = (REPO / "trainer_core" / "tasks" / "checkers.py").read_text(encoding="utf-8")
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    assert not [name for name in imported if name.startswith("trainer_core.rewards")]
