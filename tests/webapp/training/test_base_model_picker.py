"""The training form's base-model picker lists the local models that exist (directories with a
config.json under the data directory's models/ and the model roots, registered local policies'
models) and nothing a run could not read; a typed directory still works, checked against the
model roots; a tiny starter model is offered in one click, its name checked before any job."""

from __future__ import annotations

import html
import json
import re
import uuid

import pytest
from django.urls import reverse

from webapp.common.errors import ApplicationError
from webapp.jobs.models import Job
from webapp.jobs.names import Kinds
from webapp.rollouts.models import Policy
from webapp.training.selectors import base_model_choices
from webapp.training.services import tiny_model_launch

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def _model(path, config=True):
    path.mkdir(parents=True, exist_ok=True)
    if config:
        (path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    return path


def _picker_options(body: str) -> list[str]:
    select = re.search(r'<select name="base_model_pick".*?</select>', body, re.S)
    assert select, "the form has the base-model picker"
    return [html.unescape(v) for v in re.findall(r'<option value="([^"]*)"', select.group(0))]


@pytest.fixture
def data_dir(settings, tmp_path):
    """A data directory of this test's own (the only model root)."""
    settings.STEPLAB_DATA_DIR = tmp_path / "data"
    settings.STEPLAB_MODEL_ROOTS = [str(settings.STEPLAB_DATA_DIR)]
    settings.STEPLAB_DATA_DIR.mkdir()
    return settings.STEPLAB_DATA_DIR


def test_the_picker_lists_the_local_models_that_exist_and_nothing_else(
    operator_client, data_dir, tmp_path
):
    models = data_dir / "models"
    starter = _model(models / "starter")
    _model(models / "half-copied", config=False)  # no config.json: not a model
    _model(models / ".building-next")  # a model being written
    outside = _model(tmp_path / "elsewhere")
    (models / "link-out").symlink_to(outside)  # resolves outside the model roots
    checkpoint = _model(data_dir / "training" / "7-sft" / "checkpoint-6")
    Policy.objects.create(
        name="sft-run7-step6", kind="local", parameters={"model_dir": str(checkpoint)}
    )
    Policy.objects.create(name="peek", kind="local", parameters={"model_dir": str(outside)})
    Policy.objects.create(name="gone", kind="local", parameters={"model_dir": str(data_dir / "x")})

    choices = base_model_choices()
    assert [(c["path"], c["label"]) for c in choices] == [
        (str(starter), "starter"),
        (str(checkpoint), "sft-run7-step6 (policy)"),
    ]
    body = operator_client.get(reverse("training:new")).content.decode()
    assert _picker_options(body) == ["", str(starter), str(checkpoint)]
    assert 'data-testid="create-tiny"' in body


def test_a_second_model_root_is_scanned_too(operator_client, data_dir, settings, tmp_path):
    root = tmp_path / "shared-models"
    qwen = _model(root / "qwen-small")
    settings.STEPLAB_MODEL_ROOTS = [str(root), str(data_dir)]
    assert [c["path"] for c in base_model_choices()] == [str(qwen)]


def test_a_new_user_with_no_model_is_offered_a_tiny_one(operator_client, data_dir):
    body = operator_client.get(reverse("training:new")).content.decode()
    assert _picker_options(body) == [""]
    assert "no local model yet: create a tiny one below" in body
    assert 'name="tiny_name" value="tiny-starter"' in body
    _model(data_dir / "models" / "tiny-starter")
    body = operator_client.get(reverse("training:new")).content.decode()
    assert 'name="tiny_name" value="tiny-starter-2"' in body


def test_the_picked_model_is_the_base_model_and_a_typed_directory_still_works(
    operator_client, data_dir
):
    starter = _model(data_dir / "models" / "starter")
    form = {"method": "sft", "name": "r"}
    picked = operator_client.post(
        reverse("training:preview"), {**form, "base_model_pick": str(starter)}
    )
    assert f"model_dir: {starter}" in picked.content.decode()
    typed = operator_client.post(
        reverse("training:preview"), {**form, "base_model_pick": "", "base_model": str(starter)}
    )
    assert f"model_dir: {starter}" in typed.content.decode()

    # launching checks the picked path against the model roots like a typed one
    launch = {**form, "launch": "1"}
    refused = operator_client.post(reverse("training:new"), {**launch, "base_model_pick": "/etc"})
    assert "outside the directories it may be read from" in html.unescape(refused.content.decode())
    accepted = operator_client.post(
        reverse("training:new"), {**launch, "base_model_pick": str(starter)}
    )
    body = accepted.content.decode()
    assert "SFT needs a dataset snapshot." in body  # the model passed; the dataset is next
    assert f'<option value="{starter}" selected>' in body


def test_a_tiny_model_name_is_checked_before_any_job(operator_client, data_dir):
    before = Job.objects.count()
    for bad in ("", "../escape", "a b", ".hidden", "x" * 65):
        with pytest.raises(ApplicationError, match="Name the model"):
            tiny_model_launch(name=bad)
    _model(data_dir / "models" / "taken")
    with pytest.raises(ApplicationError, match="exists already"):
        tiny_model_launch(name="taken")
    assert Job.objects.count() == before

    response = operator_client.post(
        reverse("training:tiny_create"), {"tiny_name": "taken"}, HTTP_HX_REQUEST="true"
    )
    assert 'data-testid="tiny-error"' in response.content.decode()
    assert Job.objects.count() == before

    name = f"tiny-{uuid.uuid4().hex[:6]}"
    response = operator_client.post(
        reverse("training:tiny_create"), {"tiny_name": name}, HTTP_HX_REQUEST="true"
    )
    job = Job.objects.get(kind=Kinds.CREATE_TINY_MODEL)
    assert job.params == {"name": name, "seed": 0} and job.queue == "default"
    body = response.content.decode()
    assert reverse("training:tiny_result", args=[job.pk]) in body and "every 1s" in body

    # without htmx the button posts the form and lands on the job's page
    other = operator_client.post(reverse("training:tiny_create"), {"tiny_name": name + "-b"})
    assert other.status_code == 302 and other["Location"].startswith("/jobs/")
