"""steplab/browser: the observation, every browser action on the shop, targeting by id and by role
and name, screenshots as files, the scripted reference on every template of every split, failing
episodes, and the network confined to the episode's own site.

One Chromium per module (``browser``); every episode gets its own context."""

from __future__ import annotations

import http.server
import os
import re
import socket
import struct
import threading
import urllib.request
from pathlib import Path

import pytest

from trainer_core.envs import list_envs, make
from trainer_core.envs.profiles import get_profile
from trainer_core.policies.scripted import ScriptedPolicy, run_episode
from trainer_core.tasks.model import Task
from trainer_core.tasks.suites.web_shop import SPLITS, TEMPLATES, shop_task

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists("/usr/bin/chromium"), reason="chromium is not installed"),
]


@pytest.fixture(scope="module")
def browser():
    from trainer_core.envs.browser import launch_browser

    handle = launch_browser()
    yield handle.browser
    handle.close()


@pytest.fixture
def env(browser, tmp_path):
    env = make("steplab/browser", browser=browser, data_dir=tmp_path)
    yield env
    env.close()


def act(env, tool, **params):
    return env.step({"tool": tool, "params": params})


def ids(observation, role, name=None):
    """The ids of the lines of ``role`` (and ``name``) in an observation."""
    pattern = rf"\[(\d+)\] {role} " + (re.escape(repr(name)) if name is not None else "")
    return re.findall(pattern, observation)


def jpeg_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:2] == b"\xff\xd8", "not a JPEG"
    i = 2
    while i < len(data):
        marker, length = data[i + 1], struct.unpack(">H", data[i + 2 : i + 4])[0]
        if marker in (0xC0, 0xC1, 0xC2):
            height, width = struct.unpack(">HH", data[i + 5 : i + 9])
            return width, height
        i += 2 + length
    raise AssertionError("no frame header")


SHOP = shop_task(0, "train")  # cheapest_price: a shop with an empty cart
PRODUCT = next(p for p in SHOP.metadata["catalog"]["products"] if p["stock"])


# --------------------------------------------------------------------------------------------
# registration, observation
# --------------------------------------------------------------------------------------------


def test_registered_with_the_browser_profile(browser):
    assert "steplab/browser" in list_envs()
    env = make("steplab/browser", browser=browser, screenshots=False)
    try:
        assert env.domain == "browser"
        assert env.tool_names() == [
            "navigate", "click", "type_text", "scroll", "extract_text", "select", "go_back",
            "submit",
        ]  # fmt: skip
    finally:
        env.close()
    profile = get_profile("browser")
    for alias, tool in [("goto", "navigate"), ("type", "type_text"), ("back", "go_back"),
                        ("read", "extract_text")]:  # fmt: skip
        assert profile.canonical_tool_name(alias) == tool
    assert profile.category_of("go_back") == "navigate"
    assert profile.tool("select").target_param == "element_id"


def test_the_observation_lists_elements_with_ids(env):
    ts = env.reset(task=SHOP)
    assert ts.observation.startswith(SHOP.prompt + "\n\nURL: http://127.0.0.1:")
    lines = ts.observation.split("\n\n", 1)[1].splitlines()
    assert lines[1] == f"Title: Home — {SHOP.metadata['catalog']['name']}"
    assert "[1] link 'Home'" in lines and "[2] link 'Cart (0)'" in lines
    assert "  [3] searchbox 'Search' value=''" in lines
    for category in SHOP.metadata["catalog"]["categories"]:
        assert len(ids(ts.observation, "link", category)) == 1
    assert ids(ts.observation, "heading", f"Welcome to {SHOP.metadata['catalog']['name']}")
    numbers = [int(n) for n in re.findall(r"^\s*\[(\d+)\]", ts.observation, re.M)]
    assert numbers == sorted(set(numbers))
    assert ts.info["url"] == ts.info["site"] + "/" and not ts.done


# --------------------------------------------------------------------------------------------
# every action on the shop
# --------------------------------------------------------------------------------------------


