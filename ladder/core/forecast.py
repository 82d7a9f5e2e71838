"""Forecasts, pure: when a plan connection's binding window runs out at the current pace,
whether that is before its reset, and what the paid rungs are expected to take until
then (spec/ladder.md, "Forecasts: what happens next, in money").

No Django, no clock, no IO: the shell hands in the connection's readings, its hysteresis,
the exit cutoff that applies to it, the paid rungs' recent pace from the ledger and
`now`, and gets a frozen `Forecast` back.

The rules, each on purpose:

- Only the readings of the current window count: those that name the newest reading's
  reset (within `SAME_WINDOW_TOLERANCE`: providers recompute a reset on every response,
  by up to about 2 s) and none from after `now`. A window whose reset has passed has no
  forecast: its readings describe a window that no longer exists.
- The pace is the least-squares slope of the last `MAX_READINGS` readings of the window:
  smoothed, so one reading rounded up or down does not swing the forecast.
- No forecast from fewer than `MIN_READINGS` readings, and none when the smoothed rate is
  not positive (a plan that is not running down has no run-out instant).
- "Runs out" means the ladder stops using the plan: its remaining reaches the exit
  cutoff. A connection that has dropped out has run out already, at the instant it did,
  whatever its readings do after that (they stay flat, because the ladder sends nothing,
  or hover in the hysteresis band): the flat tail is not a rate of zero.
- The paid spend expected until the reset is each paid rung's recent spend per minute
  times the minutes from the run-out (or now, if later) to the reset, capped by what the
  rung's budget still allows (a budget stops the rung): the current mix of paid traffic.
- A window scoped to a model (spec/ladder.md, "Windows scoped to a model") is forecast
  by the same `forecast`, on the scope's own readings: at each reading that carries
  windows of the scope, the scope's binding window among them (`scope_readings`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from enum import StrEnum
from typing import Final

from ladder.core.prose import instant_text, money_text
from ladder.core.quota import binding_reading
from ladder.core.types import Rung, WindowReading

MIN_READINGS: Final = 3
MAX_READINGS: Final = 12
# A reset that moved by less than this is the same window (jitter, not a rollover).
SAME_WINDOW_TOLERANCE: Final = timedelta(seconds=60)
_CENT: Final = Decimal("0.01")


@dataclass(frozen=True, slots=True)
class ForecastReading:
    """One reading of a connection's binding window: when, how much was left, its reset."""

    checked_at: datetime
    remaining_percent: float | None
    reset_at: datetime | None


@dataclass(frozen=True, slots=True)
class PaidPace:
    """One paid rung's recent spend per minute (from the ledger) and what its budget
    still allows in the current budget window (None: no budget)."""

    rung: Rung
    usd_per_minute: Decimal
    budget_left_usd: Decimal | None = None


@dataclass(frozen=True, slots=True)
class Forecast:
    """What happens next to one plan connection's binding window.

    `runs_out_at` is None when there is no forecast (too few readings, not running down,
    a window past its reset); `basis` always says why, or what the forecast rests on.
    """

    runs_out_at: datetime | None
    before_reset: bool | None
    reset_at: datetime | None
    paid_until_reset_usd: Decimal | None
    paid_by_rung: tuple[tuple[Rung, Decimal], ...]
    readings_used: int
    rate_percent_per_hour: float | None
    has_run_out: bool
    basis: str


def window_readings(
    readings: Sequence[ForecastReading], now: datetime
) -> tuple[list[ForecastReading], datetime | None]:
    """The readings of the current window, oldest first, and that window's reset: the
    readings (with a remaining percent, none after `now`) that name the newest one's
    reset within `SAME_WINDOW_TOLERANCE`."""
    known = sorted(
        (r for r in readings if r.remaining_percent is not None and r.checked_at <= now),
        key=lambda r: r.checked_at,
    )
    if not known:
        return [], None
    reset_at = known[-1].reset_at
    # Back from the newest: the window starts after the last reading that named another
    # reset (a rollover, or the binding window changing from one window to another).
    start = len(known)
    while start > 0 and _same_window(known[start - 1].reset_at, reset_at):
        start -= 1
    return known[start:], reset_at


