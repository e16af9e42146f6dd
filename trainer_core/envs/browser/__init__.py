"""The browser environment (``steplab/browser``): Steplab's own web sites on loopback, driven
through headless Chromium with Playwright. Playwright is imported only when a browser starts."""

from trainer_core.envs.browser.env import BrowserEnv
from trainer_core.envs.browser.network import BrowserHandle, launch_browser

__all__ = ["BrowserEnv", "BrowserHandle", "launch_browser"]
