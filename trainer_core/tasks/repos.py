"""Where a task's ``repo`` may come from: never from anywhere on the host.

A task's repository is copied into the sandbox's workspace, by the process that runs the episode
(a worker, or the CLI). A path to any host directory would copy that directory in — the app's
own secrets included — so a ``repo`` is accepted only when, after resolving symlinks and ``..``,
it lies

* inside the directory of the task file it was read from (a task file on disk may ship its
  repositories beside it: ``load_tasks`` registers that directory for the process), or
* inside the archives uploaded with a task set (the web app stores them in a directory it adds
  to the roots), or
* inside one of the roots an administrator lists in ``STEPLAB_TASK_REPO_ROOTS`` (directories
  separated by ``:``; default: none).

Anything else is refused at import (with the line and field) and again when an episode starts.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from trainer_core.errors import ConfigError

__all__ = ["ENV_ROOTS", "allow_repo_root", "checked_repo", "repo_roots", "resolve_repo"]

#: The environment variable an administrator lists the allowed repository roots in.
ENV_ROOTS = "STEPLAB_TASK_REPO_ROOTS"

_LOCK = threading.Lock()
_PROCESS_ROOTS: set[Path] = set()


def _real(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.realpath(os.path.expanduser(os.fspath(path))))


def allow_repo_root(directory: str | os.PathLike[str]) -> None:
    """Allow repositories inside ``directory`` for the rest of this process (the directory of a
    task file read from disk)."""
    with _LOCK:
        _PROCESS_ROOTS.add(_real(directory))


def repo_roots() -> list[Path]:
    """The directories repositories may come from: ``STEPLAB_TASK_REPO_ROOTS`` and the ones
    this process allowed, resolved."""
    configured = [
        _real(part)
        for part in os.environ.get(ENV_ROOTS, "").split(os.pathsep)
        if part.strip() and os.path.isabs(os.path.expanduser(part.strip()))
    ]
    with _LOCK:
        return sorted(set(configured) | _PROCESS_ROOTS)


def _inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def resolve_repo(repo: str, *, base_dir: str | os.PathLike[str] | None = None) -> Path:
    """The real path of ``repo`` when it may be used (see the module docstring); ConfigError
    saying why not, and where repositories belong, otherwise.

    A relative ``repo`` is taken inside ``base_dir`` (the task file's directory, or the
    archives uploaded with the task set) and must stay inside it; without ``base_dir`` it is
    refused. Symlinks and ``..`` are resolved before the check, so neither can lead out.
    """
    text = str(repo or "").strip()
    if not text:
        raise ConfigError("repo is empty")
    if "\x00" in text:
        raise ConfigError("repo holds a NUL character")
    base = _real(base_dir) if base_dir is not None else None
    if not os.path.isabs(os.path.expanduser(text)):
        if base is None:
            raise ConfigError(
                f"repo {text!r} is a relative path: name an archive uploaded with the task "
                "file, or a path beside the task file when it is read from disk"
            )
        path = _real(base / text)
        if not _inside(path, base):
            raise ConfigError(f"repo {text!r} leads out of the task file's directory")
        return path
    path = _real(text)
    roots = repo_roots() + ([base] if base is not None else [])
    if any(_inside(path, root) for root in roots):
        return path
    allowed = ", ".join(str(r) for r in roots) or "none configured"
    raise ConfigError(
        f"repo {text!r} (resolved: {path}) is outside the directories repositories may come "
        f"from ({allowed}). Ship the repository with the task set (an archive uploaded with "
        f"the task file), give its files inline in 'files', or ask an administrator to add its "
        f"directory to {ENV_ROOTS}"
    )


def checked_repo(task) -> str | None:
    """The repository an episode of ``task`` may copy into its sandbox (None: the task has
    none). Checked again when the episode starts, whatever the task came through: a stored task
    edited since, a task built in code."""
    repo = getattr(task, "repo", "") or ""
    if not repo:
        return None
    return str(resolve_repo(repo))
