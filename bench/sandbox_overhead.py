"""Per-call overhead of the local sandbox backend over a bare ``subprocess.run``.

    python bench/sandbox_overhead.py [--runs 200]

Runs ``/bin/true`` and ``echo hi`` (argv, no shell) N times each, bare and through
``LocalSandbox.exec`` (bubblewrap + cgroup + rlimits where this machine has them), and prints
the mean milliseconds per call and the ratio local/bare.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from trainer_core.sandboxes.local import LocalSandbox  # noqa: E402

COMMANDS = {"/bin/true": ["/bin/true"], "echo hi": ["echo", "hi"]}


def _mean_ms(fn, runs: int) -> float:
    fn()  # warm up
    samples = []
    for _ in range(runs):
        started = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.fmean(samples)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()

    with LocalSandbox() as sandbox:
        info = sandbox.info
        rows = []
        for label, argv in COMMANDS.items():

            def bare(argv=argv):
                subprocess.run(argv, capture_output=True, check=True)  # noqa: S603

            def local(argv=argv):
                result = sandbox.exec(argv)
                assert result.ok, result

            bare_ms = _mean_ms(bare, args.runs)
            local_ms = _mean_ms(local, args.runs)
            rows.append((label, bare_ms, local_ms))

    isolation = "bubblewrap" if info.isolated else "NOT isolated (no working bwrap)"
    cgroups = [c for c in ("memory", "pids") if info.details.get(f"cgroup_{c}")]
    print(f"local backend: {isolation}; cgroups: {', '.join(cgroups) or 'none'}; rlimits")
    print(f"{args.runs} runs per command, mean per call")
    print(f"{'command':<12} {'bare ms':>9} {'local ms':>9} {'overhead ms':>12} {'local/bare':>11}")
    for label, bare_ms, local_ms in rows:
        print(
            f"{label:<12} {bare_ms:>9.2f} {local_ms:>9.2f} {local_ms - bare_ms:>12.2f} "
            f"{local_ms / bare_ms:>10.1f}x"
        )
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
