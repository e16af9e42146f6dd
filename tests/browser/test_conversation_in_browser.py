"""A simulated-user episode of steplab/customer-service on its trajectory page in headless
Chromium: the dialogue reads as a conversation (the customer's and the agent's turns in order,
with their roles), the database calls between them as tool steps, and what the customer said
shows literally (it is untrusted text)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.browser.test_diagnostic_in_browser import _log_in
from trainer_core.envs import make
from trainer_core.policies.scripted import ScriptedPolicy
from trainer_core.recording.importers import ImportResult
from trainer_core.rollouts.collect import EpisodeSpec, run_episode
from trainer_core.tasks.suites.customer_service import customer_service_task
from webapp.accounts.models import Role
from webapp.trajectories import services
from webapp.trajectories.models import Trajectory as TrajectoryRow

pytestmark = [pytest.mark.browser]


@pytest.mark.django_db(transaction=True)
def test_a_simulated_user_episode_shows_as_a_chat(live_server, make_user, browser_page):
    task = customer_service_task(1_000_000, "validation")
    env = make("steplab/customer-service")
    try:
        played = run_episode(env, ScriptedPolicy(), EpisodeSpec(task, 0, 1), max_steps=40)
    finally:
        env.close()
    assert played.error is None and played.trajectory.outcome.success is True
    services.trajectories_import(
        results=[ImportResult("service.json", "steplab", "1", [played.trajectory])]
    )
    row = TrajectoryRow.objects.get()
    steps = played.trajectory.steps
    said = [(s.role, s.text) for s in steps if s.kind == "message"]
    assert said[0][0] == "user" and ("assistant", said[1][1]) == said[1]

    page = browser_page
    _log_in(page, live_server, make_user(Role.VIEWER))
    page.goto(f"{live_server.url}/trajectories/{row.pk}/")
    messages = page.locator('li.step[data-kind="message"]')
    expect(messages).to_have_count(len(said))
    roles = messages.evaluate_all("items => items.map(li => li.dataset.role)")
    assert roles == [role for role, _ in said]
    # each turn's text, literally, in order (the customer's words are untrusted text)
    shown = messages.locator('[data-testid="message-text"]').all_inner_texts()
    assert [text.strip() for text in shown[1:]] == [text.strip() for _, text in said[1:]]
    tools = page.locator("li.step:not([data-kind])")
    expect(tools).to_have_count(sum(1 for s in steps if s.kind != "message"))
    # the agent's first turn comes before any tool call: it asks the customer who they are
    first_tool = min(s.index for s in steps if s.kind != "message")
    first_answer = next(s.index for s in steps if s.kind == "message" and s.role == "assistant")
    assert first_answer < first_tool
    expect(page.locator(f"#step-{first_answer} .badge")).to_have_text("assistant")
