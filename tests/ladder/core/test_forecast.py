"""Forecasts on exact reading sequences: the pace, the run-out instant, the reset, the
paid spend until the reset, and the sentence an operator reads."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta
from decimal import Decimal

import pytest

from ladder.core import Rung
from ladder.core.forecast import (
    ForecastReading,
    Outcome,
    PaidPace,
    burn_rate,
    forecast,
    forecast_sentence,
    judge,
    scope_forecasts,
    scope_readings,
    window_readings,
)
from ladder.core.types import WindowReading
from tests.ladder.core.factories import NOW

CUTOFF = 2.0
RESET = NOW + timedelta(hours=4)
PAID = (
    PaidPace(Rung.PREMIUM, Decimal("0.01")),
    PaidPace(Rung.CHEAP, Decimal("0.02")),
)


def minutes(value: float) -> timedelta:
    return timedelta(minutes=value)


def series(
    points: Sequence[tuple[float, float | None]], reset_at: datetime | None = RESET
) -> list[ForecastReading]:
    """Readings (minutes before NOW, remaining percent), all naming `reset_at`."""
    return [ForecastReading(NOW - minutes(ago), left, reset_at) for ago, left in points]


LINEAR = series([(50, 62), (40, 57), (30, 52), (20, 47), (10, 42), (0, 37)])


def test_a_linear_burn_runs_out_at_the_cutoff_at_its_pace() -> None:
    result = forecast(LINEAR, now=NOW, exit_cutoff_percent=CUTOFF, paid=PAID)

    assert result is not None
    # 0.5 % a minute from 37 %: 35 points above the cutoff last 70 minutes.
    assert result.runs_out_at == NOW + minutes(70)
    assert result.before_reset is True
    assert result.reset_at == RESET
    assert result.rate_percent_per_hour == 30.0
    assert result.readings_used == 6
    assert result.has_run_out is False
    # 170 minutes from the run-out to the reset at each rung's pace.
    assert result.paid_by_rung == ((Rung.CHEAP, Decimal("3.40")), (Rung.PREMIUM, Decimal("1.70")))
    assert result.paid_until_reset_usd == Decimal("5.10")
    assert result.basis == (
        "from 6 readings over the last 50 min, and the paid rungs' spend over the last 60 min"
    )


def test_the_sentence_says_when_how_long_before_the_reset_and_what_the_rungs_take() -> None:
    result = forecast(LINEAR, now=NOW, exit_cutoff_percent=CUTOFF, paid=PAID)

    assert result is not None
    assert forecast_sentence("Claude Max 2", result, NOW) == (
        "Claude Max 2 runs out in about 1 h, 3 h before its reset; at the current mix the "
        "cheap rung takes about $3.40 and the premium rung about $1.70 until then."
    )


def test_a_reset_inside_the_horizon_comes_first_and_nothing_is_paid() -> None:
    reset = NOW + minutes(30)
    readings = series([(20, 47), (10, 42), (0, 37)], reset_at=reset)

    result = forecast(readings, now=NOW, exit_cutoff_percent=CUTOFF, paid=PAID)

    assert result is not None
    assert result.runs_out_at == NOW + minutes(70)
    assert result.before_reset is False
    assert result.paid_until_reset_usd == Decimal("0.00")
    assert result.paid_by_rung == ()
    assert forecast_sentence("max-2", result, NOW) == (
        "max-2 runs out in about 1 h, 40 min after its reset: the reset comes first."
    )


def test_a_window_already_past_its_reset_has_no_forecast() -> None:
    passed = NOW - minutes(5)
    readings = series([(40, 30), (30, 20), (20, 10)], reset_at=passed)

    result = forecast(readings, now=NOW, exit_cutoff_percent=CUTOFF, paid=PAID)

    assert result is not None
    assert result.runs_out_at is None
    assert result.before_reset is None
    assert result.paid_until_reset_usd is None
    assert result.basis == (
        "the window of the last reading reset at 2026-11-29 11:55:00 UTC; "
        "no forecast until readings of the new window arrive"
    )


def test_readings_of_the_previous_window_do_not_count() -> None:
    old = series([(50, 20), (40, 10), (30, 5)], reset_at=NOW - minutes(25))
    new = series([(20, 100), (10, 98)])

    result = forecast(old + new, now=NOW, exit_cutoff_percent=CUTOFF, paid=PAID)

    assert result is not None
    assert result.runs_out_at is None
    assert result.readings_used == 2
    assert result.basis == "2 readings in this window, 3 needed for a forecast"


@pytest.mark.parametrize(
    "points",
    [
        pytest.param([(10, 40)], id="one"),
        pytest.param([(10, 40), (0, 30)], id="two"),
        pytest.param([(20, 40), (10, None), (0, 30)], id="two-known-one-unknown"),
    ],
)
def test_fewer_than_three_readings_give_no_forecast(
    points: list[tuple[float, float | None]],
) -> None:
    result = forecast(series(points), now=NOW, exit_cutoff_percent=CUTOFF, paid=PAID)

    assert result is not None
    assert result.runs_out_at is None
    assert result.paid_until_reset_usd is None
    assert result.basis.endswith("in this window, 3 needed for a forecast")


def test_no_reading_at_all_is_no_forecast() -> None:
    assert forecast([], now=NOW, exit_cutoff_percent=CUTOFF) is None


@pytest.mark.parametrize(
    "points",
    [
        pytest.param([(20, 40), (10, 40), (0, 40)], id="flat"),
        pytest.param([(20, 40), (10, 41), (0, 42)], id="rising"),
    ],
)
def test_a_zero_or_negative_rate_gives_no_forecast(points: list[tuple[float, float]]) -> None:
    result = forecast(series(points), now=NOW, exit_cutoff_percent=CUTOFF, paid=PAID)

    assert result is not None
    assert result.runs_out_at is None
    assert result.rate_percent_per_hour is None
    assert result.basis == "not running down (from 3 readings over the last 20 min)"
    assert forecast_sentence("max-2", result, NOW) == (
        "No forecast for max-2: not running down (from 3 readings over the last 20 min)."
    )


def test_the_rate_is_smoothed_over_the_readings_not_the_last_step() -> None:
    # The last step alone (44 -> 40) says 0.4 %/min; the least-squares slope is 0.32.
    readings = series([(30, 50), (20, 46), (10, 44), (0, 40)])

    result = forecast(readings, now=NOW, exit_cutoff_percent=CUTOFF)

    assert result is not None
    assert result.rate_percent_per_hour == pytest.approx(19.2, abs=1e-9)
    # 38 points at 0.32 %/min: 118.75 minutes.
    assert result.runs_out_at == NOW + timedelta(seconds=7125)


def test_only_the_last_twelve_readings_set_the_pace() -> None:
    # An early fast burn (3 %/min) is forgotten; the last twelve burn 0.5 %/min.
    early = [(200 - 10 * i, 100 - 3 * i) for i in range(4)]
    late = [(110 - 10 * i, 80 - 5 * i) for i in range(12)]

    rate = burn_rate(series(early + late))

    assert rate is not None
    assert rate * 60 == pytest.approx(0.5, abs=1e-12)


def test_a_jittering_reset_is_the_same_window() -> None:
    readings = [
        ForecastReading(NOW - minutes(20), 47, RESET - timedelta(seconds=1.8)),
        ForecastReading(NOW - minutes(10), 42, RESET + timedelta(seconds=1.2)),
        ForecastReading(NOW, 37, RESET),
    ]

    window, reset_at = window_readings(readings, NOW)

    assert window == readings
    assert reset_at == RESET


def test_a_reading_from_after_now_is_not_used() -> None:
    readings = [*series([(20, 47), (10, 42), (0, 37)]), ForecastReading(NOW + minutes(1), 1, RESET)]

    result = forecast(readings, now=NOW, exit_cutoff_percent=CUTOFF)

    assert result is not None
    assert result.runs_out_at == NOW + minutes(70)


def test_a_dropped_out_plan_ran_out_when_it_dropped_out_not_never_from_its_flat_tail() -> None:
    # The ladder stopped sending at the cutoff, so the readings after it are flat: that is
    # not a rate of zero, and not "no forecast".
    readings = series([(50, 10), (40, 6), (30, 2), (20, 1.5), (10, 1.5), (0, 1.5)])

    result = forecast(
        readings,
        now=NOW,
        exit_cutoff_percent=CUTOFF,
        dropped_out_since=NOW - minutes(30),
        paid=PAID,
    )

    assert result is not None
    assert result.has_run_out is True
    assert result.runs_out_at == NOW - minutes(30)
    assert result.before_reset is True
    # From now (not from the past run-out) to the reset: 240 minutes.
    assert result.paid_by_rung == ((Rung.CHEAP, Decimal("4.80")), (Rung.PREMIUM, Decimal("2.40")))
    assert result.paid_until_reset_usd == Decimal("7.20")
    assert forecast_sentence("max-2", result, NOW) == (
        "max-2 ran out about 30 min ago, 4 h before its reset; at the current mix the cheap "
        "rung takes about $4.80 and the premium rung about $2.40 until then."
    )


def test_a_dropped_out_plan_hovering_in_the_band_stays_run_out() -> None:
    # Back above the cutoff but under the re-entry floor: still out, and its rise is not
    # read as a negative rate.
    readings = series([(30, 6), (20, 1.9), (10, 2.4), (0, 2.4)])

    result = forecast(
        readings, now=NOW, exit_cutoff_percent=CUTOFF, dropped_out_since=NOW - minutes(20)
    )

    assert result is not None
    assert result.has_run_out is True
    assert result.runs_out_at == NOW - minutes(20)


def test_a_reading_at_the_cutoff_has_run_out_without_a_hysteresis_record() -> None:
    readings = series([(30, 8), (20, 4), (10, 2), (0, 1)])

    result = forecast(readings, now=NOW, exit_cutoff_percent=CUTOFF)

    assert result is not None
    assert result.has_run_out is True
    assert result.runs_out_at == NOW - minutes(10)


def test_a_drop_out_from_an_earlier_window_is_not_this_windows_run_out() -> None:
    result = forecast(
        LINEAR, now=NOW, exit_cutoff_percent=CUTOFF, dropped_out_since=NOW - minutes(300)
    )

    assert result is not None
    assert result.has_run_out is False
    assert result.runs_out_at == NOW + minutes(70)


def test_a_budget_caps_what_a_rung_is_expected_to_take() -> None:
    paid = (
        PaidPace(Rung.CHEAP, Decimal("0.02"), budget_left_usd=Decimal("1.25")),
        PaidPace(Rung.PREMIUM, Decimal("0.01"), budget_left_usd=Decimal("0")),
    )

    result = forecast(LINEAR, now=NOW, exit_cutoff_percent=CUTOFF, paid=paid)

    assert result is not None
    assert result.paid_by_rung == ((Rung.CHEAP, Decimal("1.25")), (Rung.PREMIUM, Decimal("0.00")))
    assert result.paid_until_reset_usd == Decimal("1.25")
    assert forecast_sentence("max-2", result, NOW).endswith(
        "at the current mix the cheap rung takes about $1.25 until then."
    )


def test_without_paid_traffic_nothing_paid_is_expected() -> None:
    result = forecast(LINEAR, now=NOW, exit_cutoff_percent=CUTOFF)

    assert result is not None
    assert result.paid_until_reset_usd == Decimal("0.00")
    assert result.basis == "from 6 readings over the last 50 min"
    assert forecast_sentence("max-2", result, NOW).endswith(
        "no paid rung has spent lately, so nothing paid is expected until then."
    )


def test_an_unknown_reset_gives_the_instant_but_no_before_reset_or_paid() -> None:
    readings = series([(20, 47), (10, 42), (0, 37)], reset_at=None)

    result = forecast(readings, now=NOW, exit_cutoff_percent=CUTOFF, paid=PAID)

    assert result is not None
    assert result.runs_out_at == NOW + minutes(70)
    assert result.before_reset is None
    assert result.paid_until_reset_usd is None
    assert forecast_sentence("max-2", result, NOW) == (
        "max-2 runs out in about 1 h (its reset is not known)."
    )


@pytest.mark.parametrize(
    ("before_reset", "ran_out_after", "is_closed", "outcome", "error"),
    [
        pytest.param(True, 600, False, Outcome.RAN_OUT_AS_FORECAST, 600.0, id="late-by-10-min"),
        pytest.param(True, -300, True, Outcome.RAN_OUT_AS_FORECAST, -300.0, id="early-by-5-min"),
        pytest.param(True, None, True, Outcome.DID_NOT_RUN_OUT, None, id="false-alarm"),
        pytest.param(False, 0, True, Outcome.RAN_OUT_UNFORECAST, 0.0, id="missed"),
        pytest.param(False, None, True, Outcome.HELD_AS_FORECAST, None, id="held"),
        pytest.param(True, None, False, Outcome.OPEN, None, id="open"),
    ],
)
def test_a_windows_outcome_is_judged_against_its_forecast(
    before_reset: bool,
    ran_out_after: int | None,
    is_closed: bool,
    outcome: Outcome,
    error: float | None,
) -> None:
    ran_out_at = None if ran_out_after is None else NOW + timedelta(seconds=ran_out_after)

    judged = judge(
        before_reset=before_reset, runs_out_at=NOW, ran_out_at=ran_out_at, is_closed=is_closed
    )

    assert judged == (outcome, error)


# --- windows scoped to a model: the same forecast, on each scope's readings ----------------

WEEK = NOW + timedelta(days=3)


def windowed(
    points: Sequence[tuple[float, Sequence[WindowReading]]],
) -> list[tuple[datetime, Sequence[WindowReading]]]:
    """Readings (minutes before NOW, their windows)."""
    return [(NOW - minutes(ago), windows) for ago, windows in points]


def five_hour(left: float) -> WindowReading:
    return WindowReading("five_hour", left, RESET)


def opus(left: float, reset_at: datetime = WEEK) -> WindowReading:
    return WindowReading("seven_day_opus", left, reset_at, model_scope="opus")


def test_a_scoped_linear_burn_is_forecast_from_the_scopes_window_alone() -> None:
    # The unscoped five-hour window is flat at 80 %; Opus's weekly cap burns 0.5 % a
    # minute; Sonnet's scope has two windows, the binding one (least left) flat at 60 %.
    sonnet = [
        WindowReading("seven_day_sonnet", 90.0, WEEK, model_scope="sonnet"),
        WindowReading("sonnet_daily", 60.0, RESET, model_scope="sonnet"),
    ]
    readings = windowed(
        [(ago, [five_hour(80.0), opus(left), *sonnet])
         for ago, left in ((50, 62), (40, 57), (30, 52), (20, 47), (10, 42), (0, 37))]
    )  # fmt: skip

    made = dict(scope_forecasts(readings, now=NOW, exit_cutoff_percent=CUTOFF, paid=PAID))

    assert list(made) == ["opus", "sonnet"]
    scoped = made["opus"]
    # 37 % at 0.5 % a minute: 35 points above the cutoff last 70 minutes.
    assert scoped.runs_out_at == NOW + minutes(70)
    assert scoped.before_reset is True
    assert scoped.reset_at == WEEK
    assert scoped.rate_percent_per_hour == 30.0
    assert scoped.readings_used == 6
    # From the run-out to the weekly reset: 4250 minutes at each rung's pace.
    assert scoped.paid_by_rung == (
        (Rung.CHEAP, Decimal("85.00")),
        (Rung.PREMIUM, Decimal("42.50")),
    )
    assert scoped.basis == (
        "from 6 readings over the last 50 min, and the paid rungs' spend over the last 60 min"
    )
    assert made["sonnet"].runs_out_at is None
    assert made["sonnet"].reset_at == RESET
    assert made["sonnet"].basis == "not running down (from 6 readings over the last 50 min)"
    assert forecast_sentence("Claude Max 2 (model scope opus)", scoped, NOW) == (
        "Claude Max 2 (model scope opus) runs out in about 1 h, 3 d before its reset; at the "
        "current mix the cheap rung takes about $85.00 and the premium rung about $42.50 "
        "until then."
    )


def test_a_scope_whose_reset_comes_inside_the_horizon_is_not_forecast_before_it() -> None:
    reset = NOW + minutes(30)
    readings = windowed(
        [(ago, [five_hour(80.0), opus(left, reset)]) for ago, left in ((20, 47), (10, 42), (0, 37))]
    )

    ((scope, scoped),) = scope_forecasts(readings, now=NOW, exit_cutoff_percent=CUTOFF, paid=PAID)

    assert scope == "opus"
    assert scoped.runs_out_at == NOW + minutes(70)
    assert scoped.before_reset is False
    assert scoped.paid_until_reset_usd == Decimal("0.00")
    assert forecast_sentence("max-2 (model scope opus)", scoped, NOW) == (
        "max-2 (model scope opus) runs out in about 1 h, 40 min after its reset: "
        "the reset comes first."
    )


def test_too_few_scoped_readings_give_no_forecast_whatever_the_connection_has() -> None:
    # Six readings of the connection; the Opus window only in the newest two.
    readings = windowed(
        [(50, [five_hour(80.0)]), (40, [five_hour(79.0)]), (30, [five_hour(78.0)]),
         (20, [five_hour(77.0)]), (10, [five_hour(76.0), opus(40.0)]),
         (0, [five_hour(75.0), opus(30.0)])]
    )  # fmt: skip

    ((scope, scoped),) = scope_forecasts(readings, now=NOW, exit_cutoff_percent=CUTOFF, paid=PAID)

    assert scope == "opus"
    assert scoped.runs_out_at is None
    assert scoped.before_reset is None
    assert scoped.paid_until_reset_usd is None
    assert scoped.readings_used == 2
    assert scoped.basis == "2 readings in this window, 3 needed for a forecast"


def test_a_scope_that_dropped_out_has_run_out_since_it_did() -> None:
    readings = windowed(
        [(ago, [five_hour(80.0), opus(left)]) for ago, left in ((30, 9), (20, 4), (10, 3), (0, 3))]
    )
    dropped = NOW - minutes(20)

    ((_, scoped),) = scope_forecasts(
        readings, now=NOW, exit_cutoff_percent=CUTOFF, dropped_out_since={"opus": dropped}
    )

    assert scoped.has_run_out is True
    assert scoped.runs_out_at == dropped
    assert scoped.before_reset is True


def test_scope_readings_take_each_scopes_binding_window_and_skip_the_unscoped() -> None:
    at_reset = WindowReading("seven_day_opus_b", 20.0, RESET, model_scope="opus")
    later = WindowReading("seven_day_opus_c", 20.0, WEEK, model_scope="opus")
    readings = windowed([(10, [five_hour(5.0), opus(50.0)]), (0, [at_reset, later, opus(70.0)])])

    assert scope_readings(readings) == {
        "opus": [
            ForecastReading(NOW - minutes(10), 50.0, WEEK),
            # A tie on the least left: the later reset binds.
            ForecastReading(NOW, 20.0, WEEK),
        ]
    }
