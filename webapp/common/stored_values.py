"""Stored values that Python cannot represent read as empty instead of failing the request.

PostgreSQL keeps timestamps up to the year 294276; Python's ``datetime`` stops at 9999. A row
written before imports checked their timestamps (``9999-12-31T23:59:59-14:00`` is the year
10000 in UTC), or straight into the database, would otherwise raise on every query that loads
it: the trajectory's pages and every export that includes it would answer HTTP 500. Here, on
each new PostgreSQL connection, the loaders of ``timestamptz``, ``timestamp`` and ``date``
are wrapped so that such a value loads as None (the pages show it as empty, exports write
null) and a warning names it in the log. Values Python can represent load exactly as before.
"""

from __future__ import annotations

import logging
from functools import cache
from typing import Any

log = logging.getLogger(__name__)

_TYPES = ("timestamptz", "timestamp", "date")  # Django reads results as text


@cache
def _tolerant(loader: type) -> type:
    """``loader`` whose out-of-range values load as None (one subclass per loader class)."""
    import psycopg

    class TolerantLoader(loader):
        tolerant = True

        def load(self, data: Any) -> Any:
            try:
                return super().load(data)
            except psycopg.DataError as exc:
                log.warning("a stored date or time cannot be read (%s); shown as empty", exc)
                return None

    TolerantLoader.__name__ = TolerantLoader.__qualname__ = f"Tolerant{loader.__name__}"
    return TolerantLoader


def tolerate_unreadable_dates(sender: Any = None, connection: Any = None, **kwargs: Any) -> None:
    """``connection_created`` receiver: wrap the date and time loaders of a psycopg 3
    connection (other databases and drivers are left alone)."""
    if connection is None or connection.vendor != "postgresql":
        return
    try:
        from psycopg.pq import Format
    except ImportError:  # psycopg2: not used by Steplab
        return
    from psycopg.types import datetime as pg_datetime

    # psycopg's C loaders cannot be subclassed: their pure-Python twins stand in for them.
    python_loaders = {
        "timestamptz": pg_datetime.TimestamptzLoader,
        "timestamp": pg_datetime.TimestampLoader,
        "date": pg_datetime.DateLoader,
    }
    adapters = getattr(connection.connection, "adapters", None)
    if adapters is None:
        return
    for name in _TYPES:
        current = adapters.get_loader(adapters.types[name].oid, Format.TEXT)
        if current is None or getattr(current, "tolerant", False):
            continue
        try:
            tolerant = _tolerant(current)
        except TypeError:  # a C loader
            tolerant = _tolerant(python_loaders[name])
        adapters.register_loader(name, tolerant)
