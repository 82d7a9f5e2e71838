"""The change feed's endpoint (spec/api.md "Caching a decision in the gateway"): the
change version, and the hold protocol by which the server layer (omniroute_admin.change_feed)
long-polls it: the header this view sets on an answer to hold, how it is written and how
the server layer reads it back."""

from __future__ import annotations

from typing import Annotated, Any

from django.http import HttpRequest, HttpResponse
from ninja import Query, Router, Schema

from ladder.api import pool_answers
from ladder.core.change_version import VERSION_REGEX, Counters, format_version, parse_version
from omniroute_admin.auth import gateway_auth
from omniroute_admin.errors import GATEWAY_ERRORS, PATH_ERRORS

router = Router(tags=["ladder"])

# Set by the view on an answer to hold, removed by the server layer: never sent.
HOLD_HEADER = "X-Omniroute-Hold"
MAX_FEED_WAIT_SECONDS = 30


def hold_value(counters: Counters, wait: float) -> str:
    """The HOLD_HEADER value of an answer of `counters` to hold up to `wait` seconds."""
    return f"{format_version(counters)} {wait:g}"


def parse_hold(value: str) -> tuple[Counters, float] | None:
    """The counters and the seconds a HOLD_HEADER value asks to hold for; None when it
    does not parse or asks for more than the endpoint allows."""
    version, _, wait = value.partition(" ")
    counters = parse_version(version)
    try:
        seconds = float(wait)
    except ValueError:
        return None
    if counters is None or not 0 <= seconds <= MAX_FEED_WAIT_SECONDS:
        return None
    return counters, seconds


class ChangesOut(Schema):
    model_config = {"json_schema_extra": {"example": {"version": "12.345"}}}

    version: str


@router.get(
    "/changes",
    response={200: ChangesOut, **PATH_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
    summary="The change version, long-polled",
)
def get_changes(
    request: HttpRequest,
    response: HttpResponse,
    after: Annotated[
        str | None,
        Query(pattern=VERSION_REGEX, description="The version you hold.", example="12.345"),
    ] = None,
    wait: Annotated[
        int,
        Query(
            ge=0, le=MAX_FEED_WAIT_SECONDS, description="Seconds to wait for a change.", example=30
        ),
    ] = 0,
) -> Any:
    """The control plane's change version. With `after` equal to it, waits up to `wait`
    seconds for the next change before answering; otherwise answers at once. The wait
    is the server layer's (omniroute_admin.change_feed): this view only decides."""
    counters = pool_answers.request_counters(request)  # read with the token
    assert counters is not None
    if wait > 0 and after is not None and parse_version(after) == counters:
        response[HOLD_HEADER] = hold_value(counters, wait)
    response["Cache-Control"] = "no-store"
    return {"version": format_version(counters)}
