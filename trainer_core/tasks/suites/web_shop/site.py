"""The shop as web pages: plain HTML forms and links, no JavaScript, rendered from a catalog
(:mod:`.catalog`) and a cart that lives in the site object (one site per episode).

Pages::

    GET  /                     categories (links to their search pages) and the search box
    GET  /search?q=&category=&brand=&max_price=&in_stock=1&sort=
                               the filter form (Category, Brand, Max price (€), In stock only,
                               Sort, Apply filters) and the matching products
    GET  /product/<id>         a product: price, brand, rating, stock, Quantity, Add to cart
    GET  /cart                 the cart: one line per product with its Remove button, the total
    POST /cart/add             product_id, quantity -> 303 to /cart
    POST /cart/remove          product_id -> 303 to /cart

A page names every control once (the search box is ``Search``, a cart line's button is
``Remove <product name>``), so a role and a name pick one element: the reference solutions
target elements that way.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

from trainer_core.tasks.suites.web_shop.catalog import by_id, euros, rating_text

#: (status, headers, body) as the loopback server sends it
Response = tuple[int, dict[str, str], bytes]
SORTS: dict[str, str] = {
    "name": "Name",
    "price_asc": "Price: low to high",
    "price_desc": "Price: high to low",
    "rating_desc": "Rating: high to low",
}
QUANTITIES = (1, 2, 3, 4, 5)


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _options(values: list[tuple[str, str]], selected: str) -> str:
    return "".join(
        f'<option value="{_e(v)}"{" selected" if v == selected else ""}>{_e(label)}</option>'
        for v, label in values
    )


class ShopSite:
    """One shop, one cart. ``handle`` answers a request; ``state`` is what the checker sees."""

    def __init__(self, catalog: Mapping[str, Any], cart: Mapping[str, int] | None = None):
        self.catalog = catalog
        self.products = by_id(catalog)
        self.cart: dict[str, int] = {str(k): int(v) for k, v in (cart or {}).items()}

    def state(self) -> dict[str, Any]:
        return {"cart": dict(sorted(self.cart.items()))}

    # --- requests ---------------------------------------------------------------------------

    def handle(
        self, method: str, path: str, query: Mapping[str, str], form: Mapping[str, str]
    ) -> Response:
        if method == "POST" and path in ("/cart/add", "/cart/remove"):
            return self._change_cart(path, form)
        if method != "GET":
            return self._page(405, "Not allowed", "<p>That is not allowed here.</p>")
        if path == "/":
            return self._page(200, "Home", self._home())
        if path == "/search":
            return self._page(200, "Products", self._search(query))
        if path == "/cart":
            return self._page(200, "Your cart", self._cart())
        if path.startswith("/product/") and path[9:] in self.products:
            product = self.products[path[9:]]
            return self._page(200, product["name"], self._product(product))
        return self._page(404, "Not found", "<h1>Page not found</h1><p>No such page.</p>")

    def _change_cart(self, path: str, form: Mapping[str, str]) -> Response:
        product = self.products.get(form.get("product_id", ""))
        if product is None:
            return self._page(400, "Unknown product", "<h1>Unknown product</h1>")
        if path == "/cart/add":
            if not product["stock"]:
                return self._page(409, "Out of stock", "<h1>This product is out of stock</h1>")
            try:
                quantity = max(1, min(9, int(form.get("quantity", "1"))))
            except ValueError:
                quantity = 1
            self.cart[product["id"]] = self.cart.get(product["id"], 0) + quantity
        else:
            self.cart.pop(product["id"], None)
        return 303, {"Location": "/cart"}, b""

    # --- pages ------------------------------------------------------------------------------

    def _page(self, status: int, title: str, main: str) -> Response:
        count = sum(self.cart.values())
        shop = _e(self.catalog["name"])
        body = (
            f"<!doctype html><html lang=en><head><meta charset=utf-8>"
            f"<title>{_e(title)} — {shop}</title></head><body>"
            f'<header><nav><a href="/">Home</a> <a href="/cart">Cart ({count})</a></nav>'
            f'<form action="/search" method="get" role="search">'
            f'<input type="search" name="q" aria-label="Search" placeholder="Search products">'
            f"<button type=submit>Search</button></form></header>"
            f"<main>{main}</main><footer><p>{shop}, a Steplab test shop.</p></footer>"
            f"</body></html>"
        )
        return status, {"Content-Type": "text/html; charset=utf-8"}, body.encode()

    def _home(self) -> str:
        links = "".join(
            f'<li><a href="/search?category={_e(c)}">{_e(c)}</a></li>'
            for c in self.catalog["categories"]
        )
        return (
            f"<h1>Welcome to {_e(self.catalog['name'])}</h1>"
            f"<h2>Categories</h2><ul>{links}</ul>"
            f"<p>{len(self.products)} products from {len(self.catalog['brands'])} brands.</p>"
        )

    def _matches(self, query: Mapping[str, str]) -> list[dict[str, Any]]:
        words = query.get("q", "").casefold().split()
        category, brand = query.get("category", ""), query.get("brand", "")
        try:
            limit = round(float(query.get("max_price", "").replace(",", ".")) * 100)
        except ValueError:
            limit = None
        found = []
        for p in self.products.values():
            text = f"{p['name']} {p['brand']} {p['category']}".casefold()
            if any(w not in text for w in words):
                continue
            if (category and p["category"] != category) or (brand and p["brand"] != brand):
                continue
            if limit is not None and p["price"] > limit:
                continue
            if query.get("in_stock") and not p["stock"]:
                continue
            found.append(p)
        sort = query.get("sort", "name")
        keys = {
            "price_asc": lambda p: p["price"],
            "price_desc": lambda p: -p["price"],
            "rating_desc": lambda p: -p["rating"],
        }
        return sorted(found, key=keys.get(sort, lambda p: p["name"]))

    def _search(self, query: Mapping[str, str]) -> str:
        found = self._matches(query)
        category, brand = query.get("category", ""), query.get("brand", "")
        cats = [("", "All categories")] + [(c, c) for c in self.catalog["categories"]]
        brands = [("", "All brands")] + [(b, b) for b in self.catalog["brands"]]
        checked = " checked" if query.get("in_stock") else ""
        form = (
            '<form action="/search" method="get" aria-label="Filters">'
            f'<input type="hidden" name="q" value="{_e(query.get("q", ""))}">'
            f'<label>Category <select name="category">{_options(cats, category)}</select></label>'
            f'<label>Brand <select name="brand">{_options(brands, brand)}</select></label>'
            '<label>Max price (€) <input type="number" name="max_price" min="0" step="any" '
            f'value="{_e(query.get("max_price", ""))}"></label>'
            f'<label><input type="checkbox" name="in_stock" value="1"{checked}> In stock only'
            "</label>"
            f'<label>Sort <select name="sort">'
            f"{_options(list(SORTS.items()), query.get('sort', 'name'))}</select></label>"
            "<button type=submit>Apply filters</button></form>"
        )
        items = "".join(
            f'<li><a href="/product/{p["id"]}">{_e(p["name"])}</a>'
            f"<p>€{euros(p['price'])} · {_e(p['brand'])} · rating {rating_text(p['rating'])}"
            f" · {'in stock' if p['stock'] else 'out of stock'}</p></li>"
            for p in found
        )
        q = query.get("q", "")
        heading = f"Results for {_e(q)}" if q else _e(category or "All products")
        count = f"{len(found)} product{'' if len(found) == 1 else 's'}"
        return f"<h1>{heading}</h1>{form}<p>{count}</p><ul>{items}</ul>"

    def _product(self, p: Mapping[str, Any]) -> str:
        quantities = _options([(str(q), str(q)) for q in QUANTITIES], "1")
        disabled = "" if p["stock"] else " disabled"
        noun = p["category"].lower()
        return (
            f"<h1>{_e(p['name'])}</h1>"
            f"<p>Price: €{euros(p['price'])}</p><p>Brand: {_e(p['brand'])}</p>"
            f"<p>Category: {_e(p['category'])}</p>"
            f"<p>Customer rating: {rating_text(p['rating'])} out of 5</p>"
            f"<p>{'In stock' if p['stock'] else 'Out of stock'}</p>"
            f"<p>One of our {_e(noun)}, made by {_e(p['brand'])}.</p>"
            '<form action="/cart/add" method="post">'
            f'<input type="hidden" name="product_id" value="{p["id"]}">'
            f'<label>Quantity <select name="quantity">{quantities}</select></label>'
            f"<button type=submit{disabled}>Add to cart</button></form>"
        )

    def _cart(self) -> str:
        if not self.cart:
            return "<h1>Your cart</h1><p>Your cart is empty.</p>"
        lines, total = [], 0
        for pid, quantity in sorted(self.cart.items()):
            p = self.products[pid]
            total += p["price"] * quantity
            lines.append(
                f'<li><a href="/product/{pid}">{_e(p["name"])}</a>'
                f"<p>Quantity: {quantity} · €{euros(p['price'] * quantity)}</p>"
                '<form action="/cart/remove" method="post">'
                f'<input type="hidden" name="product_id" value="{pid}">'
                f'<button type=submit aria-label="Remove {_e(p["name"])}">Remove</button>'
                "</form></li>"
            )
        return f"<h1>Your cart</h1><ul>{''.join(lines)}</ul><p>Total: €{euros(total)}</p>"
