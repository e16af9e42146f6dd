"""Scoring trajectories: rule-only, model rubrics without a judge, the real judge against a
loopback Anthropic server, the config snapshot, and the trajectory parts."""

from __future__ import annotations

import json
import re

import pytest

from tests.trainer_core.policies.fake_llm_servers import FakeLLMServer, anthropic_message
from trainer_core.errors import ConfigError, InputError
from trainer_core.recording.schema import Outcome, Step, TaskRef, Trajectory
from trainer_core.rewards.combine import LayerWeights, TotalWeights
from trainer_core.rewards.judge import Judge, JudgeConfig
from trainer_core.rewards.rubrics import Rubric, rubric_set
from trainer_core.rewards.scoring import (
    ALL_MODEL_NO_JUDGE,
    RewardConfig,
    score_trajectory,
)

KEY_ENV = "STEPLAB_TEST_SCORING_JUDGE_KEY"
UNDER_REVIEW = re.compile(r"The step under review: step (\d+)")


def coding_trajectory(outcome: Outcome | None = None) -> Trajectory:
    steps = [
        Step(
            index=0,
            tool="read_file",
            params={"file_path": "src/calc.py"},
            observation="src/calc.py:\n1 def add_numbers(a, b):\n2     return a - b\n",
        ),
        # an exact repeat of a read, nothing changed: non_redundancy 0.0
        Step(
            index=1,
            tool="Read",
            params={"file_path": "src/calc.py"},
            observation="src/calc.py:\n1 def add_numbers(a, b):\n2     return a - b\n",
        ),
        Step(
            index=2,
            tool="edit_file",
            params={
                "file_path": "src/calc.py",
                "old_string": "return a - b",
                "new_string": "return a + b",
            },
            observation="edited",
        ),
        # uses nothing seen before: info_utilization 0.7
        Step(index=3, tool="bash", params={"command": "pytest -q"}, observation="3 passed"),
    ]
    return Trajectory(
        task=TaskRef(id="calc-1", domain="coding", prompt="Fix add_numbers."),
        steps=steps,
        outcome=outcome or Outcome(success=False, tests_passed=3, tests_failed=1),
    )


# --- rules only -----------------------------------------------------------------------------


def test_rule_rubrics_on_a_coding_trajectory_without_a_judge():
    config = RewardConfig.for_profile("coding")
    result = score_trajectory(coding_trajectory(), config, reference_steps=3)

    info = [s.rubrics["info_utilization"].value for s in result.steps]
    non_redundancy = [s.rubrics["non_redundancy"].value for s in result.steps]
    assert info == [1.0, 1.0, 1.0, 0.7]
    assert non_redundancy == [1.0, 0.0, 1.0, 1.0]
    assert result.steps[1].rubrics["non_redundancy"].rationale == (
        "repeats step 0 with nothing changed since"
    )
    assert result.steps[3].rubrics["info_utilization"].rationale == (
        "uses no path or identifier from earlier observations"
    )
    for step in result.steps:
        goal = step.rubrics["goal_progress"]
        assert (goal.value, goal.layer, goal.rationale) == (None, "model", "no judge was given")
        assert step.rubrics["info_utilization"].layer == "rule"

    # the two rule rubrics weigh .15 each (× the rule layer's .6): a step total is their mean
    assert [s.total for s in result.steps] == pytest.approx([1.0, 0.5, 1.0, 0.85])
    # process = (1 + .5 + 1 + .85) / 4 = .8375; outcome = 3 / (3 + 1) = .75; efficiency = 3/4
    assert result.process == pytest.approx(0.8375)
    assert result.outcome == pytest.approx(0.75)
    assert result.efficiency == pytest.approx(0.75)
    # total = .4*.75 + .5*.8375 + .1*.75 = .3 + .41875 + .075
    assert result.total == pytest.approx(0.79375)
    assert result.unscored_reason is None and result.judge_usage is None
    assert result.config_fingerprint == config.fingerprint()


