"""`POST /api/v1/what-if/ledger-replays` and `GET /api/v1/what-if/ledger-replays/{run_id}`
(JSON, or CSV with `?format=csv`): "what a different purchase would have saved", a past
period's recorded requests replayed as bought and with one change, for operators'
scripts (docs/FORECASTS.md). Starting one is an operator's write; reading one a
gateway-scope read."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from ninja import Field, Query, Router, Schema
from ninja.responses import Status
from pydantic import ConfigDict

from ladder.models import LedgerReplayRun
from ladder.schemas import CONNECTION_ID_REGEX
from ladder.services import enqueue, ledger_replays
from omniroute_admin.auth import actor_of, gateway_auth, operator_auth
from omniroute_admin.errors import BODY_ERRORS, GATEWAY_ERRORS, OPERATOR_ERRORS, ErrorOut

router = Router(tags=["what-if"])


class BudgetsIn(Schema):
    cheap: float | None = Field(default=None, ge=0, le=1_000_000)
    premium: float | None = Field(default=None, ge=0, le=1_000_000)

    model_config = ConfigDict(extra="forbid")


class LedgerReplayIn(Schema):
    period_start: datetime = Field(description="The period's first instant (in the past).")
    period_end: datetime = Field(description="The instant after its last (at most 92 days on).")
    add_seat_like: str | None = Field(
        default=None,
        pattern=CONNECTION_ID_REGEX,
        description="One more plan seat, measured like this active plan connection.",
    )
    remove_seat: str | None = Field(
        default=None, pattern=CONNECTION_ID_REGEX, description="One seat fewer: this one."
    )
    budgets: BudgetsIn | None = Field(
        default=None,
        description="A budget per paid rung for the whole period (a rung left out keeps "
        "the settings'; null: no budget).",
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "period_start": "2026-11-01T00:00:00Z",
                    "period_end": "2026-11-29T00:00:00Z",
                    "add_seat_like": "claude-max-1",
                }
            ]
        },
    )


class FiguresOut(Schema):
    paid_usd: float
    paid_cheap_usd: float
    paid_premium_usd: float
    saved_usd: float
    plan_requests: int
    paid_requests: int
    empty_subscription_requests: int
    unserved_requests: int


class SeatOut(Schema):
    seat_id: str
    provider: str
    capacity_usd: float
    window_hours: float
    used_percent: float
    basis: str


class ReplayResultOut(Schema):
    requests: int
    skipped_requests: int
    recorded_paid_usd: float
    recorded_saved_usd: float
    as_bought: FiguresOut
    changed: FiguresOut
    seats: list[SeatOut]
    sentence: str


class LedgerReplayOut(Schema):
    id: int
    state: Literal["queued", "running", "succeeded", "failed"]
    requested_by: str
    created_at: datetime
    finished_at: datetime | None
    period_start: datetime
    period_end: datetime
    change: str
    progress_done: int
    progress_total: int
    stage: str
    error: str
    result: ReplayResultOut | None


class ReplayQuery(Schema):
    format: Literal["json", "csv"] = Field(
        default="json", description="`csv`: the result's table as text/csv (once finished)."
    )


def _figures(stored: dict[str, Any]) -> dict[str, Any]:
    return {key: float(value) if key.endswith("_usd") else value for key, value in stored.items()}


def replay_json(run: LedgerReplayRun) -> dict[str, Any]:
    """One replay as the API answers it."""
    stored = run.result
    result = None
    if stored is not None:
        result = {
            "requests": stored["requests"],
            "skipped_requests": stored["skipped_requests"],
            "recorded_paid_usd": float(stored["recorded"]["paid_usd"]),
            "recorded_saved_usd": float(stored["recorded"]["saved_usd"]),
            "as_bought": _figures(stored["as_bought"]),
            "changed": _figures(stored["changed"]),
            "seats": [
                {**seat, "capacity_usd": float(seat["capacity_usd"])} for seat in stored["seats"]
            ],
            "sentence": ledger_replays.result_sentence(stored),
        }
    return {
        "id": run.pk,
        "state": run.state,
        "requested_by": run.requested_by,
        "created_at": run.created_at,
        "finished_at": run.finished_at,
        "period_start": run.period_start,
        "period_end": run.period_end,
        "change": ledger_replays.change_text(run.change),
        "progress_done": run.progress_done,
        "progress_total": run.progress_total,
        "stage": run.stage,
        "error": run.error,
        "result": result,
    }


@router.post(
    "/what-if/ledger-replays",
    response={202: LedgerReplayOut, 409: ErrorOut, **BODY_ERRORS, **OPERATOR_ERRORS},
    auth=operator_auth,
)
def start_ledger_replay(request: HttpRequest, payload: LedgerReplayIn) -> Any:
    """Queue a ledger replay of a past period with one change (a seat more, a seat fewer,
    a budget per rung): 202 with the run to poll; 409 while another replay is queued or
    running; 503 when the task queue cannot be reached (nothing runs)."""
    budgets = None
    if payload.budgets is not None:
        budgets = {
            k: None if v is None else str(v)
            for k, v in payload.budgets.model_dump(exclude_unset=True).items()
        }
    ask = ledger_replays.ReplayAsk(
        payload.period_start,
        payload.period_end,
        add_seat_like=payload.add_seat_like,
        remove_seat=payload.remove_seat,
        budgets=budgets,
    )
    try:
        run = ledger_replays.start_replay(
            ask, actor_of(request), send=enqueue.send_ledger_replay, now=timezone.now()
        )
    except ledger_replays.ReplayError as error:
        return Status(422, {"detail": str(error)})
    except ledger_replays.ReplayBusy as busy:
        return Status(
            409,
            {"detail": f"Ledger replay {busy.run.pk} is {busy.run.state}: wait for it to finish."},
        )
    if run.state == LedgerReplayRun.State.FAILED:
        return Status(503, {"detail": run.error})
    return Status(202, replay_json(run))


@router.get(
    "/what-if/ledger-replays/{run_id}",
    response={200: LedgerReplayOut, 404: ErrorOut, 409: ErrorOut, **GATEWAY_ERRORS},
    auth=gateway_auth,
)
def get_ledger_replay(request: HttpRequest, run_id: int, query: Query[ReplayQuery]) -> Any:
    """A ledger replay's state and progress and, once finished, both runs' figures
    (as bought and with the change), the seats as measured and the answer in words;
    `?format=csv`: the figures' table (409 until it has finished)."""
    run = ledger_replays.replay_run(run_id)
    if run is None:
        return Status(404, {"detail": f"No ledger replay {run_id}."})
    if query.format == "csv":
        if run.result is None:
            return Status(409, {"detail": f"Ledger replay {run_id} is {run.state}: no result yet."})
        answer = HttpResponse(
            ledger_replays.result_csv(run.result), content_type="text/csv; charset=utf-8"
        )
        answer["Content-Disposition"] = f'attachment; filename="ledger-replay-{run_id}.csv"'
        return answer
    return replay_json(run)
