"""Scoring trajectories with message steps (schema 1.1): one step score per turn of the agent's own
(tool steps and assistant messages), none for user and system messages; the rules score tool
calls exactly as when the dialogue was kept beside them, and mark assistant messages not
applicable; the judge judges assistant messages on their text and sees the dialogue."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.trainer_core.policies.fake_llm_servers import FakeLLMServer, anthropic_message
from trainer_core.recording.importers import import_path
from trainer_core.recording.schema import Step, TaskRef, Trajectory
from trainer_core.rewards.judge import Judge, JudgeConfig
from trainer_core.rewards.rubrics import rubric_set
from trainer_core.rewards.scoring import (
    NO_TOOL_CALL_NO_JUDGE,
    NOT_APPLICABLE_TO_MESSAGES,
    RewardConfig,
    score_trajectory,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "agent_logs"
KEY_ENV = "STEPLAB_TEST_JUDGE_KEY"
UNDER_REVIEW = re.compile(r"The step under review: step (\d+)")


def _tau() -> Trajectory:
    (t,) = import_path(FIXTURES / "tau_bench_hat136.json")[0].trajectories
    return t


def _as_1_0(t: Trajectory) -> Trajectory:
    """The same trajectory as schema 1.0 kept it: tool steps, the dialogue in the metadata."""
    steps, dialogue = [], []
    for step in t.steps:
        if step.kind == "tool":
            steps.append(step.model_copy(update={"index": len(steps)}))
        else:
            dialogue.append({"role": step.role, "content": step.text, "before_step": len(steps)})
    legacy = t.model_copy(update={"steps": steps, "metadata": {**t.metadata}})
    legacy.metadata["dialogue"] = dialogue
    return legacy


def test_only_the_agents_turns_are_scored_and_tool_calls_score_as_before():
    t = _tau()
    config = RewardConfig.for_profile("conversation")
    scored = score_trajectory(t, config)
    turns = [s.index for s in t.steps if s.kind == "tool" or s.role == "assistant"]
    assert [s.index for s in scored.steps] == turns  # none for user or system messages
    by_index = {s.index: s for s in scored.steps}
    for step in t.steps:
        if step.kind == "message" and step.role == "assistant":
            rubrics = by_index[step.index].rubrics
            rule = [r for r in rubrics.values() if r.layer == "rule"]
            assert rule and all(r.value is None for r in rule)
            assert {r.rationale for r in rule} == {NOT_APPLICABLE_TO_MESSAGES}
            assert by_index[step.index].total is None  # rules only: nothing applies
    # the tool steps score exactly as in 1.0, where the dialogue was metadata beside them
    legacy = score_trajectory(_as_1_0(t), config)
    tools = [by_index[s.index] for s in t.tool_steps]
    assert [s.total for s in tools] == [s.total for s in legacy.steps]
    assert [s.to_dict()["rubrics"] for s in tools] == [s.to_dict()["rubrics"] for s in legacy.steps]
    assert (scored.process, scored.efficiency, scored.total) == (
        legacy.process,
        legacy.efficiency,
        legacy.total,
    )


def test_a_dialogue_without_tool_calls_is_unscored_by_rules_with_a_reason():
    t = Trajectory(
        task=TaskRef(prompt="hi"),
        steps=[
            Step(index=0, kind="message", role="user", text="hi"),
            Step(index=1, kind="message", role="assistant", text="hello"),
        ],
    )
    scored = score_trajectory(t, RewardConfig.for_profile("conversation"))
    assert [s.index for s in scored.steps] == [1]
    assert scored.process is None and scored.unscored_reason == NO_TOOL_CALL_NO_JUDGE


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-judge-test")
    with FakeLLMServer() as fake:
        yield fake


def test_the_judge_scores_assistant_messages_and_sees_the_dialogue(server):
    t = _tau()
    rubrics = [r for r in rubric_set("conversation") if r.evaluator == "model"]
    ids = [r.id for r in rubrics]
    prompts: dict[int, str] = {}

    def respond(request):
        text = next(m["content"] for m in request.json["messages"] if m["role"] == "user")
        index = int(UNDER_REVIEW.search(text).group(1))
        prompts[index] = text
        return anthropic_message(json.dumps({"scores": dict.fromkeys(ids, 0.5), "rationale": "ok"}))

    turns = [s for s in t.steps if s.kind == "tool" or s.role == "assistant"]
    server.enqueue(*[respond] * len(turns))
    judge = Judge(
        JudgeConfig(
            kind="anthropic",
            model="claude-haiku-4-5",
            base_url=server.anthropic_base_url,
            api_key_env=KEY_ENV,
            max_retries=0,
            timeout=5.0,
            concurrency=1,
            window=3,
        )
    )
    config = RewardConfig.for_profile("conversation")
    scored = score_trajectory(t, config, judge=judge)
    assert sorted(prompts) == [s.index for s in turns]  # never a user or system message
    reply = next(s for s in t.steps if s.kind == "message" and s.role == "assistant")
    assert "a message to the user (no tool call), as the assistant:" in prompts[reply.index]
    assert reply.text[:40] in prompts[reply.index]
    assert "(user message)" in prompts[reply.index]  # the dialogue is in the window
    by_index = {s.index: s for s in scored.steps}
    model = [r for r in by_index[reply.index].rubrics.values() if r.layer == "model"]
    assert model and all(r.value == 0.5 for r in model)
    assert by_index[reply.index].total == pytest.approx(0.5)