def test_without_a_reference_efficiency_drops_out_and_the_total_renormalises():
    result = score_trajectory(coding_trajectory(), RewardConfig.for_profile("coding"))
    assert result.efficiency is None
    # (.4*.75 + .5*.8375) / (.4 + .5)
    assert result.total == pytest.approx((0.3 + 0.41875) / 0.9)


def test_reference_steps_from_the_trajectory_metadata():
    trajectory = coding_trajectory()
    trajectory.metadata["reference_steps"] = 2
    result = score_trajectory(trajectory, RewardConfig.for_profile("coding"))
    assert result.efficiency == pytest.approx(0.5)


def test_all_model_domain_without_a_judge_is_unscored_not_a_constant():
    rubrics = rubric_set("qa", {"goal_progress": 0.5, "helpfulness": 0.5})
    assert {r.evaluator for r in rubrics} == {"model"}
    config = RewardConfig(rubrics=rubrics, profile="coding")
    result = score_trajectory(coding_trajectory(), config, reference_steps=4)
    assert result.unscored_reason == ALL_MODEL_NO_JUDGE
    assert result.total is None and result.process is None
    assert all(s.total is None for s in result.steps)
    assert all(r.value is None for s in result.steps for r in s.rubrics.values())
    # what is known is still reported
    assert result.outcome == pytest.approx(0.75) and result.efficiency == 1.0


def test_human_rubrics_are_left_for_annotators():
    config = RewardConfig(
        rubrics=[Rubric("non_redundancy", "", "rule", 1.0), Rubric("style", "", "human", 1.0)],
        profile="coding",
    )
    result = score_trajectory(coding_trajectory(), config)
    style = result.steps[0].rubrics["style"]
    assert (style.value, style.layer) == (None, "human")
    assert [s.total for s in result.steps] == [1.0, 0.0, 1.0, 1.0]

    only_human = RewardConfig(rubrics=[Rubric("style", "", "human", 1.0)], profile="coding")
    unscored = score_trajectory(coding_trajectory(), only_human)
    assert unscored.total is None and "human" in unscored.unscored_reason


def test_a_rule_rubric_no_rule_scores_is_unscored():
    config = RewardConfig(
        rubrics=[Rubric("non_redundancy", "", "rule", 1.0), Rubric("made_up", "", "rule", 1.0)],
        profile="coding",
    )
    made_up = score_trajectory(coding_trajectory(), config).steps[0].rubrics["made_up"]
    assert made_up.value is None and "no rule scores 'made_up'" in made_up.rationale


def test_empty_trajectory_and_unknown_profile():
    config = RewardConfig.for_profile("coding")
    empty = score_trajectory(Trajectory(outcome=Outcome(success=True)), config, reference_steps=3)
    assert empty.steps == [] and empty.process is None and empty.unscored_reason is None
    # outcome 1.0, efficiency 0.0 (no steps): (.4*1 + .1*0) / .5
    assert empty.total == pytest.approx(0.8)
    nothing = score_trajectory(Trajectory(), config)
    assert nothing.total is None and nothing.unscored_reason

    # a domain with no built-in profile: tool categories are inferred from the names
    unknown = RewardConfig(rubrics=config.rubrics, profile="my-domain")
    inferred = score_trajectory(coding_trajectory(), unknown)
    assert [s.rubrics["non_redundancy"].value for s in inferred.steps] == [1.0, 0.0, 1.0, 1.0]


def test_a_dict_trajectory_is_validated():
    config = RewardConfig.for_profile("coding")
    data = json.loads(coding_trajectory().to_json())
    assert (
        score_trajectory(data, config).total == score_trajectory(coding_trajectory(), config).total
    )
    with pytest.raises(InputError, match="steps"):
        score_trajectory({"steps": [{"tool": "bash"}]}, config)


