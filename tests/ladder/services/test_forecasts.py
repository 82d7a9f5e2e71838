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
from ladder.core import WindowReading
from ladder.core.forecast import Outcome
from ladder.models import Connection, LadderSettings, WindowForecast
from tests.ladder.factories import NOW, api, iso, make_connection, make_reading, make_token
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


def test_a_plan_with_its_own_reserve_runs_out_at_its_own_exit_cutoff() -> None:
    make_connection("claude-max-1", exit_cutoff_percent=17.0)
    make_connection("claude-max-2")
    burn("claude-max-1")
    burn("claude-max-2")

    made = {item.connection_id: item.forecast for item in services.plan_forecasts(now=NOW)}

    # 37 % left at 0.5 % a minute: 40 min to its own 17 % cutoff, 70 min to the settings' 2 %.
    assert made["claude-max-1"].runs_out_at == NOW + minutes(40)
    assert made["claude-max-2"].runs_out_at == NOW + minutes(70)


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
        scoped_burn(f"claude-max-{number}", (40.0, 30.0, 20.0))  # and two model scopes
        for extra in range(15):  # more readings than a forecast reads, of the last window
            make_reading(f"claude-max-{number}", now=NOW - minutes(60 + extra),
                         checked_at=NOW - minutes(60 + extra), remaining_percent=80.0,
                         reset_at=NOW - minutes(30))  # fmt: skip

    with django_assert_num_queries(len(one.captured_queries)):
        made = services.plan_forecasts(now=NOW)

    assert len(made) == 6
    assert {m.forecast.runs_out_at for m in made} == {NOW + minutes(70)}
    assert sum(len(m.scopes) for m in made) == 10


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


# --- windows scoped to a model ------------------------------------------------------------

WEEK = NOW + timedelta(days=3)


def scoped_burn(
    connection_id: str,
    opus: tuple[float, float, float],
    *,
    now: Any = NOW,
    sonnet: tuple[float, float] = (90.0, 89.0),
) -> None:
    """Three readings 10 minutes apart, the newest at `now`: the five-hour window burning
    0.5 % a minute, Opus's weekly cap at `opus`, Sonnet's only in the newest two."""
    five_hour = (47.0, 42.0, 37.0)
    for index, ago in enumerate((20, 10, 0)):
        at = now - minutes(ago)
        windows = [
            WindowReading("five_hour", five_hour[index], now + timedelta(hours=4)),
            WindowReading("seven_day_opus", opus[index], now + timedelta(days=3), "opus"),
        ]
        if index:
            sonnet_left = sonnet[index - 1]
            windows.append(
                WindowReading("seven_day_sonnet", sonnet_left, now + timedelta(days=3), "sonnet")
            )
        make_reading(connection_id, now=at, checked_at=at, remaining_percent=five_hour[index],
                     reset_at=now + timedelta(hours=4), windows=tuple(windows))  # fmt: skip


def test_each_scoped_window_is_forecast_from_its_own_readings(priced: None) -> None:
    make_connection("claude-max-1", label="Team Max")
    scoped_burn("claude-max-1", (40.0, 30.0, 20.0))
    spend("c1", "1.20", NOW - minutes(30))

    made = services.forecast_of(Connection.objects.get(connection_id="claude-max-1"), now=NOW)

    assert made is not None
    assert made.forecast.runs_out_at == NOW + minutes(70)  # the unscoped window, unchanged
    assert [scoped.model_scope for scoped in made.scopes] == ["opus", "sonnet"]
    opus, sonnet = (scoped.forecast for scoped in made.scopes)
    # 20 % at 1 % a minute: 18 min to the 2 % cutoff; then 4302 min to the weekly reset
    # at 0.02 USD a minute on cheap.
    assert opus.runs_out_at == NOW + minutes(18)
    assert opus.before_reset is True
    assert opus.reset_at == WEEK
    assert opus.paid_until_reset_usd == Decimal("86.04")
    assert made.scopes[0].sentence == (
        "Team Max (model scope opus) runs out in about 18 min, 3 d before its reset; at the "
        "current mix the cheap rung takes about $86.04 until then."
    )
    assert sonnet.runs_out_at is None
    assert sonnet.basis == "2 readings in this window, 3 needed for a forecast"


def test_a_scope_that_dropped_out_is_forecast_as_run_out_since_it_did(priced: None) -> None:
    make_connection("claude-max-1", label="Team Max")
    # Opus drops out under the 2 % cutoff 10 minutes ago, then hovers under the 5 % floor.
    scoped_burn("claude-max-1", (10.0, 1.5, 4.0))

    made = services.forecast_of(Connection.objects.get(connection_id="claude-max-1"), now=NOW)

    assert made is not None
    opus = made.scopes[0]
    assert (opus.model_scope, opus.forecast.has_run_out) == ("opus", True)
    assert opus.forecast.runs_out_at == NOW - minutes(10)
    assert opus.sentence == (
        "Team Max (model scope opus) ran out about 10 min ago, 3 d before its reset; no paid "
        "rung has spent lately, so nothing paid is expected until then."
    )


