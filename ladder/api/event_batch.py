"""The batch of gateway events (api.md "Events from the gateway"): each entry validated
and applied on its own, in order, so one bad entry is answered in its slot and never
stops the others; the whole batch in one transaction. One snapshot for the whole batch:
a constant number of queries per entry."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import transaction
from pydantic import ValidationError as PydanticValidationError

from ladder import metrics, services
from ladder.schemas import BatchEventIn


def _invalid(error: PydanticValidationError) -> dict[str, str]:
    problems = [
        f"{'.'.join(str(part) for part in e['loc']) or 'entry'}: {e['msg']}"
        for e in error.errors(include_url=False, include_input=False)
    ]
    return {"error": "Invalid event: " + "; ".join(problems)}


def parse_entry(entry: Any) -> BatchEventIn | dict[str, str]:
    """One entry validated, or `{"error": ...}` naming its invalid fields."""
    try:
        return BatchEventIn.model_validate(entry)
    except PydanticValidationError as error:
        return _invalid(error)


def apply_entry(event: BatchEventIn | dict[str, str], snapshot: services.Snapshot) -> Any:
    """The result of one entry: its EventResult, or `{"error": ...}` naming what is wrong
    (its invalid fields, or the unknown connection)."""
    if isinstance(event, dict):
        return event
    try:
        result = services.apply_event(
            event.connection_id,
            kind=event.kind,
            retry_after_seconds=event.retry_after_seconds,
            reset_at=event.reset_at,
            headers=event.headers,
            snapshot=snapshot,
            settle=False,
            model=event.model,
            observed_at=event.observed_at,
            event_id=event.event_id,
        )
    except services.NotFound as error:
        return {"error": str(error)}
    except DjangoValidationError as error:
        return {"error": "Invalid event: " + "; ".join(error.messages)}
    metrics.EVENTS.labels(kind=event.kind).inc()
    return result


def apply_batch(entries: list[Any]) -> list[Any]:
    """The results of the entries, in their order: all applied in one transaction (a
    fault applies none; its retry, with the same event ids, all), each entry in a
    savepoint of its own so that one refused never undoes the others. The batch's
    connections are locked first, in id order, so that two batches never wait on each
    other in a cycle; one commit for the whole batch."""
    snapshot = services.write_snapshot()
    events = [parse_entry(entry) for entry in entries]
    with transaction.atomic():
        services.lock_connections(e.connection_id for e in events if not isinstance(e, dict))
        results = [apply_entry(event, snapshot) for event in events]
    services.settle_config_race(snapshot, False)
    return results
