"""Plan utilisation read back: each plan connection's quota windows that reset in a
period, with the lowest remaining percent its readings showed before each reset, grouped
in SQL (one query, whatever the readings hold; the pure rules in ladder.core.plan_use)."""

from __future__ import annotations

from datetime import datetime

from django.db.models import Count, F, Min

from ladder.core.plan_use import PlanUse, WindowUse, plan_uses
from ladder.models import QuotaReading


def plan_use(start: datetime, end: datetime, *, now: datetime) -> list[PlanUse]:
    """The windows that reset in [start, min(end, now)), each from the readings taken
    before its reset, per connection (one query). A window not yet reset is not counted:
    what it leaves unused is not known before it resets."""
    until = min(end, now)
    rows = (
        QuotaReading.objects.filter(
            reset_at__gte=start,
            reset_at__lt=until,
            checked_at__lt=F("reset_at"),
            remaining_percent__isnull=False,
        )
        .values("connection__connection_id", "reset_at")
        .annotate(lowest=Min("remaining_percent"), readings=Count("id"))
        .order_by("connection__connection_id", "reset_at")
        .values_list("connection__connection_id", "reset_at", "lowest", "readings")
    )
    return plan_uses(
        WindowUse(connection_id, reset_at, float(lowest), readings)
        for connection_id, reset_at, lowest, readings in rows
        if reset_at is not None  # filtered in SQL; said again for the type
    )
