"""Onboarding a push-only connection: a connection whose quota source is "none" is never
polled, so its readings must be pushed to the API; this says how often, and the exact
request, with the connection's real id and the token as `$T`."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from ladder.core import LadderConfig
from ladder.models import Connection
from ladder.quota.registry import REGISTRY
from ladder.web.presenters import duration_text

EXAMPLE_REMAINING_PERCENT = 41.5
# The example's reset: on the hour, this long after now (never a date in the past).
EXAMPLE_RESET_AFTER = timedelta(hours=5)


def example_body(now: datetime) -> dict[str, object]:
    """A reading to push as of `now`: no checked_at (the server stamps its own receipt),
    a reset on the hour five hours ahead, so the example is never dated in the past."""
    reset_at = (
        (now + EXAMPLE_RESET_AFTER).astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    )
    return {
        "remaining_percent": EXAMPLE_REMAINING_PERCENT,
        "reset_at": reset_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


@dataclass(frozen=True, slots=True)
class PushInstructions:
    path: str  # the API path of the readings of this connection
    max_age_seconds: int
    max_age_text: str
    every_text: str  # a push interval that leaves room for one missed push
    curl: str  # the whole request, to this server
    adapter: str | None  # a quota adapter exists for the provider under this name


def push_instructions(
    connection: Connection, config: LadderConfig, base_url: str, now: datetime
) -> PushInstructions:
    """How to keep a push-only connection's quota current (no query); `base_url`: this
    server's origin, as the browser reached it; the example reading is as of `now`."""
    path = f"/api/v1/connections/{connection.connection_id}/readings"
    max_age = int(config.max_state_age_seconds)
    body = json.dumps(example_body(now))
    curl = (
        f'curl -X POST "{base_url}{path}" \\\n'
        '  -H "Authorization: Bearer $T" \\\n'
        '  -H "Content-Type: application/json" \\\n'
        f"  -d {shlex.quote(body)}"
    )
    provider = connection.provider.strip().lower()
    return PushInstructions(
        path=path,
        max_age_seconds=max_age,
        max_age_text=duration_text(max_age),
        every_text=duration_text(max(1, max_age // 2)),
        curl=curl,
        adapter=provider if provider in REGISTRY and provider != "simulated" else None,
    )
