"""Builders for billing tests: catalog entries, prices (by hand or imported) and price
files, each through the billing services so every row is audited like a real one."""

from __future__ import annotations

import json
from decimal import Decimal
from io import StringIO
from pathlib import Path
from typing import Any

from django.core.management import call_command

from billing import services
from billing.models import BillingCatalogEntry, ModelPrice
from billing.price_import import ParsedPriceFile
from billing.tiers import PriceRow

# A small LiteLLM-style price file: three chat models and one row that is skipped.
PRICE_FILE = Path(__file__).parent / "data" / "prices_small.json"


def make_catalog_entry(
    provider: str = "acme",
    auth_type: str | None = "oauth",
    billing: str = "subscription",
    overage: str = "hard-stop",
    reason: str = "Plan terms.",
    *,
    actor: str = "setup",
) -> BillingCatalogEntry:
    """A curated catalog entry, created (and audited) by `actor`."""
    return services.create_catalog_entry(
        services.CatalogInput(provider, auth_type, billing, overage, reason), actor=actor
    )


def make_price(
    provider: str = "openai",
    model: str = "gpt-4o-mini",
    *,
    input_usd: str = "0.15",
    output_usd: str = "0.6",
    tier_override: str | None = None,
    actor: str = "setup",
) -> ModelPrice:
    """A price entered by hand (`manual`), created or updated by `actor`."""
    price, _ = services.upsert_price(
        services.PriceInput(
            provider=provider,
            model=model,
            input_usd_per_mtok=Decimal(input_usd),
            output_usd_per_mtok=Decimal(output_usd),
            tier_override=tier_override,
        ),
        actor=actor,
    )
    return price


def import_rows(*rows: tuple[str, str, str], actor: str = "import_prices") -> services.ImportCounts:
    """(provider, model, cost per token) rows imported as a price file would be."""
    parsed = ParsedPriceFile(
        rows=tuple(PriceRow(p, m, Decimal(cost), Decimal(cost)) for p, m, cost in rows),
        skipped=0,
    )
    return services.import_prices(parsed, actor=actor)


def write_price_file(path: Path, data: Any) -> Path:
    """A price file at `path`: `data` as JSON, or as is when it is already text."""
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def run_import_prices(tmp_path: Path, data: Any, *options: str) -> str:
    """`import_prices` run on a price file holding `data`; its output, stripped."""
    path = write_price_file(tmp_path / "prices.json", data)
    out = StringIO()
    call_command("import_prices", str(path), *options, stdout=out)
    return out.getvalue().strip()
