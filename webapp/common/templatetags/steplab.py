from __future__ import annotations

import json

from django import template
from django.utils import timezone

register = template.Library()


@register.filter
def duration(seconds) -> str:
    """12 → '12s', 95 → '1m 35s', 4000 → '1h 6m'."""
    if seconds is None or seconds == "":
        return "—"
    seconds = int(round(float(seconds)))
    if seconds < 60:
        return f"{seconds}s"
    minutes, sec = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {sec}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes}m"


_SCALARS = (str, int, float, bool, type(None))


@register.filter
def pretty_json(value) -> str:
    """Indented JSON as plain text (autoescaped by the template like any string). An object
    of plain values (most tool parameters) is written here, as ``json.dumps`` would indent it:
    its indenting encoder is pure Python and costs 50 µs an object, a page of steps 50 ms."""
    if (
        isinstance(value, dict)
        and value
        and all(type(k) is str and isinstance(v, _SCALARS) for k, v in value.items())
    ):
        items = sorted(value.items())
        lines = ",\n".join(f"  {json.dumps(k)}: {json.dumps(v, default=str)}" for k, v in items)
        return "{\n" + lines + "\n}"
    return json.dumps(value, indent=2, sort_keys=True, default=str)


@register.filter
def elapsed(job) -> str:
    if not job.started_at:
        return "—"
    end = job.finished_at
    if end is None:
        end = timezone.now()
    return duration((end - job.started_at).total_seconds())


@register.filter
def ago(moment) -> str:
    """Seconds-precise 'how long ago' for live pages: '3s ago', '2m 5s ago'."""
    if not moment:
        return "—"
    return f"{duration(max(0.0, (timezone.now() - moment).total_seconds()))} ago"


@register.filter
def pvalue(value) -> str:
    """A p-value to read: 4 decimals, "< 0.0001" below that, "—" when there is none."""
    if value is None or value == "":
        return "—"
    try:
        p = float(value)
    except (TypeError, ValueError):
        return "—"
    return "< 0.0001" if p < 0.0001 else f"{p:.4f}"
