"""The What-if page's ledger replay ("what a different purchase would have saved",
docs/FORECASTS.md): the form that starts one (a past period of UTC days and one change),
its progress polled while a worker runs it, and its report page with the CSV download.

Writes: `ledger_replay_start` (operators) queues a replay; a bad ask re-renders the form
with its error (422), another replay active is a 409, a viewer gets a 403. Nothing here
computes: the service validates, the task runs, the page shows what the run row holds."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Final

from django import forms
from django.http import Http404, HttpResponse, HttpResponseBase
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from ladder.models import LedgerReplayRun
from ladder.services import enqueue, ledger_replays
from ladder.web.presenters import duration_text
from omniroute_admin import dashboard
from omniroute_admin.dashboard import HtmxHttpRequest, operator_required, render, viewer_required

PAGE_TEMPLATE: Final = "ladder/ledger_replay.html"
PARTIALS: Final = ("ledger-replay",)
PROGRESS_POLL_SECONDS: Final = 1


class LedgerReplayForm(forms.Form):
    """A period of whole UTC days (the last day included) and one change."""

    first_day = forms.DateField(
        label="From (UTC day)", widget=forms.DateInput(attrs={"type": "date"})
    )
    last_day = forms.DateField(
        label="To (UTC day, included)", widget=forms.DateInput(attrs={"type": "date"})
    )
    add_seat_like = forms.ChoiceField(label="One more seat like", required=False)
    remove_seat = forms.ChoiceField(label="One seat fewer", required=False)
    cheap_budget = forms.DecimalField(
        label="Cheap rung budget for the period (USD)",
        required=False,
        min_value=Decimal(0),
        max_value=Decimal(1_000_000),
        decimal_places=2,
    )
    premium_budget = forms.DecimalField(
        label="Premium rung budget for the period (USD)",
        required=False,
        min_value=Decimal(0),
        max_value=Decimal(1_000_000),
        decimal_places=2,
    )

    def __init__(self, *args: Any, seats: list[str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choices = [("", "none"), *((seat, seat) for seat in seats)]
        for name in ("add_seat_like", "remove_seat"):
            field = self.fields[name]
            assert isinstance(field, forms.ChoiceField)
            field.choices = choices

    def ask(self) -> ledger_replays.ReplayAsk:
        """The replay asked for (the service validates it)."""
        data = self.cleaned_data
        budgets = {
            rung: data[f"{rung}_budget"]
            for rung in ("cheap", "premium")
            if data.get(f"{rung}_budget") is not None
        }
        return ledger_replays.ReplayAsk(
            datetime.combine(data["first_day"], time(), tzinfo=UTC),
            datetime.combine(data["last_day"] + timedelta(days=1), time(), tzinfo=UTC),
            add_seat_like=data["add_seat_like"] or None,
            remove_seat=data["remove_seat"] or None,
            budgets=budgets,
        )


def _initial(now: datetime) -> dict[str, Any]:
    """The last seven whole UTC days."""
    today = now.date()
    return {"first_day": today - timedelta(days=7), "last_day": today - timedelta(days=1)}


def _result(run: LedgerReplayRun | None) -> dict[str, Any]:
    if run is None or run.result is None:
        return {}
    return {
        "replay_rows": ledger_replays.figure_rows(run.result),
        "replay_sentence": ledger_replays.result_sentence(run.result),
        "replay_result": run.result,
    }


def panel_context(
    run: LedgerReplayRun | None, form: LedgerReplayForm | None = None, **extra: Any
) -> dict[str, Any]:
    """The panel: the form, the newest replay's state and, once done, its figures."""
    now = dashboard.current_time()
    return {
        "replay": run,
        "replay_ago": duration_text((now - run.created_at).total_seconds()) if run else "",
        "replay_form": form
        or LedgerReplayForm(initial=_initial(now), seats=ledger_replays.plan_seat_ids()),
        "replay_poll_seconds": PROGRESS_POLL_SECONDS,
        **_result(run),
        **extra,
    }


def _run(run_id: int) -> LedgerReplayRun:
    run = ledger_replays.replay_run(run_id)
    if run is None:
        raise Http404("No such ledger replay.")
    return run


@require_GET
@viewer_required
def ledger_replay_page(request: HtmxHttpRequest, run_id: int) -> TemplateResponse:
    """A replay's report page; for the panel's poll (HTMX) the panel alone."""
    run = _run(run_id)
    return render(request, PAGE_TEMPLATE, panel_context(run), partials=PARTIALS)


@require_GET
@viewer_required
def ledger_replay_csv(request: HtmxHttpRequest, run_id: int) -> HttpResponse:
    """A finished replay's figures as CSV (404 until it has them)."""
    run = _run(run_id)
    if run.result is None:
        raise Http404("This ledger replay has no result yet.")
    answer = HttpResponse(
        ledger_replays.result_csv(run.result), content_type="text/csv; charset=utf-8"
    )
    answer["Content-Disposition"] = f'attachment; filename="ledger-replay-{run.pk}.csv"'
    return answer


@require_POST
@operator_required
def ledger_replay_start(request: HtmxHttpRequest) -> HttpResponseBase:
    """Queue a replay: 202 with the panel following it (HTMX), else back to the page;
    422 with the form's errors, 409 while another replay is active, 503 when the task
    queue is unreachable (the run says why)."""
    seats = ledger_replays.plan_seat_ids()
    form = LedgerReplayForm(request.POST, seats=seats)
    latest = ledger_replays.latest_replay()
    if not form.is_valid():
        return _answer(request, panel_context(latest, form), 422)
    try:
        run = ledger_replays.start_replay(
            form.ask(),
            str(request.user.get_username()),
            send=enqueue.send_ledger_replay,
            now=dashboard.current_time(),
        )
    except ledger_replays.ReplayError as error:
        form.add_error(None, str(error))
        return _answer(request, panel_context(latest, form), 422)
    except ledger_replays.ReplayBusy as busy:
        message = (
            f"Ledger replay {busy.run.pk} is already {busy.run.state} (started by "
            f"{busy.run.requested_by}): wait for it to finish, then start another."
        )
        return _answer(request, panel_context(busy.run, form, replay_refusal=message), 409)
    failed = run.state == LedgerReplayRun.State.FAILED
    return _answer(request, panel_context(run, is_started=True), 503 if failed else 202)


def _answer(request: HtmxHttpRequest, context: dict[str, Any], status: int) -> HttpResponseBase:
    if not request.htmx and status < 400:
        return redirect(reverse("ladder:ledger-replay", args=[context["replay"].pk]))
    return render(request, PAGE_TEMPLATE, context, partials=PARTIALS, status=status)
