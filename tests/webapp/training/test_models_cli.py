"""``steplab models create-tiny`` builds a tiny starter model in the data directory (no worker,
nothing downloaded) and ``steplab models list`` shows it, as the training form's picker does."""

from __future__ import annotations

import pytest

from tests.test_cli import _db_env, _run

pytestmark = [pytest.mark.sqlite, pytest.mark.slow]


def test_create_tiny_then_list(transactional_db, tmp_path):
    env = {**_db_env(), "STEPLAB_DATA_DIR": str(tmp_path), "STEPLAB_MODEL_ROOTS": ""}
    empty = _run("models", "list", env=env)
    assert empty.returncode == 0, empty.stderr
    assert "no local model yet: `steplab models create-tiny` makes one" in empty.stdout

    made = _run("models", "create-tiny", env=env)
    assert made.returncode == 0, made.stderr
    path = tmp_path / "models" / "tiny-starter"
    assert made.stdout.strip() == str(path)
    assert f"train from it with model_dir: {path}" in made.stderr
    assert {"config.json", "tokenizer.json", "model.safetensors"} <= {
        p.name for p in path.iterdir()
    }
    assert [p.name for p in path.parent.iterdir()] == ["tiny-starter"]  # no staging left

    listed = _run("models", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [f"{path}  tiny-starter"]

    again = _run("models", "create-tiny", "--name", "tiny-starter", env=env)
    assert again.returncode != 0 and "exists already" in again.stderr
    bad = _run("models", "create-tiny", "--name", "../up", env=env)
    assert bad.returncode != 0 and "Name the model" in bad.stderr
