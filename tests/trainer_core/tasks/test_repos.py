"""A task's repo never reaches outside the directories repositories may come from: refused at
import (line and field), and again when an episode starts. Symlinks and ``..`` are resolved
before the check."""

from __future__ import annotations

import io
import json
import tarfile

import pytest

from trainer_core.envs import make
from trainer_core.errors import ConfigError
from trainer_core.tasks.files import TaskFileError, load_tasks
from trainer_core.tasks.model import Task
from trainer_core.tasks.repos import ENV_ROOTS, repo_roots, resolve_repo


@pytest.fixture
def root(tmp_path, monkeypatch):
    allowed = tmp_path / "allowed"
    (allowed / "project").mkdir(parents=True)
    (allowed / "project" / "main.py").write_text("print('hi')\n")
    monkeypatch.setenv(ENV_ROOTS, str(allowed))
    return allowed


@pytest.mark.parametrize("path", ["/", "/etc", "/root", "/proc/self"])
def test_host_directories_are_refused_whatever_is_configured(root, path):
    with pytest.raises(ConfigError, match="outside the directories repositories may come from"):
        resolve_repo(path)


def test_with_no_root_configured_an_absolute_path_is_refused(tmp_path, monkeypatch):
    monkeypatch.delenv(ENV_ROOTS, raising=False)
    (tmp_path / "repo").mkdir()
    with pytest.raises(ConfigError, match="none configured|outside"):
        resolve_repo(str(tmp_path / "repo"))


def test_a_directory_under_a_root_is_accepted_and_resolved(root):
    assert resolve_repo(str(root / "project")) == (root / "project").resolve()
    assert root.resolve() in repo_roots()


def test_dot_dot_and_symlinks_cannot_lead_out(root, tmp_path):
    secret = tmp_path / "secret"
    secret.mkdir()
    with pytest.raises(ConfigError, match="outside"):
        resolve_repo(str(root / "project" / ".." / ".." / "secret"))
    (root / "escape").symlink_to(secret)
    with pytest.raises(ConfigError, match="outside"):
        resolve_repo(str(root / "escape"))
    (root / "etc-link").symlink_to("/etc")
    with pytest.raises(ConfigError, match="outside"):
        resolve_repo(str(root / "etc-link"))


def test_a_relative_repo_needs_a_base_and_stays_inside_it(tmp_path):
    base = tmp_path / "tasks"
    (base / "repo").mkdir(parents=True)
    with pytest.raises(ConfigError, match="relative path"):
        resolve_repo("repo")
    assert resolve_repo("repo", base_dir=base) == (base / "repo").resolve()
    with pytest.raises(ConfigError, match="leads out"):
        resolve_repo("../../etc", base_dir=base)
    (base / "link").symlink_to("/etc")
    with pytest.raises(ConfigError, match="leads out"):
        resolve_repo("link", base_dir=base)


def _task(**fields) -> dict:
    return {"id": "t1", "prompt": "Look around.", "expected_answer": "x", **fields}


def test_import_refuses_a_host_path_naming_the_line_and_field(monkeypatch, tmp_path):
    monkeypatch.delenv(ENV_ROOTS, raising=False)
    text = json.dumps(_task()) + "\n" + json.dumps(_task(id="t2", repo=str(tmp_path))) + "\n"
    with pytest.raises(TaskFileError) as caught:
        load_tasks(text)
    ((line, field, message),) = caught.value.problems
    assert (line, field) == (2, "repo")
    assert "outside the directories" in message


def test_a_task_file_on_disk_may_ship_its_repository_beside_it(tmp_path):
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "README").write_text("beside the task file\n")
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(_task(repo="repo", environment="steplab/sandbox")) + "\n")
    (task,) = load_tasks(path).tasks
    assert task.repo == str((tmp_path / "repo").resolve())
    env = make("steplab/sandbox", max_steps=None)
    try:
        env.reset(task=task)  # allowed in this process: it came from the task file's directory
        assert env.sandbox.read_file("README") == b"beside the task file\n"
    finally:
        env.close()


def test_an_episode_refuses_a_host_repo_before_any_sandbox_starts(monkeypatch):
    monkeypatch.delenv(ENV_ROOTS, raising=False)
    task = Task(prompt="Read the password.", domain="coding", repo="/etc")
    env = make("steplab/sandbox", max_steps=None)
    try:
        with pytest.raises(ConfigError, match="outside the directories"):
            env.reset(task=task)
        assert env.sandbox is None
    finally:
        env.close()


def test_a_tar_archive_under_a_root_seeds_the_workspace(root):
    archive = root / "repo.tar.gz"
    data = b"from the archive\n"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("NOTES")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    task = Task(prompt="Read NOTES.", domain="coding", repo=str(archive))
    env = make("steplab/sandbox", max_steps=None)
    try:
        env.reset(task=task)
        assert env.sandbox.read_file("NOTES") == data
    finally:
        env.close()
