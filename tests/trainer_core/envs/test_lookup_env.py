"""steplab/lookup: the directory tools (search, fetch, calculate, submit), their errors, the
domain profile, and scripted episodes with and without mistakes (following the near-duplicate
dooms an episode)."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from trainer_core.envs import list_envs, make
from trainer_core.envs.profiles import get_profile
from trainer_core.errors import ConfigError
from trainer_core.policies.scripted import ScriptedPolicy, run_episode
from trainer_core.tasks.model import Task
from trainer_core.tasks.suites.lookup import lookup_task, lookup_tasks

TASKS = lookup_tasks("train", n=140) + lookup_tasks("test", n=70)
RECORDS = [
    {"id": "P-1001", "kind": "person", "name": "Anna Berg", "employer": "CO-2002",
     "home_city": "CI-3003", "manager": None},
    {"id": "P-1004", "kind": "person", "name": "Anna Bergh", "employer": "CO-2002",
     "home_city": "CI-3003", "manager": "P-1001"},
    {"id": "CO-2002", "kind": "company", "name": "Berg Tools", "city": "CI-3003",
     "founded": 1950, "products": ["PR-4004"]},
    {"id": "PR-4004", "kind": "product", "name": "Berg Drill", "maker": "CO-2002", "price": 99},
    {"id": "CI-3003", "kind": "city", "name": "Brenholm", "population": 48213},
]  # fmt: skip
CUSTOM = Task(
    id="custom",
    prompt="How much do 2 Berg drills cost?",
    domain="lookup",
    expected_answer=198,
    checker="number",
    metadata={"records": RECORDS},
)


def _env(task=CUSTOM):
    env = make("steplab/lookup")
    env.reset(task=task)
    return env


def _call(env, tool, **params):
    return env.step({"tool": tool, "params": params})


def _ids(observation):
    return re.findall(r"^([A-Z]+-\d+) \|", observation, re.MULTILINE)


# --------------------------------------------------------------------------------------------
# the tools
# --------------------------------------------------------------------------------------------


def test_the_environment_is_registered_with_its_tools_and_profile():
    assert "steplab/lookup" in list_envs()
    env = make("steplab/lookup")
    assert env.domain == "lookup"
    assert env.tool_names() == ["search", "fetch", "calculate", "submit"]
    profile = get_profile("lookup")
    categories = {tool.name: tool.category for tool in profile.tools}
    assert categories == {
        "search": "search",
        "fetch": "read",
        "calculate": "execute",
        "submit": "submit",
    }
    assert profile.tool("fetch").target_param == "id"
    assert profile.canonical_tool_name("calculator") == "calculate"
    assert profile.canonical_tool_name("get_record") == "fetch"
    assert abs(sum(profile.rubric_weights.values()) - 1.0) < 1e-9
    assert profile.rubric_weights["info_utilization"] >= 0.2
    assert "reuse" in profile.description


def test_search_lists_ids_kinds_and_names_near_duplicates_included():
    env = _env()
    found = _call(env, "search", query="Anna Berg")
    assert found.observation.splitlines() == [
        "4 matches for 'Anna Berg':",
        "P-1001 | person | Anna Berg",
        "P-1004 | person | Anna Bergh",
        "CO-2002 | company | Berg Tools",
        "PR-4004 | product | Berg Drill",
    ]
    assert found.info["matches"] == 4 and "error" not in found.info
    assert _ids(_call(env, "search", query="anna berg", kind="person").observation) == [
        "P-1001",
        "P-1004",
    ]
    assert _ids(_call(env, "search", query="p-1004").observation) == ["P-1004"]
    assert _ids(_call(env, "find", query="Brenholm").observation) == ["CI-3003"]  # an alias
    none = _call(env, "search", query="Zorro")
    assert none.observation.startswith("No record matches 'Zorro'") and not none.done
    bad = _call(env, "search", query="Anna", kind="planet")
    assert bad.info["error"] == "invalid_params" and "person, company" in bad.observation
    missing = _call(env, "search", kind="person")
    assert missing.info["error"] == "invalid_params" and "query" in missing.observation


def test_a_long_search_says_how_many_it_left_out():
    task = lookup_tasks("train", n=3, start=2)[0]  # units_cost: a company and its sector
    env = _env(task)
    found = _call(env, "search", query="a " + " ".join(r["name"] for r in task.metadata["records"]))
    lines = found.observation.splitlines()
    assert len(lines) == 9 and re.search(r"\(the first 8 of \d+\):$", lines[0])
    assert found.info["matches"] > 8


def test_fetch_shows_fields_and_references_as_plain_ids():
    env = _env()
    assert _call(env, "fetch", id="P-1001").observation == (
        "P-1001 (person)\nname: Anna Berg\nemployer: CO-2002\nhome_city: CI-3003\nmanager: none"
    )
    assert _call(env, "fetch", id=" co-2002 ").observation == (
        "CO-2002 (company)\nname: Berg Tools\ncity: CI-3003\nfounded: 1950\n"
        "products: PR-4004 Berg Drill"
    )
    product = _call(env, "get", id="PR-4004")
    assert product.observation.endswith("price: 99 EUR") and product.info["tool"] == "fetch"
    assert product.info["record_id"] == "PR-4004"
    assert _call(env, "fetch", id="CI-3003").observation.endswith("population: 48213")


def test_wrong_ids_and_bad_calls_are_observations_and_the_episode_goes_on():
    env = _env()
    wrong = _call(env, "fetch", id="P-9999")
    assert wrong.info["error"] == "not_found" and not wrong.done
    assert (
        "No record with id 'P-9999'" in wrong.observation
        and "CO-4821 (company)" in wrong.observation
    )
    assert _call(env, "fetch").info["error"] == "invalid_params"
    assert _call(env, "fetch", id=4004).info["error"] == "invalid_params"
    assert _call(env, "calculate", expression="2 *").info["error"] == "calculator_error"
    assert _call(env, "teleport", to="x").info["error"] == "unknown_tool"
    assert _call(env, "calculate", expression="2 * 99").observation == "2 * 99 = 198"
    last = _call(env, "submit", answer="198")
    assert last.terminated and last.reward == 1.0


def test_submissions_are_checked_by_the_tasks_checker():
    assert _call(_env(), "submit", answer="199").reward == 0.0
    assert _call(_env(), "submit").info["outcome"]["success"] is False
    assert _call(_env(), "submit", answer="198.0").reward == 1.0
    task = next(t for t in TASKS if t.checker == "exact")
    assert _call(_env(task), "submit", answer=f" {task.expected_answer.lower()} ").reward == 1.0
    assert _call(_env(task), "submit", answer=f"{task.expected_answer}e").reward == 0.0


def test_a_task_without_records_has_an_empty_directory():
    env = _env(Task(prompt="Who is P-1?", domain="lookup", metadata={"records": ["junk", {}]}))
    assert env.unwrapped.records == {}
    assert _call(env, "search", query="anyone").observation.startswith("No record matches")
    assert _call(env, "fetch", id="P-1").info["error"] == "not_found"


def test_reset_with_a_seed_plays_that_task_of_the_split():
    env = make("steplab/lookup", split="validation")
    ts = env.reset(seed=4)
    assert env.task == lookup_task(1_000_004, "validation") and ts.observation == env.task.prompt
    with pytest.raises(ConfigError, match="unknown split"):
        make("steplab/lookup", split="heldout")


# --------------------------------------------------------------------------------------------
# scripted episodes
# --------------------------------------------------------------------------------------------


def _episodes(policy, tasks=TASKS):
    """(task, steps, last timestep, the mistakes made) of each task in turn."""
    for task in tasks:
        steps, last = run_episode(make("steplab/lookup"), policy, task)
        yield task, steps, last, list(policy.mistakes_made)


def test_the_scripted_policy_solves_every_task_in_its_reference_steps():
    policy = ScriptedPolicy()
    for task, steps, last, made in _episodes(policy):
        assert last.reward == 1.0 and len(steps) == task.reference_steps, task.id
        assert made == []


def test_following_the_near_duplicate_dooms_every_episode():
    policy = ScriptedPolicy({"follow_decoy": 1.0})
    for task, steps, last, made in _episodes(policy):
        assert last.terminated and last.reward == 0.0, task.id
        assert last.info["answer"] == str(task.metadata["decoy_answer"])
        assert len(steps) == len(task.metadata["decoy_solution"])
        (mistake,) = made
        assert mistake["kind"] == "follow_decoy" and mistake["step"] == 2
        assert mistake["action"]["params"]["id"] in task.metadata["decoys"]
        assert all("error" not in ts.info for _, ts in steps)  # a coherent, wrong path


def test_a_noisy_policy_fails_a_fair_share_and_only_through_wrong_paths_or_answers():
    mistakes = {
        "follow_decoy": 0.25,
        "wrong_answer": 0.05,
        "wrong_tool": 0.2,
        "bad_params": 0.2,
        "repeat_step": 0.2,
        "skip_step": 0.1,
    }
    policy = ScriptedPolicy(mistakes, seed=3)
    outcomes, kinds = Counter(), Counter()
    for task, steps, last, mistakes_made in _episodes(policy):
        made = {m["kind"] for m in mistakes_made}
        kinds.update(made)
        failed = last.reward == 0.0
        outcomes[failed] += 1
        assert failed == bool(made & {"follow_decoy", "wrong_answer"}), (task.id, made)
        assert last.terminated and len(steps) <= 20
    share = outcomes[True] / len(TASKS)
    assert 0.15 <= share <= 0.6, share
    assert set(mistakes) <= set(kinds)


def test_the_same_seed_gives_the_same_noisy_episodes():
    def run(seed):
        policy = ScriptedPolicy({"follow_decoy": 0.3, "wrong_tool": 0.3}, seed=seed)
        return [
            ([a for a, _ in steps], last.reward, made)
            for _, steps, last, made in _episodes(policy, TASKS[:40])
        ]

    assert run(5) == run(5)
    assert run(5) != run(6)
