"""A tiny starter model built by a real worker from the training form: the form follows the job
and, when it ends, puts the new model in the base-model picker, picked; the model loads and the
job page links back to the form."""

from __future__ import annotations

import re
import uuid

import pytest
from django.conf import settings
from django.urls import reverse

from tests.conftest import wait_for
from webapp.jobs.models import Job, JobStatus
from webapp.jobs.names import Kinds

pytestmark = [pytest.mark.worker, pytest.mark.slow]


def test_the_form_creates_a_tiny_model_on_a_worker_and_picks_it(celery_worker, operator_client):
    from trainer_core.training.modelling import load_model_and_tokenizer

    name = f"tiny-{uuid.uuid4().hex[:8]}"
    started = operator_client.post(
        reverse("training:tiny_create"), {"tiny_name": name}, HTTP_HX_REQUEST="true"
    )
    assert 'data-testid="tiny-waiting"' in started.content.decode()
    job = Job.objects.get(kind=Kinds.CREATE_TINY_MODEL, params__name=name)
    poll = reverse("training:tiny_result", args=[job.pk])

    def created() -> str | None:
        body = operator_client.get(poll).content.decode()
        return body if 'data-testid="tiny-created"' in body or "tiny-error" in body else None

    body = wait_for(created, timeout=120, interval=0.5, what="the tiny model job")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    path = (settings.STEPLAB_DATA_DIR / "models" / name).resolve()
    assert job.result["path"] == str(path) and job.result["model_type"] == "llama"
    # the picker comes back out of band with the new model picked
    assert re.search(r'id="base-model-picker"[^>]*hx-swap-oob="true"', body)
    assert f'<option value="{path}" selected>' in body
    assert not [p for p in path.parent.iterdir() if p.name.startswith(f".building-{name}")]
    model, tokenizer = load_model_and_tokenizer(path, device="cpu")
    assert model.config.vocab_size == len(tokenizer)

    page = operator_client.get(reverse("jobs:detail", args=[job.pk])).content.decode()
    assert 'data-testid="train-from-tiny"' in page and str(path) in page
    form = operator_client.get(reverse("training:new")).content.decode()
    assert f'<option value="{path}"' in form
