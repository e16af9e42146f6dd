"""The web shop suite (trainer_core.tasks.suites.web_shop), without a browser: tasks are
deterministic, every template comes from any seed, the splits share nothing, the site answers
its pages and changes its cart, and the built-in task sets are registered."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from trainer_core.errors import ConfigError
from trainer_core.tasks.checkers import check_outcome
from trainer_core.tasks.suites import builtin_suites
from trainer_core.tasks.suites.web_shop import (
    DEFAULT_SIZES,
    SPLITS,
    TEMPLATES,
    ShopSite,
    shop_task,
    shop_tasks,
)
from trainer_core.tasks.suites.web_shop.catalog import ANSWER_RESIDUES, euros

TASKS = {split: shop_tasks(split, n=96) for split in SPLITS}
TEST_SPLIT_SHA256 = "eda83606a930a9566bb862d317a3f53ee38486c841bf5474d561b8a09faed987"


def _numbers(task) -> set[int]:
    """The numbers a task can ask about: prices (cents), ratings (tenths), counts, totals."""
    found = {p["price"] for p in task.metadata["catalog"]["products"]}
    found |= {p["rating"] for p in task.metadata["catalog"]["products"]}
    # "24.99" (a price) -> 2499 cents, "4.3" (a rating) -> 43 tenths, "7" (a count) -> 7
    if task.checker == "number":
        found.add(int(task.expected_answer.replace(".", "")))
    for output in task.metadata.get("required_outputs") or []:
        found.add(int(output.replace(".", "")))
    return found


def test_tasks_are_deterministic_and_every_template_comes_from_any_seed():
    assert shop_task(7) == shop_task(7) == TASKS["train"][7]
    assert shop_task(7) != shop_task(8)
    assert [t.metadata["template"] for t in TASKS["train"][:12]] == list(TEMPLATES)
    for name in TEMPLATES:
        task = shop_task(1_000_003, "validation", template=name)
        assert task.metadata["template"] == name and task.reference_solution
    assert len(TEMPLATES) >= 10
    with pytest.raises(ConfigError, match="not in the test split"):
        shop_task(5, "test")
    with pytest.raises(ConfigError, match="unknown template"):
        shop_task(5, template="nope")


def test_answer_and_cart_tasks_carry_what_their_checker_needs():
    for task in TASKS["train"][:24]:
        meta = task.metadata
        assert meta["site"] == "shop" and meta["start_path"] == "/"
        assert task.environment == "steplab/browser" and task.domain == "browser"
        assert task.reference_solution[-1].tool == "submit"
        if task.checker == "final_state":
            assert set(meta["expected_database"]) == {"cart"}
            assert meta["expected_database"]["cart"] != meta["cart"]
        else:
            assert task.checker in ("number", "exact") and task.expected_answer
            assert task.reference_solution[-1].params["answer"] == task.expected_answer


def test_the_splits_share_nothing():
    def parts(split):
        brands, names, ids, prompts, answers, numbers = set(), set(), set(), set(), set(), set()
        for task in TASKS[split]:
            for p in task.metadata["catalog"]["products"]:
                brands.add(p["brand"])
                names.add(p["name"])
                ids.add(p["id"])
            prompts.add(task.prompt)
            if task.expected_answer is not None:
                answers.add(str(task.expected_answer).lower())
            answers.update(task.metadata.get("required_outputs") or [])
            numbers |= _numbers(task)
        return brands, names, ids, prompts, answers, numbers

    found = {split: parts(split) for split in SPLITS}
    for a, b in [("train", "validation"), ("train", "test"), ("validation", "test")]:
        for what, left, right in zip(
            ["brands", "names", "ids", "prompts", "answers"], found[a], found[b], strict=False
        ):
            assert not left & right, f"{a} and {b} share {what}: {sorted(left & right)[:5]}"
    for split in SPLITS:
        assert {n % 7 for n in found[split][5]} <= set(ANSWER_RESIDUES[split])
        assert {int(i) % 3 for i in found[split][2]} == {list(SPLITS).index(split)}


def test_the_site_serves_its_pages_and_keeps_the_cart():
    catalog = TASKS["train"][0].metadata["catalog"]
    site = ShopSite(catalog)
    product = next(p for p in catalog["products"] if p["stock"])
    status, headers, body = site.handle("GET", "/", {}, {})
    assert status == 200 and "text/html" in headers["Content-Type"]
    assert all(c.encode() in body for c in catalog["categories"])
    status, _, body = site.handle("GET", "/search", {"q": product["name"]}, {})
    assert status == 200 and product["name"].encode() in body and b"1 product<" in body
    status, _, body = site.handle("GET", f"/product/{product['id']}", {}, {})
    assert f"€{euros(product['price'])}".encode() in body
    assert site.handle("POST", "/cart/add", {}, {"product_id": product["id"], "quantity": "2"})[
        :2
    ] == (303, {"Location": "/cart"})
    assert site.state() == {"cart": {product["id"]: 2}}
    status, _, body = site.handle("GET", "/cart", {}, {})
    assert f"Total: €{euros(2 * product['price'])}".encode() in body
    assert f'aria-label="Remove {product["name"]}"'.encode() in body
    site.handle("POST", "/cart/remove", {}, {"product_id": product["id"]})
    assert site.state() == {"cart": {}}
    assert site.handle("GET", "/nope", {}, {})[0] == 404
    assert site.handle("POST", "/cart/add", {}, {"product_id": "0"})[0] == 400


def test_search_filters_and_sorts():
    catalog = TASKS["train"][0].metadata["catalog"]
    site = ShopSite(catalog)
    category = catalog["categories"][0]
    body = site.handle(
        "GET", "/search", {"category": category, "sort": "price_asc", "in_stock": "1"}, {}
    )[2].decode()
    shown = re.findall(r'<a href="/product/(\d+)">', body)
    expected = sorted(
        (p for p in catalog["products"] if p["category"] == category and p["stock"]),
        key=lambda p: p["price"],
    )
    assert shown == [p["id"] for p in expected]


def test_an_empty_or_wrong_outcome_fails_the_checker():
    answer_task = next(t for t in TASKS["train"] if t.checker == "number")
    assert check_outcome(answer_task, final_text=answer_task.expected_answer).success
    assert not check_outcome(answer_task, final_text="").success
    assert not check_outcome(answer_task, final_text="0.01").success
    cart_task = next(t for t in TASKS["train"] if t.checker == "final_state")
    expected = cart_task.metadata["expected_database"]
    assert check_outcome(cart_task, run_result={"database": expected, "said": []}).success
    empty = {"database": {"cart": dict(cart_task.metadata["cart"])}, "said": []}
    assert not check_outcome(cart_task, run_result=empty).success


def test_the_builtin_task_sets():
    suites = builtin_suites()
    for split, size in DEFAULT_SIZES.items():
        suite = suites[f"web-shop-{split}"]
        assert (suite.domain, suite.environment) == ("browser", "steplab/browser")
        assert len(suite.tasks) == size
        assert suite.tasks[:96] == TASKS[split][: min(96, size)]


def _digest(tasks):
    digest = hashlib.sha256()
    for task in tasks:
        core = [task.id, task.prompt, task.expected_answer, task.checker, task.metadata]
        core.append([call.model_dump() for call in task.reference_solution])
        digest.update(json.dumps(core, sort_keys=True).encode() + b"\n")
    return digest.hexdigest()


def test_the_test_split_is_fixed():
    assert _digest(shop_tasks("test")) == TEST_SPLIT_SHA256, (
        "the test split changed: it is fixed before any run, so a generator change must keep "
        "its tasks (change the train split, or add a new split)"
    )
