"""Scoring jobs on a real worker: imported trajectories scored by rules, by a judge through the
real SDK against a loopback server, versions side by side, the spend cap, a missing key."""

from __future__ import annotations

import json

import pytest

from tests.conftest import wait_for
from trainer_core.recording.importers import ImportResult
from trainer_core.recording.schema import Outcome, Step, TaskRef, Trajectory
from webapp.jobs.models import Job, JobStatus
from webapp.rewards import services
from webapp.rewards.models import Rubric, StepScore, TrajectoryScore
from webapp.trajectories import services as store

pytestmark = [pytest.mark.worker]


def _coding_trajectory(marker: str, *, repeat_read: bool, success: bool) -> Trajectory:
    steps = [
        ("read_file", {"path": "src/app.py"}, "def total(items):\n    return sum(items) + 1\n"),
        ("grep", {"pattern": "total", "path": "src"}, "src/app.py:1: def total(items):"),
    ]
    if repeat_read:
        steps.append(("read_file", {"path": "src/app.py"}, "def total(items): ..."))
    steps += [
        (
            "edit_file",
            {"path": "src/app.py", "old_str": "sum(items) + 1", "new_str": "sum(items)"},
            "edited src/app.py",
        ),
        ("bash", {"command": "python -m pytest -q"}, "3 passed"),
        ("submit", {}, "submitted"),
    ]
    return Trajectory(
        task=TaskRef(id=f"fix-total-{marker}", prompt=f"Fix total() ({marker})", domain="coding"),
        agent="test-agent",
        policy="p-" + marker,
        steps=[
            Step(index=i, tool=t, params=p, observation=o, thought=f"step {i}")
            for i, (t, p, o) in enumerate(steps)
        ],
        outcome=Outcome(success=success),
    )


def _import(*trajectories) -> list[int]:
    return store.trajectories_import(
        results=[ImportResult("scored.jsonl", "test", "1", list(trajectories))]
    ).created


def _finished(job_id: int) -> Job | None:
    job = Job.objects.get(pk=job_id)
    return job if job.is_terminal else None


@pytest.fixture
def coding_rubrics(db):
    services.rubrics_seed(domain="coding")
    return Rubric.objects.filter(domain="coding")


@pytest.mark.sqlite
def test_rule_scoring_job_scores_imported_trajectories_and_skips_them_the_second_time(
    celery_worker, operator, coding_rubrics
):
    clean, wasteful = _import(
        _coding_trajectory("a", repeat_read=False, success=True),
        _coding_trajectory("b", repeat_read=True, success=False),
    )
    version = services.reward_model_create(domain="coding", note="rules")
    run = services.scoring_launch(reward_model=version, trajectory_ids=[clean, wasteful])
    job = wait_for(lambda: _finished(run.job_id), timeout=60, what="scoring job")
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.queue == "judge"
    run.refresh_from_db()
    assert run.scored == 2 and run.judge_calls == 0
    scores = {s.trajectory_id: s for s in TrajectoryScore.objects.filter(reward_model=version)}
    assert scores[clean].total > scores[wasteful].total
    assert scores[clean].outcome == 1.0 and scores[wasteful].outcome == 0.0
    repeated = StepScore.objects.get(reward_model=version, trajectory_id=wasteful, index=2)
    assert repeated.rubrics["non_redundancy"]["value"] == 0.0
    assert repeated.rubrics["non_redundancy"]["layer"] == "rule"
    # model-evaluated rubrics without a judge are unscored, never a made-up constant
    assert repeated.rubrics["goal_progress"]["value"] is None

    again = services.scoring_launch(reward_model=version, trajectory_ids=[clean, wasteful])
    job = wait_for(lambda: _finished(again.job_id), timeout=60, what="second scoring job")
    again.refresh_from_db()
    assert again.scored == 0 and again.skipped == 2
    assert TrajectoryScore.objects.filter(reward_model=version).count() == 2


