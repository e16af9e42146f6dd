"""``score_files``: agent log files scored with no database, as ``steplab score`` does: rules only,
then with the judge against a loopback Anthropic server and a cache file; settings checked before
any file is read; a file that cannot be imported named in the error. Also the one Trajectory
coercion, ``as_trajectory``."""

from __future__ import annotations

import json
import re

import pytest

from tests.trainer_core.policies.fake_llm_servers import FakeLLMServer, anthropic_message
from trainer_core.envs.profiles import get_profile
from trainer_core.errors import ConfigError, InputError, PolicyError
from trainer_core.recording.importers import ImportFailure
from trainer_core.recording.schema import Outcome, Step, TaskRef, Trajectory, as_trajectory
from trainer_core.rewards.judge import JudgeConfig
from trainer_core.rewards.rubrics import rubric_set
from trainer_core.rewards.scoring import FileScore, RewardConfig, score_files, score_trajectory

KEY_ENV = "STEPLAB_TEST_SCORE_FILES_KEY"
UNDER_REVIEW = re.compile(r"The step under review: step (\d+)")


def trajectory(task_id: str, n: int = 3) -> Trajectory:
    steps = [
        Step(index=0, tool="read_file", params={"file_path": "a.py"}, observation="def load_x():"),
        Step(index=1, tool="read_file", params={"file_path": "a.py"}, observation="def load_x():"),
        Step(index=2, tool="bash", params={"command": "pytest"}, observation="1 passed"),
    ][:n]
    return Trajectory(
        task=TaskRef(id=task_id, domain="coding", prompt="Fix it."),
        steps=steps,
        outcome=Outcome(success=True),
    )


def write_jsonl(path, *trajectories: Trajectory):
    path.write_text("".join(t.to_json() + "\n" for t in trajectories), encoding="utf-8")
    return path


def test_rules_only_one_score_per_trajectory_in_file_order(tmp_path):
    first = write_jsonl(tmp_path / "one.jsonl", trajectory("t1"), trajectory("t2", 2))
    second = write_jsonl(tmp_path / "two.jsonl", trajectory("t3", 1))
    results = list(score_files([first, str(second)], domain="coding"))

    assert [(r.file, r.index, r.trajectory.task.id) for r in results] == [
        ("one.jsonl", 0, "t1"),
        ("one.jsonl", 1, "t2"),
        ("two.jsonl", 0, "t3"),
    ]
    assert all(isinstance(r, FileScore) for r in results)
    profile = get_profile("coding")
    config = RewardConfig.for_profile(profile)
    for result in results:
        expected = score_trajectory(result.trajectory, config, profile=profile)
        assert result.score.to_dict() == expected.to_dict()
    file, index, scored_trajectory, scored = results[0]  # unpacks as the CLI does
    assert (file, index) == ("one.jsonl", 0) and scored_trajectory.task.id == "t1"
    assert scored.steps[1].rubrics["non_redundancy"].value == 0.0  # the repeated read
    assert scored.total is not None


def test_an_unknown_domain_scores_with_the_default_rubrics(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", trajectory("t1"))
    (result,) = score_files([path], domain="no-such-domain")
    assert list(result.score.steps[0].rubrics) == [r.id for r in rubric_set("default")]
    expected = RewardConfig.for_profile("no-such-domain")
    assert result.score.config_fingerprint == expected.fingerprint()


def test_files_are_read_as_the_iterator_is_consumed(tmp_path):
    good = write_jsonl(tmp_path / "good.jsonl", trajectory("t1"))
    bad = tmp_path / "bad.jsonl"
    bad.write_text("this is not an agent log\n", encoding="utf-8")
    results = score_files([good, bad])
    first = next(results)
    assert first.trajectory.task.id == "t1"
    with pytest.raises(ImportFailure) as caught:
        next(results)
    assert isinstance(caught.value, InputError)
    assert "bad.jsonl" in str(caught.value)


def test_settings_are_checked_before_any_file_is_read(tmp_path, monkeypatch):
    monkeypatch.delenv(KEY_ENV, raising=False)
    missing = tmp_path / "never-read.jsonl"  # does not exist: the check comes first
    judge = {"kind": "anthropic", "model": "claude-haiku-4-5", "api_key_env": KEY_ENV}
    with pytest.raises(PolicyError, match=KEY_ENV):
        score_files([missing], judge=judge, cache_path=tmp_path / "cache.sqlite")
    with pytest.raises(ConfigError, match="unknown judge setting"):
        score_files([missing], judge={"kind": "anthropic", "model": "m", "modle": "x"})


def test_the_judge_scores_model_rubrics_and_its_cache_file_makes_a_rerun_free(
    tmp_path, monkeypatch
):
    monkeypatch.setenv(KEY_ENV, "sk-test-score-files")
    path = write_jsonl(tmp_path / "a.jsonl", trajectory("t1"))
    cache = tmp_path / "judge-cache.sqlite"
    answer = {"goal_progress": 0.5, "tool_selection": 1, "param_correctness": 0.75}
    with FakeLLMServer() as server:
        server.enqueue(*(anthropic_message(json.dumps({"scores": answer, "rationale": "ok"})),) * 3)
        judge = JudgeConfig(
            kind="anthropic",
            model="claude-haiku-4-5",
            base_url=server.anthropic_base_url,
            api_key_env=KEY_ENV,
            max_retries=0,
            concurrency=1,
        )
        (first,) = score_files([path], domain="coding", judge=judge, cache_path=cache)
        assert len(server.requests) == 3  # one call per step
        assert first.score.steps[0].rubrics["goal_progress"].value == 0.5
        assert first.score.judge_usage.calls == 3

        (again,) = score_files([path], domain="coding", judge=judge, cache_path=cache)
        assert len(server.requests) == 3  # every step from the cache file
        assert again.score.judge_usage.cache_hits == 3 and again.score.judge_usage.calls == 0
        assert again.score.to_dict()["total"] == first.score.to_dict()["total"]


# --- as_trajectory --------------------------------------------------------------------------------


def test_as_trajectory_takes_a_trajectory_or_its_dict():
    original = trajectory("t1")
    assert as_trajectory(original) is original
    assert as_trajectory(json.loads(original.to_json())) == original


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"steps": [{"index": 0}]}, "invalid trajectory"),
        ("a string", "a trajectory is a Trajectory or its dict, not str"),
        (None, "not NoneType"),
    ],
)
def test_as_trajectory_says_what_is_wrong(value, message):
    with pytest.raises(InputError, match=message):
        as_trajectory(value)
