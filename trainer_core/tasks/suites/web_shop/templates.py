"""The shop's task templates: each builds, from a catalog and a random stream, a prompt, what is
checked (an answer, or the cart at the end) and the reference solution.

A reference targets elements by role and name as the observation prints them (``link 'Kettles'``,
``combobox 'Brand'``, ``button 'Remove Norda Arc Kettle'``), never by a numeric id: the numbers are
handed out as the page is walked and change with the page, the role and name of an element of the
shop do not (every page names its controls once, :mod:`.site`). The environment resolves such a
description to the element's id; an agent may use either.

Answer templates submit a number (a price in euros, a rating, a count) or a name; cart templates
submit nothing and are checked on the cart (``final_state``); ``cart_total`` is both: the cart, and
the total said in the answer.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from trainer_core.tasks.model import ToolCall
from trainer_core.tasks.suites.web_shop.catalog import (
    CATEGORIES,
    allowed,
    best_rated,
    cheapest,
    euros,
    in_category,
    rating_text,
)
from trainer_core.tasks.suites.web_shop.site import SORTS


class Unsuitable(Exception):
    """This catalog cannot pose the template's question (the caller draws another catalog)."""


@dataclass
class Draft:
    prompt: str
    reference: list[ToolCall]
    answer: str | None = None  # for answer templates
    checker: str = "final_state"
    cart: dict[str, int] = field(default_factory=dict)  # the cart the episode starts with
    expected_cart: dict[str, int] | None = None
    required_outputs: list[str] = field(default_factory=list)


# --- reference steps ------------------------------------------------------------------------------


def click(target: str, thought: str) -> ToolCall:
    return ToolCall(tool="click", params={"element_id": target}, thought=thought)


def select(target: str, value: str, thought: str) -> ToolCall:
    return ToolCall(tool="select", params={"element_id": target, "value": value}, thought=thought)


def type_text(target: str, text: str, thought: str) -> ToolCall:
    return ToolCall(tool="type_text", params={"element_id": target, "text": text}, thought=thought)


def submit(answer: str | None = None) -> ToolCall:
    params = {} if answer is None else {"answer": answer}
    thought = "Submit the answer." if answer is not None else "The cart is right; submit."
    return ToolCall(tool="submit", params=params, thought=thought)


def q(text: str) -> str:
    """How the observation quotes a name."""
    return repr(text)


def open_product(p: Mapping[str, Any]) -> list[ToolCall]:
    return [
        type_text("searchbox 'Search'", p["name"], f"Search for the {p['name']}."),
        click("button 'Search'", "Run the search."),
        click(f"link {q(p['name'])}", "Open its page."),
    ]


def add_to_cart(p: Mapping[str, Any], quantity: int = 1) -> list[ToolCall]:
    steps = []
    if quantity != 1:
        steps.append(select("combobox 'Quantity'", str(quantity), f"Choose {quantity}."))
    steps.append(click("button 'Add to cart'", "Add it to the cart."))
    return steps


def filter_steps(
    category: str, *, brand: str = "", max_price: str = "", in_stock: bool = False, sort: str = ""
) -> list[ToolCall]:
    steps = [click(f"link {q(category)}", f"Open the {category} category.")]
    if brand:
        steps.append(select("combobox 'Brand'", brand, f"Only {brand}."))
    if max_price:
        steps.append(type_text("spinbutton 'Max price (€)'", max_price, "Set the price limit."))
    if in_stock:
        steps.append(click("checkbox 'In stock only'", "Only what is in stock."))
    if sort:
        steps.append(select("combobox 'Sort'", SORTS[sort], f"Sort by {SORTS[sort].lower()}."))
    steps.append(click("button 'Apply filters'", "Apply the filters."))
    return steps


def _noun(category: str) -> str:
    return CATEGORIES[category][0].lower()


def _pick_group(catalog: Mapping[str, Any], rng: random.Random, *, stock_only: bool = False):
    """A category and a brand with at least one product (in stock, when asked)."""
    groups = sorted(
        {(p["category"], p["brand"]) for p in catalog["products"] if p["stock"] or not stock_only}
    )
    if not groups:
        raise Unsuitable("no product")
    category, brand = rng.choice(groups)
    products = [
        p
        for p in in_category(catalog, category)
        if p["brand"] == brand and (p["stock"] or not stock_only)
    ]
    return category, brand, products