def _same_window(reset_at: datetime | None, other: datetime | None) -> bool:
    if reset_at is None or other is None:
        return reset_at is other
    return abs(reset_at - other) < SAME_WINDOW_TOLERANCE


def burn_rate(readings: Sequence[ForecastReading]) -> float | None:
    """The smoothed pace in percent per second, positive when the plan runs down: the
    least-squares slope of the last `MAX_READINGS` readings (None from fewer than
    `MIN_READINGS`, or when they share one instant)."""
    used = [r for r in readings if r.remaining_percent is not None][-MAX_READINGS:]
    if len(used) < MIN_READINGS:
        return None
    origin = used[0].checked_at
    xs = [(r.checked_at - origin).total_seconds() for r in used]
    ys = [float(r.remaining_percent) for r in used if r.remaining_percent is not None]
    mean_x = math.fsum(xs) / len(xs)
    mean_y = math.fsum(ys) / len(ys)
    spread = math.fsum((x - mean_x) ** 2 for x in xs)
    if spread == 0:
        return None
    slope = math.fsum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread
    return -slope


def forecast(
    readings: Sequence[ForecastReading],
    *,
    now: datetime,
    exit_cutoff_percent: float,
    dropped_out_since: datetime | None = None,
    paid: Sequence[PaidPace] = (),
    paid_lookback_minutes: int = 60,
) -> Forecast | None:
    """The forecast of one plan connection's binding window (None: no reading at all)."""
    window, reset_at = window_readings(readings, now)
    if not window:
        return None
    if reset_at is not None and reset_at <= now:
        return _none(
            reset_at,
            len(window),
            f"the window of the last reading reset at {instant_text(reset_at)}; "
            "no forecast until readings of the new window arrive",
        )
    used = window[-MAX_READINGS:]
    span = _minutes_text((now - used[0].checked_at).total_seconds())
    basis = f"from {len(used)} reading{'s' if len(used) != 1 else ''} over the last {span}"
    ran_out_at = _ran_out_at(window, exit_cutoff_percent, dropped_out_since)
    if ran_out_at is not None:
        return _with_paid(
            ran_out_at, reset_at, len(used), None, True, basis, now, paid, paid_lookback_minutes
        )
    if len(window) < MIN_READINGS:
        return _none(
            reset_at,
            len(window),
            f"{len(window)} reading{'s' if len(window) != 1 else ''} in this window, "
            f"{MIN_READINGS} needed for a forecast",
        )
    rate = burn_rate(used)
    if rate is None or rate <= 0:
        return _none(reset_at, len(used), f"not running down ({basis})")
    newest = used[-1]
    assert newest.remaining_percent is not None  # window_readings keeps only known values
    seconds_left = (newest.remaining_percent - exit_cutoff_percent) / rate
    runs_out_at = newest.checked_at + timedelta(seconds=round(seconds_left))
    return _with_paid(
        runs_out_at,
        reset_at,
        len(used),
        rate * 3600,
        False,
        basis,
        now,
        paid,
        paid_lookback_minutes,
    )


def scope_readings(
    readings: Iterable[tuple[datetime, Sequence[WindowReading]]],
) -> dict[str, list[ForecastReading]]:
    """Each model scope's readings, from (checked_at, windows) pairs: at each reading that
    carries windows of the scope, the scope's binding window among them (least remaining;
    ties, the later reset), as the ladder judges the scope."""
    by_scope: dict[str, list[ForecastReading]] = {}
    for checked_at, windows in readings:
        grouped: dict[str, list[WindowReading]] = {}
        for window in windows:
            if window.model_scope is not None:
                unscoped = WindowReading(window.name, window.remaining_percent, window.reset_at)
                grouped.setdefault(window.model_scope, []).append(unscoped)
        for scope, scoped in grouped.items():
            binding = binding_reading(scoped)
            if binding is not None:
                by_scope.setdefault(scope, []).append(
                    ForecastReading(checked_at, binding.remaining_percent, binding.reset_at)
                )
    return by_scope


