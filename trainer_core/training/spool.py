"""A file-based group store and version publisher for decoupled GRPO, for library use and tests
(the web app keeps groups and versions in its database instead). Not a scheduler: samplers write
groups, the trainer takes them; several processes may share the directories (every change is an
atomic create or rename on one filesystem).

:class:`SpoolSource` (a :class:`~trainer_core.training.decoupled.GroupSource`) over a spool
directory::

    <dir>/index/<n>              the counter: n reserved by one writer (created exclusively)
    <dir>/ready/<n>.json         a group (Group.to_dict()) waiting to be trained on
    <dir>/taken/<n>.json         claimed by the trainer for the step it is making
    <dir>/consumed/<n>.json      trained on ...
    <dir>/dropped/<n>.json       ... or dropped as too stale
    <dir>/steps/<step>.json      {"step", "version", "consumed": [n...], "dropped": [n...]}

A group's id is its counter value ``n``, taken when it is written (:func:`spool_group`), so the
arrival order is the counter's. :class:`FilePublisher` (a
:class:`~trainer_core.training.decoupled.Publisher`) writes ``<dir>/versions/<version>.json``
(``{"version", "path", "step"}``); samplers read :meth:`FilePublisher.latest`.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from typing import Any

from trainer_core.errors import ConfigError, InputError
from trainer_core.training.episodes import Group

__all__ = ["FilePublisher", "SpoolSource", "spool_group"]

_STATES = ("ready", "taken", "consumed", "dropped")
_WIDTH = 12  # digits of a group's file name: names sort in counter order
_POLL_SECONDS = 0.05


def _write_json(path: Path, data: Any) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file in the same directory, renamed."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(json.dumps(data), encoding="utf-8")
    os.replace(tmp, path)


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{path} cannot be read as JSON: {exc}") from None


def _name(index: int) -> str:
    return f"{index:0{_WIDTH}d}.json"


def _make_dirs(root: Path) -> None:
    for sub in (*_STATES, "index", "steps"):
        (root / sub).mkdir(parents=True, exist_ok=True)


def spool_group(directory: str | Path, group: Group) -> int:
    """Write ``group`` (its ``version`` set) into the spool at ``directory`` as the next ready
    group; returns its id (the counter value). Safe with several writers: each counter value is
    reserved by an exclusive create, and the group appears in ``ready/`` by an atomic rename."""
    if group.version is None:
        raise InputError("spool a group with the policy version that sampled it (group.version)")
    root = Path(directory)
    _make_dirs(root)
    index = len(os.listdir(root / "index"))
    while True:
        try:
            os.close(os.open(root / "index" / str(index), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            break
        except FileExistsError:
            index += 1
    data = group.to_dict()
    data["id"] = index
    _write_json(root / "ready" / _name(index), data)
    return index


class SpoolSource:
    """The groups of a spool directory (see the module docstring), taken in counter order."""

    def __init__(self, directory: str | Path):
        self.root = Path(directory)
        _make_dirs(self.root)

    def _names(self, state: str) -> list[str]:
        return sorted(n for n in os.listdir(self.root / state) if n.endswith(".json"))

    def _move(self, name: str, source: str, target: str) -> bool:
        """Rename a group file between states; False when it is no longer there."""
        try:
            os.rename(self.root / source / name, self.root / target / name)
        except FileNotFoundError:
            return False
        return True

    def take(self, n: int, *, timeout: float) -> list[Group]:
        """Claim the oldest ready groups, up to ``n``, in counter order; waits up to ``timeout``
        seconds for ``n`` of them and returns those claimed by then (maybe none)."""
        deadline = time.monotonic() + max(0.0, timeout)
        claimed: list[Group] = []
        while True:
            for name in self._names("ready"):
                if len(claimed) >= n:
                    break
                if self._move(name, "ready", "taken"):
                    group = Group.from_dict(_read_json(self.root / "taken" / name))
                    group.id = int(name.removesuffix(".json"))
                    claimed.append(group)
            if len(claimed) >= n or time.monotonic() >= deadline:
                return claimed
            time.sleep(_POLL_SECONDS)

    def settle(self, step: int, version: int, consumed: list[Group], dropped: list[Group]) -> None:
        """Record that ``step`` (trained at ``version``) consumed and dropped these taken groups:
        the step's record first, then each group file moved to ``consumed/`` or ``dropped/``."""
        record = {
            "step": int(step),
            "version": int(version),
            "consumed": [int(g.id) for g in consumed],
            "dropped": [int(g.id) for g in dropped],
        }
        _write_json(self.root / "steps" / f"{int(step):08d}.json", record)
        for state, groups in (("consumed", consumed), ("dropped", dropped)):
            for g in groups:
                self._move(_name(int(g.id)), "taken", state)

    def release_after(self, step: int) -> int:
        """Resume: every group consumed or dropped by a step after ``step``, and every group taken
        but not settled, back to ready (their ids and order kept); the records of those steps
        removed. Returns how many groups were released."""
        released = 0
        for record in self.steps():
            if record["step"] <= step:
                continue
            for state in ("consumed", "dropped"):
                for gid in record[state]:
                    released += self._move(_name(gid), state, "ready")
            (self.root / "steps" / f"{record['step']:08d}.json").unlink(missing_ok=True)
        for name in self._names("taken"):
            released += self._move(name, "taken", "ready")
        return released

    def steps(self) -> list[dict[str, Any]]:
        """The settled steps' records, by step: ``{"step", "version", "consumed", "dropped"}``."""
        return [
            _read_json(self.root / "steps" / n)
            for n in sorted(os.listdir(self.root / "steps"))
            if n.endswith(".json")
        ]

    def counts(self) -> dict[str, int]:
        """How many groups are in each state (ready, taken, consumed, dropped)."""
        return {state: len(self._names(state)) for state in _STATES}


class FilePublisher:
    """Policy versions as files ``<dir>/versions/<version>.json`` (see the module docstring)."""

    def __init__(self, directory: str | Path):
        self.root = Path(directory)
        (self.root / "versions").mkdir(parents=True, exist_ok=True)

    def versions(self) -> list[dict[str, Any]]:
        """Every published version, by number: ``{"version", "path", "step"}``."""
        return [
            _read_json(self.root / "versions" / n)
            for n in sorted(os.listdir(self.root / "versions"))
            if n.endswith(".json")
        ]

    def latest(self) -> tuple[int, str] | None:
        """The newest version and its model directory; None before version 0 is published."""
        found = self.versions()
        return (int(found[-1]["version"]), str(found[-1]["path"])) if found else None

    def publish(self, version: int, path: str, step: int) -> None:
        """Make ``version`` (the model directory ``path``, written at optimizer step ``step``)
        the newest. Versions are numbered 0, 1, 2, ... without gaps: publishing the newest one
        again with the same path is a no-op, any other number a ConfigError."""
        latest = self.latest()
        if latest is not None and latest == (version, str(path)):
            return
        expected = 0 if latest is None else latest[0] + 1
        if version != expected:
            raise ConfigError(
                f"version {version} cannot be published after "
                f"{'none' if latest is None else latest[0]}: versions are numbered without gaps "
                f"(the next is {expected})"
            )
        record = {"version": int(version), "path": str(path), "step": int(step)}
        _write_json(self.root / "versions" / f"{int(version):08d}.json", record)
