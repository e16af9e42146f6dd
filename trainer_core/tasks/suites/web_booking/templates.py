"""The booking site's task templates: each builds, from a world and a random stream, a prompt,
what is checked (the bookings at the end, or an answer) and the reference solution, which targets
elements by role and name (``combobox 'Party size'``, ``link 'Book 19:30'``, ``button 'Cancel
booking BK10042'``) as the shop's do (:mod:`trainer_core.tasks.suites.web_shop.templates`).

Booking templates are checked by ``final_state`` on the site's ``{"bookings": {...}}``
(:class:`~.site.BookingSite`); ``book_report_ref`` must also state the new booking's reference,
and ``dinner_cost`` is an answer (checker ``number``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trainer_core.tasks.model import ToolCall
from trainer_core.tasks.suites.web_booking.site import SORTS, BookingSite
from trainer_core.tasks.suites.web_booking.world import NOTES, customer, slot_key
from trainer_core.tasks.suites.web_shop.catalog import allowed, euros
from trainer_core.tasks.suites.web_shop.templates import Unsuitable, click, q, select, submit
from trainer_core.tasks.suites.web_shop.templates import type_text as type_into


@dataclass
class Draft:
    prompt: str
    reference: list[ToolCall]
    answer: str | None = None
    checker: str = "final_state"
    bookings: list[dict[str, Any]] = field(default_factory=list)  # those the episode starts with
    expected: dict[str, Any] | None = None  # the site's state at the end
    required_outputs: list[str] = field(default_factory=list)


# --- reference steps ------------------------------------------------------------------------------


def search_steps(location: str, date: str, party: int, sort: str = "") -> list[ToolCall]:
    steps = [
        select("combobox 'Location'", location or "All locations", "Choose the location."),
        select("combobox 'Date'", date, f"Choose {date}."),
        select("combobox 'Party size'", str(party), f"A table for {party}."),
    ]
    if sort:
        steps.append(select("combobox 'Sort'", SORTS[sort], f"Sort by {SORTS[sort].lower()}."))
    steps.append(click("button 'Search tables'", "Search for tables."))
    return steps


def book_steps(r: Mapping[str, Any], time: str, who: Mapping[str, str], notes: str = ""):
    steps = [
        click(f"link {q(r['name'])}", f"Open {r['name']}."),
        click(f"link 'Book {time}'", f"Take the {time} table."),
        type_into("textbox 'Full name'", who["name"], "Fill in the name."),
        type_into("textbox 'Email'", who["email"], "Fill in the email address."),
        type_into("textbox 'Phone'", who["phone"], "Fill in the phone number."),
    ]
    if notes:
        steps.append(type_into("textbox 'Notes'", notes, "Add the note."))
    steps.append(click("button 'Confirm booking'", "Confirm the booking."))
    return steps


def contact_text(who: Mapping[str, str]) -> str:
    return f"under the name {who['name']} (email {who['email']}, phone {who['phone']})"


def with_booking(site: BookingSite, r, date, time, party, who, notes="") -> dict[str, Any]:
    """The site's state with one more booking."""
    state = site.state()
    state["bookings"][slot_key(r["id"], date, time)] = {
        "party": party, "name": who["name"], "email": who["email"], "phone": who["phone"],
        "notes": notes,
    }  # fmt: skip
    state["bookings"] = dict(sorted(state["bookings"].items()))
    return state


def _free_table(site: BookingSite, rng: random.Random, restaurants=None):
    """A restaurant, a date, a free time there and a party it seats."""
    options = [
        (r, d, t)
        for r in restaurants or site.restaurants.values()
        for d in site.world["dates"]
        for t in site.free_times(r, d)
    ]
    if not options:
        raise Unsuitable("no free table")
    r, date, time = rng.choice(options)
    return r, date, time, rng.randint(1, r["max_party"])


# --- booking templates ----------------------------------------------------------------------------


def book_named(world, rng, split) -> Draft:
    site, who = BookingSite(world), customer(split, rng)
    r, date, time, party = _free_table(site, rng)
    return Draft(
        prompt=f"Book a table for {party} at {r['name']} in {r['location']} on {date} at {time}, "
        f"{contact_text(who)}, then submit.",
        reference=[*search_steps(r["location"], date, party), *book_steps(r, time, who), submit()],
        expected=with_booking(site, r, date, time, party, who),
    )


