"""A DPO dataset from reward-model scores needs preference pairs: the form offers to build them in
the export job ("Build preference pairs first"), and when there are none the error says that this
is the missing step and links to it, instead of asking to widen the filters."""

from __future__ import annotations

import html
import re

import pytest
from django.urls import reverse

from tests.workers.test_scoring_job import _coding_trajectory, _import
from webapp.common.errors import ApplicationError
from webapp.datasets.models import DatasetSnapshot
from webapp.datasets.services import snapshot_create
from webapp.jobs.models import Job
from webapp.rewards import services as rewards
from webapp.rewards.models import PreferencePair

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


@pytest.fixture
def version():
    rewards.rubrics_seed(domain="coding")
    return rewards.reward_model_create(domain="coding")


def _text(response) -> str:
    return html.unescape(response.content.decode())


def test_a_dpo_export_without_pairs_is_refused_and_says_how_to_get_them(version):
    before = (DatasetSnapshot.objects.count(), Job.objects.count())
    with pytest.raises(ApplicationError) as refused:
        snapshot_create(name="dpo", kind="dpo", reward_model=version)
    message = refused.value.message
    assert f"Reward-model version {version.label} has no preference pairs yet" in message
    assert "Tick “Build preference pairs first”" in message
    assert f"steplab preferences --version {version.pk}" in message
    assert "widen the filters" not in message
    assert refused.value.extra == {"hint": "pairs"}
    with pytest.raises(
        ApplicationError, match="no human preference pairs yet: they come from pairwise"
    ):
        snapshot_create(name="dpo-h", kind="dpo", label_source="human")
    assert (DatasetSnapshot.objects.count(), Job.objects.count()) == before


def test_building_pairs_first_goes_into_the_export_job(version):
    snapshot = snapshot_create(
        name="dpo", kind="dpo", reward_model=version,
        build_pairs={"method": "adjacent", "min_margin": "0.05"},
    )  # fmt: skip
    assert snapshot.job.params == {
        "snapshot_id": snapshot.pk,
        "build_pairs": {"method": "adjacent", "min_margin": 0.05},
    }
    for kwargs, error in [
        ({"kind": "sft"}, "Preference pairs are built from reward-model scores for a DPO"),
        ({"kind": "dpo", "label_source": "human"}, "Preference pairs are built from"),
        ({"kind": "dpo", "build_pairs": {"method": "uncertain"}}, "Pair method 'uncertain'"),
        ({"kind": "dpo", "build_pairs": {"min_margin": -1}}, "a number ≥ 0"),
        ({"kind": "dpo", "build_pairs": {"min_margin": "nan"}}, "a number ≥ 0"),
    ]:
        options = {"build_pairs": {"method": "outside_in"}, **kwargs}
        with pytest.raises(ApplicationError, match=re.escape(error)):
            snapshot_create(name="x", reward_model=version, **options)


def test_the_form_offers_the_checkbox_and_its_error_links_to_the_pairs(operator_client, version):
    form = {"name": "dpo", "kind": "dpo", "reward_model": version.pk, "label_source": "model"}
    page = _text(operator_client.get(reverse("datasets:new")))
    assert 'name="build_pairs"' in page and "Build preference pairs first" in page

    refused = _text(operator_client.post(reverse("datasets:new"), {**form, "seed": 0}))
    assert "has no preference pairs yet" in refused
    hint = re.search(r'data-testid="pairs-hint">(.*?)</p>', refused, re.S).group(1)
    assert f'href="{reverse("rewards:pairs")}"' in hint and 'href="#id_build_pairs"' in hint
    assert not DatasetSnapshot.objects.exists()

    made = operator_client.post(
        reverse("datasets:new"),
        {**form, "seed": 0, "build_pairs": "on", "pair_method": "outside_in", "min_margin": ""},
    )
    snapshot = DatasetSnapshot.objects.get(name="dpo")
    assert made.status_code == 302 and made["Location"] == reverse(
        "datasets:detail", args=[snapshot.pk]
    )
    assert snapshot.job.params["build_pairs"] == {"method": "outside_in", "min_margin": 0.1}


def test_with_pairs_a_dpo_export_needs_no_checkbox(version):
    a, b = _import(
        _coding_trajectory("p", repeat_read=False, success=True),
        _coding_trajectory("p", repeat_read=True, success=False),
    )
    PreferencePair.objects.create(
        task_ref="t", chosen_id=a, rejected_id=b, source="rules", reward_model=version, method="x"
    )
    snapshot = snapshot_create(name="dpo", kind="dpo", reward_model=version)
    assert "build_pairs" not in snapshot.job.params


def test_export_again_fills_the_form_as_before_with_pairs_built_first(operator_client, version):
    PreferencePair.objects.create(
        task_ref="t",
        chosen_id=_import(_coding_trajectory("q", repeat_read=False, success=True))[0],
        rejected_id=_import(_coding_trajectory("q", repeat_read=True, success=True))[0],
        source="rules", reward_model=version, method="x",
    )  # fmt: skip
    first = snapshot_create(
        name="dpo-ok", kind="dpo", reward_model=version, query={"outcome": "success"}, seed=4
    )
    snapshot_create(name="dpo-ok-2", kind="sft")
    page = _text(operator_client.get(reverse("datasets:new") + f"?again={first.pk}"))
    assert 'name="name" value="dpo-ok-3"' in page
    assert re.search(r'name="build_pairs"[^>]*checked', page)
    assert re.search(rf'<option value="{version.pk}" selected>', page)
    assert re.search(r'<option value="success" selected>', page)
    assert 'name="seed" value="4"' in page
