"""What several API test modules send and read back."""

from __future__ import annotations

from typing import Any

from ladder.models import QuotaReading
from tests.ladder.factories import api

# A legal settings body, every field off its default.
TUNED = {
    "exit_cutoff_percent": 3,
    "reentry_min_remaining_percent": 10.5,
    "rung_budget_usd": {"cheap": 20, "premium": 0},
    "budget_window": "week",
    "max_state_age_seconds": 300,
    "base_cooldown_seconds": 2.5,
    "max_cooldown_seconds": 60,
    "cheap_max_input_usd_per_mtok": 0.5,
}


def post_reading(token: str, body: dict[str, Any], connection_id: str = "claude-max-1") -> Any:
    return api("post", f"/api/v1/connections/{connection_id}/readings", token, body)


def post_event(token: str, body: dict[str, Any], connection_id: str = "claude-max-1") -> Any:
    return api("post", f"/api/v1/connections/{connection_id}/events", token, body)


def reading_rows() -> list[tuple[Any, ...]]:
    return list(
        QuotaReading.objects.order_by("pk").values_list(
            "status", "remaining_percent", "reset_at", "checked_at", "source"
        )
    )
