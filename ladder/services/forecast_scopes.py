"""Forecasts per model scope, the shell's part (docs/FORECASTS.md, "Per model scope"):
the scoped windows of the stored readings, each scope's drop-out from the connection's
stored model scopes, and the pure `ladder.core.forecast.scope_forecasts` called on them
with the connection's cutoff and paid pace. No query: `ladder.services.forecasts` hands in
the rows it has loaded."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ladder.core import HysteresisState, WindowReading
from ladder.core.forecast import Forecast, PaidPace, forecast_sentence, scope_forecasts
from ladder.services.loading import scoped_of


@dataclass(frozen=True, slots=True)
class ScopeForecast:
    """One model scope's forecast on a plan connection (spec/ladder.md, "Windows scoped
    to a model"), with its sentence ("Team Max (model scope opus) runs out in ...")."""

    model_scope: str
    forecast: Forecast
    sentence: str


def scoped_windows(data: Any) -> list[WindowReading]:
    """The scoped windows of a stored reading (`QuotaReading.windows`)."""
    windows = []
    for window in data if isinstance(data, list) else ():
        scope = window.get("model_scope") if isinstance(window, dict) else None
        if scope is None:
            continue
        reset = window.get("reset_at")
        windows.append(
            WindowReading(
                str(window.get("name", "")),
                window.get("remaining_percent"),
                datetime.fromisoformat(reset) if isinstance(reset, str) and reset else None,
                str(scope),
            )
        )
    return windows


def scopes_dropped_out(scoped_state: Any) -> dict[str, datetime]:
    """Since when each model scope that has dropped out has (the connection's stored
    `scoped_state`: hysteresis is kept per scope)."""
    return {
        entry.model_scope: entry.hysteresis.since
        for entry in scoped_of(scoped_state, None)
        if entry.hysteresis.state == HysteresisState.DROPPED_OUT
        and entry.hysteresis.since is not None
    }


def scope_name(name: str, model_scope: str) -> str:
    """The name a scope's sentence uses: "Team Max (model scope opus)"."""
    return f"{name} (model scope {model_scope})"


def forecasts_per_scope(
    windows: Sequence[tuple[datetime, Sequence[WindowReading]]],
    *,
    name: str,
    now: datetime,
    exit_cutoff_percent: float,
    dropped_out_since: Mapping[str, datetime],
    paces: Sequence[PaidPace],
    lookback_minutes: int,
) -> tuple[ScopeForecast, ...]:
    """Each model scope's forecast and sentence, sorted by scope: the same forecast as
    the connection's, on the scope's own readings (its reserve is the connection's, as
    the ladder judges the scope)."""
    return tuple(
        ScopeForecast(scope, made, forecast_sentence(scope_name(name, scope), made, now))
        for scope, made in scope_forecasts(
            windows,
            now=now,
            exit_cutoff_percent=exit_cutoff_percent,
            dropped_out_since=dropped_out_since,
            paid=paces,
            paid_lookback_minutes=lookback_minutes,
        )
    )
