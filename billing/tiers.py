"""Pure economic tiers and prices of models, from the model price catalog.

No ORM, no IO. A provider's `*` row prices (and overrides) its models that have no
row of their own. A model with no known price is assumed to cost $5 in / $15 out
per million tokens, so an unpriced model is premium and never lands on `free`.
Free must be explicit: a row awaiting review (an imported zero) is no known price, so
only a hand-entered zero or a `free` override puts a model on the free rung.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from typing import Final, NamedTuple

WILDCARD_MODEL = "*"
ASSUMED_INPUT_USD_PER_MTOK = Decimal("5")
ASSUMED_OUTPUT_USD_PER_MTOK = Decimal("15")
DEFAULT_CHEAP_MAX_INPUT_USD_PER_MTOK = Decimal("1.0")
TOKENS_PER_MILLION = Decimal(1_000_000)


class Tier(StrEnum):
    FREE = "free"
    CHEAP = "cheap"
    PREMIUM = "premium"


class PriceRow(NamedTuple):
    """One model price row, as plain data (USD per million tokens). A named tuple: a
    snapshot builds one per row of the table (50,000 of them), and a frozen dataclass
    costs several times more to construct."""

    provider: str
    model: str
    input_usd_per_mtok: Decimal
    output_usd_per_mtok: Decimal
    tier_override: Tier | None = None
    # An imported zero awaiting an operator: not a known price (treated as unpriced).
    needs_review: bool = False


@dataclass(frozen=True, slots=True)
class Price:
    """The effective price of a model and whether it was assumed."""

    input_usd_per_mtok: Decimal
    output_usd_per_mtok: Decimal
    is_assumed: bool


ASSUMED_PRICE = Price(ASSUMED_INPUT_USD_PER_MTOK, ASSUMED_OUTPUT_USD_PER_MTOK, is_assumed=True)


def tier_for_input_price(
    input_usd_per_mtok: Decimal, cheap_max_input_usd_per_mtok: Decimal
) -> Tier:
    """Tier by input price alone: <= 0 free, <= the cheap boundary cheap, else premium."""
    if input_usd_per_mtok <= 0:
        return Tier.FREE
    if input_usd_per_mtok <= cheap_max_input_usd_per_mtok:
        return Tier.CHEAP
    return Tier.PREMIUM


# A price row as a query returns it: (provider, model, input, output, the override's
# value or None, needs review). PriceRow has the same layout, so the book reads either
# by position, and a snapshot of 50,000 rows needs no object per row.
PlainPriceRow = tuple[str, str, Decimal, Decimal, str | None, bool]
_TIER_BY_VALUE: dict[str | None, Tier] = {tier.value: tier for tier in Tier}
_INPUT: Final = 2
_OUTPUT: Final = 3
_OVERRIDE: Final = 4
_REVIEW: Final = 5


class PriceBook:
    """An index over price rows answering price and tier questions in O(1)."""

    __slots__ = ("_models", "_rows")

    def __init__(self, rows: Iterable[PriceRow | PlainPriceRow]) -> None:
        self._rows: dict[tuple[str, str], PriceRow | PlainPriceRow] = {
            (row[0], row[1]): row for row in rows
        }
        self._models = frozenset(model for _, model in self._rows if model != WILDCARD_MODEL)

    @property
    def model_names(self) -> frozenset[str]:
        """Every model a price row names (the models the product can name)."""
        return self._models

    def _row(self, provider: str, model: str) -> PriceRow | PlainPriceRow | None:
        return self._rows.get((provider, model)) or self._rows.get((provider, WILDCARD_MODEL))

    def price_of(self, provider: str, model: str) -> Price:
        """The model's own price, else its provider's `*` price, else the assumed $5/$15.
        A row awaiting review is no known price: assumed, never its provider's `*` price
        (a placeholder zero must not borrow a free `*` row either)."""
        row = self._row(provider, model)
        if row is None or row[_REVIEW]:
            return ASSUMED_PRICE
        return Price(row[_INPUT], row[_OUTPUT], is_assumed=False)

    def tier_of(
        self,
        provider: str,
        model: str,
        cheap_max_input_usd_per_mtok: Decimal = DEFAULT_CHEAP_MAX_INPUT_USD_PER_MTOK,
    ) -> Tier:
        """Override per model, then per provider (`*`), else by input price."""
        exact = self._rows.get((provider, model))
        if exact is not None and (override := _TIER_BY_VALUE.get(exact[_OVERRIDE])) is not None:
            return override
        wildcard = self._rows.get((provider, WILDCARD_MODEL))
        if (
            wildcard is not None
            and (override := _TIER_BY_VALUE.get(wildcard[_OVERRIDE])) is not None
        ):
            return override
        price = self.price_of(provider, model)
        return tier_for_input_price(price.input_usd_per_mtok, cheap_max_input_usd_per_mtok)

    def cost_usd(self, provider: str, model: str, input_tokens: int, output_tokens: int) -> Decimal:
        """Cost of a request from its token counts (assumed price when unpriced)."""
        price = self.price_of(provider, model)
        return (
            price.input_usd_per_mtok * input_tokens + price.output_usd_per_mtok * output_tokens
        ) / TOKENS_PER_MILLION


def classify_tier(
    provider: str,
    model: str,
    rows: Iterable[PriceRow],
    cheap_max_input_usd_per_mtok: Decimal = DEFAULT_CHEAP_MAX_INPUT_USD_PER_MTOK,
) -> Tier:
    """Economic tier of (provider, model) from price rows (convenience over `PriceBook`)."""
    return PriceBook(rows).tier_of(provider, model, cheap_max_input_usd_per_mtok)