def book_with_notes(world, rng, split) -> Draft:
    site, who, notes = BookingSite(world), customer(split, rng), rng.choice(NOTES)
    r, date, time, party = _free_table(site, rng)
    return Draft(
        prompt=f"Reserve {r['name']} ({r['location']}) for {party} on {date} at {time} "
        f"{contact_text(who)}, with the note {notes!r}, then submit.",
        reference=[
            *search_steps(r["location"], date, party),
            *book_steps(r, time, who, notes),
            submit(),
        ],
        expected=with_booking(site, r, date, time, party, who, notes),
    )


def book_best_rated(world, rng, split) -> Draft:
    site, who = BookingSite(world), customer(split, rng)
    location, date = rng.choice(world["locations"]), rng.choice(world["dates"])
    time, party = rng.choice(sorted({t for r in world["restaurants"] for t in r["times"]})), 2
    fits = [
        r
        for r in site.restaurants.values()
        if r["location"] == location and time in site.free_times(r, date)
    ]
    if len(fits) < 2:
        raise Unsuitable("too few restaurants with that table")
    party = rng.randint(1, min(r["max_party"] for r in fits))
    best = max(fits, key=lambda r: r["rating"])
    return Draft(
        prompt=f"Book a table for {party} on {date} at {time} at the best-rated restaurant in "
        f"{location} that has a free table then, {contact_text(who)}, then submit.",
        reference=[
            *search_steps(location, date, party, "rating_desc"),
            *book_steps(best, time, who),
            submit(),
        ],
        expected=with_booking(site, best, date, time, party, who),
    )


def book_cheapest_cuisine(world, rng, split) -> Draft:
    site, who = BookingSite(world), customer(split, rng)
    date, party = rng.choice(world["dates"]), rng.randint(2, 4)
    by_cuisine: dict[str, list] = {}
    for r in site.restaurants.values():
        if r["max_party"] >= party and site.free_times(r, date):
            by_cuisine.setdefault(r["cuisine"], []).append(r)
    options = sorted(c for c, rs in by_cuisine.items() if len(rs) >= 2)
    if not options:
        raise Unsuitable("no cuisine with two restaurants free that day")
    cuisine = rng.choice(options)
    r = min(by_cuisine[cuisine], key=lambda r: r["price"])
    time = site.free_times(r, date)[0]
    return Draft(
        prompt=f"Book the cheapest {cuisine} restaurant (any location, by price per person) that "
        f"has a free table for {party} on {date}, at its earliest free time that day, "
        f"{contact_text(who)}, then submit.",
        reference=[
            *search_steps("", date, party, "price_asc"),
            *book_steps(r, time, who),
            submit(),
        ],
        expected=with_booking(site, r, date, time, party, who),
    )


def book_earliest(world, rng, split) -> Draft:
    site, who = BookingSite(world), customer(split, rng)
    r, date, _, party = _free_table(site, rng)
    time = site.free_times(r, date)[0]
    return Draft(
        prompt=f"Book the earliest free table at {r['name']} on {date} for {party}, "
        f"{contact_text(who)}, then submit.",
        reference=[*search_steps(r["location"], date, party), *book_steps(r, time, who), submit()],
        expected=with_booking(site, r, date, time, party, who),
    )


def book_report_ref(world, rng, split) -> Draft:
    site, who = BookingSite(world), customer(split, rng)
    r, date, time, party = _free_table(site, rng)
    ref = f"BK{world['next_ref']}"
    return Draft(
        prompt=f"Book a table for {party} at {r['name']} on {date} at {time}, "
        f"{contact_text(who)}, then submit the booking reference the site gives you.",
        reference=[
            *search_steps(r["location"], date, party),
            *book_steps(r, time, who),
            submit(ref),
        ],
        expected=with_booking(site, r, date, time, party, who),
        required_outputs=[ref],
    )


# --- my bookings ----------------------------------------------------------------------------------


def _existing(world, rng, split, count: int) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """``count`` bookings the user already holds, at different restaurants."""
    site, who = BookingSite(world), customer(split, rng)
    bookings: list[dict[str, Any]] = []
    for k, r in enumerate(rng.sample(list(site.restaurants.values()), count), start=1):
        r, date, time, party = _free_table(site, rng, [r])
        ref = f"BK{world['next_ref'] - 3 * k}"
        bookings.append(
            {"ref": ref, "restaurant": r["id"], "date": date, "time": time, "party": party,
             "name": who["name"], "email": who["email"], "phone": who["phone"], "notes": ""}
        )  # fmt: skip
        site = BookingSite(world, bookings)
    return bookings, who


