"""The reward-hacking flags over the API (issue 21): list a run's flags, compute them with a
setting (a bad one is a 422 naming it), make the queue of a flag's samples (operators), confirm
or reject it (annotators)."""

from __future__ import annotations

import pytest

from tests.webapp.training.flag_runs import build_run
from webapp.accounts.models import Role

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def test_flags_over_the_api(client, make_user, make_token):
    def auth(role):
        return {"Authorization": f"Bearer {make_token(make_user(role))}"}

    run = build_run(hacked=True)
    base = f"/api/v1/training-runs/{run.pk}/flags"
    bad = client.post(
        f"{base}/compute",
        {"settings": {"alpha": 3}},
        content_type="application/json",
        headers=auth(Role.OPERATOR),
    )
    assert bad.status_code == 422 and "alpha must be between" in bad.json()["error"]["message"]
    assert (
        client.post(
            f"{base}/compute", {}, content_type="application/json", headers=auth(Role.VIEWER)
        ).status_code
        == 403
    )
    computed = client.post(
        f"{base}/compute",
        {"settings": {"window": 4}},
        content_type="application/json",
        headers=auth(Role.OPERATOR),
    )
    fired = [r for r in computed.json() if r["fired"]]
    assert [(r["kind"], r["start"]) for r in fired] == [
        ("failed_high_process", 1),
        ("failed_high_process", 5),
    ]
    listed = client.get(base, headers=auth(Role.VIEWER)).json()
    assert [f["window"] for f in listed] == [4, 4] and listed[0][
        "statistic"
    ] == "share_failed_with_high_process"
    flag_id = listed[0]["id"]
    assert (
        client.post(f"/api/v1/flags/{flag_id}/queue", headers=auth(Role.ANNOTATOR)).status_code
        == 403
    )
    queue = client.post(f"/api/v1/flags/{flag_id}/queue", headers=auth(Role.OPERATOR)).json()
    assert queue["items"] == len(listed[0]["trajectory_ids"])
    review = client.post(
        f"/api/v1/flags/{flag_id}/review",
        {"answer": "confirmed", "note": "scores reward the submit format"},
        content_type="application/json",
        headers=auth(Role.ANNOTATOR),
    ).json()
    assert (
        review["review"] == "confirmed"
        and review["reviewed_by"]
        and review["queue_id"] == queue["queue_id"]
    )
