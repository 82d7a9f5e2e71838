"""The pools, the hot path (spec/api.md "Pools"): an auto id's pool over the registered
candidates (GET) or over the gateway's own (POST), with the caching headers and 304s of
ladder.api.pool_answers."""

from __future__ import annotations

import time
from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from ninja import Router, Status

from ladder import services
from ladder.api import pool_answers
from ladder.core import AutoId, CandidateIn
from ladder.schemas import DecisionOut, PoolRequestIn
from omniroute_admin.auth import gateway_auth
from omniroute_admin.errors import BODY_ERRORS, GATEWAY_ERRORS

router = Router(tags=["ladder"])


@router.get(
    "/pools/{path:auto_id}",
    response={200: DecisionOut, 404: dict, **GATEWAY_ERRORS},
    auth=gateway_auth,
    summary="Pool of an auto id over the registered candidates",
    openapi_extra=pool_answers.POOL_CACHING_OPENAPI,
)
def get_pool(
    request: HttpRequest, auto_id: str, if_none_match: pool_answers.IfNoneMatch = None
) -> Any:
    """The ordered pool of `auto/subscription`, `auto/thrifty` or
    `auto/<category>:<tier>` over the registered candidates, with every excluded
    connection and why. An empty pool is a 200: the intended answer of a fail-closed
    grouping; `next_change_at` tells when it may change. `ETag`, `Cache-Control` and a
    304 for `If-None-Match` of the current tag: ladder.api.pool_answers."""
    started = time.perf_counter()
    parsed = pool_answers.parse_pool_id(auto_id)
    if not isinstance(parsed, AutoId):
        return Status(404, parsed)
    now = timezone.now()
    decision = services.decide_registered(
        parsed, now=now, counters=pool_answers.request_counters(request)
    )
    pool_answers.observe(parsed, decision, started)
    return pool_answers.decision_response(decision, now, if_none_match)


@router.post(
    "/pools/{path:auto_id}",
    response={200: DecisionOut, 404: dict, **BODY_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
    summary="Pool of an auto id over the gateway's own ranked candidates",
    openapi_extra=pool_answers.POOL_CACHING_OPENAPI,
)
def post_pool(
    request: HttpRequest,
    auto_id: str,
    payload: PoolRequestIn,
    if_none_match: pool_answers.IfNoneMatch = None,
) -> Any:
    """Filter and order the gateway's own pool (its order is the ranking; `priority` is
    ignored, `id` is echoed back). A category id keeps only the candidates that list it.
    Caching headers and 304s as for the GET."""
    started = time.perf_counter()
    parsed = pool_answers.parse_pool_id(auto_id)
    if not isinstance(parsed, AutoId):
        return Status(404, parsed)
    candidates = []
    errors: list[dict[str, Any]] = []
    for index, item in enumerate(payload.candidates):
        if (item.connection_id is None) == (not item.allowed_connection_ids):
            errors.append(
                {
                    "loc": ["body", "payload", "candidates", index],
                    "msg": "Give exactly one of connection_id and a non-empty "
                    "allowed_connection_ids.",
                    "type": "value_error",
                }
            )
            continue
        candidates.append(
            CandidateIn(
                id=item.id,
                provider=item.provider,
                model=item.model,
                categories=tuple(item.categories),
                connection_id=item.connection_id,
                allowed_connection_ids=tuple(item.allowed_connection_ids)
                if item.allowed_connection_ids
                else None,
                ref=item.ref,
            )
        )
    if errors:
        return Status(422, {"detail": errors})
    now = timezone.now()
    decision = services.decide_for(
        parsed,
        candidates,
        now=now,
        cache_key=pool_answers.body_key(request.META.get("CONTENT_TYPE", ""), request.body),
        counters=pool_answers.request_counters(request),
        input_bytes=len(request.body),
    )
    pool_answers.observe(parsed, decision, started)
    return pool_answers.decision_response(decision, now, if_none_match)