def scope_forecasts(
    readings: Iterable[tuple[datetime, Sequence[WindowReading]]],
    *,
    now: datetime,
    exit_cutoff_percent: float,
    dropped_out_since: Mapping[str, datetime] | None = None,
    paid: Sequence[PaidPace] = (),
    paid_lookback_minutes: int = 60,
) -> tuple[tuple[str, Forecast], ...]:
    """Each model scope's forecast, sorted by scope: `forecast` on the scope's readings,
    with the scope's own drop-out (its hysteresis is kept per scope)."""
    dropped = dropped_out_since or {}
    made = []
    for scope, scoped in sorted(scope_readings(readings).items()):
        result = forecast(
            scoped,
            now=now,
            exit_cutoff_percent=exit_cutoff_percent,
            dropped_out_since=dropped.get(scope),
            paid=paid,
            paid_lookback_minutes=paid_lookback_minutes,
        )
        if result is not None:
            made.append((scope, result))
    return tuple(made)


def _ran_out_at(
    window: Sequence[ForecastReading], cutoff: float, dropped_out_since: datetime | None
) -> datetime | None:
    """When the ladder stopped using the plan in this window, if it has: it dropped out
    (the hysteresis keeps it out while it hovers under the re-entry floor), or its newest
    reading is at or under the cutoff (the first such reading of the run)."""
    if dropped_out_since is not None and dropped_out_since >= window[0].checked_at:
        return dropped_out_since
    newest = window[-1]
    if newest.remaining_percent is None or newest.remaining_percent > cutoff:
        return None
    first = newest.checked_at
    for reading in reversed(window):
        if reading.remaining_percent is None or reading.remaining_percent > cutoff:
            break
        first = reading.checked_at
    return first


def _none(reset_at: datetime | None, count: int, basis: str) -> Forecast:
    return Forecast(
        runs_out_at=None,
        before_reset=None,
        reset_at=reset_at,
        paid_until_reset_usd=None,
        paid_by_rung=(),
        readings_used=count,
        rate_percent_per_hour=None,
        has_run_out=False,
        basis=basis,
    )


def _with_paid(
    runs_out_at: datetime,
    reset_at: datetime | None,
    count: int,
    rate_per_hour: float | None,
    has_run_out: bool,
    basis: str,
    now: datetime,
    paid: Sequence[PaidPace],
    lookback_minutes: int,
) -> Forecast:
    before_reset = None if reset_at is None else runs_out_at < reset_at
    by_rung: tuple[tuple[Rung, Decimal], ...] = ()
    total: Decimal | None = None
    if before_reset is True and reset_at is not None:
        minutes = Decimal(str((reset_at - max(runs_out_at, now)).total_seconds())) / 60
        by_rung = tuple(
            (pace.rung, _expected(pace, max(minutes, Decimal(0))))
            for pace in sorted(paid, key=lambda p: p.rung)
        )
        total = sum((usd for _, usd in by_rung), Decimal(0)).quantize(_CENT)
        if paid:
            basis += f", and the paid rungs' spend over the last {lookback_minutes} min"
    elif before_reset is False:
        total = Decimal("0.00")
    return Forecast(
        runs_out_at=runs_out_at,
        before_reset=before_reset,
        reset_at=reset_at,
        paid_until_reset_usd=total,
        paid_by_rung=by_rung,
        readings_used=count,
        rate_percent_per_hour=rate_per_hour,
        has_run_out=has_run_out,
        basis=basis,
    )


def _expected(pace: PaidPace, minutes: Decimal) -> Decimal:
    usd = max(pace.usd_per_minute, Decimal(0)) * minutes
    if pace.budget_left_usd is not None:
        usd = min(usd, max(pace.budget_left_usd, Decimal(0)))
    return usd.quantize(_CENT, rounding=ROUND_HALF_UP)


