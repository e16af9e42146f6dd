"""Hide secrets before a value is shown or logged."""

from __future__ import annotations


def mask_url(url: str) -> str:
    """``url`` with its password replaced by ``***`` (``redis://user:***@host``)."""
    if "@" in url and "://" in url:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        user = creds.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}" if ":" in creds else f"{scheme}://{user}@{host}"
    return url
