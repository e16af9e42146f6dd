"""Built-in data: each app registers an idempotent seeder in its AppConfig.ready()."""

from __future__ import annotations

from collections.abc import Callable

_SEEDERS: list[tuple[str, Callable[[], str]]] = []


def register_seeder(name: str, fn: Callable[[], str]) -> None:
    """``fn`` loads its data idempotently and returns one line saying what it did."""
    if all(existing != name for existing, _ in _SEEDERS):
        _SEEDERS.append((name, fn))


def seed_all() -> list[str]:
    if not _SEEDERS:
        return ["built-in data: none defined yet"]
    return [f"{name}: {fn()}" for name, fn in _SEEDERS]
