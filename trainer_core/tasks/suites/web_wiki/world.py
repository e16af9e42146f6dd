"""The wiki's world, generated from a seed: a few countries (capital, population, area, currency),
three cities in each (population, year founded, mayor) and the people born in them (occupation,
year of birth), plus near-duplicates, as the lookup suite's decoys: two cities whose name is
another's with a prefix ("New Velmora" beside "Velmora"), and two names borne by two people each,
told apart by their occupation ("Ana Varga (painter)", "Ana Varga (politician)") under a
disambiguation page ("Ana Varga").

Splits share nothing (as the shop, :mod:`trainer_core.tasks.suites.web_shop.catalog`): a split
draws its wiki, country, city and currency names and its people's first names and surnames from
its own third of the pools, and every number (populations, areas, years of birth) is in its own residues
modulo 7, so every numeric answer is too (years of founding are of any residue, but the gap
between two, the only thing asked of them, is the split's). Years of birth and of founding are all
different within one world, so "the oldest" always names one.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import Any

from trainer_core.tasks.suites.web_shop.catalog import allowed, split_pool

WIKI_NAMES = """
Atlaspedia|Gazetteer|Worldbook|Almanack|Compendium|Lexicon|Chronicle|Omnibook|Infopedia
|Mappa Mundi|Codex|Annals|Registry|Thesaurus|Digest
""".replace("\n", "").split("|")
COUNTRIES = """
Arvenia Belmora Cordavia Dunmark Estoria Falvena Galdria Hestovia Istrana Jorvalia Kestria
Lorvania Mardonia Norvessa Ostravia Pellovia Quarnia Rostavia Sarneth Tavoria Ulmeria Valdria
Wenmark Xantria Yelvania Zorvath Althera Brenmoor Calvessa Dravonia Elmaria Fennoria Garvenia
Halmora Irvessa Korthia
""".split()
CITIES = """
Velmora Tarsk Ombrel Kasvik Lunetta Brastow Corvane Dellam Eskar Firnholt Garrow Hanza Ilmar
Jessen Korvel Lysse Marrak Nolde Orvik Pasco Quarrel Rennet Solvang Tibor Udine Varlen Wexford
Yarrow Zellic Amberg Borsk Cavell Dunmere Elsing Ferrin Gorsk Holbeck Ivel Jarrow Kelso Lumm
Merrin Norrick Ossel Pelm Quillan Rusk Sarnow Trevel Umber Vossen Wenlow Yeldham Zorn Arkel
Brede Callon Dorsk Emmerich Falun
""".split()
CURRENCIES = """
crown mark florin ducat thaler real dinar lira peso guilder krona escudo pengo sol riel kuna
lev zloty taler scudo denier groat sovereign noble penny shilling obol talent solidus livre
""".split()
FIRST_NAMES = """
Ana Boris Clara Dmitar Edda Felix Greta Hugo Irena Janos Kira Luka Mira Nils Olga Petra Radu
Sonja Tomas Uma Viktor Wanda Yann Zofia Aron Bela Cilla Danko Erna Frode Gisela Hallam Ines
Jurek Katrin Lajos Malin Nevena Ottar Pavla Rasmus Selma Teodor Vesna Zoltan
""".split()
SURNAMES = """
Varga Holm Petrov Lindgren Moravec Castell Dragan Ekberg Ferenc Grahl Hasek Ivanic Jensen Kovac
Lukas Mazur Nyberg Orsolic Pavlik Quist Rostov Sandor Tamas Urban Vlasic Wessel Zeman Antal
Bergqvist Csonka Dvorak Elling Fodor Gruber Horvat Ilves Jovic Kadar Lorenz Marek Novotny
Ostberg Pirc Rakos Soltesz
""".split()
OCCUPATIONS = ("painter", "chemist", "poet", "architect", "composer", "botanist")
PREFIXES = ("New", "Port", "Upper", "Little")


def _number(rng: random.Random, split: str, low: int, high: int, taken: set[int]) -> int:
    """A number of ``split``'s residues, not yet taken."""
    while True:
        value = rng.randint(low, high)
        if allowed(value, split) and value not in taken:
            taken.add(value)
            return value


