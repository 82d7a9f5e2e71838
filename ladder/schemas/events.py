"""Gateway events, one or a batch (ladder/api/events.py, ladder/api/event_batch.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import ConfigDict, Field, StringConstraints

from billing.schemas import ModelStr, WriteSchema
from ladder.schemas.common import ConnectionIdStr, UtcDatetime


class EventIn(WriteSchema):
    kind: Literal["rate_limited", "quota_exhausted", "success", "error"]
    retry_after_seconds: (
        Annotated[float, Field(strict=True, ge=0, le=31_536_000, allow_inf_nan=False)] | None
    ) = None
    reset_at: UtcDatetime | None = None
    model: ModelStr | None = Field(
        default=None,
        description="The model the request asked for: scopes what the headers say about "
        "one model, and the cooldown of a model-scoped rejection.",
    )
    observed_at: UtcDatetime | None = Field(
        default=None,
        description="When the gateway saw the upstream's answer (default: receive time; "
        "more than 60 s in the future is refused, up to 60 s ahead is stored as the "
        "receive time). Events apply in the order they were observed: a success clears "
        "only the failures observed at least 60 s before it (or once their cooldown "
        "ended), and within 60 s the less safe of two truths wins.",
    )
    headers: (
        Annotated[
            dict[
                Annotated[str, StringConstraints(max_length=200)],
                Annotated[str, StringConstraints(max_length=2000)],
            ],
            Field(max_length=100),
        ]
        | None
    ) = None

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "kind": "rate_limited",
                    "retry_after_seconds": None,
                    "reset_at": "2026-11-29T12:05:00Z",
                    "headers": {"anthropic-ratelimit-unified-status": "rejected"},
                }
            ]
        },
    )


class EventResultOut(Schema):
    connection_id: str
    cooldown_until: datetime | None
    cooldown_seconds: float
    clamped_to_reset: bool
    consecutive_failures: int


# The batch of events (api.md "Events from the gateway"): entries are validated one by
# one by the endpoint, so that one bad entry is answered in its slot.
# api.md allows 1,000 "or the documented maximum is lowered until" the batch answers
# inside the request deadline: 100 events answer in about half of it under load
# (bench/events_batch.py; 200 take about all of it).
MAX_EVENT_BATCH = 100


class BatchEventIn(EventIn):
    connection_id: ConnectionIdStr
    event_id: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None = Field(
        default=None,
        description="The gateway's id for this entry: one applied before is answered as "
        "then and never applied again, so a retried batch doubles nothing.",
    )


class EventBatchIn(WriteSchema):
    events: Annotated[list[Any], Field(max_length=MAX_EVENT_BATCH)]

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "events": [
                        {
                            "connection_id": "claude-max-1",
                            "kind": "success",
                            "observed_at": "2026-11-29T12:00:00Z",
                            "event_id": "9f1c2e7a4b5d4c3e8a6f0b1d2c3e4f5a",
                        },
                        {"connection_id": "codex-1", "kind": "rate_limited"},
                    ]
                }
            ]
        },
    )


class EventBatchErrorOut(Schema):
    error: str


class EventBatchOut(Schema):
    results: list[EventResultOut | EventBatchErrorOut]
