"""`GET /api/v1/forecasts` and `GET /api/v1/forecasts/outcomes`: every active plan
connection's forecast, and forecast against outcome for the last windows (JSON, or CSV
with `?format=csv`), for operators' scripts (docs/FORECASTS.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from ninja import Field, Query, Router, Schema

from ladder import services
from ladder.schemas import CONNECTION_ID_REGEX, ForecastOut
from omniroute_admin.auth import gateway_auth
from omniroute_admin.errors import GATEWAY_ERRORS

router = Router(tags=["ladder"])


class PlanForecastOut(ForecastOut):
    connection_id: str


class OutcomeOut(Schema):
    connection_id: str
    window_reset_at: datetime
    forecast_at: datetime
    runs_out_at: datetime
    before_reset: bool
    paid_until_reset_usd: float | None
    basis: str
    ran_out_at: datetime | None
    closed: bool
    outcome: Literal[
        "open",
        "ran_out_as_forecast",
        "did_not_run_out",
        "ran_out_unforecast",
        "held_as_forecast",
    ]
    error_seconds: float | None


class OutcomeQuery(Schema):
    connection_id: str | None = Field(
        default=None, pattern=CONNECTION_ID_REGEX, description="Only this connection's windows."
    )
    format: Literal["json", "csv"] = Field(
        default="json", description="`csv`: the same rows as text/csv with a header row."
    )


@router.get(
    "/forecasts", response={200: list[PlanForecastOut], **GATEWAY_ERRORS}, auth=gateway_auth
)
def list_forecasts(request: HttpRequest) -> object:
    """Every active plan connection's forecast, soonest run-out first (those without a
    run-out instant last, with the basis saying why)."""
    return [
        {"connection_id": item.connection_id, **(services.forecast_json(item) or {})}
        for item in services.plan_forecasts(now=timezone.now())
    ]


@router.get(
    "/forecasts/outcomes",
    response={200: list[OutcomeOut], **GATEWAY_ERRORS},
    auth=gateway_auth,
)
def list_outcomes(request: HttpRequest, query: Query[OutcomeQuery]) -> object:
    """Forecast against outcome for the last 10 windows of each plan connection (newest
    first per connection): each window's first forecast, whether and when it ran out,
    and the forecast's error in seconds."""
    outcomes = services.forecast_outcomes(query.connection_id)
    if query.format == "csv":
        answer = HttpResponse(
            services.outcomes_csv(outcomes), content_type="text/csv; charset=utf-8"
        )
        stamp = f"{timezone.now():%Y%m%dT%H%M%SZ}"
        answer["Content-Disposition"] = f'attachment; filename="forecast-outcomes-{stamp}.csv"'
        return answer
    return [services.outcome_json(o) for o in outcomes]
