"""Gateway events: the cooldown a failure writes (clamped to the reset), and the
reading a `quota_exhausted` event or rate-limit headers imply."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.utils import timezone

from billing import services as billing_services
from billing.models import ChangeCounter
from ladder import core
from ladder.core import QuotaStatus
from ladder.models import Connection
from ladder.quota.headers import parse_rate_limit_headers
from ladder.services.common import NotFound, known_id
from ladder.services.config import load_config
from ladder.services.readings import ReadingInput, store_reading


@dataclass(frozen=True, slots=True)
class EventResult:
    connection_id: str
    cooldown_until: datetime | None
    cooldown_seconds: float
    clamped_to_reset: bool
    consecutive_failures: int


def apply_event(
    connection_id: str,
    *,
    kind: str,
    retry_after_seconds: float | None = None,
    reset_at: datetime | None = None,
    headers: dict[str, str] | None = None,
    now: datetime | None = None,
) -> EventResult:
    """Write the cooldown a gateway event implies (replacing any in force), clamped to
    the upstream's reset; `quota_exhausted` also stores an EXHAUSTED reading."""
    known_id(connection_id)
    now = now or timezone.now()
    config = load_config()
    header_reading: ReadingInput | None = None
    if headers:
        info = parse_rate_limit_headers(headers, now)
        if retry_after_seconds is None:
            retry_after_seconds = info.retry_after_seconds
        if reset_at is None:
            reset_at = info.reset_at
        # Headers that carry no percentage and no exhaustion (a bare reset time) say
        # nothing about quota: storing them would replace a good reading with UNKNOWN.
        if info.is_exhausted or any(w.remaining_percent is not None for w in info.windows):
            header_reading = ReadingInput(
                status=QuotaStatus.EXHAUSTED.value if info.is_exhausted else None,
                windows=info.windows,
                reset_at=info.reset_at,
                checked_at=now,
                source="headers",
            )
    with transaction.atomic():
        connection = (
            Connection.objects.select_for_update().filter(connection_id=connection_id).first()
        )
        if connection is None:
            raise NotFound(f"No connection {connection_id!r}.")
        change = core.apply_event(
            kind,
            consecutive_failures=connection.consecutive_failures,
            retry_after_seconds=retry_after_seconds,
            reset_at=reset_at,
            config=config,
            now=now,
        )
        connection.cooldown_until = change.cooldown_until
        connection.consecutive_failures = change.consecutive_failures
        connection.save(update_fields=["cooldown_until", "consecutive_failures", "updated_at"])
        billing_services.bump(ChangeCounter.STATE)
        if kind == "quota_exhausted":
            store_reading(
                connection_id,
                ReadingInput(
                    status=QuotaStatus.EXHAUSTED.value,
                    remaining_percent=0.0,
                    reset_at=reset_at,
                    checked_at=now,
                    source="event",
                    detail="The gateway reported the quota exhausted.",
                ),
                now=now,
            )
        elif header_reading is not None:
            store_reading(connection_id, header_reading, now=now)
    return EventResult(
        connection_id=connection_id,
        cooldown_until=change.cooldown_until,
        cooldown_seconds=change.cooldown_seconds,
        clamped_to_reset=change.clamped_to_reset,
        consecutive_failures=change.consecutive_failures,
    )
