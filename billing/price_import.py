"""Pure parsing of a `model_prices_and_context_window.json` price file.

The file maps a model name to its per-token USD costs, with the provider in
`litellm_provider`. Chat models only; the `sample_spec` documentation entry is
skipped. The whole file is validated before anything is written.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from billing.tiers import PriceRow

SAMPLE_SPEC_KEY = "sample_spec"
CHAT_MODE = "chat"
PER_MILLION = Decimal(1_000_000)
MAX_NAME_LENGTH = 200


class PriceFileError(ValueError):
    """The price file cannot be imported; nothing was written."""


@dataclass(frozen=True, slots=True)
class ParsedPriceFile:
    rows: tuple[PriceRow, ...]
    skipped: int  # entries that are not chat models, or carry no price


def _cost_per_mtok(model: str, field: str, value: Any) -> Decimal:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise PriceFileError(f"{model}: {field} must be a number, got {type(value).__name__}")
    try:
        cost = Decimal(str(value))
    except InvalidOperation as error:
        raise PriceFileError(f"{model}: {field} is not a number: {value!r}") from error
    if not cost.is_finite() or (isinstance(value, float) and not math.isfinite(value)):
        raise PriceFileError(f"{model}: {field} must be finite")
    if cost < 0:
        raise PriceFileError(f"{model}: {field} must not be negative, got {value!r}")
    return (cost * PER_MILLION).quantize(Decimal("0.000001"))


def parse_price_file(data: Any, provider_map: Mapping[str, str] | None = None) -> ParsedPriceFile:
    """Turn the decoded JSON of a price file into price rows, or raise PriceFileError."""
    if not isinstance(data, dict):
        raise PriceFileError("The price file must be a JSON object keyed by model name.")
    provider_map = provider_map or {}
    rows: dict[tuple[str, str], PriceRow] = {}
    skipped = 0
    for model, spec in data.items():
        if model == SAMPLE_SPEC_KEY:
            continue
        if not isinstance(spec, dict):
            raise PriceFileError(f"{model}: each entry must be a JSON object")
        if spec.get("mode") != CHAT_MODE:
            skipped += 1
            continue
        source_provider = spec.get("litellm_provider")
        if not isinstance(source_provider, str) or not source_provider.strip():
            raise PriceFileError(f"{model}: litellm_provider must be a non-empty string")
        if "input_cost_per_token" not in spec or "output_cost_per_token" not in spec:
            skipped += 1
            continue
        provider = provider_map.get(source_provider, source_provider)
        # "anthropic/claude-x" under provider anthropic is the model "claude-x" to a gateway.
        name = model.removeprefix(f"{source_provider}/")
        if not name or len(name) > MAX_NAME_LENGTH or "\x00" in name:
            raise PriceFileError(
                f"{model!r}: a model name must be 1 to {MAX_NAME_LENGTH} characters"
            )
        rows[(provider, name)] = PriceRow(
            provider=provider,
            model=name,
            input_usd_per_mtok=_cost_per_mtok(
                model, "input_cost_per_token", spec["input_cost_per_token"]
            ),
            output_usd_per_mtok=_cost_per_mtok(
                model, "output_cost_per_token", spec["output_cost_per_token"]
            ),
        )
    return ParsedPriceFile(rows=tuple(rows.values()), skipped=skipped)
