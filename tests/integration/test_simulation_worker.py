"""A What-if simulation started as the dashboard starts it, run by a real Celery worker
on the real broker: the worker claims the queued run, records its progress and stores
the report the page then shows."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from ladder.models import SimulationRun
from ladder.services import enqueue, simulations
from tests.integration.harness import Worker, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_simulation_started_through_the_broker_runs_on_the_worker(worker: Worker) -> None:
    call_command("seed_demo", stdout=StringIO())

    run = simulations.start_simulation(
        "olga", send=enqueue.send_simulation, days=1, requests_per_weekday=200
    )

    def finished() -> SimulationRun | None:
        current = SimulationRun.objects.get(pk=run.pk)
        return current if not current.is_active else None

    done = wait_until(finished, timeout=60)
    assert (done.state, done.active, done.error) == ("succeeded", None, "")
    assert (done.progress_done, done.progress_total, done.stage) == (4, 4, "Finished")
    assert done.started_at is not None
    assert done.finished_at >= done.started_at
    assert [row["name"] for row in done.report["rows"]] == [
        "Thrifty (this product)",
        "Plans only",
        "Cheapest price first",
        "Thrifty, earlier design",
    ]
    shown = simulations.shown_report()
    assert shown is not None
    assert (shown.origin, shown.run) == ("run", done)
