"""The drift check and the token view of dataset rows (issue 21), on the real services and a
real byte-level BPE tokenizer built here: an export for a policy whose sampling prompt differs
from what training renders is blocked with the first differing position (shown on the dataset
page), one whose recorded ids match passes, imported logs without ids are not checkable, a
training run on a drifted dataset is blocked at its start, and the row's token page shows the
tokens coloured by loss and step with every untrusted text escaped."""

from __future__ import annotations

import html
import re
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from tests.trainer_core.policies.tiny_model import build_tiny_tokenizer
from tests.webapp.trajectories.test_gdi import _run
from tests.workers.test_scoring_job import _import
from trainer_core.policies import chat_format as cf
from trainer_core.policies.base import Turn
from trainer_core.recording.schema import Step as StepSpec
from trainer_core.recording.schema import TaskRef
from trainer_core.recording.schema import Trajectory as TrajectorySpec
from trainer_core.training.drift import turn_spans
from webapp.accounts.models import Role
from webapp.common.errors import ApplicationError
from webapp.datasets.jobs import export_run
from webapp.datasets.models import DatasetSnapshot
from webapp.datasets.services import snapshot_create
from webapp.rollouts.models import Policy
from webapp.training.jobs import train_run
from webapp.training.models import TrainingRun
from webapp.training.services import training_launch
from webapp.trajectories import services as trajectories

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]

MARKUP = '<script>alert("x")</script>'
PROMPT = f"What is 2+3? {MARKUP}"
ACTIONS = [
    ({"tool": "calculator", "params": {"expression": "2+3"}, "thought": "Compute it."}, "5"),
    ({"tool": "submit", "params": {"answer": "5"}, "thought": ""}, "Correct."),
]


@pytest.fixture(scope="module")
def tokenizer():
    return build_tiny_tokenizer()


@pytest.fixture
def policy(tokenizer):
    """A local policy whose model directory holds the tokenizer (under the data directory)."""
    path = Path(settings.STEPLAB_DATA_DIR) / "models" / f"tok-{uuid.uuid4().hex[:8]}"
    tokenizer.save_pretrained(path)
    return Policy.objects.create(name=f"tiny-{path.name}", kind="local", model=str(path))


def _rollout(tokenizer, *, sampled_system: str | None = None) -> int:
    """A rollout of ``ACTIONS`` whose steps record the ids its sampler prompted with and sampled;
    ``sampled_system``: the sampler's prompt had this system message (the export has none)."""
    history = [Turn(action=a, observation=o) for a, o in ACTIONS]
    messages = cf.to_messages(prompt=PROMPT, history=history, system=sampled_system)
    encoded = cf.tokenize(messages, tokenizer)
    ids = encoded.input_ids
    trajectory = trajectories.trajectory_begin(key=uuid.uuid4().hex, prompt=PROMPT, policy="tiny")
    steps = [
        StepSpec(
            index=i, tool=a["tool"], params=a["params"], thought=a["thought"], observation=o,
            metadata={"metrics": {"prompt_token_ids": ids[:s], "completion_token_ids": ids[s:e]}},
        )
        for i, ((a, o), (s, e)) in enumerate(zip(ACTIONS, turn_spans(encoded.assistant_mask), strict=True))
    ]  # fmt: skip
    trajectories.trajectory_append_steps(trajectory=trajectory, steps=steps)
    trajectories.trajectory_finish(trajectory=trajectory, outcome={"success": True})
    return trajectory.pk


def _imported() -> int:
    spec = TrajectorySpec(
        task=TaskRef(id="imported", prompt=PROMPT, domain="generic"),
        agent="someone",
        steps=[
            StepSpec(index=i, tool=a["tool"], params=a["params"], observation=o)
            for i, (a, o) in enumerate(ACTIONS)
        ],
    )
    return _import(spec)[0]


def _export(name: str, policy: Policy, **query) -> DatasetSnapshot:
    query = {**query, "splits": {"train": 1.0}}  # the one row is row 0 of the train split
    return snapshot_create(name=name, kind="sft", query=query, token_policy=policy)


def _page(client, snapshot, **params):
    url = reverse("datasets:row_tokens", args=[snapshot.pk, 0])
    return client.get(url, params).content.decode()


