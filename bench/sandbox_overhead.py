"""Per-call overhead of the local sandbox backend over bare bubblewrap with the same arguments.

    python bench/sandbox_overhead.py [--runs 200]

Runs ``/bin/true`` and ``echo hi`` (argv, no shell) N times each, interleaved round by round:

* ``bare``: a plain ``subprocess.run`` (no isolation at all);
* ``bwrap``: bubblewrap alone with exactly the sandbox's command line (the same namespaces,
  mounts and environment: :func:`~trainer_core.sandboxes.local.command.command_line` of the same
  workspace), run with ``subprocess.run`` in a new session;
* ``local``: ``LocalSandbox.exec`` (that bubblewrap command line, plus the sandbox's cgroups,
  rlimits, the wall-time watch and output capture).

It prints the mean and median milliseconds per call and the ratio local/bwrap (the goal:
within 1.5x), then the docker backend's cost per exec and a scripted coding episode's.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trainer_core.sandboxes.local import LocalSandbox, host_support  # noqa: E402
from trainer_core.sandboxes.local.command import command_line  # noqa: E402
from trainer_core.sandboxes.shared import command_env  # noqa: E402

COMMANDS = {"/bin/true": ["/bin/true"], "echo hi": ["echo", "hi"]}
COLUMNS = ("bare", "bwrap", "local")


def _mean_ms(fn, runs: int) -> float:
    fn()  # warm up
    return statistics.fmean(_ms(fn) for _ in range(runs))


def _ms(fn) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def _callers(sandbox: LocalSandbox, argv: list[str]) -> dict:
    """The three ways of running ``argv`` (see the module's docstring)."""
    workspace = sandbox.workspace
    bwrap = host_support().bwrap
    isolated_argv = command_line(bwrap, workspace, argv, network=sandbox.limits.network)
    env = command_env(True, workspace)

    def bare():
        subprocess.run(argv, capture_output=True, check=True)  # noqa: S603

    def bwrap_alone():
        subprocess.run(  # noqa: S603
            isolated_argv, capture_output=True, check=True, cwd=workspace, env=env,
            start_new_session=True,
        )  # fmt: skip

    def local():
        result = sandbox.exec(argv)
        assert result.ok, result

    return {"bare": bare, "bwrap": bwrap_alone, "local": local}


def measure(sandbox: LocalSandbox, runs: int) -> dict[str, dict[str, list[float]]]:
    """command label -> column -> the milliseconds of each call (rounds interleaved)."""
    callers = {label: _callers(sandbox, argv) for label, argv in COMMANDS.items()}
    samples = {label: {column: [] for column in COLUMNS} for label in COMMANDS}
    for fns in callers.values():
        for fn in fns.values():
            fn()  # warm up
    for _ in range(runs):
        for label, fns in callers.items():
            for column in COLUMNS:
                samples[label][column].append(_ms(fns[column]))
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()

    with LocalSandbox() as sandbox:
        info = sandbox.info
        if not info.isolated:
            print(f"bubblewrap is not usable here ({info.details['bwrap']}): nothing to compare")
            return 1
        samples = measure(sandbox, args.runs)

    cgroups = [c for c in ("memory", "pids") if info.details.get(f"cgroup_{c}")]
    print(
        f"local backend: bubblewrap; cgroup {info.details['cgroup_version'] or '-'} "
        f"({', '.join(cgroups) or 'none'}); rlimits"
    )
    print(f"{args.runs} interleaved rounds per command; ms per call, mean / median")
    header = "".join(f"{c + ' ms':>16}" for c in COLUMNS)
    print(f"{'command':<10}{header} {'local/bwrap':>18}")
    for label, columns in samples.items():
        means = {c: statistics.fmean(v) for c, v in columns.items()}
        medians = {c: statistics.median(v) for c, v in columns.items()}
        cells = "".join(f"{means[c]:>8.2f} /{medians[c]:>6.2f}" for c in COLUMNS)
        ratio_mean = means["local"] / means["bwrap"]
        ratio_median = medians["local"] / medians["bwrap"]
        print(f"{label:<10}{cells} {ratio_mean:>8.2f}x /{ratio_median:>5.2f}x")
    print(_docker_per_exec())
    episodes, steps, seconds = _scripted_coding_episodes()
    print(
        f"scripted coding episode (make + Recorder, 4 steps incl. hidden tests at submit): "
        f"{episodes} episodes, {steps / seconds:.1f} steps/s, {seconds / episodes * 1000:.0f} ms/episode"
    )
    return 0


def _docker_per_exec(runs: int = 50) -> str:
    """Mean ms per ``DockerSandbox.exec(["true"])`` (one exec in a running container)."""
    from trainer_core.errors import SandboxError
    from trainer_core.sandboxes.docker import DockerSandbox

    sandbox = DockerSandbox()
    try:
        started = time.perf_counter()
        sandbox.start()
        start_ms = (time.perf_counter() - started) * 1000

        def docker_true():
            result = sandbox.exec(["true"])
            assert result.ok, result

        exec_ms = _mean_ms(docker_true, runs)
    except SandboxError as exc:
        return f"docker backend: not measured: {exc}"
    finally:
        sandbox.close()
    return (
        f"docker backend ({sandbox.base_url}, {sandbox.image}): {exec_ms:.1f} ms per exec "
        f"(mean of {runs} execs of `true`), {start_ms:.0f} ms to start a container"
    )


def _scripted_coding_episodes(n: int = 10) -> tuple[int, int, float]:
    import time

    from trainer_core.envs import make
    from trainer_core.envs.wrappers import Recorder

    files = {
        "mathy.py": "def clamp(x, lo, hi):\n    if x < lo:\n        return lo\n    if x > hi:\n        return x\n    return x\n"
    }
    hidden = {
        "test_clamp.py": "import unittest\nfrom mathy import clamp\n\n\nclass T(unittest.TestCase):\n"
        "    def test_above(self):\n        self.assertEqual(clamp(12, 0, 10), 10)\n"
    }
    task = {
        "id": "bench",
        "prompt": "fix clamp",
        "domain": "coding",
        "files": files,
        "test_command": "python3 -m unittest -q",
        "metadata": {"hidden_files": hidden},
    }
    actions = [
        {"tool": "read_file", "params": {"file_path": "mathy.py"}},
        {
            "tool": "edit_file",
            "params": {
                "file_path": "mathy.py",
                "old_string": "        return x\n    return x",
                "new_string": "        return hi\n    return x",
            },
        },
        {"tool": "bash", "params": {"command": "python3 -c 'import mathy'"}},
        {"tool": "submit", "params": {}},
    ]
    env = Recorder(make("steplab/sandbox"))
    steps = 0
    started = time.perf_counter()
    try:
        for _ in range(n):
            env.reset(task=task)
            for action in actions:
                ts = env.step(action)
                steps += 1
            assert ts.reward == 1.0, ts.observation
    finally:
        env.close()
    return n, steps, time.perf_counter() - started


if __name__ == "__main__":
    raise SystemExit(main())
