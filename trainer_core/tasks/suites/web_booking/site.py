"""The booking site as web pages: plain HTML forms and links, no JavaScript, rendered from a world
(:mod:`.world`) and the bookings, which live in the site object (one site per episode).

Pages::

    GET  /                          the search form: Location, Date, Party size, Search tables
    GET  /search?location=&date=&party=&sort=
                                    the form again (with Sort) and the restaurants with a free
                                    table for the party that day, with their free times
    GET  /restaurant/<id>?date=&party=
                                    a restaurant: cuisine, rating, price per person, the largest
                                    party, and a "Book HH:MM" link per free time
    GET  /book/<id>?date=&time=&party=
                                    the booking form: Party size, Full name, Email, Phone, Notes,
                                    Confirm booking
    POST /book                      -> 303 to /booking/<ref>, or the form again (400) with the
                                    validation errors listed at its top
    GET  /booking/<ref>             the confirmation: the reference and what was booked
    GET  /bookings                  my bookings: per booking "Change booking <ref>" (a link) and
                                    "Cancel booking <ref>" (a button)
    GET  /bookings/<ref>/edit       Date, Time, Party size, Save changes
    POST /bookings/<ref>/edit       -> 303 to /booking/<ref>, or the form again with its errors
    POST /bookings/<ref>/cancel     -> 303 to /bookings

Forms are ``novalidate``: the server checks every field, so a mistake is an observation (the
errors as text), never a browser tooltip. Every page names each control once, so a role and a
name pick one element. ``state()`` is ``{"bookings": {"<restaurant id> <date> <time>": {party,
name, email, phone, notes}}}``: what the checker sees, without the references (a booking made by
mistake and cancelled leaves no trace).
"""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from typing import Any

from trainer_core.tasks.suites.web_booking.world import by_id, slot_key
from trainer_core.tasks.suites.web_shop.catalog import euros, rating_text

Response = tuple[int, dict[str, str], bytes]
PARTY_SIZES = tuple(range(1, 9))
SORTS: dict[str, str] = {
    "name": "Name",
    "rating_desc": "Rating: high to low",
    "price_asc": "Price: low to high",
}
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[A-Za-z]{2,}$")
PHONE = re.compile(r"^\+?[\d\s()-]+$")


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _options(values: list[tuple[str, str]], selected: str) -> str:
    return "".join(
        f'<option value="{_e(v)}"{" selected" if v == selected else ""}>{_e(label)}</option>'
        for v, label in values
    )


def _select(label: str, name: str, values: list[tuple[str, str]], selected: str) -> str:
    return f'<label>{label} <select name="{name}">{_options(values, selected)}</select></label>'


