"""Trajectory pages in headless Chromium: upload → filter → detail → select two → diff, and
untrusted text (HTML, script, template payloads) shown literally with no script running."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.test_diagnostic_in_browser import _log_in
from trainer_core.recording.importers import ImportResult
from trainer_core.recording.schema import Outcome, Step, TaskRef, Trajectory
from webapp.accounts.models import Role
from webapp.trajectories import services
from webapp.trajectories.models import Trajectory as TrajectoryRow

pytestmark = [pytest.mark.browser]

EVIL = (
    '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
    "{{ 7*7 }}{% now 'Y' %}<b>bold</b>"
)


def _traj(marker: str, tools: list[str], *, success: bool) -> Trajectory:
    return Trajectory(
        task=TaskRef(id="fix-bug", prompt=f"Fix the bug ({marker})", domain="coding"),
        agent="swe-agent",
        model="claude-test",
        steps=[
            Step(
                index=i,
                tool=tool,
                params={"path": f"src/{tool}.py"},
                observation=f"{marker} output of {tool}",
                thought=f"{marker}: now {tool}",
            )
            for i, tool in enumerate(tools)
        ],
        outcome=Outcome(success=success),
    )


def _watch_for_problems(page) -> list[str]:
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
    page.on(
        "dialog", lambda dialog: (problems.append(f"dialog: {dialog.message}"), dialog.dismiss())
    )
    return problems


@pytest.mark.django_db(transaction=True)
def test_upload_filter_open_and_diff_in_the_browser(live_server, make_user, browser_page, tmp_path):
    page = browser_page
    problems = _watch_for_problems(page)
    operator = make_user(Role.OPERATOR)
    good = tmp_path / "good-run.jsonl"
    bad = tmp_path / "bad-run.jsonl"
    good.write_text(_traj("GOOD", ["read", "edit", "test", "submit"], success=True).to_json())
    bad.write_text(_traj("BAD", ["read", "grep", "edit", "submit"], success=False).to_json())
    refused = tmp_path / "<img src=x onerror=alert(1)>.json"  # a file that does not read
    refused.write_text('{"messages": [')

    _log_in(page, live_server, operator)
    page.goto(live_server.url + "/trajectories/import/")
    page.set_input_files("input[type=file]", [str(good), str(refused), str(bad)])
    page.get_by_test_id("import").click()
    table = page.get_by_test_id("import-files")
    table.wait_for()
    statuses = table.locator("tbody tr").evaluate_all("rows => rows.map(r => r.dataset.fileStatus)")
    assert statuses == ["imported", "refused", "imported"]
    assert "invalid JSON" in page.get_by_test_id("file-error").inner_text()
    assert refused.name in page.get_by_test_id("file-error").inner_text()  # shown as text
    assert "Imported 2 trajectories" in page.get_by_test_id("import-summary").inner_text()
    page.get_by_test_id("imported-link").click()
    page.wait_for_url("**/trajectories/?min_id=*")
    rows = page.locator("[data-testid=trajectories] tbody tr[data-trajectory-id]")
    assert rows.count() == 2

    # filter: failures only, kept in the URL
    page.select_option("select[name=outcome]", "failure")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**outcome=failure**")
    assert rows.count() == 1
    bad_id = TrajectoryRow.objects.get(success=False).pk
    good_id = TrajectoryRow.objects.get(success=True).pk
    assert rows.first.get_attribute("data-trajectory-id") == str(bad_id)

    # open it: steps with thought, tool, observation; j moves to the first step
    page.locator(f"tr[data-trajectory-id='{bad_id}'] a").first.click()
    page.wait_for_url(f"**/trajectories/{bad_id}/")
    steps = page.locator("li.step")
    assert steps.count() == 4
    assert "BAD: now grep" in steps.nth(1).inner_text()
    page.keyboard.press("j")
    assert page.evaluate("document.activeElement.id") == "step-0"
    page.keyboard.press("j")
    assert page.evaluate("document.activeElement.id") == "step-1"

    # back to the whole list, select both, diff them
    page.goto(live_server.url + "/trajectories/")
    page.check(f"input[name=selected][value='{good_id}']")
    page.check(f"input[name=selected][value='{bad_id}']")
    page.get_by_test_id("diff-selected").click()
    page.wait_for_url(f"**/trajectories/diff/?a={min(good_id, bad_id)}&b={max(good_id, bad_id)}")
    text = page.inner_text("body")
    assert "first divergence" in text
    outcomes = {
        page.inner_text("[data-testid=left-outcome]"),
        page.inner_text("[data-testid=right-outcome]"),
    }
    assert {o.split(" ")[0] for o in outcomes} == {"success", "failure"}
    assert (
        page.locator("[data-kind=right_only], [data-kind=left_only], [data-kind=different]").count()
        >= 1
    )
    assert problems == []


@pytest.mark.django_db(transaction=True)
def test_untrusted_text_shows_literally_and_no_script_runs(live_server, make_user, browser_page):
    page = browser_page
    problems = _watch_for_problems(page)
    evil = Trajectory(
        task=TaskRef(id=EVIL, prompt=EVIL, domain="coding"),
        agent=EVIL,
        model=EVIL,
        steps=[Step(index=0, tool=EVIL[:150], params={EVIL: EVIL}, observation=EVIL, thought=EVIL)],
        outcome=Outcome(success=False, metadata={"note": EVIL}),
    )
    (pk,) = services.trajectories_import(
        results=[ImportResult(EVIL, "test", "1", [evil])], raw={EVIL: b"raw"}
    ).created
    services.trajectories_tag(ids=[pk], tag=EVIL[:64])
    (other,) = services.trajectories_import(
        results=[ImportResult("plain.jsonl", "test", "1", [_traj("PLAIN", ["bash"], success=True)])]
    ).created

    _log_in(page, live_server, make_user(Role.VIEWER))
    for path in (
        "/trajectories/",
        f"/trajectories/{pk}/",
        f"/trajectories/diff/?a={pk}&b={other}",
    ):
        page.goto(live_server.url + path)
        page.wait_for_load_state("load")
        assert page.evaluate("window.__pwned") is None, f"a script ran on {path}"
        assert page.locator("img[src=x]").count() == 0, path
        assert page.locator("b", has_text="bold").count() == 0, path
        body = page.inner_text("body")
        assert "<script>window.__pwned=1</script>" in body, path
        # the template syntax shows as typed, and 7*7 is never rendered: "49" may appear only in
        # the ids and timestamps the page shows
        assert "{{ 7*7 }}{% now 'Y' %}" in body, path
        shown = re.sub(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}", "", body)
        assert "49" not in shown.replace(str(pk), "").replace(str(other), ""), path
    page.goto(live_server.url + f"/trajectories/{pk}/")
    assert EVIL in page.inner_text("[data-testid=prompt]")
    assert page.evaluate("window.__pwned") is None
    assert problems == []


@pytest.mark.django_db(transaction=True)
def test_a_long_diff_shows_its_first_rows_then_every_row_and_long_bodies_on_demand(
    live_server, make_user, browser_page
):
    """A diff of two 250-step trajectories: the page renders its first rows and loads the rest
    by itself until all 250 aligned rows are shown; a long observation shows its head and
    loads the whole text on demand."""
    page = browser_page
    problems = _watch_for_problems(page)
    long_text = "line of output " * 100  # 1,500 characters

    def spec(marker: str) -> Trajectory:
        steps = [
            Step(
                index=i,
                tool="bash",
                params={"command": f"step {i} {marker if i % 50 == 0 else ''}"},
                observation=f"{i} {long_text}",
            )  # fmt: skip
            for i in range(250)
        ]
        return Trajectory(task=TaskRef(id="long", prompt=f"long {marker}"), steps=steps)

    a, b = services.trajectories_import(
        results=[ImportResult("long.jsonl", "test", "1", [spec("a"), spec("b")])]
    ).created
    _log_in(page, live_server, make_user(Role.VIEWER))
    page.goto(live_server.url + f"/trajectories/diff/?a={a}&b={b}")
    rows = page.locator("table[data-testid=diff] tr[data-kind]")
    expect(rows).to_have_count(250)  # the page's own rows, then the ones it loaded
    assert rows.count() == 250 and page.locator("[data-testid=diff-more]").count() == 0
    assert rows.nth(249).locator("td").first.inner_text().strip() == "249"
    cell = page.locator(f"#obs-{a}-249")
    assert "show all" in cell.inner_text() and len(cell.locator("pre").inner_text()) < 600
    cell.get_by_text("show all").click()
    expect(cell.locator("pre")).to_have_text(f"249 {long_text}")
    assert problems == []
