"""What a gateway reports about a connection: quota readings, upstream events one at a
time, and a batch of events (spec/api.md "Readings", "Events from the gateway")."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Status

from ladder import metrics, services
from ladder.api import event_batch
from ladder.api.params import ConnectionIdPath
from ladder.core import WindowReading
from ladder.schemas import (
    EventBatchIn,
    EventBatchOut,
    EventIn,
    EventResultOut,
    ReadingIn,
    ReadingOut,
)
from omniroute_admin.auth import gateway_auth
from omniroute_admin.errors import BODY_ERRORS, GATEWAY_ERRORS

router = Router(tags=["ladder"])


@router.post(
    "/connections/{connection_id}/readings",
    response={201: ReadingOut, 404: dict, **BODY_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
)
def post_reading(request: HttpRequest, connection_id: ConnectionIdPath, payload: ReadingIn) -> Any:
    """Store a quota reading. Status is derived when absent (UNKNOWN without a number,
    EXHAUSTED at or below 0, else SAFE); windows reduce to the binding (lowest) one."""
    data = services.ReadingInput(
        status=payload.status,
        remaining_percent=payload.remaining_percent,
        reset_at=payload.reset_at,
        checked_at=payload.checked_at,
        windows=tuple(
            WindowReading(w.name, w.remaining_percent, w.reset_at, w.model_scope)
            for w in payload.windows
        )
        if payload.windows is not None
        else None,
        evidence=services.pushed_evidence(payload.overage_evidence),
    )
    stored = services.store_reading(connection_id, data)
    return Status(201, stored.reading)


@router.post(
    "/connections/{connection_id}/events",
    response={200: EventResultOut, 404: dict, **BODY_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
)
def post_event(request: HttpRequest, connection_id: ConnectionIdPath, payload: EventIn) -> Any:
    """Report an upstream outcome: failures write a cooldown (Retry-After, else backoff),
    clamped to the upstream's reset; `quota_exhausted` also stores an EXHAUSTED reading;
    `success` clears the failure count and the cooldown observed before it. Applied in
    the order observed (`observed_at`): within 60 s the less safe of two truths wins."""
    result = services.apply_event(
        connection_id,
        kind=payload.kind,
        retry_after_seconds=payload.retry_after_seconds,
        reset_at=payload.reset_at,
        headers=payload.headers,
        model=payload.model,
        observed_at=payload.observed_at,
    )
    metrics.EVENTS.labels(kind=payload.kind).inc()
    return result


@router.post(
    "/events/batch",
    response={200: EventBatchOut, **BODY_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
)
def post_event_batch(request: HttpRequest, payload: EventBatchIn) -> Any:
    """Report up to 100 events, each `Event` plus its `connection_id` and an optional
    `event_id`, applied in order, each in its own transaction; each result (an
    EventResult, or `{"error": ...}` for a bad entry or an unknown connection) is in the
    slot of its entry. An entry whose `event_id` was applied before is answered as then
    and not applied again: a batch cut by a fault is completed by its retry."""
    return {"results": event_batch.apply_batch(payload.events)}
