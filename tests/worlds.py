"""Worlds for the dashboard's view tests, browser tests and screenshots: the demo world
brought to life with a day of readings, spend and a cooldown, and the same world grown
by hundreds of bulk connections (to pin query counts and measure page times)."""

from __future__ import annotations

import io
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.contrib.auth.models import Group, User
from django.core.management import call_command

from ladder import beat, services
from ladder.models import (
    Candidate,
    Connection,
    HysteresisTransition,
    QuotaReading,
    SpendEntry,
)

PASSWORD = "correct-horse-battery-staple"

# The demo's plan connections: remaining % now, and how it went over the last day.
DEMO_READINGS: dict[str, float] = {
    "claude-max-1": 64.0,
    "claude-max-2": 1.5,  # at or below the exit cutoff: dropped out
    "codex-plus": 3.5,  # refilling, but still inside the hysteresis band
    "cursor-pro": 40.0,  # overage unknown: never in auto/subscription
}


def make_user(username: str, role: str | None) -> User:
    """A dashboard user in the `viewer` or `operator` group (None: no role; "superuser")."""
    if role == "superuser":
        return User.objects.create_superuser(username, password=PASSWORD)
    user = User.objects.create_user(username, password=PASSWORD)
    if role is not None:
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    return user


def _current(connection_id: str, final: float, now: datetime) -> None:
    """The current reading, 20 s old, resetting in 37 minutes."""
    if 2 < final <= 5:
        # Dropped out a few minutes ago and refilling inside the band: still out.
        services.store_reading(
            connection_id,
            services.ReadingInput(
                remaining_percent=1.0,
                reset_at=now + timedelta(minutes=37),
                checked_at=now - timedelta(minutes=3),
                source="simulated",
            ),
            now=now,
        )
    services.store_reading(
        connection_id,
        services.ReadingInput(
            remaining_percent=final,
            reset_at=now + timedelta(minutes=37),
            checked_at=now - timedelta(seconds=20),
            source="simulated",
        ),
        now=now,
    )


def _history(connection_id: str, now: datetime, hours: int = 24) -> None:
    """A day of readings every 30 minutes: a plan draining and resetting every 5 hours,
    stored in order so its hysteresis transitions are real ones."""
    steps = hours * 2
    for step in range(steps, 0, -1):
        at = now - timedelta(minutes=30 * step)
        phase = (steps - step) % 10
        remaining = max(0.0, 100.0 - phase * 12.5)
        reset_at = at + timedelta(minutes=30 * (10 - phase))
        services.store_reading(
            connection_id,
            services.ReadingInput(
                remaining_percent=remaining, reset_at=reset_at, checked_at=at, source="simulated"
            ),
            now=at,
        )


def seed_demo_world(now: datetime, *, history: bool = True) -> None:
    """`seed_demo`, then readings for the plan connections, spend on the paid rungs, a
    cooldown on the free key and a stored quota error, so every column has something."""
    call_command("seed_demo", stdout=io.StringIO())
    beat.record_heartbeat(now)  # a healthy world: its beat is running
    for connection_id, final in DEMO_READINGS.items():
        if history:
            _history(connection_id, now)
        _current(connection_id, final, now)
    Connection.objects.filter(connection_id="groq-key").update(
        cooldown_until=now + timedelta(seconds=95), consecutive_failures=3
    )
    Connection.objects.filter(connection_id="cursor-pro").update(
        quota_error="401 from the usage endpoint: the credential was rejected"
    )
    for index, (connection_id, provider, model, cost) in enumerate(
        (
            ("openai-key", "openai", "gpt-4o-mini", "1.84"),
            ("openai-key", "openai", "gpt-4o", "7.25"),
            ("anthropic-key", "claude", "claude-sonnet-4-5", "3.10"),
        )
    ):
        services.record_spend(
            services.SpendInput(
                request_id=f"demo-{index}",
                connection_id=connection_id,
                provider=provider,
                model=model,
                cost_usd=Decimal(cost),
                occurred_at=now - timedelta(hours=index + 1),
            ),
            now=now,
        )


BULK_KINDS: tuple[tuple[str, str, str, str, tuple[str, ...]], ...] = (
    # provider, auth_type, quota_source, model, categories (the demo's categories only,
    # so the published auto ids, and so the query counts, match the demo world's)
    ("claude", "oauth", "simulated", "claude-sonnet-4-5", ("coding", "reasoning")),
    ("codex", "oauth", "simulated", "gpt-5-codex", ("coding",)),
    ("cursor", "oauth", "simulated", "cursor-fast", ("coding",)),
    ("ollama", "none", "none", "llama3.1", ("chat",)),
    ("groq", "apikey", "none", "llama-3.3-70b", ("chat", "coding")),
    ("openai", "apikey", "none", "gpt-4o-mini", ("chat", "coding")),
    ("openai", "apikey", "none", "gpt-4o", ("reasoning", "coding")),
    ("mistral", "apikey", "none", "mistral-large", ("chat",)),
)


