"""The browser environment (``steplab/browser``): a web site served by Steplab on loopback for
the episode, driven through headless Chromium (Playwright's sync API), one isolated browser
context per episode.

Tools (the ``browser`` domain profile; the short names are aliases)::

    navigate(url)                 goto: open a URL of the task's site (relative URLs allowed)
    click(element_id)             click an element
    type_text(element_id, text, press_enter?)   type: fill a text field
    select(element_id, value)     choose an option of a drop-down by its label (or value)
    scroll(direction)             up or down, most of a screen
    go_back()                     back: the previous page
    extract_text(element_id?)     read: the full text of an element, or of the page
    submit(answer?)               end the episode; the task's checker decides

``element_id`` is the number in brackets of the latest observation (``"12"``, ``"[12]"`` or
``12``), or the element's role and name as printed there (``"link 'Cart (1)'"``; it must name one
element). The step's ``info["element"]`` is the id acted on. Every observation after an action
is the page (:mod:`.page`); an action that fails says why and shows the page as it is.

Threads: Playwright's sync API works only in the thread that started it. An environment that
launches its own Chromium runs every call in one thread of its own, so it can be stepped from
any thread (collect's workers, the Timeout wrapper); one given ``browser=`` is used in the
caller's thread, which must be the thread that launched that browser.

Network: only the episode's own site; every other host, redirects to one, WebSockets, WebRTC,
service workers, ``file://`` and downloads are blocked (:mod:`.network`); ``info["blocked"]`` lists the
URLs stopped during the step. Screenshots (on by default): after reset and after every action, a
downscaled JPEG (``screenshot_width`` pixels wide, ``screenshot_quality``) written under
``data_dir`` (``screenshots/<episode>/step-NNN.jpg``); the step's ``info["screenshot"]`` is the
file's path, never the image. Without ``data_dir`` they go to a temporary directory removed at
close; ``screenshots=False`` turns them off.
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import shutil
import tempfile
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urljoin

from trainer_core.envs.browser.network import confined_context, is_allowed, launch_browser
from trainer_core.envs.browser.page import WALK_SCRIPT, render, resolve
from trainer_core.envs.browser.server import SiteServer, build_site
from trainer_core.envs.core import Action, TimeStep
from trainer_core.envs.toolenv import ProfileEnv
from trainer_core.errors import ConfigError
from trainer_core.tasks.model import Task, ToolSpec

#: the profile's tools this environment offers (screenshot and wait are for imported logs)
TOOLS = (
    "navigate",
    "click",
    "type_text",
    "select",
    "scroll",
    "go_back",
    "extract_text",
    "submit",
)
READ_CAP = 4000


class BrowserEnv(ProfileEnv):
    """A task's site on loopback, seen through Chromium (see the module docstring).
    ``reset(seed=k)`` without a task plays the ``k``-th web-shop task of ``split``."""

    profile_name = "browser"

    def __init__(
        self,
        split: str = "train",
        *,
        browser: Any = None,
        data_dir: str | Path | None = None,
        screenshots: bool = True,
        screenshot_width: int = 640,
        screenshot_quality: int = 50,
        observation_chars: int = 6000,
        action_timeout_ms: int = 5000,
    ):
        super().__init__()
        from trainer_core.tasks.suites.web_shop import SPLITS

        if split not in SPLITS:
            raise ConfigError(f"unknown split {split!r}; use {', '.join(SPLITS)}")
        if not 1 <= screenshot_quality <= 100 or screenshot_width < 16:
            raise ConfigError("screenshot_quality is 1..100 and screenshot_width at least 16")
        self.split = split
        self._tools = [t for t in self._tools if t.name in TOOLS]
        # Playwright in one thread of its own, or the caller's (see the module docstring)
        self._thread: ThreadPoolExecutor | None = None
        self._handle = None
        if browser is None:
            self._thread = ThreadPoolExecutor(1, thread_name_prefix="steplab-browser")
            try:
                self._handle = self._thread.submit(launch_browser).result()
            except BaseException:
                self._thread.shutdown(wait=False)
                raise
        self.browser = browser if browser is not None else self._handle.browser
        self.screenshots = screenshots
        self.screenshot_width = screenshot_width
        self.screenshot_quality = screenshot_quality
        self.observation_chars = observation_chars
        self.action_timeout_ms = action_timeout_ms
        self._tmp_dir: str | None = None
        if data_dir is None and screenshots:
            self._tmp_dir = tempfile.mkdtemp(prefix="steplab-browser-")
        self.data_dir = Path(data_dir or self._tmp_dir or tempfile.gettempdir())
        self.server: SiteServer | None = None
        self.context: Any = None
        self.page: Any = None
        self.elements: list[dict[str, Any]] = []
        self.blocked: list[str] = []
        self.episode = ""
        self._shots = itertools.count()

    @property
    def available_tools(self) -> list[ToolSpec]:
        return list(self._tools)

    # --- episode lifetime -----------------------------------------------------------------------

    def _reset(self, *, task: Task | None, seed: int | None) -> TimeStep:
        from trainer_core.tasks.suites.web_shop import SPLITS, shop_task

        if task is None:
            task = shop_task(SPLITS[self.split][0] + (seed or 0), self.split)
            self.task = task
        self._end_episode()
        meta = task.metadata or {}
        self.server = SiteServer(build_site(meta))
        self.blocked = []
        self.context = confined_context(
            self.browser, [self.server.origin], on_blocked=self.blocked.append
        )
        self.context.set_default_timeout(self.action_timeout_ms)
        self.context.on("page", self._on_page)
        self.page = self.context.new_page()
        self.episode = f"{task.id or 'task'}-{uuid.uuid4().hex[:8]}".replace("/", "_")
        self._shots = itertools.count()
        start = urljoin(self.server.origin + "/", str(meta.get("start_path") or "/"))
        self.page.goto(start, wait_until="load")
        page = self._observe()
        return TimeStep(
            observation=f"{task.prompt}\n\n{page}",
            info={"task_id": task.id, "site": self.server.origin, **self._extras()},
        )

    def _on_page(self, page: Any) -> None:
        self.page = page  # a popup becomes the page the agent sees

    def _end_episode(self) -> None:
        if self.context is not None:
            with contextlib.suppress(Exception):  # the browser may already be gone
                self.context.close()
            self.context = self.page = None
        if self.server is not None:
            self.server.stop()
            self.server = None

    def _run(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
        if self._thread is None:
            return fn(*args, **kwargs)
        return self._thread.submit(fn, *args, **kwargs).result()

    def reset(self, *, task: Task | dict | str | None = None, seed: int | None = None) -> TimeStep:
        return self._run(super().reset, task=task, seed=seed)

    def step(self, action: Any) -> TimeStep:
        return self._run(super().step, action)

    def _step(self, action: Action) -> TimeStep:
        target = action.params.get("element_id")
        if isinstance(target, int) and not isinstance(target, bool):  # an id given as a number
            action = Action(
                action.tool, {**action.params, "element_id": str(target)}, action.thought
            )
        return super()._step(action)

    def close(self) -> None:
        if self._closed:
            return
        self._run(self._shut_down)
        if self._thread is not None:
            self._thread.shutdown(wait=True)
            self._thread = None
        if self._tmp_dir is not None:
            shutil.rmtree(self._tmp_dir, ignore_errors=True)
        super().close()

    def _shut_down(self) -> None:
        self._end_episode()
        if self._handle is not None:
            self._handle.close()
            self._handle = None

    # --- what the agent sees ----------------------------------------------------------------------

    def _observe(self) -> str:
        page = self.page
        with contextlib.suppress(Exception):  # a page that never finishes loading is still shown
            page.wait_for_load_state("load", timeout=self.action_timeout_ms)
        try:
            self.elements = page.evaluate(WALK_SCRIPT)
            title = page.title()
        except Exception as exc:  # noqa: BLE001 - e.g. the page navigated while being read
            self.elements, title = [], f"(unreadable: {str(exc).splitlines()[0][:120]})"
        return render(page.url, title, self.elements, cap=self.observation_chars)

    def _extras(self) -> dict[str, Any]:
        info: dict[str, Any] = {"url": self.page.url}
        if self.blocked:
            info["blocked"] = list(self.blocked)
            self.blocked.clear()
        if self.screenshots:
            info["screenshot"] = self._screenshot()
        return info

    def _screenshot(self) -> str | None:
        """A downscaled JPEG of the viewport, written under the data directory; its path."""
        page = self.page
        try:
            view = page.evaluate("() => [window.scrollX, window.scrollY, innerWidth, innerHeight]")
            x, y, width, height = view
            cdp = self.context.new_cdp_session(page)
            try:
                shot = cdp.send(
                    "Page.captureScreenshot",
                    {
                        "format": "jpeg",
                        "quality": self.screenshot_quality,
                        "clip": {
                            "x": x,
                            "y": y,
                            "width": width,
                            "height": height,
                            "scale": min(1.0, self.screenshot_width / max(1, width)),
                        },
                    },
                )
            finally:
                cdp.detach()
        except Exception:  # noqa: BLE001 - no screenshot is not a failed step
            return None
        folder = self.data_dir / "screenshots" / self.episode
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"step-{next(self._shots):03d}.jpg"
        path.write_bytes(base64.b64decode(shot["data"]))
        return str(path)

    def _result(self, message: str, *, error: str = "", **info: Any) -> TimeStep:
        """The page after an action, with a line about the action first."""
        page = self._observe()
        data = {**info, **self._extras()}
        if error:
            data["error"] = error
        return TimeStep(observation=f"{message}\n{page}", info=data)

    def _locate(self, element_id: Any) -> tuple[Any, str, str]:
        """The locator of ``element_id``, its id, and an error message (empty when found)."""
        found, problem = resolve(element_id, self.elements)
        if found is None:
            return None, "", problem
        selector = f'[data-steplab-id="{found}"]'
        locator = self.page.locator(selector)  # open shadow roots are pierced
        if locator.count() == 0:  # an element of a same-origin frame
            inner = (f.locator(selector) for f in self.page.frames[1:])
            locator = next((loc for loc in inner if loc.count()), locator)
        if locator.count() == 0:
            return (
                None,
                found,
                (f"no element [{found}] on this page (ids are those of the latest observation)"),
            )
        return locator.first, found, ""

    def _describe(self, element: str) -> str:
        for e in self.elements:
            if str(e["id"]) == element:
                return f"[{element}] {e['role']} {e['name']!r}"
        return f"[{element}]"

    # --- tools ------------------------------------------------------------------------------------

    def tool_navigate(self, url: str) -> TimeStep:
        base = self.page.url if self.page.url.startswith("http") else self.server.origin + "/"
        target = urljoin(base, url.strip())
        if not is_allowed(target, [self.server.origin]):
            return self._result(
                f"Blocked: {target} is not part of this task's site ({self.server.origin}); "
                "only its pages can be opened.",
                error="blocked",
            )
        try:
            self.page.goto(target, wait_until="load")
        except Exception as exc:  # noqa: BLE001 - a failed navigation is an observation
            return self._result(f"Could not open {target}: {_first_line(exc)}", error="navigation")
        return self._result(f"Opened {target}.")

    def _act(self, element_id: Any, verb: str, action: Any) -> TimeStep:
        locator, found, problem = self._locate(element_id)
        if locator is None:
            return self._result(f"Cannot {verb}: {problem}.", error="no_element")
        described = self._describe(found)
        try:
            message = action(locator, described)
        except Exception as exc:  # noqa: BLE001 - Playwright's errors are the agent's to read
            return self._result(
                f"Cannot {verb} {described}: {_first_line(exc)}",
                error="action_failed",
                element=found,
            )
        return self._result(message, element=found)

    def tool_click(self, element_id: Any) -> TimeStep:
        return self._act(
            element_id, "click", lambda loc, described: loc.click() or f"Clicked {described}."
        )

    def tool_type_text(self, element_id: Any, text: str, press_enter: bool = False) -> TimeStep:
        def fill(loc: Any, described: str) -> str:
            loc.fill(text)
            if press_enter:
                loc.press("Enter")
            return f"Typed {text!r} into {described}" + (
                " and pressed Enter." if press_enter else "."
            )

        return self._act(element_id, "type into", fill)

    def tool_select(self, element_id: Any, value: str) -> TimeStep:
        def choose(loc: Any, described: str) -> str:
            options = loc.evaluate(
                "el => Array.from(el.options || []).map(o => [o.value, o.label.trim()])"
            )
            wanted = " ".join(str(value).split())
            chosen = next((v for v, label in options if label == wanted), None)
            if chosen is None:
                chosen = next((v for v, _ in options if v == wanted), None)
            if chosen is None:
                labels = ", ".join(repr(label) for _, label in options[:25]) or "none"
                raise ValueError(f"no option {wanted!r}; the options are {labels}")
            loc.select_option(value=chosen)
            return f"Selected {value!r} in {described}."

        return self._act(element_id, "select in", choose)

    def tool_scroll(self, direction: str) -> TimeStep:
        sign = {"down": 1, "up": -1}.get(direction.strip().lower())
        if sign is None:
            return self._result(
                f"Cannot scroll {direction!r}: the direction is up or down.", error="invalid_params"
            )
        self.page.evaluate(f"() => window.scrollBy(0, {sign} * Math.round(innerHeight * 0.8))")
        return self._result(f"Scrolled {direction.strip().lower()}.")

    def tool_go_back(self) -> TimeStep:
        cdp = self.context.new_cdp_session(self.page)
        try:
            history = cdp.send("Page.getNavigationHistory")
        finally:
            cdp.detach()
        index, entries = history["currentIndex"], history["entries"]
        if index < 1 or not is_allowed(entries[index - 1]["url"], [self.server.origin]):
            return self._result("There is no earlier page.", error="no_history")
        try:
            self.page.go_back(wait_until="load")
        except Exception as exc:  # noqa: BLE001
            return self._result(f"Cannot go back: {_first_line(exc)}", error="navigation")
        return self._result("Went back.")

    def tool_extract_text(self, element_id: Any = None) -> TimeStep:
        if element_id in (None, ""):
            text, where = self.page.inner_text("body"), "the page"
        else:
            locator, found, problem = self._locate(element_id)
            if locator is None:
                return TimeStep(
                    observation=f"Cannot read: {problem}.", info={"error": "no_element"}
                )
            text, where = locator.inner_text(), self._describe(found)
        text = " ".join(text.split())
        more = ""
        if len(text) > READ_CAP:
            more = f" ... ({len(text) - READ_CAP} more characters not shown)"
            text = text[:READ_CAP]
        return TimeStep(observation=f"Text of {where}: {text}{more}", info={"url": self.page.url})

    def tool_submit(self, answer: Any = None) -> TimeStep:
        from trainer_core.envs.toolenv import _outcome_dict
        from trainer_core.tasks.checkers import check_outcome, outcome_reward

        task = self.task or Task(prompt="")
        text = None if answer is None else str(answer)
        state = self.server.site.state() if self.server is not None else {}
        outcome = check_outcome(
            task,
            final_text=text or "",
            run_result={"database": state, "said": [text] if text else []},
        )
        verdict = "correct" if outcome.success else "not correct"
        what = f"Submitted {text!r}" if text is not None else "Submitted"
        return TimeStep(
            observation=f"{what} — {verdict}.",
            reward=outcome_reward(outcome),
            terminated=True,
            info={"outcome": _outcome_dict(outcome), "answer": text, "final_state": state},
        )


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
