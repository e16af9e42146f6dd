"""The layering contracts: trainer_core is a plain library; webapp never imports workers; importing
trainer_core never loads the training stack."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
HEAVY = ["torch", "transformers", "peft", "accelerate", "datasets"]
# The parts of trainer_core that must stay light to import (later issues add envs, recording...).
LIGHT_MODULES = [
    "trainer_core",
    "trainer_core.errors",
    "trainer_core.progress",
    "trainer_core.system",
    "trainer_core.envs",
    "trainer_core.envs.mcp",
    "trainer_core.envs.agentgym",
    "trainer_core.policies.base",
    "trainer_core.policies.chat_format",
    "trainer_core.policies.react",
    "trainer_core.policies.factory",
    "trainer_core.policies.local_hf",
    "trainer_core.policies.anthropic_api",
    "trainer_core.policies.openai_compat",
    "trainer_core.rollouts.collect",
    "trainer_core.tasks.checkers",
    "trainer_core.rewards.rubrics",
    "trainer_core.rewards.judge",
    "trainer_core.rewards.scoring",
    "trainer_core.calibration.agreement",
    "trainer_core.calibration.fit",
]

pytestmark = pytest.mark.sqlite


def test_import_linter_contracts_are_kept():
    proc = subprocess.run(
        [
            str(Path(sys.executable).parent / "lint-imports"),
            "--config",
            str(REPO / "pyproject.toml"),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, f"import contracts broken:\n{proc.stdout}\n{proc.stderr}"
    for contract in (
        "trainer_core is a plain library",
        "webapp never imports workers",
        "layers run one way",
        "trainer_core's packages are layered",
        "webapp apps have a direction",
        "no import circles",
    ):
        assert contract in proc.stdout, f"contract {contract!r} is not checked:\n{proc.stdout}"


def test_the_contracts_catch_a_forbidden_import(tmp_path):
    """Prove the linter would fail: a copy of the tree where trainer_core imports django."""
    import shutil

    for pkg in ("trainer_core", "webapp", "workers"):
        shutil.copytree(REPO / pkg, tmp_path / pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "trainer_core" / "leak.py").write_text("import django  # noqa\n")
    (tmp_path / "webapp" / "leak.py").write_text("import workers.base  # noqa\n")
    # an import that runs back up inside trainer_core, and one between two webapp apps
    (tmp_path / "trainer_core" / "tasks" / "leak.py").write_text(
        "import trainer_core.rewards.scoring  # noqa\n"
    )
    (tmp_path / "webapp" / "trajectories" / "leak.py").write_text(
        "import webapp.rewards.selectors  # noqa\n"
    )
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode != 0, proc.stdout
    assert "trainer_core.leak -> django" in proc.stdout
    assert "webapp.leak -> workers.base" in proc.stdout
    assert "trainer_core.tasks.leak -> trainer_core.rewards.scoring" in proc.stdout
    assert "webapp.trajectories.leak -> webapp.rewards.selectors" in proc.stdout
    assert "trainer_core's packages are layered: nothing imports up BROKEN" in proc.stdout
    assert "webapp apps have a direction: an app imports only the apps below it BROKEN" in proc.stdout


def test_importing_trainer_core_loads_no_training_stack_and_no_django():
    code = (
        "import importlib, json, sys\n"
        f"for name in {LIGHT_MODULES!r}: importlib.import_module(name)\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY + ['django', 'celery', 'webapp', 'workers']!r})))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert loaded == [], f"importing trainer_core loaded {loaded}"


def test_the_web_app_loads_no_training_stack():
    """Every app, its jobs and its URLs load without torch & co: the web server and the workers
    start fast, and only a training job or a local model pays for the stack."""
    code = (
        "import json, os, sys\n"
        "os.environ.setdefault('DJANGO_SETTINGS_MODULE', 'webapp.config.settings')\n"
        "import django; django.setup()\n"
        "import webapp.config.urls, workers.rollouts, workers.scoring, workers.datasets\n"
        "import workers.evaluation, workers.trajectories, workers.diagnostics\n"
        f"print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert loaded == [], f"starting the web app loaded {loaded}"


def test_webapp_source_never_imports_workers():
    offenders = [
        str(path.relative_to(REPO))
        for path in (REPO / "webapp").rglob("*.py")
        if any(
            line.strip().startswith(("import workers", "from workers"))
            for line in path.read_text().splitlines()
        )
    ]
    assert offenders == [], f"webapp imports workers in {offenders}; send tasks by name instead"
