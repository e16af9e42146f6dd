"""``steplab/mcp``: the tools of any MCP server become the action space.

The server is a stdio command (a list of words, never run through a shell) or a streamable-HTTP
URL; the official ``mcp`` SDK (2.x) talks to it::

    env = make("steplab/mcp", server=["mcp-server-time"])
    ts = env.reset(task={"prompt": "What time is it in UTC?", "expected_answer": "..."})
    ts = env.step({"tool": "get_current_time", "params": {"timezone": "UTC"}})
    ts = env.step({"tool": "finish", "params": {"answer": "12:00"}})   # ends, outcome checked
    env.close()

    make("steplab/mcp", url="http://127.0.0.1:8000/mcp")               # streamable HTTP

How it runs. :class:`AgentEnv` is synchronous and the SDK is async, so each env owns one event
loop in a background thread. The connection (server process or HTTP session) starts on the
first ``reset`` (or the first look at ``available_tools``), stays open across episodes and ends
in ``close()``, which leaves no process and no thread behind. Each call goes to the loop with
``asyncio.run_coroutine_threadsafe`` and waits at most ``call_timeout`` seconds.

What the agent sees.
- ``available_tools``: the server's tools (name, description, ``inputSchema`` as the JSON-schema
  parameters; category ``read`` when the server marks the tool read-only, else ``execute``),
  filtered by ``include_tools``, plus Steplab's ``finish`` tool (``answer``) when
  ``finish_tool`` is true.
- ``reset``: the task's prompt is the first observation, as it is (no tool list appended: the
  policy gets the tools from ``available_tools``). Without a task: one line naming the server.
  The server is the same across episodes: MCP has no reset, so state the server keeps (files it
  wrote, say) carries over unless the task or the caller restores it.
- A tool result's content blocks, joined (text as is; images, audio and resources as a
  one-line placeholder; ``structuredContent`` as JSON when there is no content), are the
  observation. A result with ``isError`` says ``Error from <tool>: ...`` and carries
  ``info["error"] = "tool_error"``; an error the server raises at the protocol level (unknown
  tool on its side, invalid parameters) does the same (``"invalid_params"`` for the latter).
  The episode goes on either way.
- A call that takes longer than ``call_timeout``: the observation says it timed out
  (``info["error"] = "timeout"``); the episode goes on (the SDK sends the server a
  cancellation).
- ``finish``: ends the episode; the answer is checked with the task's outcome checker exactly as
  Steplab's own environments do (:meth:`ProfileEnv.finish_with_answer`).
- Name collision: when the server has a tool called ``finish`` and ``finish_tool`` is true,
  Steplab's ``finish`` keeps the name and the server's tool is shown as ``server_finish``
  (``server_server_finish`` if that is taken too, and so on); calling that name calls the
  server's ``finish``. ``info["mcp_tool"]`` records the server's name of every call.
- The server process dying (or the HTTP server going away) is the infrastructure failing, not
  the agent: :class:`~trainer_core.errors.EnvironmentUnavailable` with the tail of the server's
  stderr. The next ``reset`` starts a fresh connection.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os
import shlex
import tempfile
import threading
from collections.abc import Mapping, Sequence
from contextlib import AsyncExitStack
from typing import Any

from trainer_core.envs.core import Action, AgentEnv, TimeStep
from trainer_core.errors import ConfigError, EnvironmentUnavailable
from trainer_core.tasks.model import Task, ToolSpec

__all__ = ["FINISH_TOOL", "McpEnv"]

FINISH_TOOL = ToolSpec(
    name="finish",
    description="End the episode and give your final answer.",
    parameters={
        "type": "object",
        "properties": {"answer": {"type": "string", "description": "Your final answer."}},
        "required": ["answer"],
    },
    category="submit",
)
_STDERR_TAIL = 4000  # characters of the server's stderr quoted when it dies
_CONNECT_GRACE = 5.0  # seconds the sync side waits beyond the SDK's own timeouts
_CLOSE_TIMEOUT = 15.0  # the SDK's stdio shutdown takes at most ~6 s (stdin close, TERM, KILL)


class _Connection:
    """One MCP session on an event loop in a background thread."""

    def __init__(
        self,
        *,
        command: list[str] | None,
        url: str | None,
        env: Mapping[str, str] | None,
        cwd: str | os.PathLike[str] | None,
        timeout: float,
    ) -> None:
        self.command = command
        self.url = url
        self.where = url or shlex.join(command or [])
        self._env = dict(env) if env else None
        self._cwd = cwd
        self._timeout = timeout
        self.session: Any = None
        self.server_name = ""
        self.tools: list[Any] = []
        self.dead = False
        self.failure: BaseException | None = None  # what ended the session, when it failed
        self._stop = asyncio.Event()  # binds to the loop on first use (Python >= 3.10)
        self._task: asyncio.Task | None = None
        self._main: concurrent.futures.Future | None = None
        self._inflight: set[concurrent.futures.Future] = set()
        self._stderr = None
        if command is not None:
            fd, path = tempfile.mkstemp(prefix="steplab-mcp-", suffix=".stderr")
            os.unlink(path)  # the file lives as long as the descriptor
            # O_APPEND: the server's writes always go to the end, whatever we read.
            self._stderr = os.fdopen(fd, "a+", encoding="utf-8", errors="replace")
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name="steplab-mcp-loop", daemon=True
        )
        self._thread.start()

    # --- lifecycle -------------------------------------------------------------------------------

    def open(self) -> None:
        ready: concurrent.futures.Future = concurrent.futures.Future()
        self._main = asyncio.run_coroutine_threadsafe(self._serve(ready), self._loop)
        try:
            ready.result(timeout=self._timeout + _CONNECT_GRACE)
        except concurrent.futures.TimeoutError:
            self.close()
            raise EnvironmentUnavailable(
                f"the MCP server {self.where!r} did not finish the handshake within "
                f"{self._timeout:g}s{self._stderr_note()}; check that it is an MCP server "
                "(stdio or streamable HTTP) and that it starts, or raise call_timeout"
            ) from None
        except BaseException as exc:
            detail = _describe(exc)
            note = self._stderr_note()
            self.close()
            raise EnvironmentUnavailable(self._cannot_start(exc, detail) + note) from None

    def _cannot_start(self, exc: BaseException, detail: str) -> str:
        if self.url is not None:
            return (
                f"cannot connect to the MCP server at {self.url}: {detail}; start the server "
                "(streamable HTTP) or fix the url"
            )
        if _find(exc, FileNotFoundError) is not None:
            return (
                f"cannot start the MCP server {self.where!r}: {self.command[0]!r} was not found; "
                "install it or give its full path (scripts/mcp-servers.sh installs the servers "
                "Steplab tests with)"
            )
        from mcp.shared.exceptions import MCPError
        from mcp.types import REQUEST_TIMEOUT

        error = _find(exc, MCPError)
        if error is not None and getattr(error, "code", None) == REQUEST_TIMEOUT:
            return (
                f"the MCP server {self.where!r} did not answer the handshake within "
                f"{self._timeout:g}s ({detail}); check that the command runs an MCP server on "
                "stdio, or raise call_timeout"
            )
        return f"the MCP server {self.where!r} failed to start: {detail}"

    async def _serve(self, ready: concurrent.futures.Future) -> None:
        from mcp import ClientSession, StdioServerParameters, stdio_client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.types import PaginatedRequestParams

        self._task = asyncio.current_task()
        try:
            async with AsyncExitStack() as stack:
                if self.url is not None:
                    transport = streamable_http_client(self.url)
                else:
                    params = StdioServerParameters(
                        command=self.command[0],
                        args=self.command[1:],
                        env=self._env,
                        cwd=self._cwd,
                    )
                    transport = stdio_client(params, errlog=self._stderr)
                read, write = await stack.enter_async_context(transport)
                session = await stack.enter_async_context(
                    ClientSession(read, write, read_timeout_seconds=self._timeout)
                )
                init = await session.initialize()
                tools: list[Any] = []
                cursor = None
                while True:
                    page = await session.list_tools(
                        params=PaginatedRequestParams(cursor=cursor) if cursor else None
                    )
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
                self.session = session
                self.server_name = getattr(init.server_info, "name", "") or ""
                self.tools = tools
                ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc)
            self.failure = exc
            self.dead = True
            if not isinstance(exc, Exception):
                raise
        finally:
            self.session = None

    def call(self, name: str, arguments: dict[str, Any], timeout: float) -> Any:
        """The server's CallToolResult. What the call itself raised (MCPError, a transport
        error) comes wrapped in :class:`_CallFailed`; a sync-side overrun raises TimeoutError,
        an interrupted call CancelledError, and anything raised in this thread meanwhile (the
        Timeout wrapper's alarm) passes through after the call is cancelled."""
        session = self.session
        if session is None:
            raise _CallFailed(self.failure or ConnectionError("the MCP session has ended"))
        future = asyncio.run_coroutine_threadsafe(
            session.call_tool(name, arguments, read_timeout_seconds=timeout), self._loop
        )
        self._inflight.add(future)
        try:
            return future.result(timeout=timeout + _CONNECT_GRACE)
        except BaseException as exc:
            if future.done() and not future.cancelled() and future.exception() is exc:
                raise _CallFailed(exc) from exc
            future.cancel()  # the SDK tells the server the request was cancelled
            raise
        finally:
            self._inflight.discard(future)

    def interrupt(self) -> None:
        for future in list(self._inflight):
            future.cancel()

    def close(self) -> None:
        if self._loop.is_closed():
            return
        if self._main is not None and not self._main.done():

            async def stop() -> None:
                task = self._task
                if task is None or task.done():
                    return
                if self.session is not None:
                    self._stop.set()  # the graceful way out of the SDK's context managers
                else:
                    task.cancel()  # still connecting: the SDK's shutdown is cancellation-safe
                await asyncio.wait({task}, timeout=_CLOSE_TIMEOUT)

            try:
                asyncio.run_coroutine_threadsafe(stop(), self._loop).result(
                    timeout=_CLOSE_TIMEOUT + 1
                )
            except BaseException:  # noqa: S110 - best effort; the loop stops below anyway
                pass
        self.dead = True

        async def drain() -> None:
            await self._loop.shutdown_asyncgens()
            await self._loop.shutdown_default_executor()

        try:
            asyncio.run_coroutine_threadsafe(drain(), self._loop).result(timeout=_CLOSE_TIMEOUT)
        except BaseException:  # noqa: S110 - best effort; the loop stops below anyway
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=_CLOSE_TIMEOUT)
        if not self._thread.is_alive():
            self._loop.close()
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    # --- diagnostics ---------------------------------------------------------------------------

    def stderr_tail(self) -> str:
        if self._stderr is None:
            return ""
        try:
            fd = self._stderr.fileno()
            size = os.fstat(fd).st_size
            start = max(0, size - _STDERR_TAIL * 4)
            data = os.pread(fd, size - start, start).decode("utf-8", "replace")
        except (OSError, ValueError):
            return ""
        return data[-_STDERR_TAIL:].strip()

    def _stderr_note(self) -> str:
        tail = self.stderr_tail()
        return f"; the server's stderr ends with:\n{tail}\n" if tail else ""