def _limit_between(products: list[Mapping[str, Any]], rng: random.Random) -> tuple[int, list]:
    """A whole-euro limit that leaves some of ``products`` (sorted by price) under it."""
    prices = sorted(p["price"] for p in products)
    if len(prices) < 3:
        raise Unsuitable("too few products")
    index = rng.randrange(1, len(prices) - 1)  # a limit between two prices: some above, some under
    limit = (prices[index] // 100) + 1
    if limit * 100 >= prices[index + 1]:
        raise Unsuitable("prices too close")
    return limit, [p for p in products if p["price"] <= limit * 100]


# --- answer templates -----------------------------------------------------------------------------


def cheapest_price(catalog, rng, split) -> Draft:
    category, brand, products = _pick_group(catalog, rng)
    p = cheapest(products)
    noun = _noun(category)
    return Draft(
        prompt=f"What is the price of the cheapest {noun} by {brand}? Submit the price in euros "
        "as a number, e.g. 12.34.",
        reference=[
            *filter_steps(category, brand=brand, sort="price_asc"),
            submit(euros(p["price"])),
        ],
        answer=euros(p["price"]),
        checker="number",
    )


def priciest_under(catalog, rng, split) -> Draft:
    category = rng.choice(catalog["categories"])
    limit, under = _limit_between(in_category(catalog, category), rng)
    p = max(under, key=lambda p: p["price"])
    return Draft(
        prompt=f"Which is the most expensive {_noun(category)} that costs at most €{limit}? "
        "Submit its full name.",
        reference=[
            *filter_steps(category, max_price=str(limit), sort="price_desc"),
            submit(p["name"]),
        ],
        answer=p["name"],
        checker="exact",
    )


def product_rating(catalog, rng, split) -> Draft:
    p = rng.choice(catalog["products"])
    return Draft(
        prompt=f"What is the customer rating of the {p['name']}? Submit the number, e.g. 3.7.",
        reference=[*open_product(p), submit(rating_text(p["rating"]))],
        answer=rating_text(p["rating"]),
        checker="number",
    )


def best_rated_brand(catalog, rng, split) -> Draft:
    category = rng.choice(catalog["categories"])
    p = best_rated(in_category(catalog, category))
    return Draft(
        prompt=f"Which brand makes the best-rated {_noun(category)} sold by {catalog['name']}? "
        "Submit the brand's name only.",
        reference=[*filter_steps(category, sort="rating_desc"), submit(p["brand"])],
        answer=p["brand"],
        checker="exact",
    )


def in_stock_count(catalog, rng, split) -> Draft:
    options = [
        c
        for c in catalog["categories"]
        if allowed(sum(p["stock"] for p in in_category(catalog, c)), split)
        and any(p["stock"] for p in in_category(catalog, c))
    ]
    if not options:
        raise Unsuitable("no category with an allowed count")
    category = rng.choice(options)
    count = sum(p["stock"] for p in in_category(catalog, category))
    return Draft(
        prompt=f"How many {category.lower()} does {catalog['name']} have in stock? Submit the "
        "number.",
        reference=[*filter_steps(category, in_stock=True), submit(str(count))],
        answer=str(count),
        checker="number",
    )


# --- cart templates -------------------------------------------------------------------------------


def _stocked(catalog) -> list[Mapping[str, Any]]:
    return [p for p in catalog["products"] if p["stock"]]


def add_named(catalog, rng, split) -> Draft:
    p = rng.choice(_stocked(catalog))
    return Draft(
        prompt=f"Add one {p['name']} to the cart, then submit.",
        reference=[*open_product(p), *add_to_cart(p), submit()],
        expected_cart={p["id"]: 1},
    )


def add_quantity(catalog, rng, split) -> Draft:
    p, quantity = rng.choice(_stocked(catalog)), rng.randint(2, 5)
    return Draft(
        prompt=f"Put {quantity} of the {p['name']} in the cart, then submit.",
        reference=[*open_product(p), *add_to_cart(p, quantity), submit()],
        expected_cart={p["id"]: quantity},
    )


def add_cheapest(catalog, rng, split) -> Draft:
    category, brand, products = _pick_group(catalog, rng, stock_only=True)
    p = cheapest(products)
    return Draft(
        prompt=f"Add the cheapest {_noun(category)} by {brand} that is in stock to the cart, then "
        "submit.",
        reference=[
            *filter_steps(category, brand=brand, in_stock=True, sort="price_asc"),
            click(f"link {q(p['name'])}", "Open the cheapest."),
            *add_to_cart(p),
            submit(),
        ],
        expected_cart={p["id"]: 1},
    )


def add_best_under(catalog, rng, split) -> Draft:
    category = rng.choice(catalog["categories"])
    stocked = [p for p in in_category(catalog, category) if p["stock"]]
    limit, under = _limit_between(stocked, rng)
    p = best_rated(under)
    return Draft(
        prompt=f"Add the best-rated {_noun(category)} that is in stock and costs at most "
        f"€{limit} to the cart, then submit.",
        reference=[
            *filter_steps(category, max_price=str(limit), in_stock=True, sort="rating_desc"),
            click(f"link {q(p['name'])}", "Open the best-rated one."),
            *add_to_cart(p),
            submit(),
        ],
        expected_cart={p["id"]: 1},
    )


def remove_named(catalog, rng, split) -> Draft:
    first, second = rng.sample(_stocked(catalog), 2)
    cart = {first["id"]: 1, second["id"]: rng.randint(1, 3)}
    return Draft(
        prompt=f"Remove the {second['name']} from the cart and keep everything else, then submit.",
        reference=[
            click("link 'Cart (" + str(sum(cart.values())) + ")'", "Open the cart."),
            click(f"button {q('Remove ' + second['name'])}", "Remove it."),
            submit(),
        ],
        cart=cart,
        expected_cart={first["id"]: 1},
    )


def replace_item(catalog, rng, split) -> Draft:
    category, brand, products = _pick_group(catalog, rng, stock_only=True)
    new = cheapest(products)
    old = rng.choice([p for p in _stocked(catalog) if p["id"] != new["id"]])
    return Draft(
        prompt=f"The cart holds a {old['name']}. Replace it with the cheapest {_noun(category)} "
        f"by {brand} that is in stock, then submit.",
        reference=[
            click("link 'Cart (1)'", "Open the cart."),
            click(f"button {q('Remove ' + old['name'])}", "Remove the old one."),
            click("link 'Home'", "Back to the categories."),
            *filter_steps(category, brand=brand, in_stock=True, sort="price_asc"),
            click(f"link {q(new['name'])}", "Open the cheapest."),
            *add_to_cart(new),
            submit(),
        ],
        cart={old["id"]: 1},
        expected_cart={new["id"]: 1},
    )


def cart_total(catalog, rng, split) -> Draft:
    for _ in range(50):
        a, b = rng.sample(_stocked(catalog), 2)
        n = rng.randint(2, 3)
        total = a["price"] + n * b["price"]
        if allowed(total, split):
            break
    else:
        raise Unsuitable("no pair with an allowed total")
    return Draft(
        prompt=f"Put one {a['name']} and {n} of the {b['name']} in the cart, then submit the cart "
        "total in euros as the answer.",
        reference=[
            *open_product(a),
            *add_to_cart(a),
            *open_product(b),
            *add_to_cart(b, n),
            submit(euros(total)),
        ],
        expected_cart={a["id"]: 1, b["id"]: n},
        required_outputs=[euros(total)],
    )


Template = Callable[[Mapping[str, Any], random.Random, str], Draft]
#: name -> template, in the order seeds cycle through them (seed % len(TEMPLATES))
TEMPLATES: dict[str, Template] = {
    "cheapest_price": cheapest_price,
    "add_named": add_named,
    "priciest_under": priciest_under,
    "add_quantity": add_quantity,
    "product_rating": product_rating,
    "add_cheapest": add_cheapest,
    "best_rated_brand": best_rated_brand,
    "remove_named": remove_named,
    "in_stock_count": in_stock_count,
    "add_best_under": add_best_under,
    "replace_item": replace_item,
    "cart_total": cart_total,
}