def test_to_dict_is_json():
    result = score_trajectory(coding_trajectory(), RewardConfig.for_profile("coding"))
    data = json.loads(json.dumps(result.to_dict()))
    assert data["steps"][1]["rubrics"]["non_redundancy"] == {
        "value": 0.0,
        "layer": "rule",
        "rationale": "repeats step 0 with nothing changed since",
        "interpolated": False,
    }
    assert data["total"] == pytest.approx(result.total) and data["judge_usage"] is None


# --- with the LLM judge (the real Judge, the real SDK, a loopback server) --------------------

JUDGED = {
    0: {"goal_progress": 0.5, "tool_selection": 1.0, "param_correctness": 1.0},
    1: {"goal_progress": 0.0, "tool_selection": 0.5, "param_correctness": 1.0},
    2: {"goal_progress": 1.0, "tool_selection": 1.0, "param_correctness": None},
    3: {"goal_progress": 1.0, "tool_selection": 1.0, "param_correctness": 1.0},
}


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-scoring-test")
    with FakeLLMServer() as fake:
        yield fake


def _judge(server, **kwargs) -> Judge:
    return Judge(
        JudgeConfig(
            kind="anthropic",
            model="claude-haiku-4-5",
            base_url=server.anthropic_base_url,
            api_key_env=KEY_ENV,
            concurrency=1,
            max_retries=0,
            timeout=5.0,
            **kwargs,
        )
    )


def _answers(table):
    def respond(request):
        user = next(m["content"] for m in request.json["messages"] if m["role"] == "user")
        index = int(UNDER_REVIEW.search(user).group(1))
        scores = table(index) if callable(table) else table[index]
        return anthropic_message(json.dumps({"scores": scores, "rationale": f"step {index}"}))

    return respond


def test_the_judge_fills_model_rubrics_and_layer_weights_apply(server):
    server.enqueue(*[_answers(JUDGED)] * 4)
    config = RewardConfig.for_profile("coding", layers=LayerWeights(rule=0.6, model=0.4))
    result = score_trajectory(coding_trajectory(), config, judge=_judge(server), reference_steps=4)

    assert result.judge_usage.calls == 4
    goal = result.steps[0].rubrics["goal_progress"]
    assert (goal.value, goal.layer, goal.rationale) == (0.5, "model", "step 0")
    assert result.steps[2].rubrics["param_correctness"].value is None  # judge said null

    # step 0: (.3*.4*.5 + .2*.4*1 + .2*.4*1 + .15*.6*1 + .15*.6*1)
    #       / (.3*.4 + .2*.4 + .2*.4 + .15*.6 + .15*.6) = (.06+.08+.08+.09+.09) / .46
    assert result.steps[0].total == pytest.approx(0.40 / 0.46)
    # step 1 (non_redundancy 0): (.3*.4*0 + .2*.4*.5 + .2*.4*1 + .09*1 + .09*0) / .46
    assert result.steps[1].total == pytest.approx((0.04 + 0.08 + 0.09) / 0.46)
    # step 2 (param_correctness unscored, left out): (.12 + .08 + .09 + .09) / (.46 - .08)
    assert result.steps[2].total == pytest.approx(0.38 / 0.38)
    # step 3 (info 0.7): (.12 + .08 + .08 + .09*.7 + .09) / .46
    assert result.steps[3].total == pytest.approx((0.37 + 0.063) / 0.46)

    # with the model layer weighed 4x more, the judge's low score on step 1 weighs more
    heavier = RewardConfig.for_profile("coding", layers=LayerWeights(rule=0.1, model=0.4))
    server.enqueue(*[_answers(JUDGED)] * 4)
    again = score_trajectory(coding_trajectory(), heavier, judge=_judge(server))
    # (.2*.4*.5 + .2*.4*1 + .15*.1*1) / (.12 + .08 + .08 + .015 + .015)
    assert again.steps[1].total == pytest.approx((0.04 + 0.08 + 0.015) / 0.31)


def test_the_judge_is_only_asked_about_model_rubrics(server):
    server.enqueue(*[_answers(JUDGED)] * 4)
    config = RewardConfig.for_profile("coding")
    score_trajectory(coding_trajectory(), config, judge=_judge(server))
    system = server.requests[0].json["system"]
    assert "goal_progress" in system and "info_utilization" not in system


