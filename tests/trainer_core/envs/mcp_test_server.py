"""A tiny MCP server built with the mcp SDK's server side (``MCPServer``), for the steplab/mcp
tests and bench/mcp_overhead.py::

    python tests/trainer_core/envs/mcp_test_server.py stdio
    python tests/trainer_core/envs/mcp_test_server.py http PORT     # http://127.0.0.1:PORT/mcp

Tools: ``add``, ``echo``, ``fail`` (a tool error), ``slow`` (sleeps), ``crash`` (writes to stderr
and kills the process) and ``finish`` (a server tool whose name collides with Steplab's).
"""

from __future__ import annotations

import asyncio
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("steplab-test-server", log_level="WARNING")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool()
def fail(message: str) -> str:
    """Always fails with the given message."""
    raise ToolError(message)


@server.tool()
async def slow(seconds: float) -> str:
    """Sleep, then say so."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}s"


@server.tool()
def crash() -> str:
    """Kill the server process."""
    sys.stderr.write("test server: crashing on purpose\n")
    sys.stderr.flush()
    os._exit(3)


@server.tool(name="finish")
def server_finish(note: str = "") -> str:
    """The server's own finish tool."""
    return f"server finish: {note}"


def main(argv: list[str]) -> None:
    if argv[:1] == ["stdio"]:
        server.run("stdio")
    elif argv[:1] == ["http"] and len(argv) == 2:
        server.run("streamable-http", host="127.0.0.1", port=int(argv[1]))
    else:
        sys.exit("usage: mcp_test_server.py stdio | http PORT")


if __name__ == "__main__":
    main(sys.argv[1:])
