"""The step grid in headless Chromium: open a queue, label three steps with keys, mark a first
error, submit with Ctrl+Enter, land on the next item."""

from __future__ import annotations

import pytest

from tests.browser.test_diagnostic_in_browser import _log_in
from trainer_core.recording.importers import ImportResult
from trainer_core.recording.schema import Outcome, Step, TaskRef, Trajectory
from webapp.accounts.models import Role
from webapp.calibration import services
from webapp.calibration.models import StepLabel, Submission
from webapp.trajectories import services as store

pytestmark = [pytest.mark.browser]


def _trajectories(n: int) -> list[int]:
    return store.trajectories_import(
        results=[
            ImportResult(
                "grid.jsonl",
                "test",
                "1",
                [
                    Trajectory(
                        task=TaskRef(id=f"t{i}", prompt=f"task {i}", domain="coding"),
                        steps=[
                            Step(
                                index=s,
                                tool="bash",
                                params={"cmd": f"echo {i}-{s}"},
                                observation=f"{i}-{s}",
                            )
                            for s in range(4)
                        ],
                        outcome=Outcome(success=False),
                    )
                    for i in range(n)
                ],
            )
        ]
    ).created


@pytest.mark.django_db(transaction=True)
def test_label_with_keys_mark_first_error_and_submit(live_server, make_user, browser_page):
    page = browser_page
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
    ids = _trajectories(2)
    queue = services.queue_create(name="grid", trajectory_ids=ids, scale_points=5)
    annotator = make_user(Role.ANNOTATOR)

    _log_in(page, live_server, annotator)
    page.goto(live_server.url + f"/annotate/{queue.pk}/")
    page.get_by_test_id("start").click()
    first = queue.items.get(position=0)
    page.wait_for_url(f"**/annotate/{queue.pk}/items/{first.pk}/")

    page.keyboard.press("j")  # step 0
    page.keyboard.press("5")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=label-0]').innerText === '1.00'"
    )
    page.keyboard.press("j")  # step 1
    page.keyboard.press("2")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=label-1]').innerText === '0.25'"
    )
    page.keyboard.press("j")  # step 2
    page.keyboard.press("0")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=label-2]').innerText === 'neutral'"
    )
    # typing in the comment box fires no shortcut
    page.fill("textarea[name=comment]", "j5x0f")
    assert page.inner_text("[data-testid=label-2]") == "neutral"
    page.keyboard.press("Escape")
    page.locator("tr.step[data-index='2']").focus()
    page.keyboard.press("?")
    assert page.get_by_test_id("help").is_visible()
    page.keyboard.press("?")

    page.locator("tr.step[data-index='1']").focus()
    page.evaluate("document.activeElement.blur()")
    page.keyboard.press("k")  # from step 2 back to step 1
    page.keyboard.press("f")  # step 1 is the first error
    page.wait_for_function(
        "() => document.querySelector('[data-testid=label-3]').innerText === 'downstream'"
    )
    assert page.inner_text("[data-testid=label-0]") == "1.00"  # typed: kept
    assert page.inner_text("[data-testid=label-1]") == "0.00 (first error)"
    labels = {
        lb.index: (lb.value, lb.origin)
        for lb in StepLabel.objects.filter(item=first, annotator=annotator)
    }
    assert labels == {
        0: (1.0, "key"),
        1: (0.0, "first_error"),
        2: (None, "downstream"),
        3: (None, "downstream"),
    }

    page.locator("tr.step[data-index='0']").click()
    page.keyboard.press("Control+Enter")
    second = queue.items.get(position=1)
    page.wait_for_url(f"**/annotate/{queue.pk}/items/{second.pk}/")
    submission = Submission.objects.get(item=first, annotator=annotator)
    assert submission.submitted_at is not None and submission.comment == "j5x0f"
    assert problems == []


@pytest.mark.django_db(transaction=True)
def test_first_error_key_keeps_labels_typed_on_earlier_steps(live_server, make_user, browser_page):
    """``f`` marks the focused step bad and the steps after it downstream; an earlier step the
    annotator typed a label on keeps it, an earlier unlabelled step becomes good, and moving the
    mark later turns the old mark's bad step good without touching the typed label."""
    page = browser_page
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
    (pk,) = _trajectories(1)
    queue = services.queue_create(name="keep", trajectory_ids=[pk], scale_points=5)
    item = queue.items.get()
    annotator = make_user(Role.ANNOTATOR)

    _log_in(page, live_server, annotator)
    page.goto(live_server.url + f"/annotate/{queue.pk}/items/{item.pk}/")

    def cell(index: int) -> str:
        return page.inner_text(f"[data-testid=label-{index}]")

    def wait_cell(index: int, text: str) -> None:
        page.wait_for_function(
            f"() => document.querySelector('[data-testid=label-{index}]').innerText === {text!r}"
        )

    page.keyboard.press("j")  # step 0
    page.keyboard.press("2")  # a typed label: 0.25
    wait_cell(0, "0.25")
    page.keyboard.press("j")  # step 1: left unlabelled
    page.keyboard.press("j")  # step 2
    page.keyboard.press("f")
    wait_cell(3, "downstream")
    assert [cell(i) for i in range(4)] == [
        "0.25",
        "1.00 (first error)",
        "0.00 (first error)",
        "downstream",
    ]

    page.keyboard.press("j")  # step 3: the first error was later after all
    page.keyboard.press("f")
    wait_cell(3, "0.00 (first error)")
    assert [cell(i) for i in range(4)] == [
        "0.25",
        "1.00 (first error)",
        "1.00 (first error)",
        "0.00 (first error)",
    ]
    labels = {
        lb.index: (lb.value, lb.origin)
        for lb in StepLabel.objects.filter(item=item, annotator=annotator)
    }
    assert labels == {
        0: (0.25, "key"),
        1: (1.0, "first_error"),
        2: (1.0, "first_error"),
        3: (0.0, "first_error"),
    }
    # what the page shows is what was stored: a reload reads the same
    page.reload()
    assert [cell(i) for i in range(4)] == [
        "0.25",
        "1.00 (first error)",
        "1.00 (first error)",
        "0.00 (first error)",
    ]
    assert problems == []