def test_the_status_api_carries_a_forecast_per_scope(priced: None) -> None:
    gateway = make_token()
    now = timezone.now().replace(microsecond=0)
    make_connection("claude-max-1")
    scoped_burn("claude-max-1", (40.0, 30.0, 20.0), now=now)
    spend("c1", "1.20", now - minutes(30))

    response = api("get", "/api/v1/connections/claude-max-1/status", gateway)

    assert response.status_code == 200
    opus, sonnet = response.json()["forecast"]["scopes"]
    assert opus == {
        "runs_out_at": iso(now + minutes(18)),
        "before_reset": True,
        "paid_until_reset_usd": 86.04,
        "basis": "from 3 readings over the last 20 min, and the paid rungs' spend over the "
        "last 60 min",
        "reset_at": iso(now + timedelta(days=3)),
        "paid_by_rung": {"cheap": 86.04, "premium": 0.0},
        "sentence": "claude-max-1 (model scope opus) runs out in about 18 min, 3 d before its "
        "reset; at the current mix the cheap rung takes about $86.04 until then.",
        "model_scope": "opus",
    }
    assert sonnet == {
        "runs_out_at": None,
        "before_reset": None,
        "paid_until_reset_usd": None,
        "basis": "2 readings in this window, 3 needed for a forecast",
        "reset_at": iso(now + timedelta(days=3)),
        "paid_by_rung": {},
        "sentence": "No forecast for claude-max-1 (model scope sonnet): 2 readings in this "
        "window, 3 needed for a forecast.",
        "model_scope": "sonnet",
    }


def test_the_connection_page_says_each_scopes_forecast_under_the_forecast(
    client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from omniroute_admin import dashboard
    from tests.pages import parse
    from tests.worlds import signed_in

    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)
    make_connection("claude-max-1", label="Team Max")
    scoped_burn("claude-max-1", (40.0, 30.0, 20.0))
    signed_in(client, "vera", "viewer")

    page = parse(client.get("/connections/claude-max-1/").content)

    (scopes,) = page.by_class("forecast-scopes")
    assert scopes.attrs["aria-label"] == "Forecast per model scope"
    assert [item.text for item in scopes.by_tag("li")] == [
        "Team Max (model scope opus) runs out in about 18 min, 3 d before its reset; no paid "
        "rung has spent lately, so nothing paid is expected until then. Forecast from 3 "
        "readings over the last 20 min, and the paid rungs' spend over the last 60 min.",
        "No forecast for Team Max (model scope sonnet): 2 readings in this window, 3 needed "
        "for a forecast.",
    ]


# --- forecast against outcome -----------------------------------------------------------


def test_a_windows_first_forecast_is_kept_with_when_it_ran_out() -> None:
    make_connection("claude-max-1")
    burn("claude-max-1")

    assert services.record_forecasts(now=NOW) == 1
    assert services.record_forecasts(now=NOW) == 0  # twice is harmless
    # Later forecasts of the same window (its reset jittered) do not replace the first.
    make_reading("claude-max-1", now=NOW + minutes(10), checked_at=NOW + minutes(10),
                 remaining_percent=30.0, reset_at=RESET + timedelta(seconds=2))  # fmt: skip
    assert services.record_forecasts(now=NOW + minutes(10)) == 0
    # It ran out 5 minutes later than forecast (70 minutes on): the ladder dropped it.
    make_reading("claude-max-1", now=NOW + minutes(75), checked_at=NOW + minutes(75),
                 remaining_percent=1.5, reset_at=RESET)  # fmt: skip
    services.record_forecasts(now=NOW + minutes(76))
    (open_window,) = services.forecast_outcomes("claude-max-1")
    services.record_forecasts(now=RESET + timedelta(seconds=1))

    (closed,) = services.forecast_outcomes("claude-max-1")
    assert (open_window.outcome, open_window.is_closed) == (
        Outcome.RAN_OUT_AS_FORECAST,
        False,
    )
    assert closed == services.ForecastOutcome(
        connection_id="claude-max-1",
        window_reset_at=RESET,
        forecast_at=NOW,
        runs_out_at=NOW + minutes(70),
        before_reset=True,
        paid_until_reset_usd=Decimal("0.00"),
        basis="from 3 readings over the last 20 min, and the paid rungs' spend over the last "
        "60 min",
        ran_out_at=NOW + minutes(75),
        is_closed=True,
        outcome=Outcome.RAN_OUT_AS_FORECAST,
        error_seconds=300.0,
    )


def test_a_window_that_reset_before_its_forecast_run_out_is_a_false_alarm() -> None:
    make_connection("claude-max-1")
    burn("claude-max-1")
    services.record_forecasts(now=NOW)

    services.record_forecasts(now=RESET)

    (window,) = services.forecast_outcomes("claude-max-1")
    assert (window.outcome, window.ran_out_at, window.error_seconds, window.is_closed) == (
        Outcome.DID_NOT_RUN_OUT,
        None,
        None,
        True,
    )


