"""The loopback web server of an episode: a threaded ``http.server`` bound to 127.0.0.1 on a free
port, answering from a site object, started at reset and stopped at the next reset or at close.

A site has ``handle(method, path, query, form) -> (status, headers, body)`` and ``state()`` (what
the checker sees at the end). Four kinds are built in: ``shop`` (the generated shop,
:class:`~trainer_core.tasks.suites.web_shop.ShopSite`), ``booking`` (the generated booking site,
:class:`~trainer_core.tasks.suites.web_booking.BookingSite`), ``wiki`` (the generated reference
wiki, :class:`~trainer_core.tasks.suites.web_wiki.WikiSite`) and ``static`` (pages given by the
task: ``metadata["pages"]`` path -> HTML, and ``metadata["redirects"]`` path -> location).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlsplit

from trainer_core.errors import InputError

MAX_BODY = 64 * 1024


class Site(Protocol):
    def handle(
        self, method: str, path: str, query: Mapping[str, str], form: Mapping[str, str]
    ) -> tuple[int, dict[str, str], bytes]: ...

    def state(self) -> dict[str, Any]: ...


class StaticSite:
    """Fixed pages (path -> HTML) and redirects (path -> location); its state is the list of
    paths requested."""

    def __init__(self, pages: Mapping[str, str], redirects: Mapping[str, str] | None = None):
        self.pages = dict(pages)
        self.redirects = dict(redirects or {})
        self.requested: list[str] = []

    def handle(self, method, path, query, form):
        self.requested.append(path)
        if path in self.redirects:
            return 302, {"Location": self.redirects[path]}, b""
        if path in self.pages:
            return 200, {"Content-Type": "text/html; charset=utf-8"}, self.pages[path].encode()
        return 404, {"Content-Type": "text/html; charset=utf-8"}, b"<h1>Not found</h1>"

    def state(self) -> dict[str, Any]:
        return {"requested": list(self.requested)}


def build_site(metadata: Mapping[str, Any]) -> Site:
    """The site a task's metadata describes (``site``: ``shop``, ``booking``, ``wiki`` or
    ``static``)."""
    kind = metadata.get("site", "static" if "pages" in metadata else "")
    if kind == "shop":
        from trainer_core.tasks.suites.web_shop import ShopSite

        if not isinstance(metadata.get("catalog"), Mapping):
            raise InputError("a shop task carries its catalog in metadata['catalog']")
        return ShopSite(metadata["catalog"], metadata.get("cart") or {})
    if kind in ("booking", "wiki"):
        if not isinstance(metadata.get("world"), Mapping):
            raise InputError(f"a {kind} task carries its site in metadata['world']")
        if kind == "booking":
            from trainer_core.tasks.suites.web_booking import BookingSite

            return BookingSite(metadata["world"], metadata.get("bookings") or [])
        from trainer_core.tasks.suites.web_wiki import WikiSite

        return WikiSite(metadata["world"])
    if kind == "static":
        pages = metadata.get("pages")
        if not isinstance(pages, Mapping) or not pages:
            raise InputError("a static site task carries metadata['pages']: path -> HTML")
        return StaticSite(pages, metadata.get("redirects"))
    raise InputError(
        "a browser task names its site in metadata['site']: 'shop' (with a catalog, see "
        "trainer_core.tasks.suites.web_shop), 'booking' or 'wiki' (with a world, see "
        "trainer_core.tasks.suites.web_booking and web_wiki) or 'static' (with metadata['pages'])"
    )


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.0"

    def do_GET(self) -> None:
        self._answer("GET", {})

    def do_POST(self) -> None:
        length = min(int(self.headers.get("Content-Length") or 0), MAX_BODY)
        body = self.rfile.read(length).decode("utf-8", "replace")
        self._answer("POST", dict(parse_qsl(body, keep_blank_values=True)))

    def _answer(self, method: str, form: dict[str, str]) -> None:
        parts = urlsplit(self.path)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        with self.server.lock:  # one request at a time: the site's state is plain Python
            status, headers, body = self.server.site.handle(method, parts.path, query, form)
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, site: Site):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.site = site
        self.lock = threading.Lock()


class SiteServer:
    """Serves ``site`` on 127.0.0.1 (a free port) from a daemon thread until ``stop()``."""

    def __init__(self, site: Site):
        self.site = site
        self._server = _Server(site)
        self.origin = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},  # shutdown() waits up to one interval
            name="steplab-site",
            daemon=True,
        )
        self._thread.start()

    @property
    def host_port(self) -> str:
        return self.origin.removeprefix("http://")

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
