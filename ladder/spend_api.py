"""GET /api/v1/spend: the ledger, a page at a time (newest first, keyset cursor like the
prices'), or all of it as CSV (`?format=csv`, streamed). Mounted on the ladder router
(spec/api.md, "Spend ledger")."""

from __future__ import annotations

from typing import Annotated, Literal

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.utils import timezone
from ninja import Field, Query, Schema
from pydantic import StringConstraints

from billing.schemas import ModelStr, ProviderStr
from ladder import services
from ladder.api import router
from ladder.schemas import ConnectionIdStr, RungLiteral, SpendOut, UtcDatetime
from omniroute_admin.auth import gateway_auth
from omniroute_admin.errors import GATEWAY_ERRORS, PATH_ERRORS
from omniroute_admin.paging import cursor_error, link_next_page


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
`spend-<UTC time>.csv`. A text cell that starts with `=`, `+`, `-` or `@` gets a leading \
`'` so no spreadsheet runs it."""


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