def test_outcomes_keep_the_last_ten_windows_of_each_connection() -> None:
    make_connection("claude-max-1")
    make_connection("claude-max-2")
    for index in range(12):
        for connection_id in ("claude-max-1", "claude-max-2"):
            WindowForecast.objects.create(
                connection=Connection.objects.get(connection_id=connection_id),
                window_reset_at=NOW + timedelta(hours=5 * index),
                forecast_at=NOW,
                runs_out_at=NOW,
                before_reset=True,
                basis="b",
            )

    outcomes = services.forecast_outcomes()

    assert [(o.connection_id, o.window_reset_at) for o in outcomes] == [
        (connection_id, NOW + timedelta(hours=5 * index))
        for connection_id in ("claude-max-1", "claude-max-2")
        for index in range(11, 1, -1)
    ]


def test_the_forecasts_api_lists_every_plans_forecast() -> None:
    gateway = make_token()
    now = timezone.now().replace(microsecond=0)
    make_connection("claude-max-1")
    burn("claude-max-1", now=now, reset_at=now + timedelta(hours=4))

    response = api("get", "/api/v1/forecasts", gateway)

    assert response.status_code == 200
    (item,) = response.json()
    assert (item["connection_id"], item["runs_out_at"], item["before_reset"]) == (
        "claude-max-1",
        iso(now + minutes(70)),
        True,
    )


def window_row(connection_id: str = "claude-max-1", **fields: Any) -> WindowForecast:
    values: dict[str, Any] = {
        "window_reset_at": RESET,
        "forecast_at": NOW,
        "runs_out_at": NOW + minutes(70),
        "before_reset": True,
        "paid_until_reset_usd": Decimal("3.10"),
        "basis": "from 3 readings over the last 20 min",
        "ran_out_at": NOW + minutes(75),
        "closed_at": RESET,
    }
    values.update(fields)
    return WindowForecast.objects.create(
        connection=Connection.objects.get(connection_id=connection_id), **values
    )


def test_the_outcomes_api_answers_json_and_csv() -> None:
    gateway = make_token()
    make_connection("claude-max-1")
    make_connection("@cmd")
    window_row()
    window_row("@cmd", ran_out_at=None, closed_at=None, paid_until_reset_usd=None)

    as_json = api("get", "/api/v1/forecasts/outcomes?connection_id=claude-max-1", gateway)
    as_csv = api("get", "/api/v1/forecasts/outcomes?format=csv", gateway)

    assert as_json.status_code == 200
    assert as_json.json() == [
        {
            "connection_id": "claude-max-1",
            "window_reset_at": iso(RESET),
            "forecast_at": iso(NOW),
            "runs_out_at": iso(NOW + minutes(70)),
            "before_reset": True,
            "paid_until_reset_usd": 3.1,
            "basis": "from 3 readings over the last 20 min",
            "ran_out_at": iso(NOW + minutes(75)),
            "closed": True,
            "outcome": "ran_out_as_forecast",
            "error_seconds": 300.0,
        }
    ]
    assert as_csv.status_code == 200
    assert as_csv["Content-Type"] == "text/csv; charset=utf-8"
    assert as_csv.content.decode().split("\r\n") == [
        "connection_id,window_reset_at,forecast_at,runs_out_at,before_reset,"
        "paid_until_reset_usd,ran_out_at,closed,outcome,error_seconds,basis",
        "'@cmd,2026-11-29T16:00:00Z,2026-11-29T12:00:00Z,2026-11-29T13:10:00Z,true,,,false,"
        "open,,from 3 readings over the last 20 min",
        "claude-max-1,2026-11-29T16:00:00Z,2026-11-29T12:00:00Z,2026-11-29T13:10:00Z,true,"
        "3.10,2026-11-29T13:15:00Z,true,ran_out_as_forecast,300,"
        "from 3 readings over the last 20 min",
        "",
    ]


def test_the_outcomes_api_refuses_a_bad_connection_id_with_a_422() -> None:
    gateway = make_token()

    response = api("get", "/api/v1/forecasts/outcomes?connection_id=a%20b", gateway)

    assert response.status_code == 422


def test_the_connection_page_shows_forecast_against_outcome(client: Any) -> None:
    from tests.worlds import signed_in

    make_connection("claude-max-1")
    window_row()
    signed_in(client, "vera", "viewer")

    page = client.get("/connections/claude-max-1/").content.decode()

    assert (
        "<tr><td>2026-11-29 16:00</td><td>2026-11-29 12:00</td><td>2026-11-29 13:10 (before "
        "the reset)</td><td>2026-11-29 13:15</td><td>ran out before its reset, as forecast"
        '</td><td class="num">300 s</td></tr>'
    ) in page
