"""Pure parsing of a `model_prices_and_context_window.json` price file.

The file maps a model name to its per-token USD costs, with the provider in
`litellm_provider`. Chat models only; the `sample_spec` documentation entry is
skipped. A file that cannot be read (not UTF-8, not JSON, nested too deeply, not an
object) is refused whole; within a readable file every malformed or out-of-range entry
(a name too long or carrying a control character or a lone surrogate, a cost that is
not a finite number within the price columns) is skipped and counted, never stored:
one bad row must not stop, or break, the others.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from billing.bounds import Bounds, OutOfRange, fit_decimal, text_problem
from billing.tiers import PriceRow

SAMPLE_SPEC_KEY = "sample_spec"
CHAT_MODE = "chat"
PER_MILLION = Decimal(1_000_000)
# A per-token cost this many orders of magnitude from 1 is junk whatever the columns
# hold; checking first keeps `cost * 1e6` from overflowing the decimal context.
MAX_COST_EXPONENT = 30
# A price file is a few MB; anything far larger is a mistake, refused before parsing.
MAX_PRICE_FILE_BYTES = 32 * 1024 * 1024


class PriceFileError(ValueError):
    """The price file cannot be imported; nothing was written."""


@dataclass(frozen=True, slots=True)
class PriceLimits:
    """What the price table stores (from its model fields): name lengths and the
    bounds of a USD-per-million-tokens column."""

    provider_max_length: int
    model_max_length: int
    usd_per_mtok: Bounds


@dataclass(frozen=True, slots=True)
class ParsedPriceFile:
    rows: tuple[PriceRow, ...]
    skipped: int  # entries that are not chat models, or carry no price
    invalid: int = 0  # malformed or out-of-range entries: skipped, counted, never stored


def decode_price_file(raw: bytes) -> Any:
    """The decoded JSON of a price file, or PriceFileError when it cannot be read."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise PriceFileError("The file is not UTF-8 text.") from None
    try:
        return json.loads(text)
    except RecursionError:
        raise PriceFileError("The file is nested too deeply to be a price file.") from None
    except json.JSONDecodeError as error:
        raise PriceFileError(
            f"The file is not valid JSON (line {error.lineno}, column {error.colno})."
        ) from None
    except ValueError:  # e.g. an integer literal longer than Python converts
        raise PriceFileError("The file is not valid JSON (a number is out of range).") from None


def parse_provider_map(pairs: Iterable[str], limits: PriceLimits) -> dict[str, str]:
    """`SOURCE=PROVIDER` pairs as a mapping, or PriceFileError naming the bad pair
    (a target must be a provider id the price table can store)."""
    mapping: dict[str, str] = {}
    for pair in pairs:
        source, sep, target = (part.strip() for part in pair.partition("="))
        if not sep or not source or not target:
            raise PriceFileError(f"Use SOURCE=PROVIDER pairs; {_shown(pair)} is not one.")
        for name, value in (("source", source), ("provider", target)):
            problem = text_problem(value, limits.provider_max_length)
            if problem is not None:
                raise PriceFileError(
                    f"In the provider map, the {name} of {_shown(pair)}: {problem}"
                )
        mapping[source] = target
    return mapping


def split_provider_map(text: str) -> list[str]:
    """The pairs of a provider map typed as text (comma or space separated)."""
    return [pair for pair in re.split(r"[\s,]+", text.strip()) if pair]


def _shown(text: str, limit: int = 40) -> str:
    """A user's text, shortened and with anything unprintable escaped, for a message."""
    shown = text if len(text) <= limit else text[:limit] + "\u2026"
    return ascii(shown) if not shown.isprintable() else repr(shown)


class _Invalid(Exception):
    """This entry is malformed or out of range: skip and count it."""


def _cost_per_mtok(value: Any, limits: PriceLimits) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise _Invalid
    try:
        # A float through its shortest repr: 1e-06 is exactly one dollar per million.
        cost = Decimal(value) if isinstance(value, int | str) else Decimal(repr(value))
    except (InvalidOperation, ValueError):
        raise _Invalid from None
    if not cost.is_finite() or cost < 0 or (cost and abs(cost.adjusted()) > MAX_COST_EXPONENT):
        raise _Invalid
    try:
        return fit_decimal(cost * PER_MILLION, limits.usd_per_mtok)
    except OutOfRange:
        raise _Invalid from None


def _row(
    model: str, spec: dict[str, Any], provider_map: Mapping[str, str], limits: PriceLimits
) -> PriceRow:
    source_provider = spec.get("litellm_provider")
    if not isinstance(source_provider, str):
        raise _Invalid
    source_provider = source_provider.strip()
    # Provider ids are trimmed and lower-cased, then mapped (the aliases, and `--map`).
    normalised = source_provider.lower()
    provider = provider_map.get(source_provider, provider_map.get(normalised, normalised))
    # "anthropic/claude-x" under provider anthropic is the model "claude-x" to a gateway.
    name = model.removeprefix(f"{source_provider}/").strip()
    if (
        text_problem(provider, limits.provider_max_length) is not None
        or text_problem(name, limits.model_max_length) is not None
    ):
        raise _Invalid
    return PriceRow(
        provider=provider,
        model=name,
        input_usd_per_mtok=_cost_per_mtok(spec["input_cost_per_token"], limits),
        output_usd_per_mtok=_cost_per_mtok(spec["output_cost_per_token"], limits),
    )


def parse_price_file(
    data: Any, provider_map: Mapping[str, str] | None = None, *, limits: PriceLimits
) -> ParsedPriceFile:
    """Turn the decoded JSON of a price file into price rows (malformed entries skipped
    and counted), or raise PriceFileError when it is not a price file at all."""
    if not isinstance(data, dict):
        raise PriceFileError("The price file must be a JSON object keyed by model name.")
    provider_map = provider_map or {}
    rows: dict[tuple[str, str], PriceRow] = {}
    skipped = invalid = 0
    for model, spec in data.items():
        if model == SAMPLE_SPEC_KEY:
            continue
        if not isinstance(spec, dict):
            invalid += 1
            continue
        if spec.get("mode") != CHAT_MODE:
            skipped += 1
            continue
        if "input_cost_per_token" not in spec or "output_cost_per_token" not in spec:
            skipped += 1
            continue
        try:
            row = _row(model, spec, provider_map, limits)
        except _Invalid:
            invalid += 1
            continue
        rows[(row.provider, row.model)] = row
    return ParsedPriceFile(rows=tuple(rows.values()), skipped=skipped, invalid=invalid)
