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


# --- free must be explicit: a row awaiting review is no known price -------------------------

REVIEW_ROWS = (
    PriceRow("ollama", "*", D("0"), D("0")),  # local models, free by hand
    PriceRow("ollama", "gpt-oss-cloud", D("0"), D("0"), needs_review=True),
    PriceRow("ollama", "confirmed", D("0"), D("0"), Tier.FREE),
    PriceRow("gigachat", "GigaChat-2-Max", D("0"), D("0"), needs_review=True),
    PriceRow("cheapo", "*", D("0"), D("0"), Tier.CHEAP),
    PriceRow("cheapo", "zero", D("0"), D("0"), needs_review=True),
    PriceRow("review", "*", D("0"), D("0"), needs_review=True),
)


@pytest.mark.parametrize(
    ("provider", "model", "expected"),
    [
        pytest.param("gigachat", "GigaChat-2-Max", Tier.PREMIUM, id="imported-zero-is-premium"),
        pytest.param("ollama", "gpt-oss-cloud", Tier.PREMIUM, id="never-borrows-a-free-wildcard"),
        pytest.param("ollama", "llama3", Tier.FREE, id="hand-entered-wildcard-zero-is-free"),
        pytest.param("ollama", "confirmed", Tier.FREE, id="free-override-confirms"),
        pytest.param("cheapo", "zero", Tier.CHEAP, id="provider-override-still-wins"),
        pytest.param("review", "anything", Tier.PREMIUM, id="wildcard-awaiting-review"),
    ],
)
def test_a_row_awaiting_review_is_tiered_as_unpriced(
    provider: str, model: str, expected: Tier
) -> None:
    assert classify_tier(provider, model, REVIEW_ROWS) is expected


def test_a_row_awaiting_review_is_priced_at_the_assumed_price_for_spend() -> None:
    book = PriceBook(REVIEW_ROWS)

    assert book.price_of("gigachat", "GigaChat-2-Max") == ASSUMED_PRICE
    assert book.cost_usd("ollama", "gpt-oss-cloud", 1_000_000, 0) == D("5")
    assert book.cost_usd("ollama", "llama3", 1_000_000, 0) == D("0")
