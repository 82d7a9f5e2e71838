"""`POST /api/v1/spend` and `GET /api/v1/spend/summary` (ladder/api/spend.py): one
request's cost recorded once, with its rung; each paid rung against its budget."""

from __future__ import annotations

from datetime import timedelta
from datetime import timezone as dt_timezone
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from billing import services as billing_services
from ladder.core import BudgetWindow, budget_window_bounds
from ladder.models import (
    SpendEntry,
)
from tests.ladder.api.calls import TUNED
from tests.ladder.factories import api, iso, make_connection

pytestmark = pytest.mark.django_db


def cheap_price() -> None:
    billing_services.upsert_price(
        billing_services.PriceInput("openai", "gpt-4o-mini", Decimal("0.15"), Decimal("0.6"), None),
        actor="t",
    )


def test_post_spend_records_it_with_the_rung_it_landed_on(gateway: str) -> None:
    cheap_price()
    make_connection("openai-key", provider="openai", auth_type="apikey")
    occurred_at = timezone.now().replace(microsecond=0) - timedelta(minutes=1)

    response = api(
        "post",
        "/api/v1/spend",
        gateway,
        {
            "request_id": "req-1",
            "connection_id": "openai-key",
            "provider": "openai",
            "model": "gpt-4o-mini",
            "cost_usd": 0.25,
            "occurred_at": occurred_at.isoformat(),
        },
    )

    assert response.status_code == 201
    assert response.json() == {
        "request_id": "req-1",
        "connection_id": "openai-key",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "cost_usd": 0.25,
        "input_tokens": None,
        "output_tokens": None,
        "occurred_at": iso(occurred_at),
        "rung": "cheap",
        "billed_usd": 0.25,
        "list_price_usd": 0.25,
    }
    entry = SpendEntry.objects.get()
    assert (entry.cost_usd, entry.is_cost_computed, entry.rung) == (
        Decimal("0.25000000"),
        False,
        "cheap",
    )


def test_post_spend_computes_a_null_cost_from_tokens_and_prices(gateway: str) -> None:
    cheap_price()

    response = api(
        "post",
        "/api/v1/spend",
        gateway,
        {
            "request_id": "req-1",
            "connection_id": "openai-key",
            "provider": "openai",
            "model": "gpt-4o-mini",
            "cost_usd": None,
            "input_tokens": 1_000_000,
            "output_tokens": 500_000,
        },
    )

    assert response.status_code == 201
    assert response.json()["cost_usd"] == 0.45
    assert SpendEntry.objects.get().is_cost_computed is True


def test_post_spend_with_a_seen_request_id_is_200_and_not_counted_again(gateway: str) -> None:
    body = {
        "request_id": "req-1",
        "connection_id": "openai-key",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "cost_usd": 1.0,
    }
    first = api("post", "/api/v1/spend", gateway, body)

    again = api("post", "/api/v1/spend", gateway, {**body, "cost_usd": 9.0})

    assert again.status_code == 200
    assert again.json() == first.json()
    assert SpendEntry.objects.count() == 1
    assert SpendEntry.objects.get().cost_usd == Decimal("1.00000000")


def test_spend_on_a_plan_connection_never_counts_against_a_paid_budget(
    gateway: str, operator: str
) -> None:
    make_connection("claude-max-1")
    api("put", "/api/v1/settings/ladder", operator, {**TUNED, "budget_window": "month"})

    response = api(
        "post",
        "/api/v1/spend",
        gateway,
        {
            "request_id": "req-1",
            "connection_id": "claude-max-1",
            "provider": "claude",
            "model": "claude-sonnet-4-5",
            "cost_usd": 50.0,
        },
    )

    assert response.json()["rung"] == "subscription"
    summary = api("get", "/api/v1/spend/summary", gateway).json()
    assert summary["rungs"]["cheap"]["spent_usd"] == 0.0
    assert summary["rungs"]["premium"]["spent_usd"] == 0.0