class _CallFailed(Exception):
    """What a tool call raised on the event loop."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


def _find(exc: BaseException, kind: type[BaseException]) -> BaseException | None:
    """``exc`` or the first exception of ``kind`` inside it (exception groups, causes)."""
    if isinstance(exc, kind):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            found = _find(inner, kind)
            if found is not None:
                return found
    if exc.__cause__ is not None and exc.__cause__ is not exc:
        return _find(exc.__cause__, kind)
    return None


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _content_text(result: Any) -> str:
    """The observation text of a CallToolResult."""
    parts: list[str] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
        elif kind in ("image", "audio"):
            parts.append(f"[{kind}: {getattr(block, 'mime_type', '') or 'unknown type'}]")
        elif kind == "resource_link":
            parts.append(f"[resource link: {block.uri}]")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            if text is not None:
                parts.append(text)
            else:
                mime = getattr(resource, "mime_type", None) or "binary"
                parts.append(f"[resource: {resource.uri} ({mime})]")
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    text = "\n".join(parts)
    if not text.strip():
        structured = getattr(result, "structured_content", None)
        if structured is not None:
            text = json.dumps(structured, ensure_ascii=False, default=str)
    return text


class McpEnv(AgentEnv):
    """The tools of an MCP server as an environment (see the module docstring).

    server: the stdio command, a list of words (a string is split like a shell would split it,
        but no shell runs). Exactly one of ``server`` and ``url``.
    url: a streamable-HTTP endpoint, e.g. ``http://127.0.0.1:8000/mcp``.
    env: environment variables for the server process, over the SDK's safe defaults (HOME,
        PATH, SHELL, TERM, USER, LOGNAME; nothing else of ours is passed on).
    cwd: the server process's working directory.
    call_timeout: seconds for the handshake and for each tool call.
    include_tools: only these server tools are offered (ConfigError at connect when one does
        not exist); None offers all.
    finish_tool: add Steplab's ``finish`` tool, which ends the episode and checks the answer.
    domain: the domain tasks of this env belong to.
    """

    def __init__(
        self,
        server: str | Sequence[str] | None = None,
        *,
        url: str | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        call_timeout: float = 30.0,
        include_tools: Sequence[str] | None = None,
        finish_tool: bool = True,
        domain: str = "generic",
    ) -> None:
        super().__init__()
        if (server is None) == (url is None):
            raise ConfigError(
                "steplab/mcp needs exactly one of server (a stdio command, e.g. "
                "['mcp-server-time']) and url (a streamable-HTTP endpoint, e.g. "
                "'http://127.0.0.1:8000/mcp')"
            )
        command: list[str] | None = None
        if server is not None:
            command = shlex.split(server) if isinstance(server, str) else [str(w) for w in server]
            if not command or not command[0]:
                raise ConfigError("the MCP server command is empty; give e.g. ['mcp-server-time']")
        if url is not None and not url.startswith(("http://", "https://")):
            raise ConfigError(f"the MCP url must start with http:// or https://, not {url!r}")
        if not call_timeout or call_timeout <= 0:
            raise ConfigError(
                f"call_timeout must be a positive number of seconds, not {call_timeout!r}"
            )
        if env is not None and not all(
            isinstance(k, str) and isinstance(v, str) for k, v in env.items()
        ):
            raise ConfigError("env must map variable names to string values")
        self.domain = domain
        self.command = command
        self.url = url
        self.server_env = dict(env) if env else None
        self.cwd = cwd
        self.call_timeout = float(call_timeout)
        self.include_tools = list(include_tools) if include_tools is not None else None
        self.finish_tool = finish_tool
        self._conn: _Connection | None = None
        self._tools: list[ToolSpec] = []
        self._server_names: dict[str, str] = {}  # agent's tool name -> server's tool name

    # --- connection ------------------------------------------------------------------------------

    def _connect(self) -> _Connection:
        if self._conn is not None and not self._conn.dead:
            return self._conn
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        conn = _Connection(
            command=self.command,
            url=self.url,
            env=self.server_env,
            cwd=self.cwd,
            timeout=self.call_timeout,
        )
        conn.open()
        try:
            self._tools, self._server_names = self._tool_specs(conn.tools)
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        self._closed = False
        return conn

    def _tool_specs(self, tools: list[Any]) -> tuple[list[ToolSpec], dict[str, str]]:
        names = [t.name for t in tools]
        if self.include_tools is not None:
            missing = [n for n in self.include_tools if n not in names]
            if missing:
                raise ConfigError(
                    f"include_tools names tool(s) the MCP server {self._where()!r} does not have: "
                    f"{', '.join(missing)}; it has: {', '.join(names) or 'none'}"
                )
            tools = [t for t in tools if t.name in self.include_tools]
        taken = {t.name for t in tools} | ({FINISH_TOOL.name} if self.finish_tool else set())
        specs: list[ToolSpec] = []
        mapping: dict[str, str] = {}
        for tool in tools:
            shown = tool.name
            if self.finish_tool and shown == FINISH_TOOL.name:
                shown = "server_finish"
                while shown in taken:
                    shown = f"server_{shown}"
                taken.add(shown)
            annotations = getattr(tool, "annotations", None)
            read_only = bool(annotations and getattr(annotations, "read_only_hint", False))
            schema = dict(tool.input_schema or {}) or {"type": "object", "properties": {}}
            specs.append(
                ToolSpec(
                    name=shown,
                    description=tool.description or "",
                    parameters=schema,
                    category="read" if read_only else "execute",
                )
            )
            mapping[shown] = tool.name
        if self.finish_tool:
            specs.append(FINISH_TOOL)
        return specs, mapping

    def _where(self) -> str:
        return self.url or shlex.join(self.command or [])

    @property
    def server_name(self) -> str:
        """The name the server gave in its handshake ('' before the first connection)."""
        return self._conn.server_name if self._conn is not None else ""

    # --- the protocol ----------------------------------------------------------------------------

    @property
    def available_tools(self) -> list[ToolSpec]:
        if self._conn is None and not self._closed:
            self._connect()
        return list(self._tools)

    def _reset(self, *, task: Task | None, seed: int | None) -> TimeStep:
        conn = self._connect()
        if task is not None and task.prompt:
            observation = task.prompt
        else:
            observation = f"Connected to the MCP server {conn.server_name or self._where()}."
        return TimeStep(observation=observation, info={"mcp_server": conn.server_name})

    def _step(self, action: Action) -> TimeStep:
        if self.finish_tool and action.tool == FINISH_TOOL.name:
            return self._finish(action)
        server_name = self._server_names.get(action.tool)
        if server_name is None:
            return self.unknown_tool(action.tool)
        conn = self._conn
        if conn is None:
            raise EnvironmentUnavailable(
                f"the MCP server {self._where()!r} is not connected; call reset() first"
            )
        info: dict[str, Any] = {"tool": action.tool, "mcp_tool": server_name}
        try:
            result = conn.call(server_name, dict(action.params), self.call_timeout)
        except concurrent.futures.TimeoutError:
            return self._timed_out(action.tool, info)
        except concurrent.futures.CancelledError:
            return TimeStep(
                observation=f"The call to {action.tool} was interrupted.",
                info={**info, "error": "interrupted"},
            )
        except _CallFailed as failed:
            return self._call_failed(conn, action.tool, failed.error, info)
        text = _content_text(result)
        if getattr(result, "is_error", False):
            return TimeStep(
                observation=f"Error from {action.tool}: {text or '(no message)'}",
                info={**info, "error": "tool_error"},
            )
        return TimeStep(observation=text or "(no output)", info=info)

    def _timed_out(self, tool: str, info: dict[str, Any]) -> TimeStep:
        return TimeStep(
            observation=(
                f"The call to {tool} timed out after {self.call_timeout:g}s and was cancelled."
            ),
            info={**info, "error": "timeout"},
        )

    def _call_failed(
        self, conn: _Connection, tool: str, exc: BaseException, info: dict[str, Any]
    ) -> TimeStep:
        from mcp.shared.exceptions import MCPError
        from mcp.types import CONNECTION_CLOSED, INVALID_PARAMS, REQUEST_TIMEOUT

        error = _find(exc, MCPError)
        code = getattr(error, "code", None) if error is not None else None
        if code == REQUEST_TIMEOUT:
            return self._timed_out(tool, info)
        if error is not None and code != CONNECTION_CLOSED:
            kind = "invalid_params" if code == INVALID_PARAMS else "tool_error"
            message = getattr(error, "message", None) or str(error)
            return TimeStep(
                observation=f"Error from {tool}: the MCP server rejected the call: {message}",
                info={**info, "error": kind},
            )
        # The connection is gone (the process died, the HTTP server went away) or the
        # transport failed: the infrastructure, not the agent.
        tail = conn.stderr_tail()
        conn.close()
        self._conn = None
        note = f"\nThe server's stderr ends with:\n{tail}" if tail else ""
        raise EnvironmentUnavailable(
            f"the MCP server {self._where()!r} went away during a call to {tool} "
            f"({_describe(exc)}); reset() starts it again{note}"
        ) from None

    def _finish(self, action: Action) -> TimeStep:
        from trainer_core.envs.toolenv import ProfileEnv

        params = dict(action.params)
        unknown = sorted(set(params) - {"answer"})
        if unknown:
            return TimeStep(
                observation=(
                    f"Invalid parameters for finish: unknown {', '.join(map(repr, unknown))} "
                    "(expected: answer: string)."
                ),
                info={"tool": "finish", "error": "invalid_params"},
            )
        answer = params.get("answer")
        if answer is not None and not isinstance(answer, str):
            answer = json.dumps(answer) if isinstance(answer, dict | list) else str(answer)
        # The same end of episode as Steplab's own environments (it only reads self.task).
        ts = ProfileEnv.finish_with_answer(self, answer)  # type: ignore[arg-type]
        return ts.replace(info={"tool": "finish", **dict(ts.info)})

    def interrupt(self) -> None:
        if self._conn is not None:
            self._conn.interrupt()

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        super().close()