def grow_world(count: int, now: datetime) -> None:
    """Add `count` bulk connections with current readings, hysteresis state, a pinned
    candidate each and an allowlisted candidate per ten, in a handful of bulk queries."""
    connections = [
        Connection(
            connection_id=f"bulk-{index:04d}",
            provider=BULK_KINDS[index % len(BULK_KINDS)][0],
            auth_type=BULK_KINDS[index % len(BULK_KINDS)][1],
            quota_source=BULK_KINDS[index % len(BULK_KINDS)][2],
            label=f"Bulk connection {index}",
            cooldown_until=now + timedelta(seconds=60) if index % 17 == 0 else None,
        )
        for index in range(count)
    ]
    Connection.objects.bulk_create(connections, batch_size=500)
    created = list(Connection.objects.filter(connection_id__startswith="bulk-"))
    readings = []
    for index, connection in enumerate(created):
        if connection.quota_source == "none":
            continue
        remaining = float((index * 37) % 101)
        readings.append(
            QuotaReading(
                connection=connection,
                status="EXHAUSTED" if remaining <= 0 else "SAFE",
                remaining_percent=remaining,
                reset_at=now + timedelta(minutes=5 + index % 300),
                checked_at=now - timedelta(seconds=index % 150),
                source="simulated",
            )
        )
    QuotaReading.objects.bulk_create(readings, batch_size=500)
    by_connection = {reading.connection_id: reading for reading in readings}
    transitions = []
    for connection in created:
        reading = by_connection.get(connection.pk)
        if reading is None:
            continue
        connection.current_reading = reading
        assert reading.remaining_percent is not None
        if reading.remaining_percent <= 2:
            connection.hysteresis_state = "dropped_out"
            connection.hysteresis_since = reading.checked_at
            connection.hysteresis_reason = (
                f"{reading.remaining_percent} % left, at or below the exit cutoff of 2 %"
            )
            transitions.append(
                HysteresisTransition(
                    connection=connection,
                    state="dropped_out",
                    at=reading.checked_at,
                    reason=connection.hysteresis_reason,
                )
            )
    Connection.objects.bulk_update(
        created,
        ["current_reading", "hysteresis_state", "hysteresis_since", "hysteresis_reason"],
        batch_size=500,
    )
    HysteresisTransition.objects.bulk_create(transitions, batch_size=500)
    candidates: list[Candidate] = []
    for index, connection in enumerate(created):
        _, _, _, model, categories = BULK_KINDS[index % len(BULK_KINDS)]
        candidates.append(
            Candidate(
                provider=connection.provider,
                model=model,
                categories=list(categories),
                priority=10 + index,
                connection_id=connection.connection_id,
            )
        )
    for start in range(0, len(created) - 9, 10 * len(BULK_KINDS)):
        group = created[start : start + 10 * len(BULK_KINDS) : len(BULK_KINDS)]
        kind = BULK_KINDS[start % len(BULK_KINDS)]
        candidates.append(
            Candidate(
                provider=kind[0],
                model=kind[3],
                categories=list(kind[4]),
                priority=5,
                allowed_connection_ids=[c.connection_id for c in group],
            )
        )
    Candidate.objects.bulk_create(candidates, batch_size=500)
    SpendEntry.objects.bulk_create(
        [
            SpendEntry(
                request_id=f"bulk-spend-{index}",
                connection_id=created[index].connection_id,
                provider="openai",
                model="gpt-4o",
                cost_usd=Decimal("0.05"),
                rung="premium",
                occurred_at=now - timedelta(minutes=index),
            )
            for index in range(min(count, 50))
        ]
    )
    # Written in bulk, past the services: bring the running totals in line.
    services.rebuild_spend_totals()


def world_summary() -> dict[str, Any]:
    """Counts of what a world holds (for messages in tests and scripts)."""
    return {
        "connections": Connection.objects.count(),
        "readings": QuotaReading.objects.count(),
        "candidates": Candidate.objects.count(),
    }


def signed_in(client: Any, username: str, role: str | None) -> Any:
    """The test client signed in as a new user with this role."""
    client.force_login(make_user(username, role))
    return client


def htmx_headers(target: str) -> dict[str, str]:
    """The headers htmx sends for a request that swaps the element `target`."""
    return {"HX-Request": "true", "HX-Target": target, "HX-Current-URL": "http://testserver/"}