def _year(rng: random.Random, taken: set[int]) -> int:
    """A year of founding, not yet taken (any residue: only the gap between two is asked)."""
    while True:
        year = rng.randint(900, 1899)
        if year not in taken:
            taken.add(year)
            return year


def _people(split, rng, cities, count) -> list[dict[str, Any]]:
    """``count`` people born in the cities (mayors first, one per city, none born in the city
    they govern), two names borne twice."""
    firsts = rng.sample(split_pool(FIRST_NAMES, split), 10)
    lasts = rng.sample(split_pool(SURNAMES, split), 10)
    names = rng.sample([f"{f} {s}" for f in firsts for s in lasts], count - 2)
    twins = rng.sample(range(len(cities), count - 2), 2)  # non-mayors whose names come twice
    names += [names[i] for i in twins]
    years: set[int] = set()
    people = []
    for index, name in enumerate(names):
        mayor_of = cities[index]["name"] if index < len(cities) else None
        job = "politician" if mayor_of else rng.choice(OCCUPATIONS)
        if index >= count - 2:  # a twin: another occupation than the first of the name
            first = next(p for p in people if p["name"] == name)
            job = rng.choice([o for o in (*OCCUPATIONS, "politician") if o != first["occupation"]])
        born = rng.choice([c["name"] for c in cities if c["name"] != mayor_of])
        people.append(
            {"name": name, "title": name, "occupation": job, "born_in": born,
             "birth_year": _number(rng, split, 1850, 1999, years), "mayor_of": mayor_of}
        )  # fmt: skip
    for name in {p["name"] for p in people if sum(q["name"] == p["name"] for q in people) > 1}:
        for p in people:
            if p["name"] == name:
                p["title"] = f"{name} ({p['occupation']})"
    return people


def build_world(split: str, rng: random.Random) -> dict[str, Any]:
    """A wiki: ``{"name", "countries", "cities", "people"}``. A country is ``{"name", "capital",
    "population", "area" (km²), "currency"}``; a city ``{"name", "country", "population",
    "founded", "mayor" (a person's title)}``; a person ``{"name", "title", "occupation",
    "born_in", "birth_year", "mayor_of"}``; titles are unique, names are not."""
    names = rng.sample(split_pool(COUNTRIES, split), 4)
    city_names = rng.sample(split_pool(CITIES, split), 12)
    currencies = rng.sample(split_pool(CURRENCIES, split), 4)
    numbers: set[int] = set()
    founded: set[int] = set()
    cities = [
        {"name": city, "country": names[i // 3],
         "population": _number(rng, split, 20_000, 2_500_000, numbers),
         "founded": _year(rng, founded)}
        for i, city in enumerate(city_names)
    ]  # fmt: skip
    for prefix, twin in zip(PREFIXES, rng.sample(cities, 2), strict=False):
        others = [c for c in names if c != twin["country"]]
        cities.append(
            {"name": f"{prefix} {twin['name']}", "country": rng.choice(others),
             "population": _number(rng, split, 20_000, 2_500_000, numbers),
             "founded": _year(rng, founded)}
        )  # fmt: skip
    people = _people(split, rng, cities, len(cities) + 8)
    for city, mayor in zip(cities, people, strict=False):
        city["mayor"] = mayor["title"]
    countries = [
        {"name": name, "capital": city_names[3 * i + rng.randrange(3)],
         "population": _number(rng, split, 1_000_000, 60_000_000, numbers),
         "area": _number(rng, split, 5_000, 400_000, numbers), "currency": currencies[i]}
        for i, name in enumerate(names)
    ]  # fmt: skip
    return {
        "name": rng.choice(split_pool(WIKI_NAMES, split)),
        "countries": countries,
        "cities": sorted(cities, key=lambda c: c["name"]),
        "people": sorted(people, key=lambda p: p["title"]),
    }


def index(world: Mapping[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every article's title -> (kind, record): ``country``, ``city``, ``person``."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for kind, key in (("country", "countries"), ("city", "cities"), ("person", "people")):
        for record in world[key]:
            out[record["title" if kind == "person" else "name"]] = (kind, record)
    return out


def slug(title: str) -> str:
    """A title as its URL path names it: spaces as underscores."""
    return title.replace(" ", "_")
