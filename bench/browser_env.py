"""steplab/browser against raw Playwright doing the same clicks: steps/s of scripted episodes,
the per-step overhead of the environment (observation walk, confinement, screenshots), and the
bytes of screenshot written per step.

    OMP_NUM_THREADS=1 .venv/bin/python bench/browser_env.py [--episodes 12] [--rounds 2]

Every variant plays the same web-shop tasks (one per template, train split) in one Chromium:

- ``raw playwright``: a plain context per episode on the same loopback site; each reference
  action is done with Playwright directly (``get_by_role(role, name=..., exact=True)`` then
  ``click`` / ``fill`` / ``select_option``), nothing read back: the floor.
- ``steplab, no screenshots``: ``BrowserEnv(screenshots=False)`` playing the reference (a confined
  context per episode, the element walk and the observation after every action).
- ``steplab, screenshots``: the same with the default screenshots (640 px JPEG, quality 50).

Episode time counts from the context's creation to the last action; steplab's also holds
starting and stopping its site server (raw's leaves it out) and the submit's check. The variants alternate within each round, so drift in the machine's load hits
all of them; figures are medians over rounds.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from pathlib import Path

from trainer_core.envs.browser import BrowserEnv, launch_browser
from trainer_core.envs.browser.server import SiteServer, build_site
from trainer_core.policies.scripted import ScriptedPolicy, run_episode
from trainer_core.tasks.suites.web_shop import TEMPLATES, shop_task

DESCRIPTION = re.compile(r"""^(\w+) (['"])(.*)\2$""")


def raw_episode(browser, task) -> tuple[int, float]:
    """The reference's actions with Playwright alone: (actions, seconds)."""
    server = SiteServer(build_site(task.metadata))
    try:
        started = time.perf_counter()
        context = browser.new_context(viewport={"width": 1280, "height": 800})
        page = context.new_page()
        page.goto(server.origin + "/", wait_until="load")
        actions = 0
        for call in task.reference_solution:
            if call.tool == "submit":
                break
            role, _, name = DESCRIPTION.match(call.params["element_id"]).groups()
            target = page.get_by_role(role, name=name, exact=True)
            if call.tool == "click":
                target.click()
            elif call.tool == "type_text":
                target.fill(call.params["text"])
            elif call.tool == "select":
                target.select_option(label=call.params["value"])
            page.wait_for_load_state("load")
            actions += 1
        seconds = time.perf_counter() - started
        context.close()
        return actions, seconds
    finally:
        server.stop()


def steplab_episode(env, task) -> tuple[int, float, int]:
    """The reference played by the environment: (actions, seconds, characters observed)."""
    started = time.perf_counter()
    steps, last = run_episode(env, ScriptedPolicy(), task)
    seconds = time.perf_counter() - started
    assert last.reward == 1.0, (task.id, last.info.get("outcome"))
    actions = sum(1 for action, _ in steps if action["tool"] != "submit")
    chars = sum(len(ts.observation) for action, ts in steps if action["tool"] != "submit")
    return actions, seconds, chars


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=len(TEMPLATES))
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    tasks = [shop_task(seed) for seed in range(args.episodes)]
    handle = launch_browser()
    shots_dir = Path(tempfile.mkdtemp(prefix="bench-browser-"))
    envs = {
        "steplab, no screenshots": BrowserEnv(browser=handle.browser, screenshots=False),
        "steplab, screenshots": BrowserEnv(browser=handle.browser, data_dir=shots_dir),
    }
    per_step: dict[str, list[float]] = {"raw playwright": [], **{k: [] for k in envs}}
    actions_total, chars_total = 0, 0
    try:
        raw_episode(handle.browser, tasks[0])  # warm up
        for env in envs.values():
            steplab_episode(env, tasks[0])
        for _ in range(args.rounds):
            raw_time, raw_actions = 0.0, 0
            for task in tasks:
                n, seconds = raw_episode(handle.browser, task)
                raw_actions += n
                raw_time += seconds
            per_step["raw playwright"].append(raw_time / raw_actions)
            for name, env in envs.items():
                total, actions = 0.0, 0
                for task in tasks:
                    n, seconds, chars = steplab_episode(env, task)
                    actions += n
                    total += seconds
                    chars_total += chars if name == "steplab, screenshots" else 0
                per_step[name].append(total / actions)
                actions_total = actions
        shots = list(shots_dir.rglob("*.jpg"))
        shot_bytes = statistics.mean(p.stat().st_size for p in shots) if shots else 0.0
    finally:
        for env in envs.values():
            env.close()
        handle.close()
    floor = statistics.median(per_step["raw playwright"])
    print(
        f"{args.episodes} scripted web-shop episodes ({actions_total} actions, the submits left "
        f"out) x {args.rounds} rounds, one Chromium; medians over rounds"
    )
    print(f"{'variant':<26}{'ms/step':>10}{'steps/s':>10}{'overhead ms':>13}{'x raw':>8}")
    for name, values in per_step.items():
        ms = statistics.median(values) * 1000
        extra = ms - floor * 1000
        print(f"{name:<26}{ms:>10.1f}{1000 / ms:>10.2f}{extra:>13.1f}{ms / (floor * 1000):>8.2f}")
    print(
        f"screenshots: {len(shots)} files, {shot_bytes / 1024:.1f} KiB per step (mean); "
        f"observation: {chars_total / max(1, actions_total * args.rounds):.0f} characters per step"
    )


if __name__ == "__main__":
    main()
