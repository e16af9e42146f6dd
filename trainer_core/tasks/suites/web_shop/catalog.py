"""The shop's catalog, generated from a seed: a few categories of products by a handful of brands,
with prices, ratings and stock.

Splits share nothing (as ``trainer_core.tasks.suites.lookup``): a split draws its shop names, brands and
model names from its own third of the pools (every third name from its index on), its product ids are ``split index`` mod 3, and every number a split can ask about (a price
in cents, a rating times ten, a count, a total) is in its own residues modulo 7
(:data:`ANSWER_RESIDUES`). Within one shop prices are all different and the ratings of a
category are all different, so "the cheapest", "the best-rated" and "the most expensive under X"
always name one product.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from typing import Any

# split -> (first seed, last seed exclusive)
SPLITS: dict[str, tuple[int, int]] = {
    "train": (0, 1_000_000),
    "validation": (1_000_000, 2_000_000),
    "test": (2_000_000, 3_000_000),
}
SPLIT_INDEX = {name: index for index, name in enumerate(SPLITS)}
ANSWER_MODULUS = 7
ANSWER_RESIDUES: dict[str, tuple[int, ...]] = {
    "train": (0, 1, 2),
    "validation": (3, 4),
    "test": (5, 6),
}

#: category (as the shop lists it) -> (one product's noun, cheapest and dearest price in euros)
CATEGORIES: dict[str, tuple[str, int, int]] = {
    "Kettles": ("Kettle", 19, 129),
    "Headphones": ("Headphones", 25, 349),
    "Backpacks": ("Backpack", 29, 219),
    "Desk lamps": ("Desk Lamp", 15, 149),
    "Blenders": ("Blender", 35, 299),
    "Tents": ("Tent", 79, 649),
    "Monitors": ("Monitor", 109, 899),
    "Running shoes": ("Running Shoes", 39, 229),
    "Coffee grinders": ("Coffee Grinder", 22, 259),
    "Bike helmets": ("Bike Helmet", 24, 189),
}
BRANDS = """
Norda Velka Quorra Brisk Altamo Corvid Lumen Pellet Tarvo Ostrand Minka Zephra Halden Rovik Sable
Kestrel Fjala Obrio Tundra Vireo Marlo Cindra Aurik Bexley Dovetail Emberly Forsa Galvo Heron Isko
Jarra Koto Lirra Mosso Nivo Orla Pavo Quill Rhea Solvi Tamsin Ulla Varda Wren Yoka
""".split()
MODELS = """
Arc Nova Pulse Vista Echo Drift Summit Orbit Zen Flux Prism Crest Glide Spark Terra Wave Aero Bolt
Core Dune Ember Frost Grove Halo Iris Jade Karma Lark Mesa Nimbus Onyx Peak Quest Ridge Sol Tide
Umbra Vale Whirl Xeno Yield Zest Atlas Bloom Cinder Delta Flare Gale Haven Inlet Juno Kite Loom
Maple Nectar Opal Pilot Quartz Rover Sage
""".split()
SHOP_NAMES = """
Northwind Store|Harbour Goods|Meadow Market|Summit Supply|Copper Lane|Birch & Bolt|Lantern Row
|Tidewater Trading|Foxglove Emporium|Granite Works|Willow Street Shop|Amber Outlet|Pinecone Depot
|Bluebell Bazaar|Kettle & Key
""".replace("\n", "").split("|")

PRODUCT_FIELDS = ("id", "name", "brand", "category", "price", "rating", "stock")


def split_pool(names: list[str], split: str) -> list[str]:
    """The split's third of a name pool: every third name from the split's index on."""
    return list(names[SPLIT_INDEX[split] :: len(SPLITS)])


def allowed(value: int, split: str) -> bool:
    """Whether a number (cents, rating x10, count) may appear as an answer of ``split``."""
    return value % ANSWER_MODULUS in ANSWER_RESIDUES[split]


def euros(cents: int) -> str:
    """Cents as the shop shows them without the sign: 2499 -> '24.99'."""
    return f"{cents // 100}.{cents % 100:02d}"


def rating_text(tenths: int) -> str:
    return f"{tenths // 10}.{tenths % 10}"


def _price(rng: random.Random, split: str, low: int, high: int, taken: set[int]) -> int:
    while True:
        cents = rng.randint(low, high) * 100 + rng.choice((0, 49, 90, 95, 99, 50, 25, 75, 19, 59))
        if allowed(cents, split) and cents not in taken:
            taken.add(cents)
            return cents


def _rating(rng: random.Random, split: str, taken: set[int]) -> int:
    while True:
        tenths = rng.randint(21, 50)
        if allowed(tenths, split) and tenths not in taken:
            taken.add(tenths)
            return tenths


def build_catalog(
    split: str, rng: random.Random, *, per_category: tuple[int, int] = (5, 8)
) -> dict[str, Any]:
    """A shop: ``{"name", "categories": [...], "brands": [...], "products": [...]}``. Each product
    is ``{"id", "name", "brand", "category", "price" (cents), "rating" (tenths), "stock"
    (bool)}``; names are unique, ids are 4-digit strings whose number is ``split index`` mod 3."""
    categories = rng.sample(sorted(CATEGORIES), 4)
    brands = rng.sample(split_pool(BRANDS, split), 5)
    models = split_pool(MODELS, split)
    products: list[dict[str, Any]] = []
    prices: set[int] = set()
    ids: set[int] = set()
    names: set[str] = set()
    for category in categories:
        noun, low, high = CATEGORIES[category]
        ratings: set[int] = set()
        for _ in range(rng.randint(*per_category)):
            while True:
                brand, model = rng.choice(brands), rng.choice(models)
                name = f"{brand} {model} {noun}"
                if name not in names:
                    names.add(name)
                    break
            while True:
                number = rng.randrange(1000, 10000)
                if number % len(SPLITS) == SPLIT_INDEX[split] and number not in ids:
                    ids.add(number)
                    break
            products.append(
                {
                    "id": str(number),
                    "name": name,
                    "brand": brand,
                    "category": category,
                    "price": _price(rng, split, low, high, prices),
                    "rating": _rating(rng, split, ratings),
                    "stock": rng.random() < 0.75,
                }
            )
    return {
        "name": rng.choice(split_pool(SHOP_NAMES, split)),
        "categories": categories,
        "brands": sorted(brands),
        "products": products,
    }


def by_id(catalog: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["id"]: p for p in catalog["products"]}


def in_category(catalog: Mapping[str, Any], category: str) -> list[dict[str, Any]]:
    return [p for p in catalog["products"] if p["category"] == category]


def cheapest(products: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return min(products, key=lambda p: p["price"], default=None)


def best_rated(products: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return max(products, key=lambda p: p["rating"], default=None)
