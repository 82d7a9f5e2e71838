"""Every exclusion reason of the contract, each produced by a real request to the pools
endpoint after setting the world up through the API: the excluded row names the reason,
the rung, the connection, and a sentence with the numbers."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from billing.models import BillingCatalogEntry
from ladder.core import BudgetWindow, budget_window_bounds
from ladder.models import ApiToken, Connection
from tests.ladder.factories import api, iso, make_token


def _utc(instant: datetime) -> str:
    """An instant as the reason sentences spell it."""
    return f"{instant.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


pytestmark = pytest.mark.django_db

SETTINGS = {
    "exit_cutoff_percent": 2,
    "reentry_min_remaining_percent": 5,
    "rung_budget_usd": {"cheap": None, "premium": None},
    "budget_window": "month",
    "max_state_age_seconds": 180,
    "base_cooldown_seconds": 5,
    "max_cooldown_seconds": 120,
    "cheap_max_input_usd_per_mtok": 1.0,
}


@pytest.fixture
def gateway() -> str:
    return make_token("gw", ApiToken.Scope.GATEWAY)


@pytest.fixture
def operator() -> str:
    return make_token("ops", ApiToken.Scope.OPERATOR)


def connect(token: str, connection_id: str, provider: str, auth_type: str, **fields: Any) -> None:
    response = api(
        "put",
        f"/api/v1/connections/{connection_id}",
        token,
        {"provider": provider, "auth_type": auth_type, **fields},
    )
    assert response.status_code == 200, response.content


def read(token: str, connection_id: str, **body: Any) -> None:
    for key in ("checked_at", "reset_at"):
        if isinstance(body.get(key), datetime):
            body[key] = body[key].isoformat()
    response = api("post", f"/api/v1/connections/{connection_id}/readings", token, body)
    assert response.status_code == 201, response.content


def pool(token: str, auto_id: str, *candidates: dict[str, Any]) -> dict[str, Any]:
    response = api("post", f"/api/v1/pools/{auto_id}", token, {"candidates": list(candidates)})
    assert response.status_code == 200, response.content
    body: dict[str, Any] = response.json()
    return body


def pinned(provider: str, model: str, connection_id: str) -> dict[str, Any]:
    return {"provider": provider, "model": model, "connection_id": connection_id}


def excluded_only(body: dict[str, Any]) -> dict[str, Any]:
    """The single excluded row of a decision that served nothing."""
    assert body["candidates"] == []
    assert len(body["excluded"]) == 1, body["excluded"]
    row: dict[str, Any] = body["excluded"][0]
    return row


def tune(token: str, **changes: Any) -> None:
    response = api("put", "/api/v1/settings/ladder", token, {**SETTINGS, **changes})
    assert response.status_code == 200, response.content


def price(token: str, provider: str, model: str, input_usd: float) -> None:
    response = api(
        "post",
        "/api/v1/prices",
        token,
        {
            "provider": provider,
            "model": model,
            "input_usd_per_mtok": input_usd,
            "output_usd_per_mtok": input_usd * 4,
        },
    )
    assert response.status_code in (200, 201), response.content


def seconds_in(detail: str, pattern: str) -> float:
    match = re.fullmatch(pattern, detail)
    assert match is not None, detail
    return float(match.group(1))


# --- one test per reason ------------------------------------------------------------------


def test_uncurated(gateway: str) -> None:
    connect(gateway, "acme-key", "acme", "apikey")

    row = excluded_only(pool(gateway, "auto/subscription", pinned("acme", "m1", "acme-key")))

    assert row == {
        "provider": "acme",
        "model": "m1",
        "connection_id": "acme-key",
        "rung": "premium",
        "reason": "uncurated",
        "detail": "No catalog entry covers acme with auth apikey: uncurated is treated as metered",
    }


def test_metered(gateway: str, operator: str) -> None:
    entry = api(
        "post",
        "/api/v1/catalog",
        operator,
        {
            "provider": "openai",
            "auth_type": "apikey",
            "billing": "metered",
            "overage": "meters-to-paid",
            "reason": "Pay per token",
        },
    ).json()
    price(operator, "openai", "gpt-4o-mini", 0.15)
    connect(gateway, "openai-key", "openai", "apikey")

    row = excluded_only(
        pool(gateway, "auto/subscription", pinned("openai", "gpt-4o-mini", "openai-key"))
    )

    assert row == {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "connection_id": "openai-key",
        "rung": "cheap",
        "reason": "metered",
        "detail": f"Billing is metered, outside the plan (catalog entry {entry['id']}: "
        "Pay per token)",
    }


def test_keyless_not_subscription(gateway: str) -> None:
    connect(gateway, "free-1", "pollinations", "none")

    row = excluded_only(pool(gateway, "auto/subscription", pinned("pollinations", "m", "free-1")))

    assert row == {
        "provider": "pollinations",
        "model": "m",
        "connection_id": "free-1",
        "rung": "keyless",
        "reason": "keyless_not_subscription",
        "detail": "The no-auth path is keyless, not a subscription: use auto/thrifty for "
        "keyless capacity",
    }


def test_overage_not_hard_stop(gateway: str) -> None:
    cursor = BillingCatalogEntry.objects.get(provider="cursor", auth_type="oauth")
    connect(gateway, "cursor-1", "cursor", "oauth")
    read(gateway, "cursor-1", remaining_percent=90)

    row = excluded_only(pool(gateway, "auto/subscription", pinned("cursor", "auto", "cursor-1")))

    assert row == {
        "provider": "cursor",
        "model": "auto",
        "connection_id": "cursor-1",
        "rung": "subscription",
        "reason": "overage_not_hard_stop",
        "detail": f"Overage is unknown, not hard-stop: past the plan it could bill (catalog "
        f"entry {cursor.pk}: {cursor.reason})",
    }


def test_quota_exhausted(gateway: str) -> None:
    connect(gateway, "claude-max-1", "claude", "oauth")
    read(gateway, "claude-max-1", remaining_percent=1.5)

    # Even thrifty, which fails open, leaves an exhausted plan out.
    row = excluded_only(pool(gateway, "auto/thrifty", pinned("claude", "sonnet", "claude-max-1")))

    assert row == {
        "provider": "claude",
        "model": "sonnet",
        "connection_id": "claude-max-1",
        "rung": "subscription",
        "reason": "quota_exhausted",
        "detail": "1.5 % left, at or below the exit cutoff of 2 %",
    }


def test_below_reentry(gateway: str) -> None:
    connect(gateway, "claude-max-1", "claude", "oauth")
    now = timezone.now()
    read(gateway, "claude-max-1", remaining_percent=1, checked_at=now - timedelta(seconds=20))
    read(gateway, "claude-max-1", remaining_percent=4, checked_at=now - timedelta(seconds=10))

    row = excluded_only(pool(gateway, "auto/thrifty", pinned("claude", "sonnet", "claude-max-1")))

    assert row == {
        "provider": "claude",
        "model": "sonnet",
        "connection_id": "claude-max-1",
        "rung": "subscription",
        "reason": "below_reentry",
        "detail": "4.0 % left, re-entry needs more than 5 %",
    }


def test_quota_unknown(gateway: str) -> None:
    connect(gateway, "claude-max-1", "claude", "oauth")
    read(gateway, "claude-max-1", status="UNKNOWN", remaining_percent=50)

    row = excluded_only(
        pool(gateway, "auto/subscription", pinned("claude", "sonnet", "claude-max-1"))
    )

    assert row == {
        "provider": "claude",
        "model": "sonnet",
        "connection_id": "claude-max-1",
        "rung": "subscription",
        "reason": "quota_unknown",
        "detail": "The reading's status is UNKNOWN (50.0 % reported left)",
    }


def test_quota_stale(gateway: str) -> None:
    connect(gateway, "claude-max-1", "claude", "oauth")
    read(
        gateway,
        "claude-max-1",
        remaining_percent=80,
        checked_at=timezone.now() - timedelta(hours=1),
    )

    row = excluded_only(
        pool(gateway, "auto/subscription", pinned("claude", "sonnet", "claude-max-1"))
    )

    assert {k: v for k, v in row.items() if k != "detail"} == {
        "provider": "claude",
        "model": "sonnet",
        "connection_id": "claude-max-1",
        "rung": "subscription",
        "reason": "quota_stale",
    }
    age = seconds_in(row["detail"], r"The reading is ([0-9.]+) s old, older than the 180 s maximum")
    assert 3600 <= age < 3660


def test_reset_passed(gateway: str) -> None:
    connect(gateway, "claude-max-1", "claude", "oauth")
    now = timezone.now()
    reset_at = (now - timedelta(seconds=10)).replace(microsecond=0)
    read(
        gateway,
        "claude-max-1",
        remaining_percent=60,
        checked_at=now - timedelta(seconds=30),
        reset_at=reset_at,
    )

    row = excluded_only(
        pool(gateway, "auto/subscription", pinned("claude", "sonnet", "claude-max-1"))
    )

    assert row == {
        "provider": "claude",
        "model": "sonnet",
        "connection_id": "claude-max-1",
        "rung": "subscription",
        "reason": "reset_passed",
        "detail": f"The reading's reset at {_utc(reset_at)} has passed: the window it "
        "describes is over and a refresh is due",
    }


def test_cooling_down(gateway: str) -> None:
    connect(gateway, "openai-key", "openai", "apikey")
    api(
        "post",
        "/api/v1/connections/openai-key/events",
        gateway,
        {"kind": "rate_limited", "retry_after_seconds": 600},
    )
    cooldown_until = Connection.objects.get().cooldown_until
    assert cooldown_until is not None

    body = pool(gateway, "auto/thrifty", pinned("openai", "gpt-5", "openai-key"))

    row = excluded_only(body)
    assert {k: v for k, v in row.items() if k != "detail"} == {
        "provider": "openai",
        "model": "gpt-5",
        "connection_id": "openai-key",
        "rung": "premium",
        "reason": "cooling_down",
    }
    left = seconds_in(
        row["detail"],
        re.escape(f"Cooling down until {_utc(cooldown_until)} (") + r"([0-9]+) s from now\)",
    )
    assert 540 < left <= 600
    assert body["next_change_at"] == iso(cooldown_until)


def test_inactive(gateway: str) -> None:
    connect(gateway, "claude-max-1", "claude", "oauth", active=False)
    read(gateway, "claude-max-1", remaining_percent=90)

    row = excluded_only(pool(gateway, "auto/thrifty", pinned("claude", "sonnet", "claude-max-1")))

    assert row == {
        "provider": "claude",
        "model": "sonnet",
        "connection_id": "claude-max-1",
        "rung": "subscription",
        "reason": "inactive",
        "detail": "Connection claude-max-1 is marked inactive",
    }


def test_rung_disabled(gateway: str, operator: str) -> None:
    tune(operator, rung_budget_usd={"cheap": 0, "premium": None})
    price(operator, "openai", "gpt-4o-mini", 0.15)
    connect(gateway, "openai-key", "openai", "apikey")

    row = excluded_only(
        pool(gateway, "auto/thrifty", pinned("openai", "gpt-4o-mini", "openai-key"))
    )

    assert row == {
        "provider": "openai",
        "model": "gpt-4o-mini",
        "connection_id": "openai-key",
        "rung": "cheap",
        "reason": "rung_disabled",
        "detail": "The cheap rung's budget is 0 USD: the rung is disabled",
    }


def test_budget_exhausted(gateway: str, operator: str) -> None:
    tune(operator, rung_budget_usd={"cheap": None, "premium": 10})
    connect(gateway, "openai-key", "openai", "apikey")
    spent = api(
        "post",
        "/api/v1/spend",
        gateway,
        {
            "request_id": "req-1",
            "connection_id": "openai-key",
            "provider": "openai",
            "model": "gpt-5",
            "cost_usd": 10,
        },
    )
    assert spent.json()["rung"] == "premium"
    window_start, window_end = budget_window_bounds(BudgetWindow.MONTH, timezone.now())
    last_day = window_end - timedelta(days=1)

    body = pool(gateway, "auto/thrifty", pinned("openai", "gpt-5", "openai-key"))

    assert excluded_only(body) == {
        "provider": "openai",
        "model": "gpt-5",
        "connection_id": "openai-key",
        "rung": "premium",
        "reason": "budget_exhausted",
        "detail": "The premium rung spent 10.00 USD of its 10.00 USD month budget of "
        f"{window_start:%Y-%m-%d} to {last_day:%Y-%m-%d} UTC",
    }
    assert body["next_change_at"] == iso(window_end)


# --- when the pool may change ------------------------------------------------------------------


def test_next_change_at_is_the_future_reset_of_an_exhausted_reading(gateway: str) -> None:
    connect(gateway, "claude-max-1", "claude", "oauth")
    reset_at = (timezone.now() + timedelta(hours=2)).replace(microsecond=0)
    read(gateway, "claude-max-1", status="EXHAUSTED", remaining_percent=0, reset_at=reset_at)

    body = pool(gateway, "auto/subscription", pinned("claude", "sonnet", "claude-max-1"))

    assert excluded_only(body) == {
        "provider": "claude",
        "model": "sonnet",
        "connection_id": "claude-max-1",
        "rung": "subscription",
        "reason": "quota_exhausted",
        "detail": f"Upstream reports EXHAUSTED with 0.0 % left, until its reset at "
        f"{_utc(reset_at)}",
    }
    assert body["next_change_at"] == iso(reset_at)


def test_an_old_exhausted_reading_stays_current_until_its_future_reset(gateway: str) -> None:
    connect(gateway, "claude-max-1", "claude", "oauth")
    now = timezone.now()
    reset_at = (now + timedelta(hours=2)).replace(microsecond=0)
    read(
        gateway,
        "claude-max-1",
        status="EXHAUSTED",
        remaining_percent=0,
        reset_at=reset_at,
        checked_at=now - timedelta(hours=1),
    )

    body = pool(gateway, "auto/subscription", pinned("claude", "sonnet", "claude-max-1"))

    assert excluded_only(body)["reason"] == "quota_exhausted"
    assert body["next_change_at"] == iso(reset_at)


def test_next_change_at_is_the_earliest_known_return(gateway: str) -> None:
    now = timezone.now()
    soon = (now + timedelta(minutes=30)).replace(microsecond=0)
    for connection_id, reset_at in (("max-a", now + timedelta(hours=3)), ("max-b", soon)):
        connect(gateway, connection_id, "claude", "oauth")
        read(gateway, connection_id, status="EXHAUSTED", remaining_percent=0, reset_at=reset_at)

    body = pool(
        gateway,
        "auto/subscription",
        {"provider": "claude", "model": "sonnet", "allowed_connection_ids": ["max-a", "max-b"]},
    )

    assert [r["connection_id"] for r in body["excluded"]] == ["max-a", "max-b"]
    assert body["next_change_at"] == iso(soon)


def test_next_change_at_is_null_when_no_return_is_known(gateway: str) -> None:
    connect(gateway, "acme-key", "acme", "apikey")

    body = pool(gateway, "auto/subscription", pinned("acme", "m1", "acme-key"))

    assert body["next_change_at"] is None


# --- precedence when several reasons apply ------------------------------------------------


def test_inactive_wins_over_a_cooldown_and_an_exhausted_quota(gateway: str) -> None:
    connect(gateway, "claude-max-1", "claude", "oauth", active=False)
    read(gateway, "claude-max-1", remaining_percent=0)
    api("post", "/api/v1/connections/claude-max-1/events", gateway, {"kind": "rate_limited"})

    row = excluded_only(
        pool(gateway, "auto/subscription", pinned("claude", "sonnet", "claude-max-1"))
    )

    assert row["reason"] == "inactive"


def test_billing_wins_over_a_cooldown_in_subscription(gateway: str) -> None:
    connect(gateway, "acme-key", "acme", "apikey")
    api("post", "/api/v1/connections/acme-key/events", gateway, {"kind": "rate_limited"})

    row = excluded_only(pool(gateway, "auto/subscription", pinned("acme", "m1", "acme-key")))

    assert row["reason"] == "uncurated"


def test_a_cooldown_wins_over_an_exhausted_quota(gateway: str) -> None:
    connect(gateway, "claude-max-1", "claude", "oauth")
    read(gateway, "claude-max-1", remaining_percent=1)
    api("post", "/api/v1/connections/claude-max-1/events", gateway, {"kind": "error"})

    row = excluded_only(pool(gateway, "auto/thrifty", pinned("claude", "sonnet", "claude-max-1")))

    assert row["reason"] == "cooling_down"


def test_thrifty_admits_a_plan_whose_quota_is_stale_or_unknown(gateway: str) -> None:
    connect(gateway, "max-a", "claude", "oauth")
    connect(gateway, "max-b", "claude", "oauth")
    read(gateway, "max-a", remaining_percent=80, checked_at=timezone.now() - timedelta(hours=1))

    body = pool(
        gateway,
        "auto/thrifty",
        {"provider": "claude", "model": "sonnet", "allowed_connection_ids": ["max-a", "max-b"]},
    )

    assert body["excluded"] == []
    assert [(c["rung"], c["allowed_connection_ids"]) for c in body["candidates"]] == [
        ("subscription", ["max-a", "max-b"])
    ]
