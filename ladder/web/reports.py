"""The What-if page: the newest simulation report inside the dashboard (a run started
here, else `manage.py simulate`'s latest, else the report shipped in docs/simulation/),
and an operator's fresh run as a Celery job whose progress the page polls.

Writes: `simulation_start` (operators) queues a run, refused with a 409 while one is
queued or running; a viewer gets a 403 and nothing is queued."""

from __future__ import annotations

from typing import Any, Final

from django.contrib import messages
from django.http import Http404, HttpResponseBase
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from ladder.models import SimulationRun
from ladder.services import enqueue, ledger_replays, simulations
from ladder.web.ledger_replays import panel_context
from ladder.web.presenters import duration_text
from omniroute_admin import dashboard
from omniroute_admin.dashboard import (
    HtmxHttpRequest,
    operator_required,
    render,
    viewer_required,
)

REPORT_TEMPLATE: Final = "ladder/simulation.html"
PARTIALS: Final = ("simulation-run", "simulation-report")
# How often the page asks for a running job's progress.
PROGRESS_POLL_SECONDS: Final = 1


def _run_context(run: SimulationRun | None, **extra: Any) -> dict[str, Any]:
    now = dashboard.current_time()
    ago = duration_text((now - run.created_at).total_seconds()) if run is not None else ""
    return {
        "run": run,
        "run_ago": ago,
        "progress_poll_seconds": PROGRESS_POLL_SECONDS,
        **extra,
    }


def _report_context() -> dict[str, Any]:
    shown = simulations.shown_report()
    return {"shown": shown, "report": shown.context if shown is not None else None}


def page_context(**extra: Any) -> dict[str, Any]:
    """The whole page: the newest run's state and the report shown, and the ledger
    replay's panel."""
    return {
        **_run_context(simulations.latest_run(), **extra),
        **_report_context(),
        **panel_context(ledger_replays.latest_replay()),
    }


@require_GET
@viewer_required
def simulation_report(request: HtmxHttpRequest) -> TemplateResponse:
    """The newest report in the dashboard's layout, and the run panel."""
    return render(request, REPORT_TEMPLATE, page_context(), partials=PARTIALS)


@require_GET
@viewer_required
def simulation_progress(request: HtmxHttpRequest, run_id: int) -> TemplateResponse:
    """A run's progress (the run panel); once it succeeded, the new report comes along
    out of band so the page shows it without a reload."""
    run = SimulationRun.objects.filter(pk=run_id).first()
    if run is None:
        raise Http404("No such simulation run.")
    if not request.htmx or request.htmx.history_restore_request:
        return render(request, REPORT_TEMPLATE, page_context(), partials=PARTIALS)
    context = _run_context(run)
    if run.state == SimulationRun.State.SUCCEEDED:
        context = {**context, **_report_context(), "report_out_of_band": True}
    return render(request, REPORT_TEMPLATE, context, partials=("simulation-run",))


def _actor(request: HtmxHttpRequest) -> str:
    return str(request.user.get_username())


@require_POST
@operator_required
def simulation_start(request: HtmxHttpRequest) -> HttpResponseBase:
    """Queue a fresh run (202 for HTMX, else back to the page); a 409 while another
    run is active, a 503 when the task queue is unreachable (the run shows why)."""
    try:
        run = simulations.start_simulation(
            _actor(request),
            send=enqueue.send_simulation,
            now=dashboard.current_time(),
            days=simulations.DASHBOARD_DAYS,
            requests_per_weekday=simulations.DASHBOARD_REQUESTS_PER_WEEKDAY,
        )
    except simulations.SimulationBusy as busy:
        other = busy.run
        message = (
            f"A simulation is already {other.state} (started by {other.requested_by}, "
            f"{duration_text((dashboard.current_time() - other.created_at).total_seconds())}"
            " ago): wait for it to finish, then start another."
        )
        if not request.htmx:
            messages.error(request, message)
            return redirect(reverse("ladder:simulation-report"))
        return render(
            request,
            REPORT_TEMPLATE,
            _run_context(other, refusal=message),
            partials=("simulation-run",),
            status=409,
        )
    failed = run.state == SimulationRun.State.FAILED
    if not request.htmx:
        if failed:
            messages.error(request, run.error)
        else:
            messages.success(request, "Simulation started: its progress shows below.")
        return redirect(reverse("ladder:simulation-report"))
    return render(
        request,
        REPORT_TEMPLATE,
        _run_context(run, is_started=True),
        partials=("simulation-run",),
        status=503 if failed else 202,
    )
