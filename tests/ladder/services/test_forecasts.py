"""The forecasts' shell (ladder/services/forecasts.py): readings and the ledger's paid pace
loaded in constant queries, handed to the core, and the status API's `forecast`."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from billing import services as billing_services
from ladder import services
from ladder.models import Connection, LadderSettings
from tests.ladder.factories import NOW, api, make_connection, make_reading, make_token
from tests.ladder.spend_ledger import PRICES

pytestmark = pytest.mark.django_db

RESET = NOW + timedelta(hours=4)


def minutes(value: float) -> timedelta:
    return timedelta(minutes=value)


def burn(connection_id: str, *, now: Any = NOW, reset_at: Any = RESET) -> None:
    """Three readings 10 minutes apart burning 0.5 % a minute, the newest at `now`."""
    for ago, left in ((20, 47.0), (10, 42.0), (0, 37.0)):
        make_reading(
            connection_id,
            now=now - minutes(ago),
            checked_at=now - minutes(ago),
            remaining_percent=left,
            reset_at=reset_at,
        )


def spend(request_id: str, cost: str, at: Any, *, model: str = "gpt-4o-mini") -> None:
    """One paid request on the metered key (gpt-4o-mini: cheap; gpt-4o: premium)."""
    services.record_spend(
        services.SpendInput(
            request_id=request_id,
            connection_id="key",
            provider="openai",
            model=model,
            cost_usd=Decimal(cost),
            input_tokens=10,
            output_tokens=10,
            occurred_at=at,
        ),
        now=at,
    )


@pytest.fixture
def priced() -> None:
    make_connection("key", provider="openai", auth_type="apikey")
    for provider, model, inp, out in PRICES:
        billing_services.upsert_price(
            billing_services.PriceInput(provider, model, Decimal(inp), Decimal(out), None),
            actor="test",
        )


def test_the_paid_pace_is_the_ledgers_recent_spend_per_minute_per_rung(priced: None) -> None:
    LadderSettings.objects.filter(pk=1).update(cheap_budget_usd=Decimal("11"))
    spend("old", "9", NOW - minutes(61))  # before the hour: in the window, not the pace
    spend("c1", "0.60", NOW - minutes(59))
    spend("c2", "0.60", NOW - minutes(1))
    spend("p1", "3.00", NOW - minutes(30), model="gpt-4o")

    paces = services.paid_paces(services.load_config(), NOW)

    assert [(p.rung.label, p.usd_per_minute, p.budget_left_usd) for p in paces] == [
        ("cheap", Decimal("0.02"), Decimal("0.80")),
        ("premium", Decimal("0.05"), None),
    ]


def test_a_plan_connection_is_forecast_from_its_readings_and_the_paid_pace(priced: None) -> None:
    make_connection("claude-max-1", label="Claude Max 1")
    burn("claude-max-1")
    spend("c1", "1.20", NOW - minutes(30))

    made = services.forecast_of(Connection.objects.get(connection_id="claude-max-1"), now=NOW)

    assert made is not None
    assert made.forecast.runs_out_at == NOW + minutes(70)
    assert made.forecast.before_reset is True
    # 0.02 USD a minute on cheap for the 170 minutes from the run-out to the reset.
    assert made.forecast.paid_until_reset_usd == Decimal("3.40")
    assert made.sentence == (
        "Claude Max 1 runs out in about 1 h, 3 h before its reset; at the current mix the "
        "cheap rung takes about $3.40 until then."
    )


@pytest.mark.parametrize(
    ("fields", "why"),
    [
        pytest.param({"provider": "openai", "auth_type": "apikey"}, "metered", id="metered"),
        pytest.param({"provider": "claude", "auth_type": "none"}, "keyless", id="keyless"),
        pytest.param({"active": False}, "inactive", id="inactive-plan"),
    ],
)
def test_only_an_active_plan_connection_has_a_forecast(fields: dict[str, Any], why: str) -> None:
    make_connection("other", **fields)
    burn("other")

    assert services.forecast_of(Connection.objects.get(connection_id="other"), now=NOW) is None


def test_a_plan_never_read_has_no_forecast() -> None:
    make_connection("claude-max-1")

    assert services.forecast_of(Connection.objects.get(), now=NOW) is None


def test_a_dropped_out_plan_is_forecast_as_run_out_since_it_dropped_out() -> None:
    make_connection("claude-max-1")
    burn("claude-max-1", now=NOW - minutes(10))
    make_reading("claude-max-1", now=NOW, checked_at=NOW, remaining_percent=1.0, reset_at=RESET)

    made = services.forecast_of(Connection.objects.get(), now=NOW)

    assert made is not None
    assert made.forecast.has_run_out is True
    assert made.forecast.runs_out_at == NOW


def test_plan_forecasts_list_the_soonest_run_out_first() -> None:
    make_connection("slow")
    make_connection("fast")
    make_connection("few")
    burn("slow")
    for ago, left in ((20, 30.0), (10, 20.0), (0, 10.0)):
        make_reading("fast", now=NOW - minutes(ago), checked_at=NOW - minutes(ago),
                     remaining_percent=left, reset_at=RESET)  # fmt: skip
    make_reading("few", now=NOW, checked_at=NOW, remaining_percent=50.0, reset_at=RESET)

    made = services.plan_forecasts(now=NOW)

    assert [(m.connection_id, m.forecast.runs_out_at) for m in made] == [
        ("fast", NOW + minutes(8)),
        ("slow", NOW + minutes(70)),
        ("few", None),
    ]


def test_the_forecasts_queries_do_not_grow_with_the_fleet(
    priced: None, django_assert_num_queries: Any
) -> None:
    make_connection("claude-max-1")
    burn("claude-max-1")
    with django_assert_num_queries(5) as one:
        services.plan_forecasts(now=NOW)
    for number in range(2, 7):
        make_connection(f"claude-max-{number}")
        burn(f"claude-max-{number}")
        for extra in range(15):  # more readings than a forecast reads, of the last window
            make_reading(f"claude-max-{number}", now=NOW - minutes(60 + extra),
                         checked_at=NOW - minutes(60 + extra), remaining_percent=80.0,
                         reset_at=NOW - minutes(30))  # fmt: skip

    with django_assert_num_queries(len(one.captured_queries)):
        made = services.plan_forecasts(now=NOW)

    assert len(made) == 6
    assert {m.forecast.runs_out_at for m in made} == {NOW + minutes(70)}


def test_the_status_api_carries_the_forecast(priced: None) -> None:
    gateway = make_token()
    now = timezone.now().replace(microsecond=0)
    make_connection("claude-max-1")
    burn("claude-max-1", now=now, reset_at=now + timedelta(hours=4))
    spend("c1", "1.20", now - minutes(30))

    response = api("get", "/api/v1/connections/claude-max-1/status", gateway)

    assert response.status_code == 200
    forecast = response.json()["forecast"]
    assert forecast["runs_out_at"] == (now + minutes(70)).isoformat().replace("+00:00", "Z")
    assert forecast["before_reset"] is True
    assert forecast["paid_until_reset_usd"] == 3.4
    assert forecast["paid_by_rung"] == {"cheap": 3.4, "premium": 0.0}
    assert forecast["basis"] == (
        "from 3 readings over the last 20 min, and the paid rungs' spend over the last 60 min"
    )
