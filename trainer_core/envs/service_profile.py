"""The ``customer-service`` domain profile (``steplab/customer-service``, tau-bench style), kept
apart from :mod:`trainer_core.envs.profiles` (which registers it among the built-in profiles).

The agent talks to a simulated customer with ``respond`` (recorded as assistant and user message
steps, not as tool steps) and reads and changes a small database. Reads are ``read`` / ``search``,
changes ``write`` (target: the record they change); ``transfer_to_human_agents`` ends the chat.
"""

from __future__ import annotations

from typing import Any


def _obj(**props: tuple[str, str]) -> dict[str, Any]:
    """JSON-schema object; a property name ending in '_' is optional."""
    properties: dict[str, Any] = {}
    required = []
    for raw, (typ, desc) in props.items():
        name = raw.rstrip("_")
        if typ == "string[]":
            properties[name] = {"type": "array", "items": {"type": "string"}, "description": desc}
        else:
            properties[name] = {"type": typ, "description": desc}
        if not raw.endswith("_"):
            required.append(name)
    return {"type": "object", "properties": properties, "required": required}


def _t(name, category, description, parameters, target=None, aliases=()) -> dict[str, Any]:
    return {
        "name": name,
        "category": category,
        "description": description,
        "parameters": parameters,
        "target_param": target,
        "aliases": list(aliases),
    }


_THINK = _t(
    "think",
    "think",
    "Think out loud; changes nothing.",
    _obj(thought=("string", "the thought")),
    None,
    ["Think", "reason"],
)

SERVICE_WEIGHTS = {
    "goal_progress": 0.30,
    "tool_selection": 0.15,
    "param_correctness": 0.20,
    "info_utilization": 0.20,
    "non_redundancy": 0.15,
}
_ID = ("string", "an id, e.g. O-12345")
_ADDRESS = {
    "street": ("string", "street and number"),
    "city": ("string", "city"),
    "zip": ("string", "zip code"),
}
_IDS = ("string[]", "item ids, e.g. ['I-12345']")
_SERVICE_TOOLS = [
    _t(
        "respond",
        "write",
        "Send a message to the customer; their reply is the result.",
        _obj(message=("string", "what to tell or ask the customer")),
        None,
        ["reply", "message_user", "say"],
    ),
    _t(
        "find_customer_by_email",
        "search",
        "Find a customer's id by their email.",
        _obj(email=("string", "the email the customer gave")),
    ),
    _t(
        "find_customer_by_name_zip",
        "search",
        "Find a customer's id by full name and zip code.",
        _obj(
            first_name=("string", "first name"),
            last_name=("string", "last name"),
            zip=("string", "zip code"),
        ),
    ),
    _t(
        "get_customer",
        "read",
        "A customer's record: email, address, tier, payment methods, order and reservation ids.",
        _obj(customer_id=("string", "e.g. C-12345")),
        "customer_id",
    ),
    _t(
        "get_order",
        "read",
        "An order: status, items, total, address, payment, tracking.",
        _obj(order_id=_ID),
        "order_id",
    ),
    _t(
        "get_product",
        "read",
        "A product's variants: item ids, options, prices, availability.",
        _obj(product_id=("string", "e.g. P-12345")),
        "product_id",
    ),
    _t(
        "get_reservation",
        "read",
        "A table reservation: date, time, party size, status.",
        _obj(reservation_id=("string", "e.g. R-12345")),
        "reservation_id",
    ),
    _t(
        "list_free_slots",
        "search",
        "The free table times of a date (YYYY-MM-DD).",
        _obj(date=("string", "YYYY-MM-DD")),
    ),
    _t(
        "cancel_order",
        "write",
        "Cancel a pending order (reason: 'no longer needed' or "
        "'ordered by mistake'); it is refunded.",
        _obj(order_id=_ID, reason=("string", "no longer needed | ordered by mistake")),
        "order_id",
    ),
    _t(
        "modify_order_address",
        "write",
        "Change a pending order's shipping address.",
        _obj(order_id=_ID, **_ADDRESS),
        "order_id",
    ),
    _t(
        "modify_order_payment",
        "write",
        "Pay a pending order with another of the customer's payment methods.",
        _obj(order_id=_ID, payment_method_id=("string", "e.g. PM-12345")),
        "order_id",
    ),
    _t(
        "modify_order_items",
        "write",
        "Change items of a pending order to other options of the same product.",
        _obj(order_id=_ID, item_ids=_IDS, new_item_ids=_IDS),
        "order_id",
    ),
    _t(
        "return_order_items",
        "write",
        "Return items of a delivered order; refund to the original payment method or a gift card.",
        _obj(order_id=_ID, item_ids=_IDS, payment_method_id=("string", "e.g. PM-12345")),
        "order_id",
    ),
    _t(
        "exchange_order_items",
        "write",
        "Exchange items of a delivered order for other options of the same product.",
        _obj(order_id=_ID, item_ids=_IDS, new_item_ids=_IDS),
        "order_id",
    ),
    _t(
        "update_customer_address",
        "write",
        "Change a customer's default address.",
        _obj(customer_id=("string", "e.g. C-12345"), **_ADDRESS),
        "customer_id",
    ),
    _t(
        "update_customer_email",
        "write",
        "Change a customer's email.",
        _obj(customer_id=("string", "e.g. C-12345"), email=("string", "the new email")),
        "customer_id",
    ),
    _t(
        "change_membership",
        "write",
        "Change a customer's membership tier (bronze, silver, gold).",
        _obj(customer_id=("string", "e.g. C-12345"), tier=("string", "bronze | silver | gold")),
        "customer_id",
    ),
    _t(
        "book_reservation",
        "write",
        "Book a table in a free slot.",
        {
            **_obj(
                customer_id=("string", "e.g. C-12345"),
                date=("string", "YYYY-MM-DD"),
                time=("string", "HH:MM"),
                party_size=("integer", "guests, 1-12"),
            )
        },
        "customer_id",
    ),
    _t(
        "cancel_reservation",
        "write",
        "Cancel a booked table.",
        _obj(reservation_id=("string", "e.g. R-12345")),
        "reservation_id",
    ),
    _t(
        "modify_reservation",
        "write",
        "Move a booked table (date, time) or change its party size; the new slot must be free.",
        _obj(
            reservation_id=("string", "e.g. R-12345"),
            date_=("string", "YYYY-MM-DD"),
            time_=("string", "HH:MM"),
            party_size_=("integer", "guests, 1-12"),
        ),
        "reservation_id",
    ),
    _t(
        "calculate",
        "execute",
        "Evaluate an arithmetic expression.",
        _obj(expression=("string", "e.g. 49 + 25")),
        None,
        ["calculator"],
    ),
    _t(
        "transfer_to_human_agents",
        "submit",
        "Hand the customer to a human agent; ends the chat.",
        _obj(summary=("string", "what the customer needs")),
        None,
        ["transfer"],
    ),
    _THINK,
]
SERVICE_PROFILE_DATA: dict[str, Any] = {
    "name": "customer-service",
    "version": 1,
    "description": (
        "Serve a simulated customer (tau-bench style): identify them, ask them for what only "
        "they know, read and change a small database of orders, accounts and table "
        "reservations after their explicit yes. The final state of the database decides."
    ),
    "tools": _SERVICE_TOOLS,
    "outcome": {},
    "task_fields": ["prompt", "checker", "metadata"],
    "rubric_weights": SERVICE_WEIGHTS,
}
