"""The wiki suite (trainer_core.tasks.suites.web_wiki), without a browser: tasks are
deterministic, every template comes from any seed, the splits share nothing, the wiki serves its
articles, searches, categories and disambiguation pages, and the built-in task sets are
registered."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from trainer_core.errors import ConfigError
from trainer_core.tasks.checkers import check_outcome
from trainer_core.tasks.suites import builtin_suites
from trainer_core.tasks.suites.web_shop.catalog import ANSWER_RESIDUES
from trainer_core.tasks.suites.web_wiki import (
    DEFAULT_SIZES,
    SPLITS,
    TEMPLATES,
    WikiSite,
    wiki_task,
    wiki_tasks,
)

TASKS = {split: wiki_tasks(split, n=60) for split in SPLITS}
TEST_SPLIT_SHA256 = "51a93f77a5dad5db3a3a6b728cef3f8062f036bd00ce6f9979fd1010735a8e5f"


def test_tasks_are_deterministic_and_every_template_comes_from_any_seed():
    assert wiki_task(7) == wiki_task(7) == TASKS["train"][7]
    assert wiki_task(7) != wiki_task(8)
    assert [t.metadata["template"] for t in TASKS["train"][: len(TEMPLATES)]] == list(TEMPLATES)
    for name in TEMPLATES:
        task = wiki_task(1_000_003, "validation", template=name)
        assert task.metadata["template"] == name and task.reference_solution
    assert len(TEMPLATES) >= 9
    with pytest.raises(ConfigError, match="not in the test split"):
        wiki_task(5, "test")
    with pytest.raises(ConfigError, match="unknown template"):
        wiki_task(5, template="nope")


def test_answers_take_following_links():
    for task in TASKS["train"][:20]:
        assert task.metadata["site"] == "wiki" and task.checker in ("number", "exact")
        assert task.reference_solution[-1].params["answer"] == task.expected_answer
        follows = [
            c for c in task.reference_solution
            if c.tool == "click" and c.params["element_id"].startswith("link ")
        ]  # fmt: skip
        if task.metadata["template"] not in ("founded_gap", "disambiguated_birth_year"):
            assert len(follows) >= 1
        if task.metadata["template"] in ("birth_country_capital_population",
                                         "mayor_birth_country_area"):  # fmt: skip
            assert len(follows) >= 3


def test_the_splits_share_nothing():
    def parts(split):
        names, prompts, answers, numbers = set(), set(), set(), set()
        for task in TASKS[split]:
            world = task.metadata["world"]
            names |= {c["name"] for c in world["countries"]} | {c["name"] for c in world["cities"]}
            names |= {p["name"] for p in world["people"]} | {world["name"]}
            names |= {c["currency"] for c in world["countries"]}
            prompts.add(task.prompt)
            answers.add(task.expected_answer.lower())
            if task.checker == "number":
                numbers.add(int(task.expected_answer))
            numbers |= {c["population"] for c in world["cities"] + world["countries"]}
            numbers |= {c["area"] for c in world["countries"]}
            numbers |= {p["birth_year"] for p in world["people"]}
        return names, prompts, answers, numbers

    found = {split: parts(split) for split in SPLITS}
    for a, b in [("train", "validation"), ("train", "test"), ("validation", "test")]:
        for what, left, right in zip(["names", "prompts", "answers"], found[a], found[b],
                                     strict=False):  # fmt: skip
            assert not left & right, f"{a} and {b} share {what}: {sorted(left & right)[:5]}"
    for split in SPLITS:
        assert {n % 7 for n in found[split][3]} <= set(ANSWER_RESIDUES[split])


def test_the_wiki_serves_articles_search_categories_and_disambiguation():
    world = TASKS["train"][0].metadata["world"]
    site = WikiSite(world)
    country = world["countries"][0]
    body = site.handle("GET", "/", {}, {})[2].decode()
    assert 'href="/category/Countries"' in body
    status, headers, _ = site.handle("GET", "/search", {"q": country["name"].upper()}, {})
    assert status == 303 and headers["Location"] == f"/wiki/{country['name']}"
    body = site.handle("GET", f"/wiki/{country['name']}", {}, {})[2].decode()
    assert f'<th>Capital</th><td><a href="/wiki/{country["capital"]}">' in body
    assert f"{country['population']:,}" in body and country["currency"] in body
    # every title is linked once on a page
    links = re.findall(r'<a href="(/wiki/[^"]+)">', body)
    assert len(links) == len(set(links))
    twin = next(p for p in world["people"] if p["title"] != p["name"])
    status, headers, _ = site.handle("GET", "/search", {"q": twin["name"]}, {})
    assert headers["Location"] == f"/wiki/{twin['name'].replace(' ', '_')}"
    body = site.handle("GET", f"/wiki/{twin['name'].replace(' ', '_')}", {}, {})[2].decode()
    assert "may refer to" in body and twin["title"] in body
    path = "/wiki/" + twin["title"].replace(" ", "_").replace("(", "%28").replace(")", "%29")
    assert str(twin["birth_year"]) in site.handle("GET", path, {}, {})[2].decode()
    near = next(c for c in world["cities"] if " " in c["name"])  # "New Velmora"
    base = near["name"].split(" ", 1)[1]
    body = site.handle("GET", "/search", {"q": base[:-1]}, {})[2].decode()  # not a title
    assert f">{near['name']}</a>" in body and f">{base}</a>" in body
    assert site.handle("GET", "/wiki/Nowhere", {}, {})[0] == 404
    assert site.state()["read"] == [country["name"], twin["name"], twin["title"]]


def test_an_empty_or_wrong_answer_fails_the_checker():
    for checker in ("number", "exact"):
        task = next(t for t in TASKS["train"] if t.checker == checker)
        assert check_outcome(task, final_text=task.expected_answer).success
        assert check_outcome(task, final_text=f"  {task.expected_answer.upper()} ").success
        assert not check_outcome(task, final_text="").success
        assert not check_outcome(task, final_text="1").success


def test_the_builtin_task_sets():
    suites = builtin_suites()
    for split, size in DEFAULT_SIZES.items():
        suite = suites[f"web-wiki-{split}"]
        assert (suite.domain, suite.environment) == ("browser", "steplab/browser")
        assert len(suite.tasks) == size
        assert suite.tasks[:60] == TASKS[split][: min(60, size)]


def _digest(tasks):
    digest = hashlib.sha256()
    for task in tasks:
        core = [task.id, task.prompt, task.expected_answer, task.checker, task.metadata]
        core.append([call.model_dump() for call in task.reference_solution])
        digest.update(json.dumps(core, sort_keys=True).encode() + b"\n")
    return digest.hexdigest()


def test_the_test_split_is_fixed():
    assert _digest(wiki_tasks("test")) == TEST_SPLIT_SHA256, (
        "the test split changed: it is fixed before any run, so a generator change must keep "
        "its tasks (change the train split, or add a new split)"
    )
