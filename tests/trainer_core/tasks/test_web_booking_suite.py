"""The booking site suite (trainer_core.tasks.suites.web_booking), without a browser: tasks are
deterministic, every template comes from any seed, the splits share nothing, the site serves its
pages, validates its forms and keeps the bookings, and the built-in task sets are registered."""

from __future__ import annotations

import hashlib
import json

import pytest

from trainer_core.errors import ConfigError
from trainer_core.tasks.checkers import check_outcome
from trainer_core.tasks.suites import builtin_suites
from trainer_core.tasks.suites.web_booking import (
    DEFAULT_SIZES,
    SPLITS,
    TEMPLATES,
    BookingSite,
    booking_task,
    booking_tasks,
)
from trainer_core.tasks.suites.web_shop.catalog import ANSWER_RESIDUES, euros

TASKS = {split: booking_tasks(split, n=60) for split in SPLITS}
TEST_SPLIT_SHA256 = "10e572839cb7a38a5cfa158be2ee12b419bbc6f4b473ec57d3791a88ff8293f8"


def test_tasks_are_deterministic_and_every_template_comes_from_any_seed():
    assert booking_task(7) == booking_task(7) == TASKS["train"][7]
    assert booking_task(7) != booking_task(8)
    assert [t.metadata["template"] for t in TASKS["train"][: len(TEMPLATES)]] == list(TEMPLATES)
    for name in TEMPLATES:
        task = booking_task(1_000_003, "validation", template=name)
        assert task.metadata["template"] == name and task.reference_solution
    assert len(TEMPLATES) >= 9
    with pytest.raises(ConfigError, match="not in the test split"):
        booking_task(5, "test")
    with pytest.raises(ConfigError, match="unknown template"):
        booking_task(5, template="nope")


def test_tasks_carry_what_their_checker_needs():
    for task in TASKS["train"][:20]:
        meta = task.metadata
        assert meta["site"] == "booking" and meta["start_path"] == "/"
        assert task.environment == "steplab/browser" and task.domain == "browser"
        assert task.reference_solution[-1].tool == "submit"
        if task.checker == "final_state":
            start = BookingSite(meta["world"], meta["bookings"]).state()
            assert set(meta["expected_database"]) == {"bookings"}
            assert meta["expected_database"] != start
        else:
            assert task.checker == "number"
            assert task.reference_solution[-1].params["answer"] == task.expected_answer


def test_the_splits_share_nothing():
    def parts(split):
        names, people, ids, prompts, answers, numbers, years = (set() for _ in range(7))
        for task in TASKS[split]:
            world = task.metadata["world"]
            names |= {r["name"] for r in world["restaurants"]} | set(world["locations"])
            ids |= {r["id"] for r in world["restaurants"]}
            ids |= {b["ref"][2:] for b in task.metadata["bookings"]}
            for booking in (
                (task.metadata.get("expected_database") or {}).get("bookings", {}).values()
            ):
                people |= {booking["name"], booking["email"]}
                ids.add(booking["phone"])
            prompts.add(task.prompt)
            if task.expected_answer is not None:
                answers.add(task.expected_answer)
                numbers.add(int(task.expected_answer.replace(".", "")))
            answers.update(task.metadata.get("required_outputs") or [])
            numbers |= {r["price"] for r in world["restaurants"]}
            numbers |= {r["rating"] for r in world["restaurants"]}
            years |= {d[:4] for d in world["dates"]}
        return names, people, ids, prompts, answers, years, numbers

    found = {split: parts(split) for split in SPLITS}
    for a, b in [("train", "validation"), ("train", "test"), ("validation", "test")]:
        for what, left, right in zip(
            ["names", "people", "ids", "prompts", "answers", "years"], found[a], found[b],
            strict=False,
        ):  # fmt: skip
            assert not left & right, f"{a} and {b} share {what}: {sorted(left & right)[:5]}"
    for split in SPLITS:
        assert {n % 7 for n in found[split][6]} <= set(ANSWER_RESIDUES[split])
        assert {int(i) % 3 for i in found[split][2]} == {list(SPLITS).index(split)}


