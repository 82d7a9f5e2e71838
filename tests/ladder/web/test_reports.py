"""The What-if page: the shipped report inside the dashboard until a simulation runs,
in plain words; an operator's fresh run as a job (queued, progress recorded, the report
shown when done, a failure said plainly, a second run refused); a viewer reads only."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from ladder import tasks
from ladder.models import SimulationRun
from ladder.services import enqueue, simulations
from omniroute_admin import dashboard
from tests.ladder.factories import NOW
from tests.pages import parse
from tests.worlds import htmx_headers, signed_in

pytestmark = pytest.mark.django_db

SHIPPED_FIRST_FINDING = (
    "Thrifty (this product) paid $21.22, served 20,174 of 22,633 requests and refused "
    "2,459 (10.9 %). Upstreams turned away 20 attempts because a plan was used up (each "
    "request then went on to the next connection)."
)


@pytest.fixture(autouse=True)
def _pinned(
    monkeypatch: pytest.MonkeyPatch, settings: pytest.FixtureRequest, tmp_path: Path
) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)
    settings.VAR_DIR = tmp_path  # type: ignore[attr-defined]  # no command report
    # A dashboard run replays one short day (the default week takes seconds).
    monkeypatch.setattr(simulations, "DASHBOARD_DAYS", 1)
    monkeypatch.setattr(simulations, "DASHBOARD_REQUESTS_PER_WEEKDAY", 200)


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The run ids the page queued (the broker is not involved)."""
    ids: list[int] = []
    monkeypatch.setattr(enqueue, "send_simulation", ids.append)
    return ids


@pytest.fixture
def operator(client: Client) -> Client:
    return signed_in(client, "olga", "operator")


@pytest.fixture
def viewer(client: Client) -> Client:
    return signed_in(client, "vera", "viewer")


def _start(client: Client) -> object:
    return client.post("/reports/simulation/run/", headers=htmx_headers("simulation-run"))


# --- the shipped report ---------------------------------------------------------------------


def test_without_a_run_the_page_shows_the_shipped_report_inside_the_dashboard(
    viewer: Client,
) -> None:
    response = viewer.get("/reports/simulation/")

    assert response.status_code == 200
    page = parse(response.content)
    current = [a.text for a in page.by_id("main-nav").by_tag("a") if a.attrs.get("aria-current")]
    assert current == ["What-if report"]
    assert page.by_id("report-origin").text == (
        "The report shipped with OmniRoute Admin (docs/simulation/): the demo world of "
        "manage.py seed_demo, not this installation's data. An operator can run one on "
        "this installation's data."
    )
    findings = [li.text for li in page.by_class("sim-findings")[0].by_tag("li")]
    assert findings[0] == SHIPPED_FIRST_FINDING
    assert len(findings) == 4
    assert "No simulation has been run from the dashboard yet." in page.by_id("simulation-run").text


def test_the_report_speaks_plainly_no_jargon_in_its_labels(viewer: Client) -> None:
    page = parse(viewer.get("/reports/simulation/").content)
    report = page.by_id("simulation-report")
    headers = [th.text for th in report.by_class("sim-table")[0].by_tag("thead")[0].by_tag("th")]
    policies = [
        th.text
        for th in report.by_class("sim-table")[0].find_all(
            lambda e: e.tag == "th" and e.attrs.get("scope") == "row"
        )
    ]

    assert headers == [
        "Policy",
        "Paid (USD)",
        "Requests refused",
        "Requests paid for",
        "Paid although a plan had quota left",
        "Paid while a plan was refilling",
        "Plan resets",
        "Seconds still paying after a reset (median / longest)",
        "Rung changes per hour",
        "Refusals by upstreams (429)",
    ]
    assert policies == [
        "Thrifty (this product)",
        "Plans only",
        "Cheapest price first",
        "Thrifty, earlier design",
    ]
    for jargon in ("original-design", "paid w/", "in band", "flips/h", "subscription-only"):
        assert jargon not in report.text


