"""steplab/browser on the booking site and the wiki: the scripted reference of every template on
one seed per split, empty and wrong episodes failing, the booking form's validation errors as
observations, and the state the checker sees.

One Chromium per module (``browser``); every episode gets its own context."""

from __future__ import annotations

import os

import pytest

from trainer_core.envs import make
from trainer_core.policies.scripted import ScriptedPolicy, run_episode
from trainer_core.tasks.suites import web_booking, web_wiki

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="chromium is not installed"),
]
SITES = {"booking": (web_booking, web_booking.booking_task), "wiki": (web_wiki, web_wiki.wiki_task)}


@pytest.fixture(scope="module")
def browser():
    from trainer_core.envs.browser import launch_browser

    handle = launch_browser()
    yield handle.browser
    handle.close()


@pytest.fixture(scope="module")
def env(browser):
    env = make("steplab/browser", browser=browser, screenshots=False)
    yield env
    env.close()


def act(env, tool, **params):
    return env.step({"tool": tool, "params": params})


@pytest.mark.slow
@pytest.mark.parametrize("split", list(web_booking.SPLITS))
@pytest.mark.parametrize("site", list(SITES))
def test_the_reference_solves_every_template(env, site, split):
    module, make_task = SITES[site]
    first = module.SPLITS[split][0]
    for offset, name in enumerate(module.TEMPLATES):
        task = make_task(first + 11 + offset, split, template=name)
        steps, last = run_episode(env, ScriptedPolicy(), task)
        assert last.terminated and last.reward == 1.0, (
            name,
            last.info["outcome"],
            [(a, s.observation[:300]) for a, s in steps if "error" in s.info],
        )
        assert not any("error" in s.info for _, s in steps)


def test_booking_validation_errors_are_observations(env):
    task = web_booking.booking_task(0)  # book_named
    world = task.metadata["world"]
    wanted = next(iter(task.metadata["expected_database"]["bookings"]))
    rid, date, time = wanted.split(" ")
    ts = env.reset(task=task)
    assert "combobox 'Location' value='All locations'" in ts.observation
    act(env, "goto", url=f"/book/{rid}?date={date}&time={time}&party=2")
    act(env, "type_text", element_id="textbox 'Email'", text="not-an-email")
    ts = act(env, "click", element_id="button 'Confirm booking'")
    assert "error" not in ts.info and ts.info["url"].endswith("/book")
    assert "StaticText 'Full name: enter the name the table is booked under.'" in ts.observation
    assert "Email: enter a valid email address, like name@example.com." in ts.observation
    assert "Phone: enter a phone number of 7 to 15 digits." in ts.observation
    assert "textbox 'Email' value='not-an-email'" in ts.observation  # what was typed stays
    assert env.unwrapped.server.site.state() == {"bookings": {}}
    for label, text in [("Full name", "Ana Lee"), ("Email", "ana@example.com"),
                        ("Phone", "0123 4567")]:  # fmt: skip
        act(env, "type_text", element_id=f"textbox {label!r}", text=text)
    ts = act(env, "click", element_id="button 'Confirm booking'")
    assert (
        "heading 'Booking confirmed'" in ts.observation
        and "link 'My bookings (1)'" in ts.observation
    )
    done = act(env, "submit")  # booked, but not what the task asked
    assert done.reward == 0.0 and done.info["final_state"]["bookings"][wanted]["name"] == "Ana Lee"
    assert world["name"] in ts.observation


def test_empty_and_wrong_episodes_fail(env):
    booking = web_booking.booking_task(1)  # cancel_booking
    assert booking.checker == "final_state" and len(booking.metadata["bookings"]) == 2
    env.reset(task=booking)
    assert act(env, "submit").reward == 0.0
    kept = next(
        b for b in booking.metadata["bookings"]
        if f"Cancel booking {b['ref']}" not in str(booking.reference_solution)
    )  # fmt: skip
    env.reset(task=booking)
    act(env, "click", element_id="link 'My bookings (2)'")
    ts = act(env, "click", element_id=f"button 'Cancel booking {kept['ref']}'")
    assert "link 'My bookings (1)'" in ts.observation
    assert act(env, "submit").reward == 0.0  # the other booking cancelled
    wiki = web_wiki.wiki_task(0)
    env.reset(task=wiki)
    assert act(env, "submit").reward == 0.0
    env.reset(task=wiki)
    wrong = act(env, "submit", answer=str(int(wiki.expected_answer) + 7))
    assert wrong.reward == 0.0 and "not correct" in wrong.observation


def test_the_wiki_disambiguation_page_in_the_browser(env):
    task = web_wiki.wiki_task(9)  # disambiguated_birth_year
    person = next(
        p for p in task.metadata["world"]["people"]
        if f"link {p['title']!r}" in str(task.reference_solution)
    )  # fmt: skip
    env.reset(task=task)
    act(env, "type_text", element_id="searchbox 'Search'", text=person["name"], press_enter=True)
    ts = act(env, "read")
    assert f"{person['name']} may refer to:" in ts.observation
    ts = act(env, "click", element_id=f"link {person['title']!r}")
    assert (
        f"heading {person['title']!r}" in ts.observation and "StaticText 'Born'" in ts.observation
    )
    assert env.unwrapped.server.site.state()["read"] == [person["name"], person["title"]]
