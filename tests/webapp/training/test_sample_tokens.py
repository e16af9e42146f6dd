"""The token view of a decoupled RL run's training sample (issue 21): the stored ids as the
trainer consumed them, coloured by loss mask and step, with the behaviour log-probs recorded at
sampling; bounded (paged) and with the model-written text escaped. And the drift check a run
starts with when its samplers tokenise with a tokenizer of their own."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tests.trainer_core.policies.tiny_model import build_tiny_tokenizer
from tests.webapp.training.test_rl_pages import MARKUP, _launch, _running, base_model  # noqa: F401
from tests.webapp.trajectories.test_gdi import _run
from trainer_core.policies import chat_format as cf
from trainer_core.training.data import encode_tokens
from trainer_core.training.episodes import Completion, Group
from webapp.accounts.models import Role
from webapp.common.errors import ApplicationError
from webapp.jobs.models import Job
from webapp.rollouts.models import Policy
from webapp.training import rl_services
from webapp.training.models import RLRun, TrainingRun
from webapp.training.rl_jobs import rl_run

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def _sample(tokenizer) -> Completion:
    messages = [
        {"role": "user", "content": "What is 2+3?"},
        {"role": "assistant", "content": MARKUP},
        {"role": "user", "content": "again"},
        {"role": "assistant", "content": "5"},
    ]
    tokens = cf.tokenize(messages, tokenizer)
    encoded = encode_tokens(tokens.input_ids, tokens.assistant_mask, max_length=4096)
    done = Completion(encoded, 1.0, [None, None], success=True)
    done.behaviour_logprobs = [-0.125 if m else 0.0 for m in tokens.assistant_mask]
    done.turns = [{"text": MARKUP, "action": None, "error": MARKUP, "observation": MARKUP}]
    return done


def test_a_samples_tokens_show_loss_steps_and_logprobs_escaped(base_model, client, make_user):  # noqa: F811
    tokenizer = build_tiny_tokenizer()
    tokenizer.save_pretrained(base_model)
    run = _launch(base_model)
    samplers, _ = _running(run)
    row = rl_services.group_claim(run=run, job_id=samplers[0].pk, version=0)
    group = Group([_sample(tokenizer), _sample(tokenizer)], key="t")
    ids = rl_services.episodes_store(run=run, row=row, group=group, model="tiny")
    assert rl_services.group_store(
        run=run, row=row, job_id=samplers[0].pk, group=group, trajectory_ids=ids
    )
    client.force_login(make_user(Role.VIEWER))
    url = reverse(
        "training:group_sample_tokens", kwargs={"pk": run.pk, "group": row.pk, "index": 1}
    )
    page = client.get(url).content.decode()
    assert MARKUP not in page and "&lt;img src=x onerror=" in page
    assert 'data-loss="1"' in page and 'data-loss="0"' in page
    assert "tok-band-0" in page and "tok-band-1" in page and "logprob -0.125" in page
    assert reverse("trajectories:detail", args=[ids[1]]) in page
    paged = client.get(url, {"start": 3}).content.decode()
    assert "Showing tokens 3–" in paged
    for index in (2, 99):
        missing = reverse(
            "training:group_sample_tokens", kwargs={"pk": run.pk, "group": row.pk, "index": index}
        )
        assert client.get(missing).status_code == 404


def test_an_rl_run_whose_sampler_tokenises_otherwise_is_blocked_at_its_start(base_model):  # noqa: F811
    build_tiny_tokenizer().save_pretrained(base_model)
    sampler_dir = f"{base_model}-sampler"
    build_tiny_tokenizer(["The quick brown fox.", "What is 2+3?"]).save_pretrained(sampler_dir)
    run = _launch(base_model)
    server = Policy.objects.create(
        name="server", kind="inference_server", model="http://127.0.0.1:9",
        parameters={"tokenizer_dir": sampler_dir},
    )  # fmt: skip
    RLRun.objects.filter(pk=run.pk).update(sampler_policy=server)
    with pytest.raises(
        ApplicationError,
        match="RL run blocked. Token drift: the first task, tokenised by the sampler",
    ):
        _run(rl_run, run.job)
    check = TrainingRun.objects.get(pk=run.training_run_id).result["token_check"]
    assert check["status"] == "mismatch" and check["first"]["part"] == "prompt"
    assert not Job.objects.filter(parent=run.job).exists()  # nothing started sampling