def test_type_click_select_and_read_on_the_shop(env):
    ts = env.reset(task=SHOP)
    ts = act(env, "type", element_id=ids(ts.observation, "searchbox")[0], text=PRODUCT["name"])
    assert ts.observation.startswith(f"Typed {PRODUCT['name']!r} into [")
    assert f"searchbox 'Search' value={PRODUCT['name']!r}" in ts.observation
    ts = act(env, "click", element_id="button 'Search'")
    assert "/search?q=" in ts.info["url"] and "1 product" in ts.observation
    link = ids(ts.observation, "link", PRODUCT["name"])[0]
    ts = act(env, "click", element_id=int(link))  # a number is taken as the id too
    assert ts.info["url"].endswith(f"/product/{PRODUCT['id']}") and ts.info["element"] == link
    assert "combobox 'Quantity' value='1' options=['1', '2', '3', '4', '5']" in ts.observation
    ts = act(env, "select", element_id="combobox 'Quantity'", value="3")
    assert "combobox 'Quantity' value='3'" in ts.observation
    ts = act(env, "click", element_id="button 'Add to cart'")
    assert ts.info["url"].endswith("/cart") and "link 'Cart (3)'" in ts.observation
    assert env.unwrapped.server.site.state() == {"cart": {PRODUCT["id"]: 3}}
    total = next(line for line in ts.observation.splitlines() if "Total:" in line)
    read = act(env, "read", element_id=re.search(r"\[(\d+)\]", total).group(1))
    assert read.observation.startswith("Text of [") and "Total: €" in read.observation
    page = act(env, "read")
    assert page.observation.startswith("Text of the page: Home Cart (3)")
    assert "screenshot" not in page.info  # a read changes nothing on the page


def test_filters_checkbox_and_press_enter(env):
    env.reset(task=SHOP)
    category = SHOP.metadata["catalog"]["categories"][1]
    ts = act(env, "click", element_id=f"link {category!r}")
    assert "checkbox 'In stock only' checked=false" in ts.observation
    ts = act(env, "click", element_id="checkbox 'In stock only'")
    assert "checkbox 'In stock only' checked=true" in ts.observation
    ts = act(env, "select", element_id="combobox 'Sort'", value="price_desc")  # by value
    assert "combobox 'Sort' value='Price: high to low'" in ts.observation
    ts = act(env, "click", element_id="button 'Apply filters'")
    assert "in_stock=1" in ts.info["url"] and "sort=price_desc" in ts.info["url"]
    stocked = [
        p for p in SHOP.metadata["catalog"]["products"] if p["category"] == category and p["stock"]
    ]
    names = re.findall(r"\] link '([^']+)'", ts.observation)
    assert names[2:] == [p["name"] for p in sorted(stocked, key=lambda p: -p["price"])]
    ts = act(env, "type_text", element_id="searchbox 'Search'", text="zzz", press_enter=True)
    assert "q=zzz" in ts.info["url"] and "0 products" in ts.observation


def test_navigate_back_and_scroll(env):
    ts = env.reset(task=SHOP)
    back = act(env, "back")
    assert back.info["error"] == "no_history" and "no earlier page" in back.observation
    ts = act(env, "goto", url="/cart")
    assert (
        ts.info["url"] == env.unwrapped.server.origin + "/cart"
        and "Your cart is empty." in ts.observation
    )
    ts = act(env, "navigate", url=env.unwrapped.server.origin + "/search?sort=price_asc")
    assert "All products" in ts.observation
    ts = act(env, "go_back")
    assert ts.info["url"].endswith("/cart") and ts.observation.startswith("Went back.")
    blocked = act(env, "goto", url="http://example.com/")
    assert blocked.info["error"] == "blocked" and blocked.info["url"].endswith("/cart")
    assert act(env, "goto", url="file:///etc/passwd").info["error"] == "blocked"
    # a long page is cut at the cap; scrolling moves the window
    env.unwrapped.observation_chars = 600
    ts = act(env, "goto", url="/search")
    assert "lines below, not shown: scroll down" in ts.observation
    assert "lines above" not in ts.observation
    first = re.findall(r"\[(\d+)\]", ts.observation)[0]
    for _ in range(3):
        ts = act(env, "scroll", direction="down")
    assert ts.observation.startswith("Scrolled down.") and "lines above" in ts.observation
    assert re.findall(r"\[(\d+)\]", ts.observation)[0] != first
    assert act(env, "scroll", direction="sideways").info["error"] == "invalid_params"