def test_the_page_holds_no_style_attribute_so_the_dashboard_csp_applies(viewer: Client) -> None:
    page = parse(viewer.get("/reports/simulation/").content)

    assert page.find_all(lambda e: "style" in e.attrs) == []
    assert page.by_tag("script") != []  # the dashboard's own scripts, from files
    assert all("src" in script.attrs for script in page.by_tag("script"))


def test_the_report_fragment_answers_an_htmx_request(viewer: Client) -> None:
    page = viewer.get("/reports/simulation/")
    fragment = viewer.get("/reports/simulation/", headers=htmx_headers("simulation-report"))

    body = fragment.content.decode()
    assert fragment.status_code == 200
    assert "<html" not in body
    assert body.lstrip().startswith('<section id="simulation-report" class="sim-report"')
    assert SHIPPED_FIRST_FINDING in parse(body).text
    assert fragment["Vary"] == page["Vary"]
    assert "HX-Request" in fragment["Vary"]


def test_without_the_shipped_report_the_page_says_so_never_a_500(
    viewer: Client, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(simulations, "SHIPPED_REPORT", tmp_path / "missing.json")

    response = viewer.get("/reports/simulation/")

    assert response.status_code == 200
    assert parse(response.content).by_id("report-origin").text == (
        "No report can be shown: the report shipped in docs/simulation/ is missing and no "
        "simulation has been run here yet. An operator can run one here, or run .venv/bin/python "
        "manage.py simulate."
    )


def test_a_command_report_newer_than_any_run_is_shown(viewer: Client, tmp_path: Path) -> None:
    shipped = json.loads(simulations.SHIPPED_REPORT.read_text())
    (tmp_path / "reports").mkdir()
    (tmp_path / "reports" / "latest.json").write_text(json.dumps({**shipped, "requests": "99"}))

    page = parse(viewer.get("/reports/simulation/").content)

    assert page.by_id("report-origin").text.startswith(
        "The report of the latest manage.py simulate, written "
    )
    assert page.by_class("sim-lead")[0].text.startswith("99 requests from ")


# --- running a simulation -------------------------------------------------------------------


def test_an_operator_runs_a_simulation_and_the_page_follows_it_to_the_report(
    operator: Client, sent: list[int]
) -> None:
    call_command("seed_demo", stdout=StringIO())

    started = _start(operator)

    run = SimulationRun.objects.get()
    assert started.status_code == 202  # type: ignore[attr-defined]
    assert sent == [run.pk]
    assert (run.state, run.active, run.requested_by, run.progress_total) == (
        "queued",
        True,
        "olga",
        4,
    )
    panel = parse(started.content).by_id("simulation-run")  # type: ignore[attr-defined]
    assert panel.attrs["hx-get"] == f"/reports/simulation/runs/{run.pk}/"
    assert panel.attrs["hx-trigger"] == "every 1s"
    assert "waiting for a worker" in panel.by_id("simulation-status").text
    assert "disabled" in panel.by_tag("button")[0].attrs  # no second start meanwhile

    # the worker runs the task: one progress write per simulated policy-day
    with CaptureQueriesContext(connection) as captured:
        tasks.run_simulation_task(run_id=run.pk)
    updates = [q["sql"] for q in captured if q["sql"].startswith('UPDATE "ladder_simulationrun"')]
    assert len(updates) == 1 + 4 + 1  # claimed, four policy-days, finished
    run.refresh_from_db()
    assert (run.state, run.active, run.progress_done, run.percent, run.stage) == (
        "succeeded",
        None,
        4,
        100,
        "Finished",
    )
    assert run.report["requests"] == "195"  # one synthetic Monday of about 200
    assert next(row["name"] for row in run.report["rows"]) == "Thrifty (this product)"

    # the page's next poll gets the finished panel (no more polling) and the new report
    polled = operator.get(
        f"/reports/simulation/runs/{run.pk}/", headers=htmx_headers("simulation-run")
    )
    fragment = parse(polled.content)
    assert "hx-trigger" not in fragment.by_id("simulation-run").attrs
    assert fragment.by_id("simulation-status").text.startswith(f"Simulation {run.pk} finished ")
    report = fragment.by_id("simulation-report")
    assert report.attrs["hx-swap-oob"] == "true"
    assert report.by_id("report-origin").text.startswith(
        "The report of the simulation run from the dashboard by olga, finished "
    )
    # and the page itself shows that report from now on
    page = parse(operator.get("/reports/simulation/").content)
    assert page.by_class("sim-lead")[0].text.startswith("195 requests from ")


def test_progress_is_shown_while_the_job_runs(operator: Client, sent: list[int]) -> None:
    _start(operator)
    run = SimulationRun.objects.get()
    SimulationRun.objects.filter(pk=run.pk).update(
        state="running", progress_done=3, stage="Replaying Cheapest price first: day 1 of 1"
    )

    polled = operator.get(
        f"/reports/simulation/runs/{run.pk}/", headers=htmx_headers("simulation-run")
    )

    fragment = parse(polled.content)
    assert fragment.by_id("simulation-status").text == (
        f"Simulation {run.pk}, started by olga 0 s ago: Replaying Cheapest price first: day 1 "
        "of 1. Progress 75 % 75 % (3 of 4 policy-days)"
    )
    bar = fragment.by_id("simulation-progress-bar")
    assert (bar.attrs["value"], bar.attrs["max"]) == ("3", "4")
    assert fragment.by_id("simulation-run").attrs["hx-trigger"] == "every 1s"
    assert fragment.find_all(lambda e: e.attrs.get("id") == "simulation-report") == []


def test_a_failed_run_says_why_in_words(operator: Client, sent: list[int]) -> None:
    _start(operator)  # no candidates registered: nothing to route
    run = SimulationRun.objects.get()

    tasks.run_simulation_task(run_id=run.pk)

    run.refresh_from_db()
    assert (run.state, run.active) == ("failed", None)
    status = parse(operator.get("/reports/simulation/").content).by_id("simulation-status")
    assert status.attrs["role"] == "alert"
    assert status.text == (
        f"Simulation {run.pk} (started by olga 0 s ago) failed: No candidates are "
        "registered, so there is nothing to route: add candidates (or run `.venv/bin/python "
        "manage.py seed_demo` for the demo world) first."
    )


def test_an_unexpected_error_fails_the_run_without_leaking_details(
    operator: Client, sent: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    call_command("seed_demo", stdout=StringIO())
    _start(operator)
    run = SimulationRun.objects.get()

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("secret-ish internals")

    monkeypatch.setattr(simulations, "simulate_all", boom)
    tasks.run_simulation_task(run_id=run.pk)

    run.refresh_from_db()
    assert (run.state, run.error) == (
        "failed",
        "The simulation stopped with an unexpected error (RuntimeError); the worker's log "
        "has the details.",
    )


def test_a_second_run_while_one_is_active_is_refused(operator: Client, sent: list[int]) -> None:
    _start(operator)

    second = _start(operator)

    assert second.status_code == 409  # type: ignore[attr-defined]
    assert SimulationRun.objects.count() == 1
    assert len(sent) == 1
    assert parse(second.content).by_id("simulation-refused").text == (  # type: ignore[attr-defined]
        "A simulation is already queued (started by olga, 0 s ago): wait for it to finish, "
        "then start another."
    )


def test_a_second_run_without_htmx_is_refused_with_a_message(
    operator: Client, sent: list[int]
) -> None:
    operator.post("/reports/simulation/run/")

    response = operator.post("/reports/simulation/run/", follow=True)

    assert SimulationRun.objects.count() == 1
    notices = [li.text for li in parse(response.content).by_class("notice-error")]
    assert notices[0].startswith("A simulation is already queued (started by olga, ")


def test_a_run_whose_worker_died_is_given_up_and_a_new_one_starts(
    operator: Client, sent: list[int]
) -> None:
    dead = SimulationRun.objects.create(
        requested_by="olga",
        state="running",
        created_at=NOW - timedelta(hours=1),
        updated_at=NOW - simulations.STALE_AFTER - timedelta(seconds=1),
    )

    started = _start(operator)

    dead.refresh_from_db()
    assert started.status_code == 202  # type: ignore[attr-defined]
    assert (dead.state, dead.active) == ("failed", None)
    assert dead.error.startswith("The worker stopped reporting progress")
    assert SimulationRun.objects.filter(active=True).count() == 1


def test_an_unreachable_task_queue_fails_the_run_and_says_so(
    operator: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(run_id: int) -> None:
        raise ConnectionError("broker down")

    monkeypatch.setattr(enqueue, "send_simulation", refuse)

    response = _start(operator)

    run = SimulationRun.objects.get()
    assert response.status_code == 503  # type: ignore[attr-defined]
    assert (run.state, run.active) == ("failed", None)
    assert (
        parse(response.content)  # type: ignore[attr-defined]
        .by_id("simulation-status")
        .text.endswith(
            "failed: The task queue could not be reached, so the simulation was not started. "
            "Check that the broker and a worker are running, then try again."
        )
    )


def test_the_task_leaves_a_run_that_is_not_queued_alone(sent: list[int]) -> None:
    run = SimulationRun.objects.create(
        requested_by="olga", state="failed", active=None, created_at=NOW, updated_at=NOW
    )

    tasks.run_simulation_task(run_id=run.pk)

    run.refresh_from_db()
    assert (run.state, run.progress_done) == ("failed", 0)


# --- viewers ----------------------------------------------------------------------------------


def test_a_viewer_cannot_start_a_run_and_nothing_changes(viewer: Client, sent: list[int]) -> None:
    page = parse(viewer.get("/reports/simulation/").content)

    plain = viewer.post("/reports/simulation/run/")
    htmx = _start(viewer)

    assert page.by_id("simulation-run").find_all(lambda e: e.tag == "form") == []
    assert (plain.status_code, htmx.status_code) == (403, 403)  # type: ignore[attr-defined]
    assert SimulationRun.objects.count() == 0
    assert sent == []


def test_a_viewer_follows_a_run_an_operator_started(operator: Client, sent: list[int]) -> None:
    _start(operator)
    run = SimulationRun.objects.get()
    reader = signed_in(Client(), "vera", "viewer")

    polled = reader.get(
        f"/reports/simulation/runs/{run.pk}/", headers=htmx_headers("simulation-run")
    )

    assert polled.status_code == 200
    assert "waiting for a worker" in parse(polled.content).by_id("simulation-status").text


def test_the_progress_url_without_htmx_is_the_whole_page_and_an_unknown_run_a_404(
    viewer: Client,
) -> None:
    run = SimulationRun.objects.create(
        requested_by="olga", state="failed", active=None, created_at=NOW, updated_at=NOW
    )

    page = viewer.get(f"/reports/simulation/runs/{run.pk}/")
    missing = viewer.get("/reports/simulation/runs/999999/")

    assert page.status_code == 200
    assert "<html" in page.content.decode()
    assert missing.status_code == 404


def test_the_page_runs_two_queries_however_many_runs(viewer: Client) -> None:
    for _index in range(50):
        SimulationRun.objects.create(
            requested_by="olga", state="failed", active=None, created_at=NOW, updated_at=NOW
        )
    viewer.get("/reports/simulation/")

    with CaptureQueriesContext(connection) as captured:
        viewer.get("/reports/simulation/")

    runs = [q for q in captured if '"ladder_simulationrun"' in q["sql"]]
    assert len(runs) == 2  # the latest run, the latest report


def test_only_the_newest_runs_keep_their_report(operator: Client, sent: list[int]) -> None:
    call_command("seed_demo", stdout=StringIO())
    old = [
        SimulationRun.objects.create(
            requested_by="olga",
            state="succeeded",
            active=None,
            created_at=NOW - timedelta(hours=20 - index),
            updated_at=NOW,
            finished_at=NOW - timedelta(hours=20 - index),
            report={"requests": str(index)},
        )
        for index in range(simulations.REPORTS_KEPT)
    ]
    _start(operator)

    tasks.run_simulation_task(run_id=sent[0])

    kept = SimulationRun.objects.filter(report__isnull=False).order_by("finished_at")
    assert [run.pk for run in kept] == [run.pk for run in old[1:]] + [sent[0]]
