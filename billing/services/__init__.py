"""The billing shell, one module per concern: load rows for the pure core, and write
catalog and price changes together with their audit rows in one transaction. This
package re-exports the public names, so callers read `services.upsert_price(...)`."""

from __future__ import annotations

from billing.services.aliases import (
    AliasInput,
    AliasNotFound,
    alias_snapshot,
    clean_alias_input,
    clean_alias_names,
    load_aliases,
    provider_id,
    refuse_catalog_provider,
    resolve_for_write,
)
from billing.services.audit import (
    catalog_snapshot,
    price_snapshot,
    record_audit,
)
from billing.services.catalog import (
    CatalogInput,
    clean_catalog_input,
    create_catalog_entry,
    delete_catalog_entry,
    load_catalog,
    update_catalog_entry,
)
from billing.services.common import (
    CatalogEntryNotFound,
    Conflict,
    PriceNotFound,
)
from billing.services.counters import (
    bump,
    change_counters,
    config_counter,
)
from billing.services.prices import (
    ImportCounts,
    PriceInput,
    PricePage,
    clean_price_input,
    confirm_free,
    decode_price_cursor,
    delete_price,
    encode_price_cursor,
    import_price_file,
    import_prices,
    imported_needs_review,
    load_price_book,
    price_book_for,
    price_limits,
    price_page,
    tier_expression,
    upsert_price,
)

__all__ = [
    "AliasInput",
    "AliasNotFound",
    "CatalogEntryNotFound",
    "CatalogInput",
    "Conflict",
    "ImportCounts",
    "PriceInput",
    "PriceNotFound",
    "PricePage",
    "alias_snapshot",
    "bump",
    "catalog_snapshot",
    "change_counters",
    "clean_alias_input",
    "clean_alias_names",
    "clean_catalog_input",
    "clean_price_input",
    "config_counter",
    "confirm_free",
    "create_catalog_entry",
    "decode_price_cursor",
    "delete_catalog_entry",
    "delete_price",
    "encode_price_cursor",
    "import_price_file",
    "import_prices",
    "imported_needs_review",
    "load_aliases",
    "load_catalog",
    "load_price_book",
    "price_book_for",
    "price_limits",
    "price_page",
    "price_snapshot",
    "provider_id",
    "record_audit",
    "refuse_catalog_provider",
    "resolve_for_write",
    "tier_expression",
    "update_catalog_entry",
    "upsert_price",
]
