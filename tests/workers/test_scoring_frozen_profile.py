"""A reward-model version scores with the domain profile version it froze when it was made: an
admin's profile edit after scoring leaves the version's re-score byte-identical, while a version
created after the edit scores with it. Each score records the profile version it used."""

from __future__ import annotations

import json

import pytest
import yaml
from django.urls import reverse

from tests.conftest import wait_for
from tests.workers.test_scoring_job import _coding_trajectory, _finished, _import
from webapp.accounts.models import Role
from webapp.domains.models import DomainProfile
from webapp.domains.services import profiles_seed_builtin
from webapp.jobs.models import JobStatus
from webapp.rewards import services
from webapp.rewards.models import StepScore, TrajectoryScore

pytestmark = [pytest.mark.worker]


def _score(version, pk: int) -> None:
    run = services.scoring_launch(reward_model=version, trajectory_ids=[pk])
    job = wait_for(lambda: _finished(run.job_id), timeout=60, what=f"scoring with {version}")
    assert job.status == JobStatus.SUCCEEDED, job.error


def _stored(version, pk: int) -> str:
    """Everything the version stored for the trajectory, as canonical JSON text."""
    total = TrajectoryScore.objects.get(reward_model=version, trajectory_id=pk)
    steps = StepScore.objects.filter(reward_model=version, trajectory_id=pk).order_by("index")
    return json.dumps(
        {
            "total": [total.total, total.process, total.outcome, total.efficiency],
            "unscored_reason": total.unscored_reason,
            "steps": [[s.index, s.total, s.raw_total, s.rubrics] for s in steps],
        },
        sort_keys=True,
    )


def test_a_profile_edit_after_scoring_leaves_the_versions_rescore_byte_identical(
    celery_worker, client, make_user
):
    profiles_seed_builtin()
    services.rubrics_seed(domain="coding")
    (pk,) = _import(_coding_trajectory("frozen", repeat_read=True, success=True))
    v1 = services.reward_model_create(domain="coding", note="before the edit")
    profile_v1 = DomainProfile.objects.get(name="coding", is_current=True)
    assert v1.profile == profile_v1
    _score(v1, pk)
    before = _stored(v1, pk)
    assert TrajectoryScore.objects.get(reward_model=v1, trajectory_id=pk).profile == profile_v1
    # the repeated read of src/app.py is redundant work while read_file is a read
    assert json.loads(before)["steps"][2][3]["non_redundancy"]["value"] == 0.0

    # an admin edits the profile on its page: read_file becomes an execute tool and success is
    # read from another outcome field
    client.force_login(make_user(Role.ADMIN))
    data = dict(profile_v1.data)
    data["tools"] = [
        dict(t, category="execute") if t["name"] == "read_file" else t for t in data["tools"]
    ]
    data["outcome"] = dict(data["outcome"], success_field="resolved")
    response = client.post(
        reverse("domains:edit", args=["coding"]),
        {"text": yaml.safe_dump(data), "change_note": "read_file executes"},
    )
    assert response.status_code == 302
    profile_v2 = DomainProfile.objects.get(name="coding", is_current=True)
    assert profile_v2.version == 2

    # v1 scores the trajectory again (its stored scores removed first): byte for byte the same
    StepScore.objects.filter(reward_model=v1, trajectory_id=pk).delete()
    TrajectoryScore.objects.filter(reward_model=v1, trajectory_id=pk).delete()
    _score(v1, pk)
    assert _stored(v1, pk) == before
    assert TrajectoryScore.objects.get(reward_model=v1, trajectory_id=pk).profile == profile_v1

    # a version made after the edit scores with it, and says so
    v2 = services.reward_model_create(domain="coding", note="after the edit")
    assert v2.profile == profile_v2 and v2.config == v1.config
    _score(v2, pk)
    after = json.loads(_stored(v2, pk))
    assert after["steps"][2][3]["non_redundancy"]["value"] > 0.0
    assert after["total"][2] != json.loads(before)["total"][2]  # the outcome field moved
    assert TrajectoryScore.objects.get(reward_model=v2, trajectory_id=pk).profile == profile_v2

    page = client.get(reverse("rewards:trajectory_scores", args=[pk]), {"rm": v1.pk})
    assert b'data-testid="score-profile"><a href="/domains/coding/v1/">coding v1</a>' in (
        page.content
    )