def test_the_site_books_validates_changes_and_cancels():
    world = TASKS["train"][0].metadata["world"]
    site = BookingSite(world)
    r = next(r for r in world["restaurants"] if site.free_times(r, world["dates"][0]))
    date, time = world["dates"][0], site.free_times(r, world["dates"][0])[0]
    status, headers, body = site.handle("GET", "/", {}, {})
    assert status == 200 and all(x.encode() in body for x in world["locations"])
    body = site.handle("GET", "/search", {"location": r["location"], "date": date}, {})[2]
    assert r["name"].encode() in body and f"€{euros(r['price'])} per person".encode() in body
    body = site.handle("GET", f"/restaurant/{r['id']}", {"date": date, "party": "2"}, {})[2]
    assert f">Book {time}</a>".encode() in body
    form = {"restaurant": r["id"], "date": date, "time": time, "party": "2"}
    status, _, body = site.handle("POST", "/book", {}, {**form, "email": "nope", "phone": "12"})
    assert status == 400 and b'role="alert"' in body and b"Full name: enter" in body
    assert b"Email: enter a valid email" in body and b"Phone: enter a phone number" in body
    assert site.state() == {"bookings": {}}
    good = {**form, "name": " Ana  Lee ", "email": "Ana@Example.com", "phone": "+44 20 7946"}
    status, headers, _ = site.handle("POST", "/book", {}, good)
    ref = headers["Location"].rsplit("/", 1)[1]
    assert status == 303 and ref == f"BK{world['next_ref']}"
    key = f"{r['id']} {date} {time}"
    assert site.state()["bookings"][key] == {
        "party": 2, "name": "Ana Lee", "email": "ana@example.com", "phone": "+44207946",
        "notes": "",
    }  # fmt: skip
    assert site.handle("POST", "/book", {}, good)[0] == 400  # that table is taken now
    assert b"no longer free" in site.handle("POST", "/book", {}, good)[2]
    too_many = {"date": date, "time": time, "party": str(r["max_party"] + 1)}
    body = site.handle("POST", f"/bookings/{ref}/edit", {}, too_many)[2]
    assert f"seats parties of 1 to {r['max_party']}".encode() in body
    assert site.handle("POST", f"/bookings/{ref}/edit", {}, {**too_many, "party": "1"})[0] == 303
    assert site.state()["bookings"][key]["party"] == 1
    assert f"Cancel booking {ref}".encode() in site.handle("GET", "/bookings", {}, {})[2]
    assert site.handle("POST", f"/bookings/{ref}/cancel", {}, {})[0] == 303
    assert site.state() == {"bookings": {}}
    assert site.handle("GET", "/nope", {}, {})[0] == 404


def test_an_empty_or_wrong_outcome_fails_the_checker():
    answer_task = next(t for t in TASKS["train"] if t.checker == "number")
    assert check_outcome(answer_task, final_text=answer_task.expected_answer).success
    assert not check_outcome(answer_task, final_text="").success
    assert not check_outcome(answer_task, final_text="0.01").success
    for task in TASKS["train"][:10]:
        if task.checker != "final_state":
            continue
        meta = task.metadata
        said = meta["required_outputs"]
        expected = {"database": meta["expected_database"], "said": said}
        assert check_outcome(task, run_result=expected).success
        start = BookingSite(meta["world"], meta["bookings"]).state()
        assert not check_outcome(task, run_result={"database": start, "said": said}).success


def test_the_builtin_task_sets():
    suites = builtin_suites()
    for split, size in DEFAULT_SIZES.items():
        suite = suites[f"web-booking-{split}"]
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
    assert _digest(booking_tasks("test")) == TEST_SPLIT_SHA256, (
        "the test split changed: it is fixed before any run, so a generator change must keep "
        "its tasks (change the train split, or add a new split)"
    )
