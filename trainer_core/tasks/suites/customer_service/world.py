"""The customer-service world: a small seeded database (customers, payment methods, orders, a
product catalogue, table reservations and free booking slots) and the tools over it.

:func:`build_database` makes a task's database from a seed; :func:`execute` runs one database
tool on it (a read returns JSON text; a write changes the database and says what it did; a call
that breaks a rule — cancelling a delivered order, booking a taken slot — changes nothing and
its observation starts with ``Error:``). The environment (``trainer_core.envs.customer_service``)
and the task generator both call :func:`execute`, so the expected final state of a task is the
state its reference solution leaves: one definition of what every tool does.

Splits share nothing: names come from the split's third of the name pools (those of the lookup
suite), and every id number (customers, orders, items, payment methods, reservations) is
``split index`` modulo 3.
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Callable, Mapping
from typing import Any

from trainer_core.tasks.suites.lookup import SPLITS, split_name_pools

SPLIT_INDEX = {name: index for index, name in enumerate(SPLITS)}

CANCEL_REASONS = ("no longer needed", "ordered by mistake")
TIERS = ("bronze", "silver", "gold")
OPEN_TIMES = ("17:00", "18:00", "19:00", "20:00", "21:00")
DATES = tuple(f"2025-07-{day:02d}" for day in range(7, 21))
STREETS = (
    "Harbour Road",
    "Mill Lane",
    "Station Street",
    "Orchard Way",
    "Church Street",
    "Linden Avenue",
    "Quarry Hill",
    "Birch Close",
    "Market Square",
    "Fern Gardens",
    "Willow Drive",
    "Beacon Row",
)
#: product -> (option name, option values, lowest price, highest price)
CATALOGUE: dict[str, tuple[str, tuple[str, ...], int, int]] = {
    "Electric Kettle": ("colour", ("steel", "black", "white"), 29, 89),
    "T-Shirt": ("size", ("S", "M", "L", "XL"), 12, 35),
    "Running Shoes": ("size", ("40", "41", "42", "43", "44"), 60, 160),
    "Backpack": ("colour", ("green", "black", "red"), 35, 120),
    "Desk Lamp": ("colour", ("white", "black", "brass"), 18, 75),
    "Headphones": ("colour", ("black", "silver", "blue"), 40, 250),
}

READ_TOOLS = (
    "find_customer_by_email",
    "find_customer_by_name_zip",
    "get_customer",
    "get_order",
    "get_product",
    "get_reservation",
    "list_free_slots",
)
WRITE_TOOLS = (
    "cancel_order",
    "modify_order_address",
    "modify_order_payment",
    "modify_order_items",
    "return_order_items",
    "exchange_order_items",
    "update_customer_address",
    "update_customer_email",
    "change_membership",
    "book_reservation",
    "cancel_reservation",
    "modify_reservation",
)
DATABASE_TOOLS = READ_TOOLS + WRITE_TOOLS


class ToolError(Exception):
    """A call the database refuses (the agent caused it): the observation says why."""


# --- building a database ------------------------------------------------------------------------


class Ids:
    """Fresh ids of a split: ``<prefix>-<number>``, every number ``split index`` mod 3."""

    def __init__(self, split: str, rng: random.Random):
        self.residue = SPLIT_INDEX[split]
        self.rng = rng
        self.used: set[str] = set()

    def new(self, prefix: str) -> str:
        while True:
            value = f"{prefix}-{3 * self.rng.randint(3334, 33332) + self.residue}"
            if value not in self.used:
                self.used.add(value)
                return value


def _catalogue(ids: Ids, rng: random.Random) -> dict[str, dict[str, Any]]:
    products = {}
    for name, (option, values, low, high) in CATALOGUE.items():
        base = rng.randint(low, high)
        variants = []
        for value in values:
            variants.append(
                {
                    "item_id": ids.new("I"),
                    "option": f"{option} {value}",
                    "price": base + rng.choice((0, 0, 2, 5)),
                    "available": rng.random() < 0.8,
                }
            )
        variants[0]["available"] = variants[1]["available"] = True
        pid = ids.new("P")
        products[pid] = {"id": pid, "name": name, "variants": variants}
    return products


def _address(rng: random.Random, cities: tuple[str, ...]) -> dict[str, str]:
    return {
        "street": f"{rng.randint(2, 98)} {rng.choice(STREETS)}",
        "city": rng.choice(cities),
        "zip": f"{rng.randint(10000, 99999)}",
    }


def order_item(product: Mapping[str, Any], variant: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "item_id": variant["item_id"],
        "product_id": product["id"],
        "name": product["name"],
        "option": variant["option"],
        "price": variant["price"],
    }


def add_order(
    db: dict[str, Any],
    ids: Ids,
    rng: random.Random,
    customer: dict[str, Any],
    status: str,
    products: list[str] | None = None,
) -> dict[str, Any]:
    """A new order of ``customer`` (of the named products, else one or two at random)."""
    catalogue = list(db["products"].values())
    chosen = (
        [p for p in catalogue if p["name"] in products]
        if products
        else rng.sample(catalogue, rng.choice((1, 2)))
    )
    items = [order_item(p, rng.choice(p["variants"])) for p in chosen]
    oid = ids.new("O")
    order = {
        "id": oid,
        "customer_id": customer["id"],
        "status": status,
        "items": items,
        "address": dict(customer["address"]),
        "payment_method_id": customer["payment_methods"][0]["id"],
        "tracking": ids.new("T") if status == "delivered" else None,
        "refunds": [],
    }
    db["orders"][oid] = order
    customer["orders"].append(oid)
    return order


def add_reservation(
    db: dict[str, Any], ids: Ids, rng: random.Random, customer: dict[str, Any]
) -> dict[str, Any]:
    """A booked table of ``customer`` in a slot that was free (the slot is taken)."""
    free = [(d, t) for d, times in db["slots"].items() for t in times]
    date, time = rng.choice(free)
    db["slots"][date].remove(time)
    rid = ids.new("R")
    reservation = {
        "id": rid,
        "customer_id": customer["id"],
        "date": date,
        "time": time,
        "party_size": rng.randint(2, 6),
        "status": "booked",
    }
    db["reservations"][rid] = reservation
    customer["reservations"].append(rid)
    return reservation


def _customer(
    db: dict[str, Any], ids: Ids, rng: random.Random, pools: dict[str, tuple[str, ...]], name: str
) -> dict[str, Any]:
    first, last = name.split(" ", 1)
    cid = ids.new("C")
    methods = [{"id": ids.new("PM"), "kind": "credit card", "last4": f"{rng.randint(1000, 9999)}"}]
    if rng.random() < 0.6:
        methods.append(
            {"id": ids.new("PM"), "kind": "gift card", "balance": rng.randint(5, 40) * 5}
        )
    if rng.random() < 0.4:
        methods.append({"id": ids.new("PM"), "kind": "paypal", "account": f"{first.lower()}.pay"})
    customer = {
        "id": cid,
        "name": name,
        "email": f"{first.lower()}.{last.lower()}{rng.randint(1, 99)}@example.com",
        "address": _address(rng, pools["city"]),
        "tier": rng.choice(TIERS[:2]),
        "payment_methods": methods,
        "orders": [],
        "reservations": [],
    }
    db["customers"][cid] = customer
    return customer


def build_database(
    split: str, rng: random.Random, *, customers: int = 5
) -> tuple[dict[str, Any], Ids]:
    """A fresh database of ``split``: the catalogue, free slots, ``customers`` customers (distinct
    names of the split's pools; two share a surname) each with orders and maybe a reservation."""
    pools = split_name_pools(split)
    ids = Ids(split, rng)
    db: dict[str, Any] = {
        "customers": {},
        "orders": {},
        "products": _catalogue(ids, rng),
        "reservations": {},
        "slots": {date: list(OPEN_TIMES) for date in DATES},
    }
    firsts = rng.sample(pools["first"], customers)
    lasts = rng.sample(pools["surname"], customers)
    lasts[1] = lasts[0]
    for first, last in zip(firsts, lasts, strict=True):
        customer = _customer(db, ids, rng, pools, f"{first} {last}")
        for status in rng.sample(("pending", "delivered", "delivered", "cancelled"), 2):
            add_order(db, ids, rng, customer, status)
        if rng.random() < 0.5:
            add_reservation(db, ids, rng, customer)
    return db, ids


# --- the tools ------------------------------------------------------------------------------------


def _text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=False)


