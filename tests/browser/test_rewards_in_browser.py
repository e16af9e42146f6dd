"""Step scores appear beside their steps on the trajectory page (loaded by htmx, swapped in out
of band), and switching version swaps them."""

from __future__ import annotations

import pytest

from tests.browser.test_diagnostic_in_browser import _log_in
from tests.webapp.rewards.test_pages import _import, _score
from webapp.accounts.models import Role
from webapp.rewards import services

pytestmark = [pytest.mark.browser]


@pytest.mark.django_db(transaction=True)
def test_step_scores_show_beside_each_step(live_server, make_user, browser_page):
    page = browser_page
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
    services.rubrics_seed(domain="coding")
    v1 = services.reward_model_create(domain="coding")
    v2 = services.reward_model_create(domain="coding", note="second")
    (pk,) = _import(1)
    _score(v1, pk, 0.75, steps=(0.5, 1.0))
    _score(v2, pk, 0.25, steps=(0.125, 0.375))

    _log_in(page, live_server, make_user(Role.VIEWER))
    page.goto(live_server.url + f"/trajectories/{pk}/")
    page.wait_for_selector("[data-testid=score-totals]")
    assert "0.250" in page.inner_text("[data-testid=score-totals]")  # the newest version first
    assert "0.125" in page.inner_text("#scores-step-0")
    assert "0.375" in page.inner_text("#scores-step-1")
    assert "<b>judge said</b>" in page.inner_text("#scores-step-0")  # literal, not bold
    page.get_by_text(v1.label).click()
    page.wait_for_function(
        "() => document.querySelector('#scores-step-0').innerText.includes('0.50')"
    )
    assert "0.750" in page.inner_text("[data-testid=score-totals]")
    assert "1.00" in page.inner_text("#scores-step-1")
    assert problems == []
