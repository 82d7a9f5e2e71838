"""REST endpoints of the billing catalog and model prices (read: gateway; write: operator)."""

from __future__ import annotations

from decimal import Decimal

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router, Status

from billing import services
from billing.models import BillingCatalogEntry, ModelPrice
from billing.schemas import (
    PRICES_DEFAULT_LIMIT,
    PRICES_MAX_LIMIT,
    Detail,
    EntryIn,
    EntryOut,
    PriceFilters,
    PriceIn,
    PriceOut,
)
from billing.tiers import PriceBook
from ladder.services import load_config
from omniroute_admin.auth import actor_of, gateway_auth, operator_auth
from omniroute_admin.errors import (
    BODY_ERRORS,
    GATEWAY_ERRORS,
    OPERATOR_ERRORS,
    PATH_ERRORS,
)
from omniroute_admin.paging import cursor_error, link_next_page

router = Router(tags=["catalog and prices"])


def _catalog_input(payload: EntryIn) -> services.CatalogInput:
    return services.CatalogInput(
        payload.provider, payload.auth_type, payload.billing, payload.overage, payload.reason
    )


@router.get(
    "/catalog",
    response={200: list[EntryOut], **GATEWAY_ERRORS},
    auth=gateway_auth,
    summary="List the catalog",
)
def list_catalog(request: HttpRequest) -> list[BillingCatalogEntry]:
    """Every curated billing entry. Providers without an entry are uncurated (metered)."""
    return list(BillingCatalogEntry.objects.all())


@router.post(
    "/catalog",
    response={201: EntryOut, 409: Detail, **BODY_ERRORS, **OPERATOR_ERRORS},
    auth=operator_auth,
    summary="Create a catalog entry",
)
def create_catalog_entry(request: HttpRequest, payload: EntryIn) -> object:
    """Curate a provider (optionally one auth type). One entry per (provider, auth_type)
    and one provider-wide entry per provider: a duplicate answers 409."""
    entry = services.create_catalog_entry(_catalog_input(payload), actor=actor_of(request))
    return Status(201, entry)


@router.get(
    "/catalog/{int:entry_id}",
    response={200: EntryOut, 404: Detail, **GATEWAY_ERRORS},
    auth=gateway_auth,
    summary="Get a catalog entry",
)
def get_catalog_entry(request: HttpRequest, entry_id: int) -> object:
    """One catalog entry."""
    entry = BillingCatalogEntry.objects.filter(pk=entry_id).first()
    if entry is None:
        return Status(404, {"detail": f"No catalog entry {entry_id}."})
    return entry


@router.put(
    "/catalog/{int:entry_id}",
    response={200: EntryOut, 404: Detail, 409: Detail, **BODY_ERRORS, **OPERATOR_ERRORS},
    auth=operator_auth,
    summary="Replace a catalog entry",
)
def update_catalog_entry(request: HttpRequest, entry_id: int, payload: EntryIn) -> object:
    """Replace every field of an entry. Send the `version` you read to be refused (409)
    instead of overwriting someone else's newer edit."""
    return services.update_catalog_entry(
        entry_id,
        _catalog_input(payload),
        actor=actor_of(request),
        expected_version=payload.version,
    )


@router.delete(
    "/catalog/{int:entry_id}",
    response={204: None, 404: Detail, **OPERATOR_ERRORS},
    auth=operator_auth,
    summary="Delete a catalog entry",
)
def delete_catalog_entry(request: HttpRequest, entry_id: int) -> object:
    """Delete an entry: its provider becomes uncurated (treated as metered)."""
    services.delete_catalog_entry(entry_id, actor=actor_of(request))
    return Status(204, None)


def price_out(price: ModelPrice, book: PriceBook, cheap_max: Decimal) -> dict[str, object]:
    """A price row with its computed tier."""
    return {
        "id": price.pk,
        "provider": price.provider,
        "model": price.model,
        "input_usd_per_mtok": float(price.input_usd_per_mtok),
        "output_usd_per_mtok": float(price.output_usd_per_mtok),
        "tier_override": price.tier_override or None,
        "source": price.source,
        "needs_review": price.needs_review,
        "tier": book.tier_of(price.provider, price.model, cheap_max).value,
    }


PRICES_DESCRIPTION = f"""Model prices (USD per million tokens) with their economic tier, \
in (provider, model) order, one page at a time.

`limit` rows per page (default {PRICES_DEFAULT_LIMIT}, at most \
{PRICES_MAX_LIMIT}). When more rows follow, the response carries the next page's \
cursor in the `X-Next-Cursor` header and a `Link: <...>; rel="next"` header with the \
full URL of the next page (same filters); the last page has neither. Send the cursor \
back as `cursor` with the same filters; it is opaque (a position, not an offset: rows \
added or deleted meanwhile shift nothing). Filters: `provider` (exact), `q` (provider \
or model contains, case-insensitive), `tier` (the computed tier), `needs_review`.
"""


@router.get(
    "/prices",
    response={200: list[PriceOut], **PATH_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
    summary="List prices (paginated)",
    description=PRICES_DESCRIPTION,
    openapi_extra={
        "responses": {
            # An int, as ninja keys its responses: the headers merge into its 200.
            200: {
                "headers": {
                    "X-Next-Cursor": {
                        "description": "The next page's cursor; absent on the last page.",
                        "schema": {"type": "string"},
                    },
                    "Link": {
                        "description": 'The next page\'s URL, as `<url>; rel="next"`.',
                        "schema": {"type": "string"},
                    },
                },
            }
        }
    },
)
def list_prices(
    request: HttpRequest,
    response: HttpResponse,
    filters: Query[PriceFilters],
) -> object:
    """One page of model prices with their economic tier."""
    try:
        position = services.decode_price_cursor(filters.cursor)
    except ValueError as error:
        return cursor_error(str(error))
    cheap_max = load_config().cheap_max_input_usd_per_mtok
    page = services.price_page(
        limit=filters.limit,
        after=position,
        provider=filters.provider,
        query=filters.q,
        tier=filters.tier,
        needs_review=filters.needs_review,
        cheap_max_input_usd_per_mtok=cheap_max,
    )
    link_next_page(request, response, page.next_cursor)
    return [price_out(price, page.book, cheap_max) for price in page.rows]


@router.post(
    "/prices",
    response={200: PriceOut, 201: PriceOut, **BODY_ERRORS, **OPERATOR_ERRORS},
    auth=operator_auth,
    summary="Create or update a price",
)
def upsert_price(request: HttpRequest, payload: PriceIn) -> object:
    """Upsert on (provider, model): 201 when created, 200 when updated."""
    data = services.PriceInput(
        provider=payload.provider,
        model=payload.model,
        input_usd_per_mtok=Decimal(str(payload.input_usd_per_mtok)),
        output_usd_per_mtok=Decimal(str(payload.output_usd_per_mtok)),
        tier_override=payload.tier_override,
    )
    price, created = services.upsert_price(data, actor=actor_of(request))
    body = price_out(
        price, services.price_book_for(price), load_config().cheap_max_input_usd_per_mtok
    )
    return Status((201 if created else 200), body)


@router.delete(
    "/prices/{int:price_id}",
    response={204: None, 404: Detail, **OPERATOR_ERRORS},
    auth=operator_auth,
    summary="Delete a price",
)
def delete_price(request: HttpRequest, price_id: int) -> object:
    """Delete a price row; the model falls back to its provider's `*` row or the
    assumed $5/$15 (premium)."""
    services.delete_price(price_id, actor=actor_of(request))
    return Status(204, None)
