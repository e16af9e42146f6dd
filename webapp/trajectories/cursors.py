"""The trajectory list's orders and their cursors (``selectors.keyset_page`` pages with them):
each order is (column [desc] nulls last, id [desc]), so pages are stable; a cursor is the last
row's (value, id). The GDI order pages through ``gdi.gdi_page`` (docs/gdi.md)."""

from __future__ import annotations

from typing import Any

from django.db.models import Q, QuerySet

from webapp.trajectories import gdi

#: name → (label, column, descending). Every order ends with the id, so pages are stable.
SORTS: dict[str, tuple[str, str, bool]] = {
    "newest": ("newest first", "id", True),
    "oldest": ("oldest first", "id", False),
    "reward_high": ("highest reward", "reward", True),
    "reward_low": ("lowest reward", "reward", False),
    "steps_most": ("most steps", "step_count", True),
    "steps_fewest": ("fewest steps", "step_count", False),
    "gdi": ("highest GDI", "gdi__total", True),  # docs/gdi.md; pages: ``gdi.gdi_page``
}


def after(qs: QuerySet, column: str, descending: bool, value: Any, last_id: int) -> QuerySet:
    """Rows after (value, last_id) in the order (column [desc] nulls last, id [desc])."""
    beyond = "lt" if descending else "gt"
    id_after = Q(**{f"pk__{beyond}": last_id})
    if column == "id":
        return qs.filter(id_after)
    if value is None:  # inside the trailing NULL block
        return qs.filter(Q(**{f"{column}__isnull": True}) & id_after)
    return qs.filter(
        Q(**{f"{column}__{beyond}": value})
        | (Q(**{column: value}) & id_after)
        | Q(**{f"{column}__isnull": True})
    )


def encode_cursor(row, sort: str) -> str:
    _, column, _ = SORTS.get(sort, SORTS["newest"])
    if column == "id":
        return str(row.pk)
    value = gdi.gdi_of(row=row) if column == "gdi__total" else getattr(row, column)
    return f"{'' if value is None else repr(value)}~{row.pk}"


def decode_cursor(cursor: str, sort: str) -> tuple[Any, int] | None:
    _, column, _ = SORTS.get(sort, SORTS["newest"])
    try:
        if column == "id":
            return None, int(cursor)
        raw, _, pk = cursor.rpartition("~")
        kind = float if column in ("reward", "gdi__total") else int
        return (kind(raw) if raw else None), int(pk)
    except ValueError:
        return None
