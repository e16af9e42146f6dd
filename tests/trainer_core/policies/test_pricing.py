"""Model prices: table lookups by family (dated ids, aliases), explicit prices, unknown models."""

from __future__ import annotations

import pytest

from trainer_core.errors import ConfigError
from trainer_core.policies.pricing import PRICES, cost, estimate_cost, known_price, price_of


@pytest.mark.parametrize(
    ("model", "prices"),
    [
        ("claude-sonnet-4-5", (3.0, 15.0)),
        ("claude-sonnet-4-5-20250929", (3.0, 15.0)),
        ("claude-opus-4-1-20250805", (15.0, 75.0)),
        ("claude-opus-4-20250514", (15.0, 75.0)),
        ("claude-opus-4-0", (15.0, 75.0)),
        ("claude-opus-4-5-20251101", (5.0, 25.0)),
        ("claude-haiku-4-5-20251001", (1.0, 5.0)),
        ("claude-3-5-haiku-latest", (0.8, 4.0)),
        ("claude-3-5-haiku-20241022", (0.8, 4.0)),
        ("claude-opus-4@20250514", (15.0, 75.0)),  # Vertex AI spelling
        ("anthropic/claude-haiku-4-5", (1.0, 5.0)),
        ("gpt-4o-2024-08-06", (2.5, 10.0)),
        ("gpt-4o-mini", (0.15, 0.60)),
        ("openai/gpt-4.1-mini", (0.40, 1.60)),
        ("Claude-Sonnet-4-5", (3.0, 15.0)),
    ],
)
def test_ids_match_their_family(model, prices):
    assert price_of(model) == prices
    assert known_price(model)


def test_a_family_is_not_matched_by_a_shorter_prefix():
    # claude-opus-4-9 is not Opus 4 (whose price differs): unknown rather than wrong
    assert price_of("claude-opus-4-9") is None
    assert price_of("gpt-4o-mini-audio") is None


def test_cost_from_the_table_and_explicit_prices():
    assert cost("claude-sonnet-4-5", 1_000_000, 0) == pytest.approx(3.0)
    assert cost("claude-sonnet-4-5", 1200, 300) == pytest.approx(0.0081)
    assert cost("claude-sonnet-4-5", 1000, 1000, price_in=1.0) == pytest.approx(0.001 + 0.015)
    assert cost("my-model", 1000, 1000, price_in=1.0, price_out=2.0) == pytest.approx(0.003)


def test_unknown_models_cost_zero_and_say_so():
    assert cost("Qwen/Qwen2.5-7B-Instruct", 10_000, 10_000) == 0.0
    assert not known_price("Qwen/Qwen2.5-7B-Instruct")
    assert not known_price("")


def test_estimate_cost():
    per_call = cost("claude-haiku-4-5", 2000, 200)
    assert estimate_cost("claude-haiku-4-5", 500, 2000, 200) == pytest.approx(500 * per_call)
    assert estimate_cost("claude-haiku-4-5", 0, 2000, 200) == 0.0
    with pytest.raises(ConfigError):
        estimate_cost("claude-haiku-4-5", -1, 2000, 200)
    with pytest.raises(ConfigError):
        cost("x", 1, 1, price_in=-1)


def test_every_price_is_a_pair_of_non_negative_numbers():
    for model, (p_in, p_out) in PRICES.items():
        assert model == model.lower()
        assert 0 <= p_in <= p_out, model
