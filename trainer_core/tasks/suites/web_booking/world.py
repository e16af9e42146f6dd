"""The booking site's world, generated from a seed: restaurants in a few neighbourhoods, with
cuisines, ratings, prices per person, the largest party they seat, their sitting times and the
sittings already full on the bookable dates; and the people who book.

Splits share nothing (as the shop, :mod:`trainer_core.tasks.suites.web_shop.catalog`): a split
draws its site names, neighbourhoods, restaurant names and customers' names from its own third
of the pools, its restaurant ids, booking references and phone numbers are ``split index`` mod 3,
its dates lie in its own year (2031 + split index), and every number a split can ask about (a
price in cents, a rating times ten) is in its own residues modulo 7. Within one site prices are all
different and so are the ratings within a neighbourhood, so "the cheapest" and "the best-rated
in <neighbourhood>" always name one restaurant.
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Mapping
from typing import Any

from trainer_core.tasks.suites.web_shop.catalog import SPLIT_INDEX, SPLITS, allowed, split_pool

SITE_NAMES = """
TableTime|Dine Finder|Forkful|Booked Up|Supper Club|Seat Me|Plate Planner|Evening Table
|Reserve Row|Open Chair|Corner Booth|Good Table|Napkin Notes|Tablecloth|Dinner Desk
""".replace("\n", "").split("|")
LOCATIONS = """
Old Harbour|Riverside|Market Square|Hillcrest|Canal Quarter|Northgate|Elm Park|Westbank
|Castle Hill|Station Row|Saltmarsh|Brewery Lane|Greenhithe|Fennel Fields|Abbey Green|Quayside
|Tannery Yard|Lark Rise|Mill End|Orchard Vale|Cobble Walk|Bell Street|Foundry Row|Heath End
|Kingsmead|Lockside|Mariner Bay|Poplar Cross|Ropewalk|Sandgate
""".replace("\n", "").split("|")
RESTAURANT_WORDS = """
Olive Saffron Juniper Ember Basil Fig Clove Sorrel Thyme Anise Cardamom Quince Plum Laurel
Tamarind Nutmeg Pepper Sage Fennel Rosemary Chicory Mace Dill Caper Ginger Lovage Mint Borage
Chive Cumin Paprika Sumac Vanilla Walnut Hazel Almond Cobnut Bramble Damson Medlar Rowan Sloe
Elder Yarrow Tarragon
""".split()
KINDS = ("Kitchen", "Bistro", "Table", "Trattoria", "Brasserie", "Dining Room", "Canteen", "House")
CUISINES = ("Italian", "Japanese", "Indian", "Mexican", "Greek", "Thai", "French", "Lebanese")
TIMES = ("12:00", "13:30", "18:00", "19:30", "21:00")
FIRST_NAMES = """
Amara Bruno Celia Dario Elin Farah Gideon Hana Ivo Jolene Kasimir Leona Matteo Nadia Oskar Priya
Quentin Rosa Soren Talia Ugo Vera Wim Xenia Yusuf Zora Anouk Bastian Cosima Dmitri Esme Florin
Greta Hector Ilse Jasper Katya Lorcan Mirela Niko Orla Pascal Rhiannon Silas Tove
""".split()
SURNAMES = """
Abernethy Bellamy Castellano Dunmore Eriksen Falkner Galloway Hollis Ingram Jessup Kowalczyk
Lindqvist Marchetti Novak Okafor Pemberton Quayle Rasmussen Sandoval Thorne Ulrich Vasquez
Whitlock Yardley Zeller Ashcombe Brandt Calloway Delacroix Eastwood Fairweather Gundersen
Hartigan Iversen Jaramillo Kellerman Lachance Mortensen Nakamura Oyelaran Prescott Rinaldi
Sorensen Trevino Underhill
""".split()
DOMAINS = ("example.com", "example.org", "example.net")
NOTES = (
    "A table by the window, please.",
    "One of us is vegetarian.",
    "We are celebrating a birthday.",
    "We will bring a baby stroller.",
    "A quiet table, please.",
    "One guest uses a wheelchair.",
)


def _split_number(rng: random.Random, split: str, low: int, high: int, taken: set[int]) -> int:
    while True:
        number = rng.randrange(low, high)
        if number % len(SPLITS) == SPLIT_INDEX[split] and number not in taken:
            taken.add(number)
            return number


def _allowed_value(rng: random.Random, split: str, low: int, high: int, taken: set[int]) -> int:
    while True:
        value = rng.randint(low, high)
        if allowed(value, split) and value not in taken:
            taken.add(value)
            return value


def _price(rng: random.Random, split: str, taken: set[int]) -> int:
    """A price per person in cents, allowed in ``split`` and not yet taken."""
    while True:
        cents = rng.randint(18, 85) * 100 + rng.choice((0, 50, 90))
        if allowed(cents, split) and cents not in taken:
            taken.add(cents)
            return cents


def split_dates(split: str, rng: random.Random, count: int = 4) -> list[str]:
    """``count`` consecutive ISO dates in the split's own year."""
    first = datetime.date(2031 + SPLIT_INDEX[split], rng.randint(1, 12), rng.randint(1, 24))
    return [(first + datetime.timedelta(days=i)).isoformat() for i in range(count)]


def build_world(split: str, rng: random.Random) -> dict[str, Any]:
    """A booking site: ``{"name", "locations", "dates", "restaurants": [...], "next_ref"}``. A
    restaurant is ``{"id", "name", "location", "cuisine", "rating" (tenths), "price" (cents per
    person), "max_party", "times", "full": ["<date> <time>", ...]}``."""
    locations = rng.sample(split_pool(LOCATIONS, split), 3)
    dates = split_dates(split, rng)
    words = rng.sample(split_pool(RESTAURANT_WORDS, split), 9)
    ids: set[int] = set()
    prices: set[int] = set()
    ratings: dict[str, set[int]] = {x: set() for x in locations}  # distinct within a location
    restaurants = []
    for index, word in enumerate(words):
        times = sorted(rng.sample(TIMES, 3))
        slots = [f"{d} {t}" for d in dates for t in times]
        restaurants.append(
            {
                "id": str(_split_number(rng, split, 100, 1000, ids)),
                "name": f"{word} {rng.choice(KINDS)}",
                "location": locations[index % 3],
                "cuisine": rng.choice(CUISINES),
                "rating": _allowed_value(rng, split, 30, 49, ratings[locations[index % 3]]),
                "price": _price(rng, split, prices),
                "max_party": rng.randint(4, 8),
                "times": times,
                "full": sorted(rng.sample(slots, rng.randint(1, 4))),
            }
        )
    return {
        "name": rng.choice(split_pool(SITE_NAMES, split)),
        "locations": sorted(locations),
        "dates": dates,
        "restaurants": sorted(restaurants, key=lambda r: r["name"]),
        "next_ref": _split_number(rng, split, 10000, 50000, set()),
    }


def customer(split: str, rng: random.Random) -> dict[str, str]:
    """A person who books: a name, an email and a phone number of the split's own."""
    first = rng.choice(split_pool(FIRST_NAMES, split))
    last = rng.choice(split_pool(SURNAMES, split))
    phone = _split_number(rng, split, 200_000_000, 999_999_999, set())
    return {
        "name": f"{first} {last}",
        "email": f"{first}.{last}@{rng.choice(DOMAINS)}".lower(),
        "phone": f"0{phone}",
    }


def by_id(world: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in world["restaurants"]}


def slot_key(restaurant_id: str, date: str, time: str) -> str:
    """How the site's state names a sitting: ``"<restaurant id> <date> <time>"``."""
    return f"{restaurant_id} {date} {time}"
