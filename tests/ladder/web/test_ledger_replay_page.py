"""The What-if page's ledger replay: an operator's form queues a job, the panel follows
its progress, the answer shows in money with its report page and CSV; a bad ask is said
at its field and starts nothing; a viewer reads only."""

from __future__ import annotations

import pytest
from django.test import Client

from ladder import tasks
from ladder.models import LedgerReplayRun
from ladder.services import enqueue
from omniroute_admin import dashboard
from tests.ladder.factories import NOW
from tests.ladder.ledger_period import T0, build_period
from tests.pages import parse
from tests.worlds import htmx_headers, signed_in

pytestmark = pytest.mark.django_db

START = "/reports/ledger-replays/run/"
# The period's UTC day, and the change: one more seat like the plan.
FORM = {
    "first_day": f"{T0:%Y-%m-%d}",
    "last_day": f"{T0:%Y-%m-%d}",
    "add_seat_like": "claude-max-1",
}


@pytest.fixture(autouse=True)
def _world(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)
    build_period()


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    ids: list[int] = []
    monkeypatch.setattr(enqueue, "send_ledger_replay", ids.append)
    return ids


def test_an_operator_replays_a_period_and_the_panel_follows_it_to_the_answer(
    client: Client, sent: list[int]
) -> None:
    operator = signed_in(client, "olga", "operator")

    started = operator.post(START, FORM, headers=htmx_headers("ledger-replay"))

    run = LedgerReplayRun.objects.get()
    assert (started.status_code, sent) == (202, [run.pk])
    panel = parse(started.content).by_id("ledger-replay")
    assert panel.attrs["hx-get"] == f"/reports/ledger-replays/{run.pk}/"
    assert "waiting for a worker" in panel.by_id("ledger-replay-status").text
    assert "disabled" in panel.by_id("ledger-replay-form").by_tag("button")[0].attrs

    tasks.run_ledger_replay_task(run_id=run.pk)
    polled = parse(
        operator.get(
            f"/reports/ledger-replays/{run.pk}/", headers=htmx_headers("ledger-replay")
        ).content
    )
    page = parse(operator.get("/reports/simulation/").content)
    csv = operator.get(f"/reports/ledger-replays/{run.pk}/export.csv")

    assert "hx-trigger" not in polled.by_id("ledger-replay").attrs
    assert polled.by_id("ledger-replay-answer").text == (
        "With one more seat like claude-max-1, this period would have paid $0.00 instead of "
        "$1.50, the plans would have saved $10.50 instead of $9.00, and 0 requests would "
        "have met an empty auto/subscription instead of 1."
    )
    assert page.by_id("ledger-replay-answer").text == polled.by_id("ledger-replay-answer").text
    assert csv.status_code == 200
    assert csv.content.decode().split("\r\n")[1] == "paid_usd,1.50,0.00,-1.50"


def test_a_bad_ask_is_said_and_starts_nothing(client: Client, sent: list[int]) -> None:
    operator = signed_in(client, "olga", "operator")

    refused = operator.post(
        START, {**FORM, "add_seat_like": ""}, headers=htmx_headers("ledger-replay")
    )

    assert refused.status_code == 422
    summary = parse(refused.content).by_class("error-summary")[0]
    assert "Name a change to replay" in summary.text
    assert (sent, LedgerReplayRun.objects.count()) == ([], 0)


def test_a_viewer_reads_but_cannot_start_a_replay(client: Client, sent: list[int]) -> None:
    viewer = signed_in(client, "vera", "viewer")

    refused = viewer.post(START, FORM, headers=htmx_headers("ledger-replay"))
    page = parse(viewer.get("/reports/simulation/").content)

    assert refused.status_code == 403
    assert (sent, LedgerReplayRun.objects.count()) == ([], 0)
    assert page.by_id("ledger-replay").by_tag("form") == []


def test_an_unknown_replay_is_a_404(client: Client) -> None:
    viewer = signed_in(client, "vera", "viewer")

    assert viewer.get("/reports/ledger-replays/999999/").status_code == 404
    assert viewer.get("/reports/ledger-replays/999999/export.csv").status_code == 404