def test_targets_errors_are_observations(env):
    ts = env.reset(task=SHOP)
    missing = act(env, "click", element_id="[999]")
    assert missing.info["error"] == "no_element" and "no element [999]" in missing.observation
    assert "URL: " in missing.observation and not missing.done
    unknown = act(env, "click", element_id="button 'Fly'")
    assert unknown.info["error"] == "no_element" and "no button named 'Fly'" in unknown.observation
    nonsense = act(env, "click", element_id="the blue one")
    assert "is not an element" in nonsense.observation
    text = ids(ts.observation, "StaticText")[0]
    typed = act(env, "type_text", element_id=text, text="x")
    assert typed.info["error"] == "action_failed" and typed.info["element"] == text
    category = SHOP.metadata["catalog"]["categories"][0]
    act(env, "click", element_id=f"link {category!r}")
    option = act(env, "select", element_id="combobox 'Brand'", value="Nobody")
    assert option.info["error"] == "action_failed"
    assert "no option 'Nobody'; the options are 'All brands'," in option.observation
    bad = act(env, "click")
    assert bad.info["error"] == "invalid_params" and "element_id" in bad.observation
    # two elements with one role and name: the description is ambiguous
    env.reset(
        task=Task(prompt="p", metadata={"pages": {"/": "<a href=/a>Go</a><a href=/b>Go</a>"}})
    )
    twice = act(env, "click", element_id="link 'Go'")
    assert "2 elements are link 'Go'" in twice.observation and "give the id" in twice.observation


# --------------------------------------------------------------------------------------------
# screenshots
# --------------------------------------------------------------------------------------------


def test_screenshots_are_small_jpeg_files_under_the_data_directory(env, tmp_path, browser):
    ts = env.reset(task=SHOP)
    first = Path(ts.info["screenshot"])
    assert first.is_relative_to(tmp_path / "screenshots") and first.name == "step-000.jpg"
    width, height = jpeg_size(first)
    assert width == 640 and height == 400
    ts = act(env, "goto", url="/search")
    assert Path(ts.info["screenshot"]).name == "step-001.jpg"
    assert all(isinstance(v, str | int | float | list) for v in ts.info.values())
    off = make("steplab/browser", browser=browser, screenshots=False)
    try:
        assert "screenshot" not in off.reset(task=SHOP).info
    finally:
        off.close()
    own = make("steplab/browser", browser=browser)  # no data_dir: a temporary one, removed at close
    shot = Path(own.reset(task=SHOP).info["screenshot"])
    origin = own.unwrapped.server.origin
    assert shot.exists()
    own.close()
    assert not shot.exists()
    with pytest.raises(OSError):
        urllib.request.urlopen(origin + "/", timeout=2)


def test_an_environment_with_its_own_browser_steps_from_any_thread():
    """Collect steps environments in worker threads, and the Timeout wrapper steps them in a
    helper thread: an environment with its own Chromium runs Playwright in one thread of its own."""
    found: dict = {}

    def episode():
        env = make("steplab/browser", step_seconds=60, screenshots=False)
        try:
            env.reset(task=SHOP)
            found["ts"] = env.step({"tool": "goto", "params": {"url": "/cart"}})
        finally:
            env.close()

    worker = threading.Thread(target=episode)
    worker.start()
    worker.join(120)
    assert "Your cart is empty." in found["ts"].observation and "error" not in found["ts"].info


