"""Keys never go into a stored description: find one wherever it hides in a parameters value.

A policy's parameters (and its model name) are stored in the database and shown to every
viewer; a key belongs in an environment variable of the workers, named by ``api_key_env``.
:func:`find_secret` walks a value recursively (nested objects and lists, header maps such as
``extra_body.headers``) and reports the first place that holds, or is named like, a
credential:

- names: ``api_key``, ``secret``, ``password``, ``Authorization``, ``*_token``, ``cookie``...
  (counts such as ``max_tokens`` are not secrets);
- values: known token shapes (``sk-…``, ``sk-ant-…``, ``hf_…``, ``ghp_…``, ``github_pat_…``,
  ``xox…-``, ``AKIA…``, ``AIza…``, JSON web tokens, private-key blocks), ``Bearer``/``Basic``
  credentials, and URLs that carry a user and password (``https://user:key@host``) or a key in
  their query (``?api_key=…``).

:func:`check_env_name` accepts only the name of an environment variable that does not itself
look like a key. Messages say where the secret was found, never what it is."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from trainer_core.errors import ConfigError

__all__ = ["WHERE_KEYS_BELONG", "check_env_name", "check_no_secret", "find_secret"]

WHERE_KEYS_BELONG = (
    "never store keys: put the key in an environment variable on the workers and give that "
    "variable's name as api_key_env (e.g. ANTHROPIC_API_KEY)"
)
_TOKENS = [
    ("an OpenAI or Anthropic key (sk-…)", r"sk-[A-Za-z0-9_\-]{16,}"),
    ("a Hugging Face token (hf_…)", r"hf_[A-Za-z0-9]{16,}"),
    ("a GitHub token", r"gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"),
    ("a Slack token (xox…)", r"xox[abposre]-[A-Za-z0-9\-]{10,}"),
    ("an AWS access key (AKIA…)", r"(?:AKIA|ASIA)[A-Z0-9]{16}"),
    ("a Google API key (AIza…)", r"AIza[A-Za-z0-9_\-]{30,}"),
    ("a JSON web token", r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*"),
    ("a private key", r"-----BEGIN [A-Z ]*PRIVATE KEY-----"),
]
_TOKEN = re.compile("|".join(f"(?P<t{i}>(?<![A-Za-z0-9_]){p})" for i, (_, p) in enumerate(_TOKENS)))
# a header value: "Bearer <token>", "Basic <base64>", "Token <token>"
_CREDENTIAL = re.compile(r"(?:Bearer|Basic|Token)\s+[A-Za-z0-9._~+/=\-]{8,}", re.IGNORECASE)
_URL_WITH_USER = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s/@?#]+@")
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s\"'<>]+")
# a name that holds a credential: api_key, x-api-key, secret, password, Authorization, ...
_SECRET_NAME = re.compile(
    r"api_?key|secret|passw(or)?d|credential|private_?key|access_?key|(^|_)auth(orization)?($|_)"
    r"|cookie|bearer"
    r"|(^|_)token$|^key$",
    re.IGNORECASE,
)
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")


def _normal(name: str) -> str:
    return re.sub(r"[\s\-.]+", "_", name.strip()).lower()


def secret_name(name: str) -> bool:
    """Whether a parameter or header name is one that holds a credential."""
    return bool(_SECRET_NAME.search(_normal(name)))


def secret_value(value: str) -> str | None:
    """What kind of credential ``value`` holds (a description), or None."""
    found = _TOKEN.search(value)
    if found:
        return _TOKENS[int(found.lastgroup[1:])][0]
    if _CREDENTIAL.fullmatch(value.strip()):
        return "a Bearer or Basic credential"
    if _URL_WITH_USER.search(value):
        return "a URL with a user name or password in it (user:key@host)"
    for match in _URL.finditer(value):
        try:
            query = parse_qsl(urlsplit(match.group()).query)
        except ValueError:
            continue
        if any(secret_name(key) for key, _ in query):
            return "a URL with a key in its query (?api_key=…)"
    return None


def find_secret(value: Any, path: str = "parameters", allowed: frozenset[str] = frozenset()):
    """(path, reason) of the first credential in ``value`` (names and values, any depth), or
    None. ``allowed``: top-level names that are not secrets though they look like one
    (``api_key_env`` names a variable; its value is checked by :func:`check_env_name`)."""
    stack: list[tuple[Any, str, bool]] = [(value, path, True)]
    while stack:
        item, where, top = stack.pop()
        if isinstance(item, dict):
            for key, child in reversed(list(item.items())):
                name = str(key)
                inner = f"{where}.{name}"
                if top and name in allowed:
                    continue
                if secret_name(name) and child not in (None, "", {}, []):
                    return inner, f"{name!r} names a credential"
                if (reason := secret_value(name)) is not None:
                    return where, f"a name in it is {reason}"
                stack.append((child, inner, False))
        elif isinstance(item, list | tuple):
            stack.extend((child, f"{where}[{i}]", False) for i, child in reversed(list(enumerate(item))))  # fmt: skip
        elif isinstance(item, str) and (reason := secret_value(item)) is not None:
            return where, f"its value is {reason}"
    return None


def check_no_secret(value: Any, path: str, allowed: frozenset[str] = frozenset()) -> None:
    """Raise ConfigError naming where ``value`` holds a credential (never the credential)."""
    found = find_secret(value, path, allowed)
    if found is not None:
        where, reason = found
        raise ConfigError(f"{where} looks like a secret ({reason}); {WHERE_KEYS_BELONG}")


def check_env_name(value: Any, path: str = "api_key_env") -> None:
    """``value`` must be an environment variable's name, and not look like a key itself."""
    if not isinstance(value, str) or not _ENV_NAME.match(value):
        raise ConfigError(
            f"{path} must be the NAME of an environment variable (letters, digits and _, like "
            "ANTHROPIC_API_KEY), not the key itself"
        )
    mixed = re.search(r"[a-z]", value) and re.search(r"[0-9]", value) and "_" not in value
    if secret_value(value) is not None or (len(value) >= 24 and mixed):
        raise ConfigError(
            f"{path} looks like a key, not the name of an environment variable; {WHERE_KEYS_BELONG}"
        )
