"""The wiki as web pages: plain HTML, no JavaScript, rendered from a world (:mod:`.world`).
Nothing changes while an episode runs; its state is the list of articles read.

Pages::

    GET /                      the main page: the search box and the categories
    GET /search?q=             a title typed exactly (case aside) -> 303 to its article (or its
                               disambiguation page); otherwise the titles containing every word
    GET /wiki/<Title_with_underscores>
                               an article: an infobox (a table: Capital, Population, Mayor, ...),
                               a few sentences with internal links, its categories at the foot;
                               or a disambiguation page listing the people of one name
    GET /category/<Name>       a category's articles

Every page links each title once (an infobox's links are not repeated in the text), so a role and
a name pick one element: the reference solutions target elements that way.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from trainer_core.tasks.suites.web_wiki.world import index, slug

Response = tuple[int, dict[str, str], bytes]


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _link(title: str, kind: str = "wiki") -> str:
    return f'<a href="/{kind}/{_e(slug(title))}">{_e(title)}</a>'


def _and(parts: list[str]) -> str:
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def plural(occupation: str) -> str:
    """The category of an occupation: ``painter`` -> ``Painters``."""
    return occupation.capitalize() + "s"


class WikiSite:
    """One wiki. ``handle`` answers a request; ``state`` lists the articles read."""

    def __init__(self, world: Mapping[str, Any]):
        self.world = world
        self.articles = index(world)
        self.countries = {c["name"]: c for c in world["countries"]}
        self.names: dict[str, list[dict[str, Any]]] = {}
        for p in world["people"]:
            self.names.setdefault(p["name"], []).append(p)
        self.categories = self._categories()
        self.read: list[str] = []

    def state(self) -> dict[str, Any]:
        return {"read": list(self.read)}

    def _categories(self) -> dict[str, list[str]]:
        cats: dict[str, list[str]] = {"Countries": sorted(self.countries)}
        for c in self.world["cities"]:
            cats.setdefault(f"Cities in {c['country']}", []).append(c["name"])
        born = {c["name"]: c["country"] for c in self.world["cities"]}
        for p in self.world["people"]:
            cats.setdefault(plural(p["occupation"]), []).append(p["title"])
            cats.setdefault(f"People from {born[p['born_in']]}", []).append(p["title"])
        return {name: sorted(members) for name, members in sorted(cats.items())}

    # --- requests ---------------------------------------------------------------------------

    def handle(
        self, method: str, path: str, query: Mapping[str, str], form: Mapping[str, str]
    ) -> Response:
        if method != "GET":
            return self._page(405, "Not allowed", "<p>That is not allowed here.</p>")
        path = unquote(path)
        if path == "/":
            return self._page(200, "Main page", self._home())
        if path == "/search":
            return self._search(query.get("q", ""))
        if path.startswith("/wiki/"):
            title = path[6:].replace("_", " ")
            if title in self.articles:
                self.read.append(title)
                return self._page(200, title, self._article(title))
            if len(self.names.get(title, [])) > 1:
                self.read.append(title)
                return self._page(200, title, self._disambiguation(title))
        if path.startswith("/category/"):
            name = path[10:].replace("_", " ")
            if name in self.categories:
                return self._page(200, f"Category: {name}", self._category(name))
        return self._page(404, "Not found", "<h1>No such article</h1><p>Try the search.</p>")

    def _search(self, text: str) -> Response:
        wanted = " ".join(text.split()).casefold()
        titles = [*self.articles, *(n for n, ps in self.names.items() if len(ps) > 1)]
        exact = next((t for t in titles if t.casefold() == wanted), None)
        if exact is not None:
            return 303, {"Location": f"/wiki/{slug(exact)}"}, b""
        words = wanted.split()
        found = sorted(t for t in titles if words and all(w in t.casefold() for w in words))
        items = "".join(f"<li>{_link(t)}</li>" for t in found)
        count = f"{len(found)} result{'' if len(found) == 1 else 's'}"
        body = f"<h1>Search results for {_e(text)}</h1><p>{count}</p><ul>{items}</ul>"
        return self._page(200, "Search", body)

    # --- pages ------------------------------------------------------------------------------

    def _page(self, status: int, title: str, main: str) -> Response:
        wiki = _e(self.world["name"])
        body = (
            f"<!doctype html><html lang=en><head><meta charset=utf-8>"
            f"<title>{_e(title)} — {wiki}</title></head><body>"
            f'<header><nav><a href="/">Main page</a></nav>'
            f'<form action="/search" method="get" role="search">'
            f'<input type="search" name="q" aria-label="Search" placeholder="Search {wiki}">'
            f"<button type=submit>Search</button></form></header>"
            f"<main>{main}</main><footer><p>{wiki}, a Steplab test wiki.</p></footer>"
            f"</body></html>"
        )
        return status, {"Content-Type": "text/html; charset=utf-8"}, body.encode()

    def _home(self) -> str:
        cats = "".join(f"<li>{_link(c, 'category')}</li>" for c in self.categories)
        return (
            f"<h1>Welcome to {_e(self.world['name'])}</h1>"
            f"<p>{len(self.articles)} articles about places and people.</p>"
            f"<h2>Categories</h2><ul>{cats}</ul>"
        )

    @staticmethod
    def _infobox(title: str, rows: list[tuple[str, str]]) -> str:
        cells = "".join(f"<tr><th>{k}</th><td>{v}</td></tr>" for k, v in rows)
        return f'<table aria-label="Infobox"><caption>{_e(title)}</caption>{cells}</table>'

    def _article(self, title: str) -> str:
        kind, record = self.articles[title]
        box, text, cats = getattr(self, f"_{kind}")(record)
        foot = " · ".join(_link(c, "category") for c in cats)
        return f"<h1>{_e(title)}</h1>{self._infobox(title, box)}{text}<p>Categories: {foot}</p>"

    def _country(self, c: Mapping[str, Any]):
        box = [
            ("Capital", _link(c["capital"])),
            ("Population", f"{c['population']:,}"),
            ("Area", f"{c['area']:,} km²"),
            ("Currency", _e(c["currency"])),
        ]
        others = [x["name"] for x in self.world["cities"] if x["country"] == c["name"]]
        others = [_link(x) for x in others if x != c["capital"]]
        text = (
            f"<p>{_e(c['name'])} is a country whose capital is {_e(c['capital'])}. Its other "
            f"cities include {_and(others)}.</p>"
        )
        return box, text, ["Countries"]

    def _city(self, c: Mapping[str, Any]):
        box = [
            ("Country", _link(c["country"])),
            ("Population", f"{c['population']:,}"),
            ("Founded", str(c["founded"])),
            ("Mayor", _link(c["mayor"])),
        ]
        capital = self.countries[c["country"]]["capital"] == c["name"]
        text = f"<p>{_e(c['name'])} is a {'capital ' if capital else ''}city in {_e(c['country'])}."
        natives = [_link(p["title"]) for p in self.world["people"] if p["born_in"] == c["name"]]
        if natives:
            text += f" People born here include {_and(natives)}."
        text += "</p>"
        twins = [
            x["name"]
            for x in self.world["cities"]
            if x["name"] != c["name"] and (x["name"].endswith(" " + c["name"])
                                           or c["name"].endswith(" " + x["name"]))
        ]  # fmt: skip
        if twins:
            text = f"<p><i>Not to be confused with {_link(twins[0])}.</i></p>" + text
        return box, text, [f"Cities in {c['country']}"]

    def _person(self, p: Mapping[str, Any]):
        country = next(c["country"] for c in self.world["cities"] if c["name"] == p["born_in"])
        box = [
            ("Born", f"{p['birth_year']}, {_link(p['born_in'])}"),
            ("Occupation", _e(p["occupation"].capitalize())),
        ]
        if p["mayor_of"]:
            box.append(("Office", f"Mayor of {_e(p['mayor_of'])}"))
        text = (
            f"<p>{_e(p['name'])} (born {p['birth_year']}) is a {_e(p['occupation'])} from "
            f"{_link(country)}.</p>"
        )
        if p["title"] != p["name"]:
            text = f"<p><i>For others of this name, see {_link(p['name'])}.</i></p>" + text
        return box, text, [plural(p["occupation"]), f"People from {country}"]

    def _disambiguation(self, name: str) -> str:
        items = "".join(
            f"<li>{_link(p['title'])}, a {_e(p['occupation'])} born in {_e(p['born_in'])}</li>"
            for p in sorted(self.names[name], key=lambda p: p["title"])
        )
        return f"<h1>{_e(name)}</h1><p>{_e(name)} may refer to:</p><ul>{items}</ul>"

    def _category(self, name: str) -> str:
        items = "".join(f"<li>{_link(t)}</li>" for t in self.categories[name])
        return f"<h1>Category: {_e(name)}</h1><ul>{items}</ul>"
