"""Keyset pages of the API, one way everywhere (`GET /prices`, `GET /spend`,
`GET /pools/{auto_id}/history`): a bad cursor is ninja's 422 at `cursor`, and a page
with more after it names the next one in `X-Next-Cursor` and `Link: <...>; rel="next"`."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from ninja import Status


def cursor_error(message: str) -> Status:
    """The 422 of a cursor that does not decode, shaped like ninja's validation errors."""
    return Status(
        422, {"detail": [{"loc": ["query", "cursor"], "msg": message, "type": "value_error"}]}
    )


def link_next_page(request: HttpRequest, response: HttpResponse, next_cursor: str | None) -> None:
    """Name the next page, if any: its cursor, and its URL (the same filters) relative to
    the request's own (RFC 8288), so a proxy's host and scheme hold."""
    if next_cursor is None:
        return
    response["X-Next-Cursor"] = next_cursor
    next_query = request.GET.copy()
    next_query["cursor"] = next_cursor
    response["Link"] = f'<{request.path}?{next_query.urlencode()}>; rel="next"'
