"""Per-step overhead of ``steplab/mcp`` (McpEnv.step) over the raw MCP call
(``await ClientSession.call_tool`` in an event loop), for the same tool on the same server.

    python bench/mcp_overhead.py [--calls 200]

Two servers: mcp-server-time over stdio (``get_current_time``, UTC; installed by
scripts/mcp-servers.sh, found through $STEPLAB_MCP_TIME or its default path) and the in-repo test
server over streamable HTTP on 127.0.0.1 (``echo``). Each side makes N calls after 5 warm-up
calls; printed: p50 and mean milliseconds per call, the overhead per step (env − raw) in ms and
the ratio env/raw. ``measure(n)`` returns the figures as a dict for other benchmarks
(bench/collect_scaling.py).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from trainer_core.envs.mcp import McpEnv  # noqa: E402

TEST_SERVER = ROOT / "tests" / "trainer_core" / "envs" / "mcp_test_server.py"
WARMUP = 5


def _time_server() -> str | None:
    default = Path(os.environ.get("STEPLAB_MCP_DIR") or ROOT / "var" / "mcp-servers")
    path = os.environ.get("STEPLAB_MCP_TIME") or str(
        default / "time-venv" / "bin" / "mcp-server-time"
    )
    return path if os.access(path, os.X_OK) else None


def _stats(samples: list[float]) -> dict[str, float]:
    return {"p50": statistics.median(samples), "mean": statistics.fmean(samples)}


def _raw(connect: Callable[[], Any], tool: str, args: dict[str, Any], n: int) -> list[float]:
    """Milliseconds per ``await session.call_tool`` inside one event loop."""
    import anyio
    from mcp import ClientSession

    samples: list[float] = []

    async def run() -> None:
        async with connect() as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            for i in range(WARMUP + n):
                started = time.perf_counter()
                result = await session.call_tool(tool, args)
                elapsed = (time.perf_counter() - started) * 1000
                assert not result.is_error, result
                if i >= WARMUP:
                    samples.append(elapsed)

    anyio.run(run)
    return samples


def _env(env: McpEnv, tool: str, args: dict[str, Any], n: int) -> list[float]:
    """Milliseconds per ``McpEnv.step`` of the same call."""
    samples: list[float] = []
    try:
        env.reset(task="benchmark")
        action = {"tool": tool, "params": args}
        for i in range(WARMUP + n):
            started = time.perf_counter()
            ts = env.step(action)
            elapsed = (time.perf_counter() - started) * 1000
            assert "error" not in ts.info, ts
            if i >= WARMUP:
                samples.append(elapsed)
    finally:
        env.close()
    return samples


def _row(label: str, tool: str, raw: list[float], env: list[float]) -> dict[str, Any]:
    raw_s, env_s = _stats(raw), _stats(env)
    return {
        "transport": label,
        "tool": tool,
        "calls": len(raw),
        "raw_ms": raw_s,
        "env_ms": env_s,
        "overhead_ms": {k: env_s[k] - raw_s[k] for k in ("p50", "mean")},
        "ratio": {k: env_s[k] / raw_s[k] for k in ("p50", "mean")},
    }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_for(port: int, server: subprocess.Popen, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the MCP test server exited with {server.returncode}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"the MCP test server did not listen on 127.0.0.1:{port}")


def measure(n: int = 200) -> dict[str, Any]:
    """Raw MCP calls vs McpEnv.step, N calls each: ``{"stdio": row | {"skipped": why},
    "http": row}``; a row has ``raw_ms`` / ``env_ms`` (``p50``, ``mean``), ``overhead_ms`` and
    ``ratio`` (env/raw) for both statistics."""
    from mcp import StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client

    results: dict[str, Any] = {}

    time_server = _time_server()
    if time_server is None:
        results["stdio"] = {
            "skipped": 'mcp-server-time is not installed: eval "$(bash scripts/mcp-servers.sh)"'
        }
    else:
        args = {"timezone": "UTC"}
        with open(os.devnull, "w") as quiet:
            raw = _raw(
                lambda: stdio_client(StdioServerParameters(command=time_server), errlog=quiet),
                "get_current_time",
                args,
                n,
            )
        env = _env(McpEnv([time_server]), "get_current_time", args, n)
        results["stdio"] = {
            "server": "mcp-server-time",
            **_row("stdio", "get_current_time", raw, env),
        }

    port = _free_port()
    server = subprocess.Popen(  # noqa: S603
        [sys.executable, str(TEST_SERVER), "http", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait_for(port, server)
        url = f"http://127.0.0.1:{port}/mcp"
        args = {"text": "hello"}
        raw = _raw(lambda: streamable_http_client(url), "echo", args, n)
        env = _env(McpEnv(url=url), "echo", args, n)
        results["http"] = {"server": "steplab test server", **_row("http", "echo", raw, env)}
    finally:
        server.terminate()
        server.wait(timeout=10)
    return results


def format_results(results: dict[str, Any]) -> str:
    lines = [
        f"{'transport':<9} {'tool':<17} {'raw p50':>8} {'env p50':>8} {'raw mean':>9} "
        f"{'env mean':>9} {'overhead p50/mean ms':>21} {'ratio mean':>10}"
    ]
    for key in ("stdio", "http"):
        row = results.get(key)
        if row is None:
            continue
        if "skipped" in row:
            lines.append(f"{key:<9} skipped: {row['skipped']}")
            continue
        raw, env, over = row["raw_ms"], row["env_ms"], row["overhead_ms"]
        lines.append(
            f"{key:<9} {row['tool']:<17} {raw['p50']:>8.2f} {env['p50']:>8.2f} "
            f"{raw['mean']:>9.2f} {env['mean']:>9.2f} "
            f"{over['p50']:>+10.2f}/{over['mean']:>+.2f}{'':>4} {row['ratio']['mean']:>9.2f}x"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    results = measure(args.calls)
    print(f"steplab/mcp overhead: {args.calls} calls each after {WARMUP} warm-up, ms per call")
    print(format_results(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
