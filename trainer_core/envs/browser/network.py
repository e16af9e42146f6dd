"""Launching Debian's Chromium headless with Playwright, and browser contexts confined to an
episode's own sites.

Confinement has layers, so that one gap does not open the network:

* the context's proxy is a port on 127.0.0.1 that refuses connections, bypassed only for the
  episode's origins (``127.0.0.1:PORT``; Playwright adds ``<-loopback>``, so other loopback ports
  go to the proxy too): every other request fails in the network stack, redirects included (a
  server's 302 to another host is followed by Chromium without passing Playwright's routes);
* ``context.route("**/*")`` aborts every request whose origin is not one of the episode's before
  it is sent (``file://`` included), and records it;
* every WebSocket is closed before it connects (``route_web_socket``);
* WebRTC and WebTransport, whose UDP neither the proxy nor the routes see, are removed from every
  frame (iframes and popups included) by an init script; QUIC is off (``--disable-quic``, so a
  worker's WebTransport sends nothing either, as measured);
* service workers are blocked and downloads refused (``accept_downloads=False``);
* a browser launched here resolves no host name (``--host-resolver-rules``; DNS prefetching
  off): no DNS query leaves for a name a page mentions (measured with strace: without the rules
  a page's names were queried; with them only Chromium's own probe of google.com was).
"""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from trainer_core.errors import ConfigError

CHROMIUM = os.environ.get("STEPLAB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    # no name is ever resolved (the sites are 127.0.0.1): no DNS prefetch or lookup leaves either
    "--dns-prefetch-disable",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
]
#: run in every frame before its scripts: no WebRTC (its STUN packets are UDP that neither the
#: proxy nor the routes see: measured, a page's RTCPeerConnection reached another loopback port
#: until this was added; --force-webrtc-ip-handling-policy did not stop it) and no WebTransport
NO_UDP_SCRIPT = """
for (const name of ["RTCPeerConnection", "webkitRTCPeerConnection", "RTCDataChannel",
                    "RTCRtpSender", "RTCRtpReceiver", "RTCIceCandidate", "WebTransport"]) {
  try { delete window[name]; } catch (e) {}
  try { Object.defineProperty(window, name, {value: undefined, configurable: false}); } catch (e) {}
}
if (navigator.mediaDevices) {
  try { Object.defineProperty(navigator, "mediaDevices", {value: undefined}); } catch (e) {}
}
"""
VIEWPORT = {"width": 1280, "height": 800}

_refusing: socket.socket | None = None


def refusing_port() -> int:
    """A loopback port that refuses every connection (bound, never listening), held for the life
    of the process so that nothing else can take it."""
    global _refusing
    if _refusing is None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        _refusing = sock
    return _refusing.getsockname()[1]


@dataclass
class BrowserHandle:
    """A running Playwright and its Chromium; ``close()`` stops both."""

    playwright: Any
    browser: Any

    def close(self) -> None:
        try:
            self.browser.close()
        finally:
            self.playwright.stop()


def launch_browser(executable: str | None = None) -> BrowserHandle:
    """Headless Chromium (Debian's, ``/usr/bin/chromium`` or ``$STEPLAB_CHROMIUM``) under
    Playwright's sync API. Use it from one thread; share it between environments of that thread
    (``BrowserEnv(browser=handle.browser)``): each episode gets its own context."""
    path = executable or CHROMIUM
    if not os.path.exists(path):
        raise ConfigError(
            f"Chromium is not at {path}: apt-get install chromium (or set STEPLAB_CHROMIUM)"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        raise ConfigError(
            "the browser environment needs playwright: pip install playwright"
        ) from None
    playwright = sync_playwright().start()
    try:
        browser = playwright.chromium.launch(
            executable_path=path, headless=True, args=CHROMIUM_ARGS
        )
    except Exception:
        playwright.stop()
        raise
    return BrowserHandle(playwright, browser)


def host_port(origin: str) -> str:
    parts = urlsplit(origin)
    return f"{parts.hostname}:{parts.port}"


def is_allowed(url: str, origins: Iterable[str]) -> bool:
    """Whether ``url`` is plain http to one of ``origins`` (``http://127.0.0.1:PORT``)."""
    parts = urlsplit(url)
    if parts.scheme != "http" or not parts.hostname:
        return False
    try:
        netloc = f"{parts.hostname}:{parts.port or 80}"
    except ValueError:
        return False
    return netloc in {host_port(o) for o in origins}


def confined_context(
    browser: Any,
    origins: list[str],
    *,
    on_blocked: Callable[[str], None] | None = None,
    viewport: dict[str, int] | None = None,
) -> Any:
    """A new browser context that reaches ``origins`` and nothing else (see the module
    docstring). ``on_blocked(url)`` is told of every request and WebSocket it stops."""
    if not origins:
        raise ConfigError("a confined context needs at least one origin")
    context = browser.new_context(
        viewport=viewport or VIEWPORT,
        service_workers="block",
        accept_downloads=False,
        java_script_enabled=True,
        proxy={
            "server": f"http://127.0.0.1:{refusing_port()}",
            "bypass": ",".join(host_port(o) for o in origins),
        },
    )

    def route(route: Any) -> None:
        url = route.request.url
        if is_allowed(url, origins):
            route.continue_()
        else:
            if on_blocked:
                on_blocked(url)
            route.abort("blockedbyclient")

    def websocket(ws: Any) -> None:
        if on_blocked:
            on_blocked(ws.url)
        ws.close(code=1008, reason="blocked: this episode reaches only its own sites")

    context.add_init_script(NO_UDP_SCRIPT)
    context.route("**/*", route)
    context.route_web_socket(re.compile(r".*"), websocket)
    return context