# --------------------------------------------------------------------------- prose


def _minutes_text(seconds: float) -> str:
    """A span in whole minutes (at least 1): "52 min"."""
    return f"{max(1, round(seconds / 60))} min"


def about_text(seconds: float) -> str:
    """A span for a sentence that says "about": minutes under an hour, then hours, then
    days ("40 min", "3 h", "2 d")."""
    seconds = abs(seconds)
    if seconds < 3600 - 30:
        return _minutes_text(seconds)
    if seconds < 48 * 3600:
        return f"{round(seconds / 3600)} h"
    return f"{round(seconds / 86400)} d"


def forecast_sentence(name: str, result: Forecast, now: datetime) -> str:
    """The sentence an operator reads ("Claude Max 2 runs out in about 40 min, 3 h before
    its reset; at the current mix the cheap rung takes about $3.10 until then")."""
    if result.runs_out_at is None:
        return f"No forecast for {name}: {result.basis}."
    out = result.runs_out_at
    if result.has_run_out:
        head = f"{name} ran out about {about_text((now - out).total_seconds())} ago"
    elif out <= now:
        head = f"{name} is running out now"
    else:
        head = f"{name} runs out in about {about_text((out - now).total_seconds())}"
    if result.reset_at is None:
        return f"{head} (its reset is not known)."
    gap = about_text((result.reset_at - out).total_seconds())
    if result.before_reset is False:
        return f"{head}, {gap} after its reset: the reset comes first."
    return f"{head}, {gap} before its reset; {_paid_text(result)}."


def _paid_text(result: Forecast) -> str:
    taking = [(rung, usd) for rung, usd in result.paid_by_rung if usd > 0]
    if not taking:
        return "no paid rung has spent lately, so nothing paid is expected until then"
    parts = [f"the {rung.label} rung about ${money_text(usd)}" for rung, usd in taking]
    first = parts[0].replace(" about ", " takes about ", 1)
    rest = parts[1:]
    joined = first if not rest else f"{first} and {' and '.join(rest)}"
    return f"at the current mix {joined} until then"


# --------------------------------------------------------------------------- outcomes


class Outcome(StrEnum):
    """What happened to a window, against its first forecast."""

    OPEN = "open"  # the window has not ended and has not run out: no outcome yet
    RAN_OUT_AS_FORECAST = "ran_out_as_forecast"  # forecast before its reset, and it did
    DID_NOT_RUN_OUT = "did_not_run_out"  # forecast before its reset; the reset came first
    RAN_OUT_UNFORECAST = "ran_out_unforecast"  # forecast after its reset, yet it ran out
    HELD_AS_FORECAST = "held_as_forecast"  # forecast after its reset, and it held

    @property
    def text(self) -> str:
        """What happened, in words."""
        return _OUTCOME_TEXT[self]


_OUTCOME_TEXT: Final = {
    Outcome.OPEN: "no outcome yet",
    Outcome.RAN_OUT_AS_FORECAST: "ran out before its reset, as forecast",
    Outcome.DID_NOT_RUN_OUT: "forecast to run out, but the reset came first",
    Outcome.RAN_OUT_UNFORECAST: "ran out, though forecast to last to its reset",
    Outcome.HELD_AS_FORECAST: "lasted to its reset, as forecast",
}


def judge(
    *, before_reset: bool, runs_out_at: datetime, ran_out_at: datetime | None, is_closed: bool
) -> tuple[Outcome, float | None]:
    """A window's outcome against its forecast, and the forecast's error in seconds
    (positive: it ran out later than forecast; None: it did not run out)."""
    if ran_out_at is not None:
        error = (ran_out_at - runs_out_at).total_seconds()
        outcome = Outcome.RAN_OUT_AS_FORECAST if before_reset else Outcome.RAN_OUT_UNFORECAST
        return outcome, error
    if not is_closed:
        return Outcome.OPEN, None
    return (Outcome.DID_NOT_RUN_OUT if before_reset else Outcome.HELD_AS_FORECAST), None