def test_a_second_version_scores_beside_the_first_and_leaves_it_untouched(
    celery_worker, operator, coding_rubrics
):
    (pk,) = _import(_coding_trajectory("c", repeat_read=True, success=True))
    v1 = services.reward_model_create(domain="coding")
    run = services.scoring_launch(reward_model=v1, trajectory_ids=[pk])
    wait_for(lambda: _finished(run.job_id), timeout=60, what="v1 scoring")
    before = TrajectoryScore.objects.get(reward_model=v1, trajectory_id=pk)
    before_steps = {
        s.index: (s.total, json.dumps(s.rubrics, sort_keys=True))
        for s in StepScore.objects.filter(reward_model=v1, trajectory_id=pk)
    }
    # the rubric edit changes what the next version snapshots, not v1
    rubric = Rubric.objects.get(domain="coding", rubric_id="non_redundancy")
    services.rubric_update(
        rubric=rubric, weight=5.0, description=rubric.description, evaluator="rule"
    )
    v2 = services.reward_model_create(
        domain="coding", totals={"outcome": 0.0, "process": 1.0, "efficiency": 0.0}
    )
    assert v1.config != v2.config
    run = services.scoring_launch(reward_model=v2, trajectory_ids=[pk])
    job = wait_for(lambda: _finished(run.job_id), timeout=60, what="v2 scoring")
    assert job.status == JobStatus.SUCCEEDED, job.error
    after = TrajectoryScore.objects.get(reward_model=v1, trajectory_id=pk)
    assert (after.total, after.process, after.scored_at) == (
        before.total,
        before.process,
        before.scored_at,
    )
    assert {
        s.index: (s.total, json.dumps(s.rubrics, sort_keys=True))
        for s in StepScore.objects.filter(reward_model=v1, trajectory_id=pk)
    } == before_steps
    v2_score = TrajectoryScore.objects.get(reward_model=v2, trajectory_id=pk)
    assert v2_score.total == pytest.approx(v2_score.process)
    assert v2_score.total != before.total


def test_a_judge_version_without_its_key_fails_at_once_naming_the_variable(
    celery_worker, operator, coding_rubrics
):
    (pk,) = _import(_coding_trajectory("d", repeat_read=False, success=True))
    version = services.reward_model_create(
        domain="coding",
        judge={
            "kind": "anthropic",
            "model": "claude-test",
            "base_url": "http://127.0.0.1:9",
            "api_key_env": "STEPLAB_SURELY_UNSET_JUDGE_KEY",
        },
    )
    run = services.scoring_launch(reward_model=version, trajectory_ids=[pk])
    job = wait_for(lambda: _finished(run.job_id), timeout=60, what="scoring job")
    assert job.status == JobStatus.FAILED
    assert "STEPLAB_SURELY_UNSET_JUDGE_KEY" in job.error
    assert not TrajectoryScore.objects.filter(reward_model=version).exists()


@pytest.fixture
def judge_key(monkeypatch):
    monkeypatch.setenv("STEPLAB_FAKE_JUDGE_KEY", "sk-test-judge")


def test_judge_scoring_through_the_sdk_with_a_spend_cap(
    judge_key, celery_worker, operator, coding_rubrics
):
    from tests.trainer_core.policies.fake_llm_servers import FakeLLMServer, anthropic_message

    ids = _import(*[_coding_trajectory(f"j{i}", repeat_read=False, success=True) for i in range(3)])
    answer = json.dumps(
        {
            "scores": {"goal_progress": 1, "tool_selection": 0.75, "param_correctness": 0.5},
            "rationale": "reads before editing",
        }
    )
    with FakeLLMServer() as server:
        server.enqueue(
            *[anthropic_message(answer, input_tokens=1000, output_tokens=0) for _ in range(60)]
        )
        version = services.reward_model_create(
            domain="coding",
            judge={
                "kind": "anthropic",
                "model": "claude-test",
                "base_url": server.anthropic_base_url,
                "api_key_env": "STEPLAB_FAKE_JUDGE_KEY",
                "price_in": 10.0,
                "price_out": 0.0,
                "concurrency": 1,
                "max_retries": 0,
            },
        )
        # each call costs $0.01; a trajectory has 5 steps; the cap stops the run in the 2nd one
        run = services.scoring_launch(reward_model=version, trajectory_ids=ids, spend_cap_usd=0.07)
        job = wait_for(lambda: _finished(run.job_id), timeout=90, what="judge scoring job")
        calls = len(server.requests_to("/v1/messages"))
    assert job.status == JobStatus.SUCCEEDED, job.error
    run.refresh_from_db()
    assert "spend cap" in run.stop_reason, (
        run.scored,
        run.judge_calls,
        run.cost_usd,
        run.cache_hits,
        calls,
        job.log_tail,
    )
    assert run.judge_calls == calls == 7
    assert run.cost_usd == pytest.approx(0.07)
    first = StepScore.objects.get(reward_model=version, trajectory_id=ids[0], index=0)
    assert first.rubrics["goal_progress"] == {
        "value": 1.0,
        "layer": "model",
        "rationale": "reads before editing",
    }
    assert first.rubrics["param_correctness"]["value"] == 0.5
    # the trajectory the cap cut short is not stored (a re-run finishes it; its judged steps are
    # in the cache), and the third was never started
    assert set(
        TrajectoryScore.objects.filter(reward_model=version).values_list("trajectory_id", flat=True)
    ) == {ids[0]}