def test_collect_records_the_screenshot_path_of_every_step(tmp_path):
    from trainer_core.rollouts.collect import collect

    [result] = collect(
        "steplab/browser",
        [shop_task(4)],
        lambda _seed: ScriptedPolicy(),
        env_kwargs={"data_dir": str(tmp_path)},
    )
    steps = result.trajectory.steps
    assert result.trajectory.outcome.success and len(steps) == len(shop_task(4).reference_solution)
    shots = [Path(s.metadata["screenshot"]) for s in steps[:-1]]  # submit changes no page
    assert all(p.is_file() and p.is_relative_to(tmp_path) for p in shots)
    assert len(set(shots)) == len(shots) and "screenshot" not in steps[-1].metadata


# --------------------------------------------------------------------------------------------
# the reference, and failing episodes
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("split", list(SPLITS))
def test_the_reference_solves_every_template(browser, split):
    env = make("steplab/browser", browser=browser, screenshots=False)
    try:
        first = SPLITS[split][0]
        for seed in range(first + 1, first + 1 + 2 * len(TEMPLATES), 2):  # each template once
            task = shop_task(seed, split, template=list(TEMPLATES)[(seed // 2) % len(TEMPLATES)])
            steps, last = run_episode(env, ScriptedPolicy(), task)
            assert last.terminated and last.reward == 1.0, (
                task.metadata["template"],
                last.info["outcome"],
                [(a, s.observation[:300]) for a, s in steps if "error" in s.info],
            )
            assert not any("error" in s.info for _, s in steps)
    finally:
        env.close()


def test_empty_and_wrong_episodes_fail(env):
    env.reset(task=SHOP)
    empty = act(env, "submit")
    assert empty.terminated and empty.reward == 0.0
    env.reset(task=SHOP)
    wrong = act(env, "submit", answer="0.01")
    assert wrong.reward == 0.0 and "not correct" in wrong.observation
    cart_task = shop_task(1)  # add_named
    assert cart_task.checker == "final_state"
    env.reset(task=cart_task)
    assert act(env, "submit").reward == 0.0
    target = next(iter(cart_task.metadata["expected_database"]["cart"]))
    other = next(
        p for p in cart_task.metadata["catalog"]["products"] if p["stock"] and p["id"] != target
    )
    env.reset(task=cart_task)
    act(env, "goto", url=f"/product/{other['id']}")
    act(env, "click", element_id="button 'Add to cart'")
    done = act(env, "submit")
    assert done.reward == 0.0 and done.info["final_state"] == {"cart": {other["id"]: 1}}


# --------------------------------------------------------------------------------------------
# the network
# --------------------------------------------------------------------------------------------


class _Recorder(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.server.requests.append(self.path)
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(b"<h1>the other host</h1>")

    def log_message(self, *args):
        pass


@pytest.fixture
def other_host():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.requests = []
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


SHADOW_PAGE = """<h1>Widgets</h1>
<fancy-card><a slot="more" href="/details">Details</a></fancy-card>
<iframe src="/frame" title="Order form"></iframe>
<p id="said">nothing yet</p>
<script>
  customElements.define("fancy-card", class extends HTMLElement {
    connectedCallback() {
      const root = this.attachShadow({mode: "open"});
      root.innerHTML = '<h2>Inside the card</h2><button id="b">Press me</button>'
        + '<slot name="more"></slot>';
      root.getElementById("b").onclick = () => {
        document.getElementById("said").textContent = "pressed in the shadow";
      };
    }
  });
</script>"""
FRAME_PAGE = """<form action="/ordered"><label>Quantity <input name="qty"></label>
<button>Order</button></form>"""


def test_shadow_dom_and_same_origin_frames_are_seen_and_acted_on(env):
    task = Task(
        prompt="Use the widgets.",
        metadata={
            "site": "static",
            "pages": {"/": SHADOW_PAGE, "/frame": FRAME_PAGE, "/ordered": "<h1>Ordered</h1>"},
        },
    )
    ts = env.reset(task=task)
    seen = ts.observation
    assert "heading 'Inside the card'" in seen and "link 'Details'" in seen
    lines = seen.splitlines()
    frame = next(i for i, line in enumerate(lines) if "iframe 'Order form'" in line)
    assert "textbox 'Quantity'" in lines[frame + 1] and lines[frame + 1].startswith("  ")
    ts = act(env, "click", element_id="button 'Press me'")
    assert "pressed in the shadow" in ts.observation
    (qty,) = ids(ts.observation, "textbox", "Quantity")
    act(env, "type_text", element_id=qty, text="3")
    ts = act(env, "click", element_id="button 'Order'")
    assert not ts.info.get("error"), ts.observation
    assert "/ordered" in env.unwrapped.server.site.state()["requested"]


def test_nothing_reaches_another_host(env, other_host):
    other = f"127.0.0.1:{other_host.server_address[1]}"
    page = f"""<h1>Greedy page</h1>
        <img src="http://{other}/img" alt="pixel">
        <iframe src="http://{other}/iframe" title="frame"></iframe>
        <script>
          fetch("http://{other}/fetch").catch(() => {{}});
          try {{ new WebSocket("ws://{other}/ws"); }} catch (e) {{}}
          navigator.sendBeacon && navigator.sendBeacon("http://{other}/beacon", "x");
        </script>
        <a href="/redirect">away</a> <a href="http://{other}/link">direct</a>"""
    task = Task(
        prompt="Stay home.",
        metadata={
            "site": "static",
            "pages": {
                "/": page,
                "/refresh": f'<meta http-equiv="refresh" content="0;url=http://{other}/meta">',
            },
            "redirects": {"/redirect": f"http://{other}/redirected"},
        },
    )
    ts = env.reset(task=task)
    assert "heading 'Greedy page'" in ts.observation
    act(env, "click", element_id="link 'away'")  # a server redirect to the other host
    env.unwrapped.page.goto(env.unwrapped.server.origin + "/")
    act(env, "click", element_id="link 'direct'")
    act(env, "goto", url="/refresh")
    act(env, "goto", url=f"http://{other}/goto")
    env.unwrapped.page.wait_for_timeout(300)
    assert other_host.requests == []
    blocked = " ".join(
        url for _, step in env.unwrapped.history for url in step.info.get("blocked", [])
    )
    assert f"{other}/img" in blocked and f"{other}/fetch" in blocked and f"{other}/ws" in blocked
    assert "/redirect" in env.unwrapped.server.site.state()["requested"]


def test_no_udp_leaves_the_page(env):
    """WebRTC's STUN and WebTransport's QUIC are UDP, out of the proxy's and the routes' sight."""
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    udp.settimeout(0.1)
    port = udp.getsockname()[1]
    script = f"""
      let PC = window.RTCPeerConnection;
      if (!PC) {{  // a fresh frame's window, as a page would try next
        const frame = document.createElement("iframe");
        document.body.appendChild(frame);
        PC = frame.contentWindow.RTCPeerConnection;
      }}
      document.title = "peer connection: " + typeof PC;
      const pc = new PC({{iceServers: [{{urls: "stun:127.0.0.1:{port}"}}]}});
      pc.createDataChannel("x");
      pc.createOffer().then((offer) => pc.setLocalDescription(offer));"""
    worker = f"new WebTransport('https://127.0.0.1:{port}/').ready.catch(() => {{}});"
    page = (
        f"<h1>UDP</h1><script>{script}</script><script>new Worker(URL.createObjectURL("
        f'new Blob(["{worker}"], {{type: "text/javascript"}})));</script>'
    )
    try:
        ts = env.reset(task=Task(prompt="p", metadata={"pages": {"/": page}}))
        assert "Title: peer connection: undefined" in ts.observation
        received = []
        for _ in range(20):  # two seconds: STUN retries within the first
            try:
                received.append(udp.recvfrom(2048))
            except TimeoutError:
                pass
        assert received == []
    finally:
        udp.close()