def _key(value: Any) -> str:
    return str(value).strip().upper()


def _get(db: Mapping[str, Any], table: str, key: Any, what: str) -> dict[str, Any]:
    record = db[table].get(_key(key))
    if record is None:
        raise ToolError(f"{what} {key!r} not found")
    return record


def _order_total(order: Mapping[str, Any], item_ids: list[str] | None = None) -> int:
    return sum(i["price"] for i in order["items"] if item_ids is None or i["item_id"] in item_ids)


def _method(db: Mapping[str, Any], customer_id: str, pm_id: Any) -> dict[str, Any]:
    for method in db["customers"][customer_id]["payment_methods"]:
        if method["id"] == _key(pm_id):
            return method
    raise ToolError(f"payment method {pm_id!r} is not one of the customer's")


def _refund(db: dict[str, Any], order: dict[str, Any], amount: int, pm_id: str) -> None:
    method = _method(db, order["customer_id"], pm_id)
    if method["kind"] == "gift card":
        method["balance"] += amount
    order["refunds"].append({"amount": amount, "payment_method_id": method["id"]})


def _status(order: Mapping[str, Any], wanted: str, doing: str) -> None:
    if order["status"] != wanted:
        raise ToolError(
            f"order {order['id']} is {order['status']}; only a {wanted} order can {doing}"
        )


