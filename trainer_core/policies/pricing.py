"""What a model call costs: list prices in US dollars per million input / output tokens.

    cost("claude-sonnet-4-5-20250929", 1200, 300)         # 0.0081
    cost("my-vllm-model", 1200, 300)                       # 0.0 (unknown; see known_price)
    cost("my-vllm-model", 1200, 300, price_in=0.2, price_out=0.6)
    estimate_cost("claude-haiku-4-5", calls=500, tokens_in_per_call=2000, tokens_out_per_call=200)

Prices are the providers' published base rates (no prompt caching, no batch discount, no
long-context surcharge) as of this module's writing; they change, so a policy can always pass
explicit ``price_in`` / ``price_out``, which win over the table. A model id matches after
dropping a provider prefix (``anthropic/``, ``openai/``), a date suffix (``-20250929``,
``-2024-08-06``, ``@20250514``) and ``-latest``, so dated snapshots and aliases share their
family's price. An id the table does not know costs 0.0 and :func:`known_price` says False, so a
page can show "cost unknown" rather than "$0".
"""

from __future__ import annotations

import re

from trainer_core.errors import ConfigError

__all__ = ["PRICES", "cost", "estimate_cost", "known_price", "price_of"]

#: USD per million tokens: model id -> (input, output).
PRICES: dict[str, tuple[float, float]] = {
    # Anthropic (https://platform.claude.com/docs/en/about-claude/pricing)
    "claude-opus-5-5": (4.0, 20.0),
    "claude-opus-5": (5.0, 25.0),
    "claude-sonnet-5-5": (2.0, 10.0),
    "claude-sonnet-5": (2.0, 10.0),
    "claude-fable-5-1": (10.0, 50.0),
    "claude-fable-5": (10.0, 50.0),
    "claude-opus-4-8": (5.0, 25.0),
    "claude-opus-4-7": (5.0, 25.0),
    "claude-opus-4-6": (5.0, 25.0),
    "claude-opus-4-5": (5.0, 25.0),
    "claude-opus-4-1": (15.0, 75.0),
    "claude-opus-4": (15.0, 75.0),
    "claude-sonnet-4-6": (3.0, 15.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-sonnet-4": (3.0, 15.0),
    "claude-3-7-sonnet": (3.0, 15.0),
    "claude-3-5-sonnet": (3.0, 15.0),
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-3-5-haiku": (0.8, 4.0),
    "claude-3-opus": (15.0, 75.0),
    "claude-3-haiku": (0.25, 1.25),
    # OpenAI (https://openai.com/api/pricing)
    "gpt-5": (1.25, 10.0),
    "gpt-5-mini": (0.25, 2.0),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.0),
    "gpt-4o-mini": (0.15, 0.60),
    "o3": (2.0, 8.0),
    "o4-mini": (1.10, 4.40),
}

# Aliases that are not a table id plus a date: "claude-opus-4-0" is Claude Opus 4.
_ALIASES = {"claude-opus-4-0": "claude-opus-4", "claude-sonnet-4-0": "claude-sonnet-4"}
_PREFIX = re.compile(r"^(?:anthropic|openai)[/.]", re.IGNORECASE)
_SUFFIX = re.compile(r"(?:[-@]\d{8}|-\d{4}-\d{2}-\d{2}|-latest)$", re.IGNORECASE)


def _key(model: str) -> str:
    name = _PREFIX.sub("", (model or "").strip()).lower()
    name = _SUFFIX.sub("", name)
    return _ALIASES.get(name, name)


def price_of(model: str) -> tuple[float, float] | None:
    """``(input, output)`` USD per million tokens from the table, or None when unknown."""
    return PRICES.get(_key(model))


def known_price(model: str) -> bool:
    """Whether the table has a price for ``model`` (so a cost of 0.0 means "free", not
    "unknown")."""
    return price_of(model) is not None


def _prices(model: str, price_in: float | None, price_out: float | None) -> tuple[float, float]:
    table = price_of(model) or (0.0, 0.0)
    p_in = table[0] if price_in is None else float(price_in)
    p_out = table[1] if price_out is None else float(price_out)
    if p_in < 0 or p_out < 0:
        raise ConfigError(f"prices must be 0 or more USD per million tokens, not {p_in}/{p_out}")
    return p_in, p_out


def cost(
    model: str,
    tokens_in: int,
    tokens_out: int,
    *,
    price_in: float | None = None,
    price_out: float | None = None,
) -> float:
    """US dollars for one call. Explicit ``price_in`` / ``price_out`` (USD per million tokens)
    win over the table; a model the table does not know, with no explicit price, costs 0.0."""
    p_in, p_out = _prices(model, price_in, price_out)
    return (max(int(tokens_in), 0) * p_in + max(int(tokens_out), 0) * p_out) / 1_000_000


def estimate_cost(
    model: str,
    calls: int,
    tokens_in_per_call: int,
    tokens_out_per_call: int,
    *,
    price_in: float | None = None,
    price_out: float | None = None,
) -> float:
    """A pre-launch estimate in US dollars: ``calls`` calls of the given average size (e.g.
    episodes × steps per episode for a collect run)."""
    if calls < 0 or tokens_in_per_call < 0 or tokens_out_per_call < 0:
        raise ConfigError("calls and tokens per call must be 0 or more")
    return calls * cost(
        model, tokens_in_per_call, tokens_out_per_call, price_in=price_in, price_out=price_out
    )
