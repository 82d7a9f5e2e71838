"""`GET /api/v1/pools/{auto_id}/history`: the pool timeline (spec/api.md "Transition").

Its own router, mounted before ladder.api.pools (ladder.api.ROUTERS): the pool endpoint's
`/pools/{path:auto_id}` would otherwise take `auto/thrifty/history` for an auto id. The
fast lane never answers it (omniroute_admin.fast_lane).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from django.http import HttpRequest, HttpResponse
from ninja import Field, Query, Router, Schema, Status
from pydantic import StringConstraints

from ladder import services
from ladder.api import pool_answers
from ladder.core import AutoId
from ladder.models import PoolTransition
from ladder.schemas import UtcDatetime
from ladder.services import timeline
from omniroute_admin.auth import gateway_auth
from omniroute_admin.errors import GATEWAY_ERRORS, PATH_ERRORS
from omniroute_admin.paging import cursor_error, link_next_page

router = Router(tags=["ladder"])

HISTORY_DEFAULT_LIMIT = 100
HISTORY_MAX_LIMIT = 500


class TransitionOut(Schema):
    """One (provider, model, connection) pair entering or leaving a published pool."""

    model_config = {
        "json_schema_extra": {
            "example": {
                "at": "2026-11-29T14:02:00.000Z",
                "auto_id": "auto/subscription",
                "change": "left",
                "provider": "claude",
                "model": "claude-sonnet-4-5",
                "connection_id": "claude-max-1",
                "rung": "subscription",
                "reason": "quota_exhausted",
                "detail": "1 % remaining is at or below the exit cutoff (2 %)",
            }
        }
    }

    at: datetime
    auto_id: str
    change: Literal["entered", "left"]
    provider: str
    model: str
    connection_id: str
    rung: str | None
    reason: str | None = Field(description="Why it left (a Reason); null when it entered.")
    detail: str


class HistoryFilters(Schema):
    """The query of the history: a time range and one page."""

    # UTC as every time of the API (an offset PostgreSQL refuses is a 422, not a 500).
    since: UtcDatetime | None = Field(default=None, description="Transitions at or after this.")
    until: UtcDatetime | None = Field(default=None, description="Transitions before this.")
    limit: int = Field(
        default=HISTORY_DEFAULT_LIMIT,
        ge=1,
        le=HISTORY_MAX_LIMIT,
        description=f"Rows per page (at most {HISTORY_MAX_LIMIT}).",
    )
    cursor: Annotated[str, StringConstraints(max_length=1024)] | None = Field(
        default=None, description="From the previous page's `X-Next-Cursor` header."
    )


HISTORY_DESCRIPTION = f"""Who entered or left the published pool of an auto id, when and \
why, newest first: recorded when the pool is computed (a gateway's request after a write, \
or the beat within one beat period), never per request. `since` (inclusive) and `until` \
(exclusive) bound `at`. `limit` rows per page (default {HISTORY_DEFAULT_LIMIT}, at most \
{HISTORY_MAX_LIMIT}); when more follow, the next page's cursor is in `X-Next-Cursor` and \
`Link: <...>; rel="next"`, as for `GET /prices`. 404 for a malformed auto id, or a \
composite that is neither published nor ever recorded. Kept as long as readings \
(QUOTA_READING_RETENTION_DAYS).
"""


@router.get(
    "/pools/{path:auto_id}/history",
    response={200: list[TransitionOut], 404: dict, **PATH_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
    summary="The timeline of an auto id's pool (paginated)",
    description=HISTORY_DESCRIPTION,
    openapi_extra={
        "responses": {
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
def get_pool_history(
    request: HttpRequest, response: HttpResponse, auto_id: str, filters: Query[HistoryFilters]
) -> Any:
    """One page of the pool's transitions, newest first."""
    parsed = pool_answers.parse_pool_id(auto_id)
    if not isinstance(parsed, AutoId):
        return Status(404, parsed)
    if not is_known(parsed):
        return Status(404, {"detail": f"No published pool {parsed.auto_id} and no history of it."})
    try:
        position = timeline.decode_transition_cursor(filters.cursor)
    except ValueError as error:
        return cursor_error(str(error))
    page = timeline.transition_page(
        parsed.auto_id,
        limit=filters.limit,
        after=position,
        since=filters.since,
        until=filters.until,
    )
    link_next_page(request, response, page.next_cursor)
    return [transition_out(row) for row in page.rows]


def is_known(auto_id: AutoId) -> bool:
    """A flat auto id always; a composite when a registered candidate lists its category
    or the timeline recorded it (at most two queries)."""
    if auto_id.category is None:
        return True
    published = services.published_auto_ids(services.registered_candidates())
    return auto_id in published or timeline.has_history(auto_id)


def transition_out(row: PoolTransition) -> dict[str, Any]:
    return {
        "at": row.at,
        "auto_id": row.auto_id,
        "change": row.change,
        "provider": row.provider,
        "model": row.model,
        "connection_id": row.connection_id,
        "rung": row.rung,
        "reason": row.reason,
        "detail": row.detail,
    }
