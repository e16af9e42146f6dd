"""Where a ``next`` parameter may send the browser: only somewhere on this site."""

from __future__ import annotations

from django.shortcuts import resolve_url
from django.utils.http import url_has_allowed_host_and_scheme


def safe_next_url(request, *, default: str, field: str = "next") -> str:
    """The request's ``next`` value (POST first, then the query string) when it points at this
    site, else ``default`` (a URL name or path). An external or malformed value is ignored, so a
    crafted link or form cannot turn one of our redirects into a way off the site."""
    candidate = (request.POST.get(field) or request.GET.get(field) or "").strip()
    if candidate and url_has_allowed_host_and_scheme(
        candidate, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return candidate
    return resolve_url(default)
