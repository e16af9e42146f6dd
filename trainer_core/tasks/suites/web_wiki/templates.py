"""The wiki's task templates: questions whose answer takes following two to four links from the
article a search finds (the population of the capital of the country where someone was born),
through disambiguation pages and past near-duplicate titles. Each builds, from a world and a
random stream, a prompt, the answer and the reference solution, which targets elements by role
and name (``link 'Velmora'``) as the shop's do (:mod:`trainer_core.tasks.suites.web_shop.templates`).

Numeric answers (populations, areas, years) are checked by ``number``, names by ``exact`` (case
and spacing ignored).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from trainer_core.tasks.model import ToolCall
from trainer_core.tasks.suites.web_shop.catalog import allowed
from trainer_core.tasks.suites.web_shop.templates import Unsuitable, click, q, submit
from trainer_core.tasks.suites.web_shop.templates import type_text as type_into
from trainer_core.tasks.suites.web_wiki.site import WikiSite


@dataclass
class Draft:
    prompt: str
    reference: list[ToolCall]
    answer: str
    checker: str = "number"


class Wiki:
    """A world's records by name, for the templates."""

    def __init__(self, world: Mapping[str, Any]):
        self.world = world
        self.country = {c["name"]: c for c in world["countries"]}
        self.city = {c["name"]: c for c in world["cities"]}
        self.person = {p["title"]: p for p in world["people"]}
        self.site = WikiSite(world)

    def who(self, p: Mapping[str, Any]) -> str:
        """How a prompt names a person: the name, with the occupation when the name is shared."""
        return p["name"] if p["title"] == p["name"] else f"{p['name']} (the {p['occupation']})"

    def birth_country(self, p: Mapping[str, Any]) -> dict[str, Any]:
        return self.country[self.city[p["born_in"]]["country"]]


def search(title: str) -> list[ToolCall]:
    return [
        type_into("searchbox 'Search'", title, f"Search for {title}."),
        click("button 'Search'", "Run the search."),
    ]


def open_person(p: Mapping[str, Any]) -> list[ToolCall]:
    """Search a person's name, through the disambiguation page when the name is shared."""
    steps = search(p["name"])
    if p["title"] != p["name"]:
        steps.append(click(f"link {q(p['title'])}", f"The {p['occupation']} is the one asked."))
    return steps


def follow(title: str, why: str) -> ToolCall:
    return click(f"link {q(title)}", why)


# --- templates ------------------------------------------------------------------------------------


def capital_population(world, rng, split) -> Draft:
    w = Wiki(world)
    c = rng.choice(world["countries"])
    answer = str(w.city[c["capital"]]["population"])
    return Draft(
        prompt=f"What is the population of the capital of {c['name']}? Submit the number.",
        reference=[
            *search(c["name"]),
            follow(c["capital"], "Open the capital."),
            submit(answer),
        ],
        answer=answer,
    )


def birthplace_population(world, rng, split) -> Draft:
    w = Wiki(world)
    p = rng.choice(world["people"])
    answer = str(w.city[p["born_in"]]["population"])
    return Draft(
        prompt=f"What is the population of the city where {w.who(p)} was born? Submit the number.",
        reference=[*open_person(p), follow(p["born_in"], "Open the birthplace."), submit(answer)],
        answer=answer,
    )


def birth_country_capital_population(world, rng, split) -> Draft:
    w = Wiki(world)
    options = [p for p in world["people"] if w.birth_country(p)["capital"] != p["born_in"]]
    p = rng.choice(options)
    country = w.birth_country(p)
    answer = str(w.city[country["capital"]]["population"])
    return Draft(
        prompt=f"What is the population of the capital of the country where {w.who(p)} was "
        "born? Submit the number.",
        reference=[
            *open_person(p),
            follow(p["born_in"], "Open the birthplace."),
            follow(country["name"], "Open its country."),
            follow(country["capital"], "Open the capital."),
            submit(answer),
        ],
        answer=answer,
    )


def birth_country_currency(world, rng, split) -> Draft:
    w = Wiki(world)
    p = rng.choice(world["people"])
    country = w.birth_country(p)
    return Draft(
        prompt=f"What is the currency of the country where {w.who(p)} was born? Submit its name.",
        reference=[
            *open_person(p),
            follow(p["born_in"], "Open the birthplace."),
            follow(country["name"], "Open its country."),
            submit(country["currency"]),
        ],
        answer=country["currency"],
        checker="exact",
    )