def _variant(db: Mapping[str, Any], item_id: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    for product in db["products"].values():
        for variant in product["variants"]:
            if variant["item_id"] == _key(item_id):
                return product, variant
    raise ToolError(f"item {item_id!r} not found")


def _swaps(
    db: Mapping[str, Any], order: Mapping[str, Any], item_ids: Any, new_item_ids: Any
) -> list[tuple[int, dict[str, Any], dict[str, Any]]]:
    """(position in the order, product, new variant) of each item to replace."""
    if not isinstance(item_ids, list) or not isinstance(new_item_ids, list) or not item_ids:
        raise ToolError("item_ids and new_item_ids must be non-empty lists")
    if len(item_ids) != len(new_item_ids):
        raise ToolError("item_ids and new_item_ids must have the same length")
    held = [i["item_id"] for i in order["items"]]
    out = []
    for old, new in zip(item_ids, new_item_ids, strict=True):
        if _key(old) not in held:
            raise ToolError(f"item {old!r} is not in order {order['id']}")
        product, variant = _variant(db, new)
        position = held.index(_key(old))
        if order["items"][position]["product_id"] != product["id"]:
            raise ToolError(f"item {new!r} is another product; exchange for the same product only")
        if variant["item_id"] == _key(old):
            raise ToolError(f"item {new!r} is the item already held")
        if not variant["available"]:
            raise ToolError(f"item {new!r} is not available")
        out.append((position, product, variant))
    return out


def _items(order: Mapping[str, Any], item_ids: Any) -> list[str]:
    if not isinstance(item_ids, list) or not item_ids:
        raise ToolError("item_ids must be a non-empty list")
    held = [i["item_id"] for i in order["items"]]
    wanted = [_key(i) for i in item_ids]
    for item in wanted:
        if item not in held:
            raise ToolError(f"item {item!r} is not in order {order['id']}")
    return wanted


def _address_params(street: Any, city: Any, zip: Any) -> dict[str, str]:  # noqa: A002
    values = {"street": str(street).strip(), "city": str(city).strip(), "zip": str(zip).strip()}
    if not all(values.values()):
        raise ToolError("street, city and zip must all be given")
    return values


def _slot(db: dict[str, Any], date: str, time: str) -> None:
    if time not in db["slots"].get(date, []):
        raise ToolError(f"no free table on {date} at {time}; list_free_slots shows the free ones")


# reads


def find_customer_by_email(db: dict[str, Any], email: str) -> str:
    for customer in db["customers"].values():
        if customer["email"].lower() == str(email).strip().lower():
            return f"Customer id: {customer['id']}"
    raise ToolError(f"no customer with email {email!r}")


def find_customer_by_name_zip(db: dict[str, Any], first_name: str, last_name: str, zip: str) -> str:  # noqa: A002
    wanted = f"{first_name} {last_name}".strip().lower()
    for customer in db["customers"].values():
        if customer["name"].lower() == wanted and customer["address"]["zip"] == str(zip).strip():
            return f"Customer id: {customer['id']}"
    raise ToolError(f"no customer {first_name} {last_name} with zip {zip!r}")


def get_customer(db: dict[str, Any], customer_id: str) -> str:
    return _text(_get(db, "customers", customer_id, "customer"))


def get_order(db: dict[str, Any], order_id: str) -> str:
    order = _get(db, "orders", order_id, "order")
    return _text({**order, "total": _order_total(order)})


def get_product(db: dict[str, Any], product_id: str) -> str:
    return _text(_get(db, "products", product_id, "product"))


def get_reservation(db: dict[str, Any], reservation_id: str) -> str:
    return _text(_get(db, "reservations", reservation_id, "reservation"))


def list_free_slots(db: dict[str, Any], date: str) -> str:
    if date not in db["slots"]:
        raise ToolError(f"no bookings on {date!r}; dates run {DATES[0]}..{DATES[-1]} (YYYY-MM-DD)")
    return _text({"date": date, "free_times": db["slots"][date]})


# writes


def cancel_order(db: dict[str, Any], order_id: str, reason: str) -> str:
    order = _get(db, "orders", order_id, "order")
    _status(order, "pending", "be cancelled")
    if reason not in CANCEL_REASONS:
        raise ToolError(f"reason must be one of: {', '.join(CANCEL_REASONS)}")
    order["status"] = "cancelled"
    order["cancel_reason"] = reason
    _refund(db, order, _order_total(order), order["payment_method_id"])
    return f"Order {order['id']} cancelled; {_order_total(order)} EUR refunded."


def modify_order_address(
    db: dict[str, Any], order_id: str, street: str, city: str, zip: str
) -> str:  # noqa: A002
    order = _get(db, "orders", order_id, "order")
    _status(order, "pending", "change its address")
    order["address"] = _address_params(street, city, zip)
    return f"Order {order['id']} will be shipped to {street}, {city} {zip}."


def modify_order_payment(db: dict[str, Any], order_id: str, payment_method_id: str) -> str:
    order = _get(db, "orders", order_id, "order")
    _status(order, "pending", "change its payment method")
    method = _method(db, order["customer_id"], payment_method_id)
    if method["id"] == order["payment_method_id"]:
        raise ToolError("the order is already paid with that payment method")
    total = _order_total(order)
    if method["kind"] == "gift card":
        if method["balance"] < total:
            raise ToolError(f"the gift card holds {method['balance']} EUR, the order costs {total}")
        method["balance"] -= total
    old = _method(db, order["customer_id"], order["payment_method_id"])
    if old["kind"] == "gift card":
        old["balance"] += total
    order["payment_method_id"] = method["id"]
    return f"Order {order['id']} is now paid with {method['id']} ({method['kind']})."


def modify_order_items(
    db: dict[str, Any], order_id: str, item_ids: list, new_item_ids: list
) -> str:
    order = _get(db, "orders", order_id, "order")
    _status(order, "pending", "change its items")
    for position, product, variant in _swaps(db, order, item_ids, new_item_ids):
        order["items"][position] = order_item(product, variant)
    return f"Order {order['id']} now holds: " + ", ".join(
        f"{i['name']} ({i['option']})" for i in order["items"]
    )


def return_order_items(
    db: dict[str, Any], order_id: str, item_ids: list, payment_method_id: str
) -> str:
    order = _get(db, "orders", order_id, "order")
    _status(order, "delivered", "be returned")
    wanted = _items(order, item_ids)
    method = _method(db, order["customer_id"], payment_method_id)
    if method["id"] != order["payment_method_id"] and method["kind"] != "gift card":
        raise ToolError("a refund goes to the original payment method or to a gift card")
    order["status"] = "return requested"
    order["return_items"] = sorted(wanted)
    amount = _order_total(order, wanted)
    _refund(db, order, amount, method["id"])
    return f"Return of {len(wanted)} item(s) from {order['id']} requested; {amount} EUR to {method['id']}."


def exchange_order_items(
    db: dict[str, Any], order_id: str, item_ids: list, new_item_ids: list
) -> str:
    order = _get(db, "orders", order_id, "order")
    _status(order, "delivered", "be exchanged")
    swaps = _swaps(db, order, item_ids, new_item_ids)
    order["status"] = "exchange requested"
    order["exchange"] = {
        "item_ids": [_key(i) for i in item_ids],
        "new_item_ids": [variant["item_id"] for _, _, variant in swaps],
    }
    return f"Exchange of {len(swaps)} item(s) from {order['id']} requested."


def update_customer_address(
    db: dict[str, Any], customer_id: str, street: str, city: str, zip: str
) -> str:  # noqa: A002
    customer = _get(db, "customers", customer_id, "customer")
    customer["address"] = _address_params(street, city, zip)
    return f"Default address of {customer['id']} updated."


def update_customer_email(db: dict[str, Any], customer_id: str, email: str) -> str:
    customer = _get(db, "customers", customer_id, "customer")
    email = str(email).strip().lower()
    if "@" not in email:
        raise ToolError(f"{email!r} is not an email address")
    if any(c["email"] == email for c in db["customers"].values()):
        raise ToolError(f"{email} is already in use")
    customer["email"] = email
    return f"Email of {customer['id']} is now {email}."


def change_membership(db: dict[str, Any], customer_id: str, tier: str) -> str:
    customer = _get(db, "customers", customer_id, "customer")
    if tier not in TIERS:
        raise ToolError(f"tier must be one of: {', '.join(TIERS)}")
    if customer["tier"] == tier:
        raise ToolError(f"the customer is already {tier}")
    customer["tier"] = tier
    return f"Membership of {customer['id']} is now {tier}."


def book_reservation(
    db: dict[str, Any], customer_id: str, date: str, time: str, party_size: int
) -> str:
    customer = _get(db, "customers", customer_id, "customer")
    if not isinstance(party_size, int) or not 1 <= party_size <= 12:
        raise ToolError("party_size must be a whole number from 1 to 12")
    _slot(db, date, time)
    numbers = [int(r.split("-")[1]) for r in db["reservations"]] or [3 * 3334]
    rid = f"R-{max(numbers) + 3}"
    db["slots"][date].remove(time)
    db["reservations"][rid] = {
        "id": rid,
        "customer_id": customer["id"],
        "date": date,
        "time": time,
        "party_size": party_size,
        "status": "booked",
    }
    customer["reservations"].append(rid)
    return f"Reservation {rid} booked: {date} at {time} for {party_size}."


def cancel_reservation(db: dict[str, Any], reservation_id: str) -> str:
    reservation = _get(db, "reservations", reservation_id, "reservation")
    if reservation["status"] != "booked":
        raise ToolError(f"reservation {reservation['id']} is {reservation['status']}")
    reservation["status"] = "cancelled"
    db["slots"][reservation["date"]].append(reservation["time"])
    db["slots"][reservation["date"]].sort()
    return f"Reservation {reservation['id']} cancelled."


def modify_reservation(
    db: dict[str, Any],
    reservation_id: str,
    date: str | None = None,
    time: str | None = None,
    party_size: int | None = None,
) -> str:
    reservation = _get(db, "reservations", reservation_id, "reservation")
    if reservation["status"] != "booked":
        raise ToolError(f"reservation {reservation['id']} is {reservation['status']}")
    new_date, new_time = date or reservation["date"], time or reservation["time"]
    if party_size is not None and (not isinstance(party_size, int) or not 1 <= party_size <= 12):
        raise ToolError("party_size must be a whole number from 1 to 12")
    if (new_date, new_time) != (reservation["date"], reservation["time"]):
        _slot(db, new_date, new_time)
        db["slots"][reservation["date"]].append(reservation["time"])
        db["slots"][reservation["date"]].sort()
        db["slots"][new_date].remove(new_time)
    elif party_size is None or party_size == reservation["party_size"]:
        raise ToolError("nothing to change: give a new date, time or party_size")
    reservation.update(date=new_date, time=new_time)
    if party_size is not None:
        reservation["party_size"] = party_size
    return f"Reservation {reservation['id']}: {new_date} at {new_time} for {reservation['party_size']}."


TOOLS: dict[str, Callable[..., str]] = {name: globals()[name] for name in DATABASE_TOOLS}


def execute(db: dict[str, Any], tool: str, params: Mapping[str, Any]) -> tuple[str, bool]:
    """Run the database tool ``tool`` on ``db`` (changed in place by a write):
    ``(observation, ok)``. A refused call changes nothing (``ok`` False, "Error: ..."). The
    parameters are assumed to fit the tool's schema (the environment checks them first)."""
    before = copy.deepcopy(db) if tool in WRITE_TOOLS else None
    try:
        return TOOLS[tool](db, **dict(params)), True
    except (ToolError, TypeError) as exc:
        if before is not None:
            db.clear()
            db.update(before)
        return f"Error: {exc}", False
