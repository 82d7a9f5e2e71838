"""The pure economic tier and price rules; no database needed."""

from __future__ import annotations

from decimal import Decimal

import pytest

from billing.tiers import ASSUMED_PRICE, Price, PriceBook, PriceRow, Tier, classify_tier

D = Decimal
ROWS = (
    PriceRow("openai", "gpt-free", D("0"), D("0")),
    PriceRow("openai", "gpt-mini", D("0.15"), D("0.60")),
    PriceRow("openai", "gpt-edge", D("1.0"), D("4.0")),
    PriceRow("openai", "gpt-big", D("2.50"), D("10.00")),
    PriceRow("openai", "gpt-forced", D("2.50"), D("10.00"), Tier.CHEAP),
    PriceRow("groq", "*", D("0.05"), D("0.10")),
    PriceRow("groq", "llama-special", D("3"), D("3")),
    PriceRow("local", "*", D("9"), D("9"), Tier.FREE),
    PriceRow("local", "mine", D("9"), D("9"), Tier.PREMIUM),
    PriceRow("local", "priced", D("0.5"), D("0.5")),
)


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        pytest.param("openai", "gpt-free", Tier.FREE, id="input-price-zero-is-free"),
        pytest.param("openai", "gpt-mini", Tier.CHEAP, id="below-boundary-is-cheap"),
        pytest.param("openai", "gpt-edge", Tier.CHEAP, id="at-boundary-is-cheap"),
        pytest.param("openai", "gpt-big", Tier.PREMIUM, id="above-boundary-is-premium"),
        pytest.param("openai", "gpt-forced", Tier.CHEAP, id="model-override-wins-over-price"),
        pytest.param("groq", "llama-anything", Tier.CHEAP, id="wildcard-row-prices-the-rest"),
        pytest.param("groq", "llama-special", Tier.PREMIUM, id="own-row-beats-wildcard-price"),
        pytest.param("local", "mine", Tier.PREMIUM, id="model-override-beats-provider-override"),
        pytest.param("local", "other", Tier.FREE, id="provider-override-for-unlisted-model"),
        pytest.param("local", "priced", Tier.FREE, id="provider-override-beats-own-price"),
        pytest.param("nobody", "mystery", Tier.PREMIUM, id="unpriced-is-premium-never-free"),
    ],
)
def test_classify_tier(provider: str, model: str, expected: Tier) -> None:
    assert classify_tier(provider, model, ROWS) is expected


def test_cheap_boundary_is_a_setting() -> None:
    assert classify_tier("openai", "gpt-big", ROWS, cheap_max_input_usd_per_mtok=D("3")) is (
        Tier.CHEAP
    )


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        pytest.param("openai", "gpt-mini", Price(D("0.15"), D("0.60"), False), id="own-row"),
        pytest.param("groq", "llama-x", Price(D("0.05"), D("0.10"), False), id="wildcard"),
        pytest.param("nobody", "mystery", ASSUMED_PRICE, id="assumed-5-in-15-out"),
    ],
)
def test_price_of(provider: str, model: str, expected: Price) -> None:
    assert PriceBook(ROWS).price_of(provider, model) == expected


def test_assumed_price_is_five_in_fifteen_out() -> None:
    assert (ASSUMED_PRICE.input_usd_per_mtok, ASSUMED_PRICE.output_usd_per_mtok) == (D(5), D(15))


def test_cost_from_tokens() -> None:
    cost = PriceBook(ROWS).cost_usd("openai", "gpt-big", input_tokens=1000, output_tokens=500)

    assert cost == D("0.0075")
