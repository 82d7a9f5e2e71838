"""The spend endpoints (spec/api.md, "Spend"): a gateway's reports, one or a batch, the
current window's summary, and the ledger, a page at a time (newest first, keyset cursor
like the prices') or all of it as CSV (`?format=csv`, streamed). One router, mounted by
omniroute_admin.api (GET and POST /spend share a path, so they share a router)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils import timezone
from ninja import Field, Query, Router, Schema, Status
from pydantic import StringConstraints

from billing.schemas import ModelStr, ProviderStr
from ladder import services
from ladder.api import pool_answers, spend_answers
from ladder.schemas import (
    ConnectionIdStr,
    RungLiteral,
    SpendBatchIn,
    SpendBatchOut,
    SpendIn,
    SpendOut,
    SpendSummaryOut,
    UtcDatetime,
)
from omniroute_admin.auth import gateway_auth
from omniroute_admin.errors import BODY_ERRORS, GATEWAY_ERRORS, PATH_ERRORS
from omniroute_admin.paging import cursor_error, link_next_page

router = Router(tags=["ladder"])


class SpendQuery(Schema):
    limit: int = Field(
        default=services.SPEND_DEFAULT_LIMIT,
        ge=1,
        le=services.SPEND_MAX_LIMIT,
        description=f"Entries per page (at most {services.SPEND_MAX_LIMIT}).",
    )
    cursor: Annotated[str, StringConstraints(max_length=1024)] | None = Field(
        default=None, description="From the previous page's `X-Next-Cursor` header."
    )
    since: UtcDatetime | None = Field(default=None, description="occurred_at at or after this.")
    until: UtcDatetime | None = Field(default=None, description="occurred_at before this.")
    rung: RungLiteral | None = None
    connection_id: ConnectionIdStr | None = None
    provider: ProviderStr | None = None
    model: ModelStr | None = None
    format: Literal["json", "csv"] = Field(
        default="json", description="`csv`: every matching entry, streamed (no pages)."
    )


SPEND_DESCRIPTION = """The spend ledger, newest first, `limit` entries per page. When more \
follow, the answer carries the next page's cursor in `X-Next-Cursor` and a `Link: <...>; \
rel="next"` header (same filters); send it back as `cursor`. Filters: `since` (inclusive), \
`until` (exclusive), `rung`, `connection_id`, `provider` (normalised), `model`.

`?format=csv`: every matching entry (no pages), streamed as `text/csv` with a header row \
and the exact stored decimals (8 places), as an attachment named \
`spend-<UTC time>.csv`. A text cell that starts with `=`, `+`, `-`, `@` or `|` (or a \
full-width form of one), whitespace or an invisible format character gets a leading `'` \
so no spreadsheet runs it."""


@router.get(
    "/spend",
    response={200: list[SpendOut], **PATH_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
    summary="List the spend ledger (paginated), or export it as CSV",
    description=SPEND_DESCRIPTION,
)
def list_spend(request: HttpRequest, response: HttpResponse, query: Query[SpendQuery]) -> object:
    """One page of the ledger, or the CSV export."""
    try:
        position = services.decode_spend_cursor(query.cursor)
    except ValueError as error:
        return cursor_error(str(error))
    filters = services.SpendFilters(
        since=query.since,
        until=query.until,
        rung=query.rung,
        connection_id=query.connection_id,
        model=query.model,
        provider=query.provider,
    )
    if query.format == "csv":
        stream = StreamingHttpResponse(
            services.spend_csv_lines(filters), content_type="text/csv; charset=utf-8"
        )
        filename = services.spend_csv_filename(timezone.now())
        stream["Content-Disposition"] = f'attachment; filename="{filename}"'
        return stream
    page = services.spend_page(filters, limit=query.limit, after=position)
    link_next_page(request, response, page.next_cursor)
    return page.rows


@router.post(
    "/spend",
    response={200: SpendOut, 201: SpendOut, **BODY_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
)
def post_spend(request: HttpRequest, payload: SpendIn) -> Any:
    """Record one request's cost, once per `request_id` (200 when seen before). A null
    `cost_usd` is computed from the tokens and the price catalog."""
    # A ValidationError (e.g. a computed cost too large to store) answers a 422.
    entry, created = services.record_spend(
        spend_answers.spend_input_of(payload, spend_answers.token_id_of(request)),
        counters=pool_answers.request_counters(request),
    )
    return Status((201 if created else 200), entry)


@router.post(
    "/spend/batch",
    response={200: SpendBatchOut, **BODY_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
)
def post_spend_batch(request: HttpRequest, payload: SpendBatchIn) -> Any:
    """Record up to 1,000 requests' costs at once, each as POST /spend would: idempotent
    per `request_id` (within the batch too), results in the order of the entries; a bad
    entry gets `{"error": [...]}` (the single endpoint's 422 list) in its slot and stops
    none of the others. More than 1,000 entries is a 422 and records nothing."""
    token_id = spend_answers.token_id_of(request)
    parsed = [spend_answers.parse_entry(raw, token_id) for raw in payload.entries]
    batch = services.record_spend_batch(
        [item for item in parsed if isinstance(item, services.SpendInput)]
    )
    results = spend_answers.batch_results(parsed, batch)
    # SpendBatchOut rendered by hand (the schema above still documents it).
    return HttpResponse(
        spend_answers.batch_body(batch, results), content_type="application/json; charset=utf-8"
    )


@router.get("/spend/summary", response={200: SpendSummaryOut, **GATEWAY_ERRORS}, auth=gateway_auth)
def get_spend_summary(request: HttpRequest) -> dict[str, Any]:
    """Spend of each paid rung against its budget in the current calendar window (UTC).
    Plan-included rungs never count against a paid rung's budget."""
    summary = services.spend_summary()
    return {
        "budget_window": summary.budget_window,
        "window_start": summary.window_start,
        "window_end": summary.window_end,
        "rungs": {
            name: {
                "spent_usd": float(rung.spent_usd),
                "budget_usd": float(rung.budget_usd) if rung.budget_usd is not None else None,
                "exhausted": rung.is_exhausted,
            }
            for name, rung in summary.rungs.items()
        },
        "saved_usd": float(summary.saved_usd),
    }