def _party(value: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def clean_contact(form: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """The contact fields as stored (name and notes trimmed, email lower-case, phone digits and a
    leading +) and the validation errors, in the form's order."""
    name = " ".join(form.get("name", "").split())
    email = form.get("email", "").strip().lower()
    phone = form.get("phone", "").strip()
    digits = re.sub(r"\D", "", phone)
    errors = []
    if not name:
        errors.append("Full name: enter the name the table is booked under.")
    if not EMAIL.match(email):
        errors.append("Email: enter a valid email address, like name@example.com.")
    if not PHONE.match(phone) or not 7 <= len(digits) <= 15:
        errors.append("Phone: enter a phone number of 7 to 15 digits.")
    notes = " ".join(form.get("notes", "").split())
    if len(notes) > 200:
        errors.append("Notes: at most 200 characters.")
    plus = "+" if phone.startswith("+") else ""
    return {"name": name, "email": email, "phone": plus + digits, "notes": notes}, errors


class BookingSite:
    """One booking site and its bookings. ``handle`` answers a request; ``state`` is what the
    checker sees."""

    def __init__(self, world: Mapping[str, Any], bookings: list[Mapping[str, Any]] | None = None):
        self.world = world
        self.restaurants = by_id(world)
        self.bookings: dict[str, dict[str, Any]] = {b["ref"]: dict(b) for b in bookings or []}
        self.next_ref = int(world["next_ref"])

    def state(self) -> dict[str, Any]:
        out = {}
        for b in self.bookings.values():
            fields = ("party", "name", "email", "phone", "notes")
            out[slot_key(b["restaurant"], b["date"], b["time"])] = {k: b[k] for k in fields}
        return {"bookings": dict(sorted(out.items()))}

    def free_times(self, restaurant: Mapping[str, Any], date: str, keep: str = "") -> list[str]:
        """The restaurant's free sittings on ``date`` (the booking ``keep`` does not hold one)."""
        taken = {
            b["time"]
            for ref, b in self.bookings.items()
            if b["restaurant"] == restaurant["id"] and b["date"] == date and ref != keep
        }
        full = set(restaurant["full"])
        return [t for t in restaurant["times"] if f"{date} {t}" not in full and t not in taken]

    # --- requests ---------------------------------------------------------------------------

    def handle(
        self, method: str, path: str, query: Mapping[str, str], form: Mapping[str, str]
    ) -> Response:
        parts = path.strip("/").split("/")
        if method == "POST":
            if path == "/book":
                return self._book(form)
            if len(parts) == 3 and parts[0] == "bookings" and parts[1] in self.bookings:
                if parts[2] == "cancel":
                    del self.bookings[parts[1]]
                    return 303, {"Location": "/bookings"}, b""
                if parts[2] == "edit":
                    return self._change(parts[1], form)
            return self._page(404, "Not found", "<h1>Page not found</h1>")
        if method != "GET":
            return self._page(405, "Not allowed", "<p>That is not allowed here.</p>")
        if path == "/":
            return self._page(200, "Find a table", self._home())
        if path == "/search":
            return self._page(200, "Tables", self._search(query))
        if path == "/bookings":
            return self._page(200, "My bookings", self._list())
        if len(parts) == 2 and parts[0] in ("restaurant", "book") and parts[1] in self.restaurants:
            r = self.restaurants[parts[1]]
            if parts[0] == "restaurant":
                return self._page(200, r["name"], self._restaurant(r, query))
            return self._page(200, "Book a table", self._form(r, dict(query), []))
        if len(parts) == 2 and parts[0] == "booking" and parts[1] in self.bookings:
            return self._page(200, "Booking confirmed", self._confirmation(parts[1]))
        if len(parts) == 3 and parts[0] == "bookings" and parts[1] in self.bookings:
            if parts[2] == "edit":
                return self._page(200, "Change booking", self._edit(parts[1], {}, []))
        return self._page(404, "Not found", "<h1>Page not found</h1><p>No such page.</p>")

    def _book(self, form: Mapping[str, str]) -> Response:
        r = self.restaurants.get(form.get("restaurant", ""))
        if r is None:
            return self._page(400, "Unknown restaurant", "<h1>Unknown restaurant</h1>")
        contact, errors = clean_contact(form)
        party, date, time = (
            _party(form.get("party", "")),
            form.get("date", ""),
            form.get("time", ""),
        )
        if not 1 <= party <= r["max_party"]:
            errors.append(f"Party size: {r['name']} seats parties of 1 to {r['max_party']}.")
        if time not in self.free_times(r, date):
            errors.append("Time: that table is no longer free; choose another time.")
        if errors:
            return self._page(400, "Book a table", self._form(r, dict(form), errors))
        ref = f"BK{self.next_ref}"
        self.next_ref += 3  # references stay in the split's residue mod 3
        self.bookings[ref] = {
            "ref": ref, "restaurant": r["id"], "date": date, "time": time, "party": party,
            **contact,
        }  # fmt: skip
        return 303, {"Location": f"/booking/{ref}"}, b""

    def _change(self, ref: str, form: Mapping[str, str]) -> Response:
        booking = self.bookings[ref]
        r = self.restaurants[booking["restaurant"]]
        party, date, time = (
            _party(form.get("party", "")),
            form.get("date", ""),
            form.get("time", ""),
        )
        errors = []
        if date not in self.world["dates"]:
            errors.append("Date: choose one of the dates offered.")
        if not 1 <= party <= r["max_party"]:
            errors.append(f"Party size: {r['name']} seats parties of 1 to {r['max_party']}.")
        if time not in self.free_times(r, date, keep=ref):
            errors.append(f"Time: {r['name']} has no free table at {time} on {date}.")
        if errors:
            return self._page(400, "Change booking", self._edit(ref, form, errors))
        booking.update(date=date, time=time, party=party)
        return 303, {"Location": f"/booking/{ref}"}, b""

    # --- pages ------------------------------------------------------------------------------

    def _page(self, status: int, title: str, main: str) -> Response:
        site = _e(self.world["name"])
        body = (
            f"<!doctype html><html lang=en><head><meta charset=utf-8>"
            f"<title>{_e(title)} — {site}</title></head><body>"
            f'<header><nav><a href="/">Home</a> '
            f'<a href="/bookings">My bookings ({len(self.bookings)})</a></nav></header>'
            f"<main>{main}</main><footer><p>{site}, a Steplab test booking site.</p></footer>"
            f"</body></html>"
        )
        return status, {"Content-Type": "text/html; charset=utf-8"}, body.encode()

    def _search_form(self, query: Mapping[str, str]) -> str:
        locations = [("", "All locations")] + [(x, x) for x in self.world["locations"]]
        dates = [(d, d) for d in self.world["dates"]]
        parties = [(str(p), str(p)) for p in PARTY_SIZES]
        sorter = _select("Sort", "sort", list(SORTS.items()), query.get("sort", "name"))
        return (
            '<form action="/search" method="get" aria-label="Find a table">'
            + _select("Location", "location", locations, query.get("location", ""))
            + _select("Date", "date", dates, query.get("date", self.world["dates"][0]))
            + _select("Party size", "party", parties, query.get("party", "2"))
            + sorter
            + "<button type=submit>Search tables</button></form>"
        )

    def _home(self) -> str:
        count = len(self.restaurants)
        return (
            f"<h1>Book a table with {_e(self.world['name'])}</h1>{self._search_form({})}"
            f"<p>{count} restaurants in {', '.join(map(_e, self.world['locations']))}.</p>"
        )

    def _search(self, query: Mapping[str, str]) -> str:
        location, date = query.get("location", ""), query.get("date", self.world["dates"][0])
        party = _party(query.get("party", "2")) or 2
        found = []
        for r in self.restaurants.values():
            if location and r["location"] != location or r["max_party"] < party:
                continue
            if times := self.free_times(r, date):
                found.append((r, times))
        keys = {
            "rating_desc": lambda x: -x[0]["rating"],
            "price_asc": lambda x: x[0]["price"],
        }
        found.sort(key=keys.get(query.get("sort", ""), lambda x: x[0]["name"]))
        items = "".join(
            f'<li><a href="/restaurant/{r["id"]}?date={date}&amp;party={party}">{_e(r["name"])}</a>'
            f"<p>{_e(r['cuisine'])} · {_e(r['location'])} · €{euros(r['price'])} per person · "
            f"rating {rating_text(r['rating'])} · free at {', '.join(times)}</p></li>"
            for r, times in found
        )
        where = _e(location or "all locations")
        count = f"{len(found)} restaurant{'' if len(found) == 1 else 's'}"
        return (
            f"<h1>Tables for {party} on {_e(date)} in {where}</h1>"
            f"{self._search_form(query)}<p>{count} with a free table</p><ul>{items}</ul>"
        )

    def _restaurant(self, r: Mapping[str, Any], query: Mapping[str, str]) -> str:
        date = query.get("date", "")
        date = date if date in self.world["dates"] else self.world["dates"][0]
        party = _party(query.get("party", "2")) or 2
        times = self.free_times(r, date) if party <= r["max_party"] else []
        links = "".join(
            f'<li><a href="/book/{r["id"]}?date={date}&amp;time={t}&amp;party={party}">Book {t}'
            "</a></li>"
            for t in times
        )
        tables = f"<ul>{links}</ul>" if links else "<p>No free table for this party that day.</p>"
        return (
            f"<h1>{_e(r['name'])}</h1><p>Cuisine: {_e(r['cuisine'])}</p>"
            f"<p>Location: {_e(r['location'])}</p><p>Rating: {rating_text(r['rating'])} out of 5</p>"
            f"<p>Price: €{euros(r['price'])} per person</p>"
            f"<p>Seats parties of up to {r['max_party']}</p>"
            f"<p>Sittings: {', '.join(r['times'])}</p>"
            f"<h2>Free tables for {party} on {_e(date)}</h2>{tables}"
        )

    @staticmethod
    def _errors(errors: list[str]) -> str:
        if not errors:
            return ""
        items = "".join(f"<li>{_e(e)}</li>" for e in errors)
        return f'<div role="alert"><p>Please correct the following:</p><ul>{items}</ul></div>'

    def _form(self, r: Mapping[str, Any], values: Mapping[str, str], errors: list[str]) -> str:
        date, time = values.get("date", ""), values.get("time", "")
        parties = [(str(p), str(p)) for p in PARTY_SIZES]

        def field(label: str, name: str, kind: str) -> str:
            value = _e(values.get(name, ""))
            return f'<label>{label} <input type="{kind}" name="{name}" value="{value}"></label>'

        return (
            f"<h1>Book a table at {_e(r['name'])}</h1>{self._errors(errors)}"
            f"<p>{_e(date)} at {_e(time)}</p>"
            '<form action="/book" method="post" novalidate aria-label="Booking">'
            f'<input type="hidden" name="restaurant" value="{r["id"]}">'
            f'<input type="hidden" name="date" value="{_e(date)}">'
            f'<input type="hidden" name="time" value="{_e(time)}">'
            + _select("Party size", "party", parties, values.get("party", "2"))
            + field("Full name", "name", "text")
            + field("Email", "email", "email")
            + field("Phone", "phone", "tel")
            + f'<label>Notes <textarea name="notes">{_e(values.get("notes", ""))}</textarea>'
            "</label><button type=submit>Confirm booking</button></form>"
        )

    def _details(self, b: Mapping[str, Any]) -> str:
        r = self.restaurants[b["restaurant"]]
        people = f"{b['party']} {'person' if b['party'] == 1 else 'people'}"
        notes = f" · notes: {_e(b['notes'])}" if b["notes"] else ""
        return (
            f"<p>{_e(r['name'])} · {_e(b['date'])} at {_e(b['time'])} · {people} · "
            f"{_e(b['name'])} · {_e(b['email'])} · {_e(b['phone'])}{notes}</p>"
        )

    def _confirmation(self, ref: str) -> str:
        return (
            f"<h1>Booking confirmed</h1><p>Reference: {ref}</p>{self._details(self.bookings[ref])}"
            '<p><a href="/bookings">See all my bookings</a></p>'
        )

    def _list(self) -> str:
        if not self.bookings:
            return "<h1>My bookings</h1><p>You have no bookings.</p>"
        items = "".join(
            f"<li><h2>Booking {ref}</h2>{self._details(b)}"
            f'<a href="/bookings/{ref}/edit">Change booking {ref}</a>'
            f'<form action="/bookings/{ref}/cancel" method="post">'
            f"<button type=submit>Cancel booking {ref}</button></form></li>"
            for ref, b in sorted(self.bookings.items(), key=lambda x: (x[1]["date"], x[1]["time"]))
        )
        return f"<h1>My bookings</h1><ul>{items}</ul>"

    def _edit(self, ref: str, values: Mapping[str, str], errors: list[str]) -> str:
        b = self.bookings[ref]
        r = self.restaurants[b["restaurant"]]
        dates = [(d, d) for d in self.world["dates"]]
        times = [(t, t) for t in r["times"]]
        parties = [(str(p), str(p)) for p in PARTY_SIZES]
        return (
            f"<h1>Change booking {ref}</h1>{self._errors(errors)}{self._details(b)}"
            f'<form action="/bookings/{ref}/edit" method="post" novalidate aria-label="Change">'
            + _select("Date", "date", dates, values.get("date", b["date"]))
            + _select("Time", "time", times, values.get("time", b["time"]))
            + _select("Party size", "party", parties, values.get("party", str(b["party"])))
            + "<button type=submit>Save changes</button></form>"
        )
