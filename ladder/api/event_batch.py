"""The batch of gateway events (api.md "Events from the gateway"): each entry validated
and applied on its own, in order, so one bad entry is answered in its slot and never
stops the others. One snapshot for the whole batch: a constant number of queries per
entry."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError as DjangoValidationError
from pydantic import ValidationError as PydanticValidationError

from ladder import metrics, services
from ladder.schemas import BatchEventIn


def _invalid(error: PydanticValidationError) -> dict[str, str]:
    problems = [
        f"{'.'.join(str(part) for part in e['loc']) or 'entry'}: {e['msg']}"
        for e in error.errors(include_url=False, include_input=False)
    ]
    return {"error": "Invalid event: " + "; ".join(problems)}


def apply_entry(entry: Any, snapshot: services.Snapshot) -> Any:
    """The result of one entry: its EventResult, or `{"error": ...}` naming what is wrong
    (its invalid fields, or the unknown connection)."""
    try:
        event = BatchEventIn.model_validate(entry)
    except PydanticValidationError as error:
        return _invalid(error)
    try:
        result = services.apply_event(
            event.connection_id,
            kind=event.kind,
            retry_after_seconds=event.retry_after_seconds,
            reset_at=event.reset_at,
            headers=event.headers,
            snapshot=snapshot,
            model=event.model,
        )
    except services.NotFound as error:
        return {"error": str(error)}
    except DjangoValidationError as error:
        return {"error": "Invalid event: " + "; ".join(error.messages)}
    metrics.EVENTS.labels(kind=event.kind).inc()
    return result


def apply_batch(entries: list[Any]) -> list[Any]:
    """The results of the entries, in their order."""
    snapshot = services.write_snapshot()
    return [apply_entry(entry, snapshot) for entry in entries]
