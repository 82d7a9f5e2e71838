"""seed_demo writes through the services: the settings audited and counted, the demo
spend recorded once."""

from __future__ import annotations

from decimal import Decimal
from io import StringIO
from typing import Any

import pytest
from django.core.management import call_command

from billing import services as billing_services
from billing.models import AuditEntry
from ladder.models import (
    LadderSettings,
    SpendEntry,
)
from tests.ladder.factories import NOW

pytestmark = pytest.mark.django_db


def settings_row() -> tuple[Any, ...]:
    row = LadderSettings.objects.get()
    return (
        row.exit_cutoff_percent,
        row.reentry_min_remaining_percent,
        row.cheap_budget_usd,
        row.premium_budget_usd,
        row.budget_window,
        row.max_state_age_seconds,
        row.base_cooldown_seconds,
        row.max_cooldown_seconds,
        row.cheap_max_input_usd_per_mtok,
    )


def test_seed_demo_writes_the_settings_through_the_service_audited_and_counted() -> None:
    config_before, _ = billing_services.change_counters()

    call_command("seed_demo", stdout=StringIO())

    audit = [
        (a.actor, a.before["cheap_budget_usd"], a.after["cheap_budget_usd"])
        for a in AuditEntry.objects.filter(target_type="settings")
    ]
    assert audit == [("seed_demo", None, "5.000000")]  # at the column's precision
    assert settings_row()[2:4] == (Decimal("5.000000"), Decimal("20.000000"))
    assert billing_services.change_counters()[0] > config_before


def test_the_demo_spend_is_a_fortnight_on_the_plans_and_the_paid_rungs_recorded_once() -> None:
    from django.db.models import Count, Sum

    from ladder.management.commands.seed_demo import record_demo_spend

    call_command("seed_demo", stdout=StringIO())

    created = record_demo_spend(NOW)
    again = record_demo_spend(NOW)

    rows = (
        SpendEntry.objects.order_by("rung")
        .values("rung")
        .annotate(n=Count("id"), billed=Sum("billed_usd"), listed=Sum("list_price_usd"))
    )
    # Per request: the plan 40k/9k tokens of claude-sonnet-4-5 at 3/15 USD per M (0.255),
    # gpt-4o-mini 30k/6k at 0.15/0.6 (0.0081), the Anthropic key 20k/4k (0.12); requests
    # per day max(1, n - day % 4) over 14 days: 65, 51 and 14.
    assert (created, again) == (130, 0)
    assert [(r["rung"], r["n"], r["billed"], r["listed"]) for r in rows] == [
        ("cheap", 51, Decimal("0.41310000"), Decimal("0.41310000")),
        ("premium", 14, Decimal("1.68000000"), Decimal("1.68000000")),
        ("subscription", 65, Decimal("0E-8"), Decimal("16.57500000")),
    ]