def test_an_export_whose_sampling_template_differs_is_blocked_and_shows_where(
    tokenizer, policy, client, make_user
):
    _rollout(tokenizer, sampled_system="You are a careful agent.")
    snapshot = _export("drifted", policy)
    with pytest.raises(ApplicationError, match="Export blocked for policy") as blocked:
        _run(export_run, snapshot.job)
    assert "assistant turn 0, token 1 (in the prompt, recorded ids" in blocked.value.message
    snapshot.refresh_from_db()
    assert snapshot.files == {} and snapshot.token_check["status"] == "mismatch"
    first = snapshot.token_check["first"]
    assert (first["turn"], first["position"], first["part"]) == (0, 1, "prompt")
    client.force_login(make_user(Role.VIEWER))
    page = client.get(reverse("datasets:detail", args=[snapshot.pk])).content.decode()
    assert 'data-status="mismatch"' in page and "Token drift — blocked" in page
    # the blocked rows stay viewable, with the same difference: the page links to the row
    link = re.search(r'href="([^"]+)" data-testid="token-check-row"', page).group(1)
    tokens = client.get(html.unescape(link)).content.decode()
    assert 'data-status="mismatch"' in tokens and "tok-loss" in tokens
    assert "train row 0, assistant turn 0, token 1" in tokens


def test_an_export_whose_ids_match_passes_and_imports_without_ids_are_not_checkable(
    tokenizer, policy
):
    _rollout(tokenizer)
    snapshot = _export("clean", policy, source="rollout")
    _run(export_run, snapshot.job)
    snapshot.refresh_from_db()
    assert snapshot.files and snapshot.token_check["status"] == "passed"
    assert snapshot.token_check["recorded"] == 2
    _imported()
    imported = _export("imported", policy, source="import")
    _run(export_run, imported.job)
    imported.refresh_from_db()
    assert imported.files and imported.token_check["status"] == "not_checkable"
    assert imported.token_check["not_checkable"] == 2
    with pytest.raises(ApplicationError, match="The drift check reads chat rows"):
        snapshot_create(name="knowlyr", kind="sft_knowlyr", token_policy=policy)


def test_a_training_run_on_a_drifted_dataset_is_blocked_at_its_start(
    tokenizer, policy, client, make_user
):
    _rollout(tokenizer, sampled_system="You are a careful agent.")
    snapshot = snapshot_create(name="plain", kind="sft", query={"splits": {"train": 1.0}})
    _run(export_run, snapshot.job)  # no policy named: exported unchecked
    snapshot.refresh_from_db()
    assert snapshot.files and snapshot.token_check == {}
    run = training_launch(method="sft", dataset=snapshot, base_model=policy.model)
    with pytest.raises(ApplicationError, match="Training blocked. Token drift: row 0"):
        _run(train_run, run.job)
    run = TrainingRun.objects.get(pk=run.pk)
    assert run.result["token_check"]["status"] == "mismatch"
    client.force_login(make_user(Role.VIEWER))
    page = client.get(reverse("training:detail", args=[run.pk])).content.decode()
    assert 'data-status="mismatch"' in page
    link = re.search(r'href="([^"]+)" data-testid="run-row-tokens"', page).group(1)
    tokens = client.get(html.unescape(link)).content.decode()  # with the run's tokenizer
    assert 'data-status="mismatch"' in tokens and 'data-loss="1"' in tokens


def test_the_row_token_page_colours_by_loss_and_step_and_escapes_text(
    tokenizer, policy, client, make_user
):
    _rollout(tokenizer)
    snapshot = _export("view", policy)
    _run(export_run, snapshot.job)
    client.force_login(make_user(Role.VIEWER))
    detail = client.get(reverse("datasets:detail", args=[snapshot.pk])).content.decode()
    assert reverse("datasets:row_tokens", args=[snapshot.pk, 0]) in detail
    page = _page(client, snapshot)  # the tokenizer of the export's check
    assert 'data-status="passed"' in page
    assert page.count('data-loss="1"') > 10 and "tok-band-0" in page and "tok-band-1" in page
    assert 'data-step="1"' in page and "Rendered chat template text" in page
    assert MARKUP not in page and "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page
    # a page of tokens is bounded, and says so
    paged = _page(client, snapshot, start=5)
    assert "Showing tokens 5–" in paged and 'title="#5 id' in paged
    missing = client.get(reverse("datasets:row_tokens", args=[snapshot.pk, 7]))
    assert missing.status_code == 200 and "has no row 7" in missing.content.decode()