def cancel_booking(world, rng, split) -> Draft:
    bookings, _ = _existing(world, rng, split, 2)
    gone, kept = bookings
    r = BookingSite(world).restaurants[gone["restaurant"]]
    return Draft(
        prompt=f"Cancel my booking at {r['name']} on {gone['date']} and keep the other one, then "
        "submit.",
        reference=[
            click("link 'My bookings (2)'", "Open my bookings."),
            click(f"button 'Cancel booking {gone['ref']}'", f"Cancel the {r['name']} booking."),
            submit(),
        ],
        bookings=bookings,
        expected=BookingSite(world, [kept]).state(),
    )


def change_party(world, rng, split) -> Draft:
    bookings, _ = _existing(world, rng, split, 2)
    b = bookings[0]
    r = BookingSite(world).restaurants[b["restaurant"]]
    new = rng.choice([p for p in range(1, r["max_party"] + 1) if p != b["party"]])
    changed = [{**b, "party": new}, bookings[1]]
    return Draft(
        prompt=f"We will be {new} at my {r['name']} booking on {b['date']} at {b['time']}. Change "
        "the party size of that booking, then submit.",
        reference=[
            click("link 'My bookings (2)'", "Open my bookings."),
            click(f"link 'Change booking {b['ref']}'", "Change that booking."),
            select("combobox 'Party size'", str(new), f"{new} people."),
            click("button 'Save changes'", "Save."),
            submit(),
        ],
        bookings=bookings,
        expected=BookingSite(world, changed).state(),
    )


def move_booking(world, rng, split) -> Draft:
    bookings, _ = _existing(world, rng, split, 1)
    b = bookings[0]
    site = BookingSite(world, bookings)
    r = site.restaurants[b["restaurant"]]
    options = [(d, t) for d in world["dates"] if d != b["date"] for t in site.free_times(r, d)]
    if not options:
        raise Unsuitable("nowhere to move")
    date, time = rng.choice(options)
    moved = [{**b, "date": date, "time": time}]
    return Draft(
        prompt=f"Move my booking at {r['name']} from {b['date']} at {b['time']} to {date} at "
        f"{time}, keeping the party size, then submit.",
        reference=[
            click("link 'My bookings (1)'", "Open my bookings."),
            click(f"link 'Change booking {b['ref']}'", "Change that booking."),
            select("combobox 'Date'", date, f"Move it to {date}."),
            select("combobox 'Time'", time, f"At {time}."),
            click("button 'Save changes'", "Save."),
            submit(),
        ],
        bookings=bookings,
        expected=BookingSite(world, moved).state(),
    )


# --- an answer ------------------------------------------------------------------------------------


def dinner_cost(world, rng, split) -> Draft:
    site = BookingSite(world)
    location = rng.choice(world["locations"])
    best = max(
        (r for r in world["restaurants"] if r["location"] == location), key=lambda r: r["rating"]
    )
    dates = [d for d in world["dates"] if site.free_times(best, d)]
    parties = [p for p in range(2, best["max_party"] + 1) if allowed(p * best["price"], split)]
    if not dates or not parties:
        raise Unsuitable("no allowed total")
    party = rng.choice(parties)
    total = euros(party * best["price"])
    return Draft(
        prompt=f"What would dinner for {party} cost at the best-rated restaurant in {location}, "
        "at its price per person? Submit the amount in euros as a number, e.g. 123.45.",
        reference=[
            *search_steps(location, dates[0], 1, "rating_desc"),
            click(f"link {q(best['name'])}", "Open the best-rated one."),
            submit(total),
        ],
        answer=total,
        checker="number",
    )


Template = Callable[[Mapping[str, Any], random.Random, str], Draft]
#: name -> template, in the order seeds cycle through them (seed % len(TEMPLATES))
TEMPLATES: dict[str, Template] = {
    "book_named": book_named,
    "cancel_booking": cancel_booking,
    "book_best_rated": book_best_rated,
    "dinner_cost": dinner_cost,
    "book_with_notes": book_with_notes,
    "change_party": change_party,
    "book_cheapest_cuisine": book_cheapest_cuisine,
    "move_booking": move_booking,
    "book_earliest": book_earliest,
    "book_report_ref": book_report_ref,
}