def test_an_all_model_domain_with_a_judge_that_answers_nothing_usable(server):
    garbage = lambda request: anthropic_message("I cannot score this.")  # noqa: E731
    server.enqueue(*[garbage] * 4)
    config = RewardConfig(rubrics=rubric_set("qa", {"goal_progress": 1.0}), profile="coding")
    result = score_trajectory(coding_trajectory(), config, judge=_judge(server))
    assert result.total is None
    assert result.unscored_reason.startswith("the judge scored no step: ")
    assert result.steps[0].rubrics["goal_progress"].rationale.startswith("judge error: ")


def test_a_stopped_judge_leaves_the_rest_to_the_rules(server):
    server.enqueue(*[_answers(JUDGED)] * 4)
    config = RewardConfig.for_profile("coding")
    calls = []
    result = score_trajectory(
        coding_trajectory(),
        config,
        judge=_judge(server),
        should_stop=lambda: "spend cap reached" if len(server.requests) >= 2 else None,
    )
    calls.append(len(server.requests))
    assert calls == [2] and result.judge_usage.calls == 2
    assert result.steps[1].rubrics["goal_progress"].value == 0.0
    late = result.steps[3].rubrics["goal_progress"]
    assert late.value is None and "spend cap reached" in late.rationale
    # step 3 is still scored, on its rule rubrics only: (.09*.7 + .09*1) / .18
    assert result.steps[3].total == pytest.approx(0.85)


# --- the config snapshot ----------------------------------------------------------------------


def test_config_round_trip_and_fingerprint():
    config = RewardConfig.for_profile(
        "engineering", layers=LayerWeights(rule=0.5, model=0.5), totals=TotalWeights(outcome=0.6)
    )
    data = config.to_dict()
    assert set(data) == {"profile", "rubrics", "layers", "totals"}
    assert data["layers"] == {"rule": 0.5, "model": 0.5, "human": 1.0}
    again = RewardConfig.from_dict(json.loads(json.dumps(data)))
    assert again == config and again.fingerprint() == config.fingerprint()
    assert len(config.fingerprint()) == 16

    changed = dict(data, rubrics=[dict(r) for r in data["rubrics"]])
    changed["rubrics"][0]["weight"] += 0.01
    assert RewardConfig.from_dict(changed).fingerprint() != config.fingerprint()


def test_from_dict_fills_built_in_rubrics():
    config = RewardConfig.from_dict({"rubrics": [{"id": "info_utilization"}, {"id": "tone"}]})
    info, tone = config.rubrics
    assert (info.evaluator, info.weight, info.description.startswith("Does the step use")) == (
        "rule",
        1.0,
        True,
    )
    assert (tone.evaluator, tone.description) == ("model", "")
    assert config.profile == "generic" and config.layers == LayerWeights()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"rubrics": []}, "at least one rubric"),
        ({"rubrics": [{"id": "a", "evaluator": "robot", "weight": 1}]}, "evaluator must be one of"),
        ({"rubrics": [{"id": "a", "evaluator": "rule", "weight": 0}]}, "every rubric weight is 0"),
        ({"rubrics": [{"id": "a", "weight": -1}]}, "finite and ≥ 0"),
        ({"rubrics": [{"id": "a"}, {"id": "a"}]}, "appears twice"),
        ({"rubrics": [{"id": "a"}], "judge": {}}, "unknown reward config key"),
        ({"rubrics": [{"id": "a"}], "layers": {"rules": 1}}, "unknown layer weight"),
        ({"rubrics": [{"id": "a"}], "totals": {"outcome": -1}}, "≥ 0"),
        ({"profile": "coding"}, "needs 'rubrics'"),
    ],
)
def test_invalid_configs(data, message):
    with pytest.raises(ConfigError, match=message):
        RewardConfig.from_dict(data)