def mayor_birth_year(world, rng, split) -> Draft:
    w = Wiki(world)
    c = rng.choice(world["cities"])
    answer = str(w.person[c["mayor"]]["birth_year"])
    return Draft(
        prompt=f"In what year was the mayor of {c['name']} born? Submit the year.",
        reference=[*search(c["name"]), follow(c["mayor"], "Open the mayor."), submit(answer)],
        answer=answer,
    )


def capital_mayor(world, rng, split) -> Draft:
    w = Wiki(world)
    options = [
        c
        for c in world["countries"]
        if w.person[w.city[c["capital"]]["mayor"]]["title"]
        == w.person[w.city[c["capital"]]["mayor"]]["name"]
    ]
    if not options:
        raise Unsuitable("every capital's mayor shares a name")
    c = rng.choice(options)
    mayor = w.city[c["capital"]]["mayor"]
    return Draft(
        prompt=f"Who is the mayor of the capital of {c['name']}? Submit the full name.",
        reference=[*search(c["name"]), follow(c["capital"], "Open the capital."), submit(mayor)],
        answer=mayor,
        checker="exact",
    )


def founded_gap(world, rng, split) -> Draft:
    pairs = [
        (a, b)
        for a in world["cities"]
        for b in world["cities"]
        if a["founded"] < b["founded"] and allowed(b["founded"] - a["founded"], split)
    ]
    if not pairs:
        raise Unsuitable("no pair with an allowed gap")
    a, b = rng.choice(pairs)
    if rng.random() < 0.5:
        first, second = a, b
    else:
        first, second = b, a
    answer = str(b["founded"] - a["founded"])
    return Draft(
        prompt=f"How many years apart were {first['name']} and {second['name']} founded? Submit "
        "the number of years.",
        reference=[*search(first["name"]), *search(second["name"]), submit(answer)],
        answer=answer,
    )


def oldest_in_category(world, rng, split) -> Draft:
    w = Wiki(world)
    options = [
        f"People from {c['name']}"
        for c in world["countries"]
        if 3 <= len(w.site.categories.get(f"People from {c['name']}", [])) <= 10
    ]
    if not options:
        raise Unsuitable("no category of three to ten")
    category = rng.choice(options)
    members = [w.person[t] for t in w.site.categories[category]]
    oldest = min(members, key=lambda p: p["birth_year"])
    if oldest["title"] != oldest["name"]:
        raise Unsuitable("the oldest shares a name")
    steps = [follow(category, f"Open the category {category}.")]
    for p in members:
        steps += [follow(p["title"], "Read the year of birth."), ToolCall(tool="go_back",
                  params={}, thought="Back to the category.")]  # fmt: skip
    return Draft(
        prompt=f"Of the people in the category {category!r}, who was born first? Submit the "
        "full name.",
        reference=[*steps, submit(oldest["name"])],
        answer=oldest["name"],
        checker="exact",
    )


def mayor_birth_country_area(world, rng, split) -> Draft:
    w = Wiki(world)
    c = rng.choice(world["cities"])
    mayor = w.person[c["mayor"]]
    country = w.birth_country(mayor)
    answer = str(country["area"])
    return Draft(
        prompt=f"What is the area, in km², of the country where the mayor of {c['name']} was "
        "born? Submit the number.",
        reference=[
            *search(c["name"]),
            follow(mayor["title"], "Open the mayor."),
            follow(mayor["born_in"], "Open the mayor's birthplace."),
            follow(country["name"], "Open its country."),
            submit(answer),
        ],
        answer=answer,
    )


def disambiguated_birth_year(world, rng, split) -> Draft:
    p = rng.choice([p for p in world["people"] if p["title"] != p["name"]])
    answer = str(p["birth_year"])
    return Draft(
        prompt=f"In what year was {p['name']}, the {p['occupation']}, born? Submit the year.",
        reference=[*open_person(p), submit(answer)],
        answer=answer,
    )


Template = Callable[[Mapping[str, Any], random.Random, str], Draft]
#: name -> template, in the order seeds cycle through them (seed % len(TEMPLATES))
TEMPLATES: dict[str, Template] = {
    "capital_population": capital_population,
    "birthplace_population": birthplace_population,
    "birth_country_capital_population": birth_country_capital_population,
    "birth_country_currency": birth_country_currency,
    "mayor_birth_year": mayor_birth_year,
    "capital_mayor": capital_mayor,
    "founded_gap": founded_gap,
    "oldest_in_category": oldest_in_category,
    "mayor_birth_country_area": mayor_birth_country_area,
    "disambiguated_birth_year": disambiguated_birth_year,
}
