"""Caches of the judge's answers, keyed by a SHA-256 over the judge's fingerprint and the full
prompt (:meth:`trainer_core.rewards.judge.Judge.cache_key`): :class:`MemoryCache` (one process)
and :class:`FileCache` (an SQLite file, for the CLI and repeated runs). Only answers that parsed
to a scores object are stored; a hit makes no call."""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from pathlib import Path
from typing import Protocol

from trainer_core.errors import ConfigError


class JudgeCache(Protocol):
    """What the judge needs of a cache: ``get(key)`` (the stored answer or None) and
    ``set(key, value)``; both called from the judge's threads."""

    def get(self, key: str) -> dict | None: ...

    def set(self, key: str, value: dict) -> None: ...


class MemoryCache:
    """A dict-backed cache (one process, lost at exit); thread-safe."""

    def __init__(self) -> None:
        self._data: dict[str, str] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> dict | None:
        with self._lock:
            text = self._data.get(key)
        return None if text is None else json.loads(text)

    def set(self, key: str, value: dict) -> None:
        text = json.dumps(value)  # a copy, and proof that it is JSON-able
        with self._lock:
            self._data[key] = text

    def __len__(self) -> int:
        with self._lock:
            return len(self._data)


class FileCache:
    """A cache in an SQLite file (for the CLI and repeated runs); thread-safe, and safe to share
    between processes (WAL, busy timeout). The parent folder is created when missing."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(self.path), timeout=30, check_same_thread=False)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS judge_cache "
                "(key TEXT PRIMARY KEY, value TEXT NOT NULL, created REAL NOT NULL)"
            )
            self._conn.commit()
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(
                f"cannot open the judge cache file {self.path}: {exc}; pick a writable path"
            ) from None
        self._lock = threading.Lock()

    def get(self, key: str) -> dict | None:
        with self._lock:
            row = self._conn.execute(
                "SELECT value FROM judge_cache WHERE key = ?", (key,)
            ).fetchone()
        if row is None:
            return None
        try:
            value = json.loads(row[0])
        except ValueError:
            return None  # a damaged row is a miss; the next answer replaces it
        return value if isinstance(value, dict) else None

    def set(self, key: str, value: dict) -> None:
        text = json.dumps(value)
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO judge_cache (key, value, created) VALUES (?, ?, ?)",
                (key, text, time.time()),
            )
            self._conn.commit()

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM judge_cache").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> FileCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
