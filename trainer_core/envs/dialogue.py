"""Conversation-like environments (conversation, engineering, advisory, discussion, crew).

The task carries the deterministic world its tools read (``task.metadata``):

* ``knowledge_base``: a list of ``{"title", "text"}`` (or a mapping title → text);
* ``stats``: a mapping name → value (``query_stats``);
* ``web``: a list of ``{"title", "url", "text"}`` (``web_search`` / ``web_fetch``);
* ``notes``: a list of strings (``read_notes``);
* ``files`` (the task field): path → content for ``read_file`` / ``grep`` (engineering).

``respond`` (or ``submit``/``finish`` where the profile has them) ends the episode and the
answer is checked by the task's outcome checker.
"""

from __future__ import annotations

import re
from typing import Any

from trainer_core.envs.core import TimeStep
from trainer_core.envs.profiles import get_profile
from trainer_core.envs.toolenv import ProfileEnv
from trainer_core.tasks.model import Task
from trainer_core.tasks.repos import checked_repo

_WORD = re.compile(r"[a-z0-9]+")


def _stem(word: str) -> str:
    """A light stemmer so 'passwords' finds 'password' and 'queries' finds 'query'."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


def _words(text: str) -> set[str]:
    return {_stem(w) for w in _WORD.findall(text.lower())}


def _documents(raw: Any) -> list[dict[str, str]]:
    if isinstance(raw, dict):
        return [{"title": str(k), "text": str(v)} for k, v in raw.items()]
    docs = []
    for item in raw or []:
        if isinstance(item, dict):
            docs.append({k: str(v) for k, v in item.items()})
        else:
            docs.append({"title": "", "text": str(item)})
    return docs


def _search(docs: list[dict[str, str]], query: str, limit: int = 3) -> list[dict[str, str]]:
    wanted = _words(query)
    if not wanted:
        return []
    scored = []
    for position, doc in enumerate(docs):
        words = _words(doc.get("title", "") + " " + doc.get("text", ""))
        hits = len(wanted & words)
        if hits:
            scored.append((-hits, position, doc))
    scored.sort(key=lambda item: (item[0], item[1]))
    return [doc for _, _, doc in scored[:limit]]


class DialogueEnv(ProfileEnv):
    def __init__(self, domain: str = "conversation", command_timeout: float = 20.0):
        super().__init__(get_profile(domain))
        self.notes: list[str] = []
        self.messages: list[dict[str, str]] = []
        self.command_timeout = command_timeout
        self._sandbox = None  # made on the first bash/git call, from the task's files

    def _reset(self, *, task: Task | None, seed: int | None) -> TimeStep:
        if task is None:
            task = Task(prompt="Say hello to the user.", domain=self.domain)
            self.task = task
        meta = task.metadata or {}
        self.notes = [str(n) for n in meta.get("notes", [])]
        self.messages = []
        self._close_sandbox()
        return TimeStep(observation=task.prompt, info={"task_id": task.id})

    @property
    def _meta(self) -> dict[str, Any]:
        return (self.task.metadata if self.task else {}) or {}

    # --- ending -------------------------------------------------------------------------------

    def tool_respond(self, message: str) -> TimeStep:
        return self.finish_with_answer(message)

    def tool_submit(self, answer: str | None = None) -> TimeStep:
        return self.finish_with_answer(answer)

    def tool_finish(self, answer: str | None = None) -> TimeStep:
        return self.finish_with_answer(answer)

    # --- looking things up --------------------------------------------------------------------

    def tool_knowledge_base(self, query: str) -> TimeStep:
        docs = _search(_documents(self._meta.get("knowledge_base")), query)
        if not docs:
            return TimeStep(observation=f"No knowledge-base entry matches {query!r}.")
        return TimeStep(
            observation="\n\n".join(f"## {d.get('title', '')}\n{d.get('text', '')}" for d in docs)
        )

    def tool_query_stats(self, query: str) -> TimeStep:
        stats = self._meta.get("stats") or {}
        wanted = _words(query)
        rows = [(k, v) for k, v in stats.items() if wanted and wanted <= _words(str(k))]
        if not rows:
            rows = [(k, v) for k, v in stats.items() if wanted & _words(str(k))]
        if not rows:
            known = ", ".join(sorted(map(str, stats))[:20]) or "none"
            return TimeStep(
                observation=f"No statistic matches {query!r}. Known statistics: {known}."
            )
        return TimeStep(observation="\n".join(f"{k}: {v}" for k, v in rows[:10]))

    def tool_web_search(self, query: str) -> TimeStep:
        docs = _search(_documents(self._meta.get("web")), query)
        if not docs:
            return TimeStep(observation=f"No results for {query!r}.")
        return TimeStep(
            observation="\n".join(
                f"- {d.get('title', '')} ({d.get('url', '')}): {d.get('text', '')[:200]}"
                for d in docs
            )
        )

    def tool_web_fetch(self, url: str) -> TimeStep:
        for doc in _documents(self._meta.get("web")):
            if doc.get("url") == url:
                return TimeStep(observation=doc.get("text", ""))
        return TimeStep(
            observation=f"Could not fetch {url!r}: not found.", info={"error": "not_found"}
        )

    def tool_read_file(
        self, file_path: str, start_line: int | None = None, end_line: int | None = None
    ) -> TimeStep:
        files = self.task.files if self.task else {}
        if file_path not in files:
            return TimeStep(
                observation=f"No such file: {file_path}. Files: {', '.join(sorted(files)) or 'none'}.",
                info={"error": "not_found", "exit_code": 1},
            )
        lines = files[file_path].splitlines()
        first = max(1, start_line or 1)
        last = min(len(lines), end_line or len(lines))
        return TimeStep(
            observation="\n".join(f"{i:>5}\t{lines[i - 1]}" for i in range(first, last + 1)),
            info={"exit_code": 0},
        )

    def tool_grep(
        self, pattern: str, path: str | None = None, ignore_case: bool | None = None
    ) -> TimeStep:
        try:
            regex = re.compile(pattern, re.IGNORECASE if ignore_case else 0)
        except re.error as exc:
            return TimeStep(
                observation=f"Invalid pattern: {exc}",
                info={"error": "invalid_pattern", "exit_code": 2},
            )
        files = self.task.files if self.task else {}
        hits = [
            f"{name}:{number}:{line}"
            for name, text in sorted(files.items())
            if path in (None, "", ".") or name == path or name.startswith(path.rstrip("/") + "/")
            for number, line in enumerate(text.splitlines(), 1)
            if regex.search(line)
        ]
        return TimeStep(
            observation="\n".join(hits[:200]) or "(no matches)",
            info={"exit_code": 0 if hits else 1},
        )

    # --- commands over the task's files (engineering) --------------------------------------------

    def _sandbox_for_task(self):
        if self._sandbox is None:
            from trainer_core.sandboxes.base import SandboxLimits
            from trainer_core.sandboxes.local import LocalSandbox

            task = self.task
            sandbox = LocalSandbox(
                SandboxLimits(wall_seconds=self.command_timeout),
                files=task.files if task else {},
                repo=checked_repo(task) if task else None,
                setup=task.setup if task else None,
            )
            sandbox.start()
            self._sandbox = sandbox
        return self._sandbox

    def _run(self, tool: str, params: dict[str, Any]) -> TimeStep:
        from trainer_core.sandboxes.tools import run_tool

        result = run_tool(
            self._sandbox_for_task(), tool, params, default_timeout=self.command_timeout
        )
        return TimeStep(
            observation=result.observation,
            info={
                "exit_code": result.exit_code,
                "error": result.error,
                "duration": result.duration,
            },
        )

    def tool_bash(self, command: str, timeout: float | None = None) -> TimeStep:
        params: dict[str, Any] = {"command": command}
        if timeout is not None:
            params["timeout"] = timeout
        return self._run("bash", params)

    def tool_git(self, args: list[str]) -> TimeStep:
        return self._run("git", {"args": args})

    def _close_sandbox(self) -> None:
        if self._sandbox is not None:
            self._sandbox.close()
            self._sandbox = None

    def close(self) -> None:
        self._close_sandbox()
        super().close()

    def interrupt(self) -> None:
        if self._sandbox is not None:
            self._sandbox.interrupt()

    # --- side effects ---------------------------------------------------------------------------

    def tool_create_note(self, title: str, content: str) -> TimeStep:
        self.notes.append(f"{title}: {content}")
        return TimeStep(observation=f"Note {title!r} saved.")

    def tool_write_notes(self, content: str) -> TimeStep:
        self.notes.append(content)
        return TimeStep(observation="Added to the shared notes.")

    def tool_read_notes(self) -> TimeStep:
        return TimeStep(observation="\n".join(f"- {n}" for n in self.notes) or "(no notes yet)")

    def tool_send_message(self, to: str, message: str) -> TimeStep:
        self.messages.append({"to": to, "message": message})
        return TimeStep(observation=f"Message sent to {to}.")

    def tool_delegate(self, agent: str, task: str) -> TimeStep:
        replies = self._meta.get("delegates") or {}
        reply = replies.get(agent)
        if reply is None:
            return TimeStep(
                observation=f"{agent} is not available. Available: {', '.join(sorted(replies)) or 'nobody'}.",
                info={"error": "not_found"},
            )
        return TimeStep(observation=f"{agent} replies: {reply}")

    def tool_think(self, thought: str) -> TimeStep:
        return TimeStep(observation="(thought noted)")
