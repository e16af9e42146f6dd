"""A new user with no model creates a tiny starter model from the training form in headless
Chromium: the form follows the job on a real worker, then the model is in the base-model picker,
picked, and the configuration preview trains from it."""

from __future__ import annotations

import pytest

from tests.browser.test_diagnostic_in_browser import _log_in
from webapp.accounts.models import Role

pytestmark = [pytest.mark.browser, pytest.mark.worker, pytest.mark.slow]


@pytest.fixture
def fresh_data_dir(settings, tmp_path):
    """A data directory with no model in it, seen by the web server and the worker alike (the
    worker is started after this fixture and gets the setting)."""
    settings.STEPLAB_DATA_DIR = tmp_path / "data"
    settings.STEPLAB_MODEL_ROOTS = [str(settings.STEPLAB_DATA_DIR)]
    settings.STEPLAB_DATA_DIR.mkdir()
    return settings.STEPLAB_DATA_DIR


def test_a_new_user_creates_a_tiny_model_from_the_training_form(
    fresh_data_dir, live_server, celery_worker, make_user, browser_page
):
    page = browser_page
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(f"pageerror: {exc}"))
    _log_in(page, live_server, make_user(Role.OPERATOR))
    page.goto(live_server.url + "/training/new/")
    picker = page.get_by_test_id("base-model-choice")
    assert picker.locator("option").all_inner_texts() == [
        "no local model yet: create a tiny one below, or type a directory"
    ]
    assert page.locator("input[name=tiny_name]").input_value() == "tiny-starter"

    page.get_by_test_id("create-tiny").click()
    page.get_by_test_id("tiny-created").wait_for(timeout=120_000)
    path = fresh_data_dir.resolve() / "models" / "tiny-starter"
    assert str(path) in page.get_by_test_id("tiny-created").inner_text()
    picker = page.get_by_test_id("base-model-choice")  # swapped in anew
    assert picker.input_value() == str(path)
    assert picker.locator("option:checked").inner_text() == f"tiny-starter · {path}"
    page.wait_for_function(
        "p => document.querySelector('[data-testid=yaml]').innerText.includes('model_dir: ' + p)",
        arg=str(path),
    )
    assert page.url.endswith("/training/new/"), "the form stays where it was"
    assert problems == []
