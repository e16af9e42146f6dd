"""The steplab command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
STEPLAB = str(Path(sys.executable).parent / "steplab")

pytestmark = pytest.mark.sqlite


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [STEPLAB, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        env=env or dict(os.environ),
        check=False,
        timeout=120,
    )


def test_help_lists_the_commands():
    proc = _run("--help")
    assert proc.returncode == 0, proc.stderr
    for command in ("check", "serve", "jobs", "worker", "seed", "version", "eval", "demo"):
        assert command in proc.stdout
    # `python -m webapp.cli` registers every command too (accelerate launch uses it)
    module = subprocess.run(
        [sys.executable, "-m", "webapp.cli", "--help"], cwd=REPO, capture_output=True, text=True
    )
    for command in ("train", "export", "leaderboard", "compare", "demo"):
        assert command in module.stdout, module.stderr


def test_file_only_commands_run_without_a_database():
    env = dict(os.environ, DATABASE_URL="postgres://nobody@127.0.0.1:1/nothing")
    proc = _run("version", env=env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("steplab ")


def test_check_prints_the_system_report(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["STEPLAB_VAR_DIR"] = str(tmp_path)  # the embedded SQLite default
    proc = _run("check", env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in ("database", "broker", "bubblewrap", "podman", "chromium", "torch", "data dir"):
        assert f"  {name}" in proc.stdout, f"{name} missing from:\n{proc.stdout}"


def test_check_fails_clearly_when_the_database_is_unreachable():
    env = dict(os.environ, DATABASE_URL="postgres://nobody@127.0.0.1:1/nothing")
    proc = _run("check", env=env)
    assert proc.returncode == 1
    assert "database" in proc.stdout and "error" in proc.stdout
    assert "check DATABASE_URL" in proc.stdout


@pytest.mark.django_db
def test_jobs_commands_show_and_cancel(transactional_db):
    from webapp.jobs.models import Job, JobStatus

    job = Job.objects.create(kind="diagnostic", celery_task_id="t", message="Waiting for a worker.")
    env = _db_env()
    listed = _run("jobs", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    assert f"{job.pk:>6}  diagnostic" in listed.stdout
    cancelled = _run("jobs", "cancel", str(job.pk), env=env)
    assert cancelled.returncode == 0, cancelled.stderr
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED
    missing = _run("jobs", "show", "999999", env=env)
    assert missing.returncode != 0
    assert "no job 999999" in missing.stderr


def _db_env() -> dict[str, str]:
    from django.db import connection

    env = dict(os.environ)
    if connection.vendor == "postgresql":
        db = connection.settings_dict
        env["DATABASE_URL"] = (
            f"postgres://{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"
        )
    else:
        env["STEPLAB_SQLITE_PATH"] = str(connection.settings_dict["NAME"])
    return env


def test_leaderboard_and_compare_print_the_statistics(transactional_db):
    from tests.webapp.evaluation.test_pages import N_TASKS, make_evaluation
    from trainer_core.tasks.files import dump_tasks_jsonl
    from trainer_core.tasks.suites.arithmetic import arithmetic_tasks
    from webapp.tasks.services import task_set_import

    task_set, _ = task_set_import(
        text=dump_tasks_jsonl(arithmetic_tasks("heldout", n=N_TASKS)), name="held-out-cli"
    )
    strong = make_evaluation(task_set, "strong", [True] * 38 + [False] * 2)
    weak = make_evaluation(task_set, "weak", [i % 4 == 0 for i in range(N_TASKS)])
    env = _db_env()
    index = _run("leaderboard", env=env)
    assert index.returncode == 0, index.stderr
    assert "held-out-cli  (2 evaluations)" in index.stdout
    board = _run("leaderboard", "--task-set", "held-out-cli", env=env)
    assert board.returncode == 0, board.stderr
    lines = [line for line in board.stdout.splitlines() if "(eval " in line]
    assert lines[0].split()[0] == "1" and "strong" in lines[0]
    assert lines[1].split()[0] == "2" and "weak" in lines[1]
    compared = _run("compare", str(weak.pk), str(strong.pk), env=env)
    assert compared.returncode == 0, compared.stderr
    assert "40 shared tasks" in compared.stdout
    mcnemar = next(line for line in compared.stdout.splitlines() if "mcnemar" in line.lower())
    assert "  yes" in mcnemar and "0.7000" in mcnemar  # effect (38 - 10) / 40
    missing = _run("compare", "999998", str(strong.pk), env=env)
    assert missing.returncode != 0 and "no evaluation run 999998" in missing.stderr


def test_schema_prints_the_trajectory_json_schema_without_a_database():
    import json

    env = dict(os.environ, DATABASE_URL="postgres://nobody@127.0.0.1:1/nothing")
    proc = _run("schema", env=env)
    assert proc.returncode == 0, proc.stderr
    schema = json.loads(proc.stdout)
    assert schema["title"] == "Trajectory"
    assert {"schema_version", "steps", "outcome", "task"} <= set(schema["properties"])


def test_validate_tasks_names_the_line_and_field(tmp_path):
    good = tmp_path / "good.jsonl"
    good.write_text(
        '{"id": "a", "prompt": "What is 2+2?", "expected_answer": 4, "checker": "number"}\n'
    )
    proc = _run("validate-tasks", str(good))
    assert proc.returncode == 0 and "1 valid task" in proc.stdout
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "prompt": "ok"}\n{"id": "b"}\n')
    proc = _run("validate-tasks", str(bad))
    assert proc.returncode != 0
    assert "line 2" in proc.stderr and "prompt" in proc.stderr


@pytest.mark.django_db
def test_tasks_import_is_all_or_nothing_from_the_cli(transactional_db, tmp_path):
    from webapp.tasks.models import TaskSet

    env = _db_env()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "prompt": "ok"}\n{"id": "b", "prompt": 5}\n')
    proc = _run("tasks", "import", str(bad), "--set", "cli-set", env=env)
    assert proc.returncode != 0 and "line 2" in proc.stderr
    assert not TaskSet.objects.filter(name="cli-set").exists()
    good = tmp_path / "good.yaml"
    good.write_text(
        "task_set:\n  name: cli-set\ntasks:\n  - id: a\n    prompt: What is 1+1?\n    expected_answer: 2\n    checker: number\n"
    )
    proc = _run("tasks", "import", str(good), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "imported 1 task(s) into 'cli-set'" in proc.stdout
    assert TaskSet.objects.get(name="cli-set").tasks.count() == 1


def test_collect_plays_a_task_file_without_a_database(tmp_path):
    from trainer_core.tasks.files import dump_tasks_jsonl
    from trainer_core.tasks.suites.arithmetic import arithmetic_tasks

    tasks = arithmetic_tasks("train", n=2)
    for task in tasks:
        task.environment = "steplab/arithmetic"
    path = tmp_path / "tasks.jsonl"
    path.write_text(dump_tasks_jsonl(tasks))
    out = tmp_path / "out.jsonl"
    env = dict(os.environ, DATABASE_URL="postgres://nobody@127.0.0.1:1/nothing")
    proc = _run(
        "collect", str(path), "--episodes", "2", "--param", 'mistakes={"wrong_answer": 1.0}',
        "-o", str(out), env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "wrote 4 trajectories" in proc.stdout and "0 successful" in proc.stdout
    import json

    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(lines) == 4 and {line["outcome"]["success"] for line in lines} == {False}
    bad = _run("collect", str(path), "--param", "delay=-1", "-o", str(out), env=env)
    assert bad.returncode != 0 and "delay must be" in bad.stderr


def test_score_files_with_rules_without_a_database(tmp_path):
    from trainer_core.recording.schema import Outcome, Step, TaskRef, Trajectory

    steps = [
        Step(index=0, tool="read_file", params={"path": "a.py"}, observation="x = 1"),
        Step(index=1, tool="read_file", params={"path": "a.py"}, observation="x = 1"),
        Step(index=2, tool="submit", params={}, observation="done"),
    ]
    path = tmp_path / "run.jsonl"
    path.write_text(
        Trajectory(
            task=TaskRef(id="t", prompt="p"), steps=steps, outcome=Outcome(success=True)
        ).to_json()
        + "\n"
    )
    out = tmp_path / "scores.jsonl"
    env = dict(os.environ, DATABASE_URL="postgres://nobody@127.0.0.1:1/nothing")
    proc = _run("score", str(path), "--domain", "coding", "-o", str(out), env=env)
    assert proc.returncode == 0, proc.stderr
    assert "scored 1 trajectories" in proc.stdout
    import json

    (record,) = [json.loads(line) for line in out.read_text().splitlines()]
    step1 = record["steps"][1]["rubrics"]["non_redundancy"]
    assert step1["value"] == 0.0 and step1["layer"] == "rule"
    assert record["steps"][1]["rubrics"]["goal_progress"]["value"] is None
    unset = dict(env)
    unset.pop("STEPLAB_NO_SUCH_KEY", None)
    proc = _run(
        "score", str(path), "--judge-kind", "anthropic", "--judge-model", "claude-x",
        "--judge-key-env", "STEPLAB_NO_SUCH_KEY", env=unset,
    )  # fmt: skip
    assert proc.returncode != 0 and "STEPLAB_NO_SUCH_KEY" in proc.stderr


@pytest.mark.slow
def test_train_sft_from_a_yaml_config_without_a_database(tmp_path):
    from trainer_core.datasets.items import ExportItem
    from trainer_core.datasets.sft import sft_records
    from trainer_core.datasets.writer import write_dataset
    from trainer_core.training.tiny import build_tiny_model, reference_trajectories

    model = build_tiny_model(tmp_path / "tiny", hidden_size=64, num_layers=2)
    items = [
        ExportItem(trajectory_id=i, trajectory=t)
        for i, t in enumerate(reference_trajectories("train", 6))
    ]
    files = write_dataset(
        sft_records(items), tmp_path / "data", name="d", kind="sft", splits={"train": 1.0}
    )
    config = tmp_path / "sft.yaml"
    config.write_text(
        f"model_dir: {model}\noutput_dir: {tmp_path / 'out'}\n"
        f"dataset: {files.files['data/train.jsonl']}\nmax_steps: 2\nbatch_size: 2\n"
    )
    env = dict(
        os.environ, DATABASE_URL="postgres://nobody@127.0.0.1:1/nothing", OMP_NUM_THREADS="1"
    )
    proc = _run("train", "sft", "--config", str(config), env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "step 2:" in proc.stdout and "loss=" in proc.stdout
    assert (tmp_path / "out" / "checkpoint-2").is_dir()
    bad = tmp_path / "bad.yaml"
    bad.write_text(f"model_dir: {model}\noutput_dir: {tmp_path}\nlearning_rte: 1\n")
    proc = _run("train", "sft", "--config", str(bad), env=env)
    assert proc.returncode != 0 and "learning_rte" in proc.stderr
