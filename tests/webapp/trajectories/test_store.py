"""The trajectory store: import with content-hash de-duplication (all or nothing), and the
streaming path rollouts use (idempotent begin and append)."""

from __future__ import annotations

import pytest

from trainer_core.recording.importers import ImportResult
from trainer_core.recording.schema import Outcome, Step, TaskRef, Trajectory
from webapp.trajectories import services
from webapp.trajectories.models import SourceFile
from webapp.trajectories.models import Step as StepRow
from webapp.trajectories.models import Trajectory as TrajectoryRow

pytestmark = [pytest.mark.sqlite, pytest.mark.django_db]


def spec(n_steps=3, marker="a", success=True):
    return Trajectory(
        task=TaskRef(id=f"task-{marker}", prompt=f"Fix bug {marker}", domain="coding"),
        agent="swe-agent",
        model="gpt-4",
        steps=[
            Step(
                index=i,
                tool="bash",
                params={"command": f"echo {marker}{i}"},
                observation=f"{marker}{i}",
                thought=f"t{i}",
            )
            for i in range(n_steps)
        ],
        outcome=Outcome(success=success),
        source_format="test",
    )


def result(*trajectories, file="run.traj"):
    return ImportResult(
        file=file, format="test", format_version="1", trajectories=list(trajectories)
    )


def test_import_stores_summary_columns_steps_and_the_compressed_raw_source():
    summary = services.trajectories_import(
        results=[result(spec(3, "a"), spec(5, "b", success=False))],
        raw={"run.traj": b'{"raw": true}' * 100},
    )
    assert len(summary.created) == 2 and summary.duplicates == []
    row = TrajectoryRow.objects.get(pk=summary.created[1])
    assert (row.step_count, row.success, row.reward, row.agent, row.model, row.domain) == (
        5,
        False,
        0.0,
        "swe-agent",
        "gpt-4",
        "coding",
    )
    assert row.source == "import" and row.status == "finished" and row.task_ref == "task-b"
    assert list(row.steps.values_list("index", "observation")) == [(i, f"b{i}") for i in range(5)]
    assert row.steps.get(index=2).params == {"command": "echo b2"}
    assert row.source_file.raw_bytes() == b'{"raw": true}' * 100
    assert len(bytes(row.source_file.data)) < 200, "kept compressed"


def test_reimporting_writes_nothing_and_reports_the_duplicates():
    services.trajectories_import(results=[result(spec(3, "a"))])
    before = (TrajectoryRow.objects.count(), StepRow.objects.count())
    again = services.trajectories_import(
        results=[result(spec(3, "a"), spec(3, "a"), file="copy.traj")]
    )
    assert again.created == []
    assert len(again.duplicates) == 2
    assert (TrajectoryRow.objects.count(), StepRow.objects.count()) == before


def test_a_failure_midway_leaves_no_rows(monkeypatch):
    def broken(rows):
        raise RuntimeError("disk full")

    monkeypatch.setattr(services, "_insert_steps", broken)
    with pytest.raises(RuntimeError):
        services.trajectories_import(results=[result(spec(3, "a"))], raw={"run.traj": b"x"})
    assert (
        not TrajectoryRow.objects.exists()
        and not StepRow.objects.exists()
        and not SourceFile.objects.exists()
    )


def test_streaming_begin_twice_is_one_trajectory_and_steps_append_once():
    key = services.idempotency_key(run=7, task="arith-1", episode=0, seed=3)
    first = services.trajectory_begin(
        key=key, prompt="What is 2+2?", agent="scripted", domain="arithmetic"
    )
    again = services.trajectory_begin(key=key, prompt="ignored")
    assert first.pk == again.pk and first.status == "running"
    step = Step(
        index=0,
        tool="calculator",
        params={"expression": "2+2"},
        observation="4",
        tokens_in=10,
        tokens_out=3,
    )
    assert services.trajectory_append_step(trajectory=first, step=step) is True
    assert services.trajectory_append_step(trajectory=first, step=step) is False
    services.trajectory_append_step(
        trajectory=first, step=Step(index=1, tool="submit", params={"answer": "4"})
    )
    done = services.trajectory_finish(
        trajectory=first, outcome={"success": True, "terminated": True}
    )
    assert done.step_count == 2 and done.status == "finished" and done.reward == 1.0
    assert (done.tokens_in, done.tokens_out) == (10, 3)
    assert StepRow.objects.filter(trajectory=done).count() == 2


def test_identical_episodes_of_a_deterministic_policy_are_separate_trajectories():
    rows = [
        services.trajectory_begin(key=services.idempotency_key(run=1, task="t", episode=e, seed=0))
        for e in range(2)
    ]
    step = Step(index=0, tool="calculator", params={"expression": "1+1"}, observation="2")
    for row in rows:
        services.trajectory_append_step(trajectory=row, step=step)
        services.trajectory_finish(trajectory=row, outcome={"success": True})
    assert rows[0].pk != rows[1].pk
    assert TrajectoryRow.objects.filter(source="rollout").count() == 2
    # and a rollout never collides with an import of the same content
    services.trajectories_import(results=[result(Trajectory(steps=[step]))])
    assert TrajectoryRow.objects.count() == 3


def test_nul_characters_from_a_model_are_stored_as_replacement_characters():
    """A sampling model can emit NUL; PostgreSQL text and JSON cannot hold it. The step is stored
    (imports and streaming alike) with U+FFFD in its place, and the episode goes on."""
    row = services.trajectory_begin(
        key=services.idempotency_key(run=9, task="t", episode=0, seed=0)
    )
    step = Step(
        index=0,
        tool="calc\x00ulator",
        params={"expression": "1\x00+1", "k\x00": ["a\x00"]},
        observation="bad\x00output",
        thought="th\x00ought",
        error="e\x00",
        metadata={"raw": "x\x00y"},
    )
    assert services.trajectory_append_step(trajectory=row, step=step) is True
    stored = StepRow.objects.get(trajectory=row)
    assert stored.observation == "bad\ufffdoutput" and stored.thought == "th\ufffdought"
    assert stored.tool == "calc\ufffdulator" and stored.error == "e\ufffd"
    assert stored.params == {"expression": "1\ufffd+1", "k\ufffd": ["a\ufffd"]}
    assert stored.metadata == {"raw": "x\ufffdy"}
    bulk = spec(2, marker="nul\x00")
    result = services.trajectories_import(results=[ImportResult("n.jsonl", "steplab", "1", [bulk])])
    assert len(result.created) == 1
    assert StepRow.objects.filter(observation="nul\ufffd0").exists()