def test_spend_summary_reports_each_paid_rung_against_its_budget(
    gateway: str, operator: str
) -> None:
    api(
        "put",
        "/api/v1/settings/ladder",
        operator,
        {**TUNED, "budget_window": "month", "rung_budget_usd": {"cheap": 1.5, "premium": None}},
    )
    cheap_price()
    for n, cost in enumerate((1.0, 0.5)):
        api(
            "post",
            "/api/v1/spend",
            gateway,
            {
                "request_id": f"req-{n}",
                "connection_id": "openai-key",
                "provider": "openai",
                "model": "gpt-4o-mini",
                "cost_usd": cost,
            },
        )
    start, end = budget_window_bounds(BudgetWindow.MONTH, timezone.now())

    response = api("get", "/api/v1/spend/summary", gateway)

    assert response.status_code == 200
    assert response.json() == {
        "budget_window": "month",
        "window_start": iso(start),
        "window_end": iso(end),
        "rungs": {
            "cheap": {"spent_usd": 1.5, "budget_usd": 1.5, "exhausted": True},
            "premium": {"spent_usd": 0.0, "budget_usd": None, "exhausted": False},
        },
        "saved_usd": 0.0,
    }


def test_post_spend_with_an_out_of_range_offset_is_stored_in_utc(gateway: str) -> None:
    # Used to answer 500 on PostgreSQL, which refuses offsets beyond 15:59. Relative to
    # now: spend older than the retention period is refused.
    moment = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    far_west = moment.astimezone(dt_timezone(-timedelta(hours=18, minutes=54)))

    response = api(
        "post",
        "/api/v1/spend",
        gateway,
        {
            "request_id": "req-1",
            "connection_id": "openai-key",
            "provider": "openai",
            "model": "gpt-4o-mini",
            "cost_usd": 1,
            "occurred_at": far_west.isoformat(),
        },
    )

    assert far_west.isoformat().endswith("-18:54")
    assert response.status_code == 201
    assert response.json()["occurred_at"] == iso(moment)


@pytest.mark.parametrize(
    ("change", "loc", "error_type"),
    [
        pytest.param({"cost_usd": -1}, ["cost_usd"], "greater_than_equal", id="negative-cost"),
        pytest.param({"cost_usd": True}, ["cost_usd"], "float_type", id="boolean-cost"),
        pytest.param({"input_tokens": "10"}, ["input_tokens"], "int_type", id="string-tokens"),
        pytest.param(
            {"input_tokens": -1}, ["input_tokens"], "greater_than_equal", id="negative-tokens"
        ),
        pytest.param(
            {"connection_id": "a b"}, ["connection_id"], "string_pattern_mismatch", id="hostile-id"
        ),
        pytest.param({"request_id": ""}, ["request_id"], "string_too_short", id="empty-request-id"),
        pytest.param(
            {"occurred_at": "2026-11-29T12:00:00"}, ["occurred_at"], "timezone_aware", id="naive"
        ),
        pytest.param({"occurred_at": 1764417600}, ["occurred_at"], "value_error", id="unix-time"),
        pytest.param({"rung": "free"}, ["rung"], "extra_forbidden", id="read-only-rung"),
    ],
)
def test_post_spend_refuses_an_invalid_body_and_records_nothing(
    gateway: str, change: dict[str, Any], loc: list[str], error_type: str
) -> None:
    body = {
        "request_id": "req-1",
        "connection_id": "openai-key",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "cost_usd": 1.0,
        **change,
    }

    response = api("post", "/api/v1/spend", gateway, body)

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", *loc], error_type)
    ]
    assert not SpendEntry.objects.exists()


def test_post_spend_whose_computed_cost_overflows_is_422_not_500(
    gateway: str, operator: str
) -> None:
    api(
        "post",
        "/api/v1/prices",
        operator,
        {
            "provider": "openai",
            "model": "o1-pro",
            "input_usd_per_mtok": 150,
            "output_usd_per_mtok": 600,
        },
    )

    response = api(
        "post",
        "/api/v1/spend",
        gateway,
        {
            "request_id": "req-1",
            "connection_id": "openai-key",
            "provider": "openai",
            "model": "o1-pro",
            "input_tokens": 10**12,
            "output_tokens": 0,
        },
    )

    assert response.status_code == 422
    assert response.json() == {
        "detail": [
            {
                "loc": ["body", "payload", "cost_usd"],
                "msg": "A request's cost must be between 0 and 99,999,999.99999999 USD.",
                "type": "value_error",
            }
        ]
    }
    assert not SpendEntry.objects.exists()
