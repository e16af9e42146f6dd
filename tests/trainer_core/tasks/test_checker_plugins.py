"""Checkers from layers above tasks (the LLM judge) are found through their entry point: a task
that names ``llm_judge`` works in a program that never imported trainer_core.rewards."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_llm_judge_is_found_without_importing_the_rewards_layer():
    code = (
        "import sys\n"
        "from trainer_core.tasks import checkers\n"
        "assert 'trainer_core.rewards' not in sys.modules\n"
        "fn = checkers.get_checker('llm_judge')\n"
        "print(fn.__module__, 'llm_judge' in checkers.list_checkers())\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["trainer_core.rewards.judge.checker", "True"]


def test_an_unknown_checker_still_names_the_known_ones():
    code = (
        "from trainer_core.errors import ConfigError\n"
        "from trainer_core.tasks import checkers\n"
        "try:\n    checkers.get_checker('llm_judg')\n"
        "except ConfigError as exc:\n    print(exc)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert "did you mean 'llm_judge'" in proc.stdout
