"""Headless Chromium driven by Playwright's synchronous API (not pytest-playwright)."""

from __future__ import annotations

import os
import re

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def browser_page(request, tmp_path, monkeypatch):
    """A fresh Playwright page in headless Chromium; a screenshot is saved when the test fails.

    Playwright's sync API runs an event loop in the main thread, and Django refuses synchronous
    ORM calls from a thread with a running loop; the test code still needs the ORM (and
    ``live_server`` serves from another thread), so async-unsafe calls are allowed here.

    Side effect to know about: while Playwright runs, asyncio sees a running loop in the main
    thread, so Django keeps the main thread's connections in a separate, context-local store
    (asgiref's thread-critical Local). A connection the test opens there is invisible to the
    ``connections.close_all()`` pytest-django does once Playwright has stopped, and an idle
    leftover would block dropping the test database; it is closed here, before the stop.
    """
    if not os.path.exists(CHROMIUM):
        pytest.skip("chromium is not installed: apt-get install chromium")
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    browser = context = page = None
    try:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS
        )
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(15_000)
        # Every page carries a Content-Security-Policy (docs/security.md): something it blocks
        # (an inline script, style or handler) fails the test even if the page still looked fine.
        # Give wait_for_function a function ("() => ..."): a bare expression is eval'd in the
        # page, which the policy refuses.
        blocked: list[str] = []
        page.on(
            "console",
            lambda msg: blocked.append(msg.text) if "Content Security Policy" in msg.text else None,
        )
        yield page
        assert not blocked, "the Content-Security-Policy blocked:\n" + "\n".join(blocked)
    finally:
        report = getattr(request.node, "rep_call", None)
        if page is not None and report is not None and report.failed:
            name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
            shot = tmp_path / f"{name}-failure.png"
            try:
                page.screenshot(path=str(shot), full_page=True)
                print(f"\nscreenshot of the failed page ({page.url}): {shot}")
            except Exception as exc:  # the page or browser may already be gone
                print(f"\ncould not save a screenshot: {exc!r}")
        for closable in (context, browser):
            if closable is not None:
                try:
                    closable.close()
                except Exception as exc:
                    print(f"\nclosing {closable!r} failed: {exc!r}")
        # Still "inside" Playwright's loop: close the connections opened from the test body.
        from django.db import connections

        connections.close_all()
        playwright.stop()
