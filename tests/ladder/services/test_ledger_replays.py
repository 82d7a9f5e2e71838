"""Ledger replays, the shell (ladder/services/ledger_replays.py): a hand-written period
(a plan seat's readings and ledger, a metered key's paid requests) measured into a seat
and replayed as bought and with one change, with the exact figures of both runs."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from ladder import tasks
from ladder.models import ApiToken, LedgerReplayRun
from ladder.services import enqueue, ledger_replays
from ladder.services.ledger_replays import ReplayAsk, ReplayBusy, ReplayError
from tests.ladder.factories import NOW, api, iso, make_token
from tests.ladder.ledger_period import PERIOD, T0, build_period

pytestmark = pytest.mark.django_db


@pytest.fixture
def period() -> None:
    build_period()


def run(ask: ReplayAsk) -> LedgerReplayRun:
    sent: list[int] = []
    started = ledger_replays.start_replay(ask, "op", send=sent.append, now=NOW)
    assert sent == [started.pk]
    assert ledger_replays.run_replay(started.pk, clock=lambda: NOW) == "succeeded"
    return LedgerReplayRun.objects.get(pk=started.pk)


FIGURE_KEYS = (
    "paid_usd",
    "paid_premium_usd",
    "saved_usd",
    "plan_requests",
    "paid_requests",
    "empty_subscription_requests",
    "unserved_requests",
)


def figures(result: dict[str, Any], which: str) -> tuple[Any, ...]:
    return tuple(result[which][key] for key in FIGURE_KEYS)


def test_one_more_seat_is_replayed_against_the_period_as_bought(period: None) -> None:
    done = run(ReplayAsk(PERIOD.period_start, PERIOD.period_end, add_seat_like="claude-max-1"))

    result = done.result
    assert result is not None
    assert result["recorded"] == {"paid_usd": "4.50", "saved_usd": "6.00"}
    assert result["seats"] == [
        {
            "seat_id": "claude-max-1",
            "provider": "claude",
            "capacity_usd": "10.00",
            "window_hours": 5.0,
            "used_percent": 60.0,
            "basis": "$6.00 of list price served for 60.0 % of its window used",
        }
    ]
    # As bought, the seat's 4.00 left take two of the paid requests; the third is paid.
    assert figures(result, "as_bought") == ("1.50", "1.50", "9.00", 6, 1, 1, 0)
    # A second seat takes the third too.
    assert figures(result, "changed") == ("0.00", "0.00", "10.50", 7, 0, 0, 0)
    assert ledger_replays.result_sentence(result) == (
        "With one more seat like claude-max-1, this period would have paid $0.00 instead of "
        "$1.50, the plans would have saved $10.50 instead of $9.00, and 0 requests would "
        "have met an empty auto/subscription instead of 1."
    )
    assert (done.state, done.progress_done, done.progress_total, done.stage) == (
        "succeeded",
        16,
        16,
        "Finished",
    )


def test_one_seat_fewer_under_a_budget_leaves_requests_unserved(period: None) -> None:
    done = run(
        ReplayAsk(
            PERIOD.period_start,
            PERIOD.period_end,
            remove_seat="claude-max-1",
            budgets={"premium": "3"},
        )
    )

    assert done.result is not None
    assert done.result["change_text"] == "without claude-max-1, the premium budget $3.00"
    # No seat: all seven requests meet an empty auto/subscription; 3.00 pays for two.
    assert figures(done.result, "changed") == ("3.00", "3.00", "0.00", 0, 2, 7, 5)


def test_the_result_is_a_csv_table(period: None) -> None:
    done = run(ReplayAsk(PERIOD.period_start, PERIOD.period_end, add_seat_like="claude-max-1"))

    assert done.result is not None
    lines = ledger_replays.result_csv(done.result).split("\r\n")
    assert lines[:4] == [
        "figure,as_bought,with_change,difference",
        "paid_usd,1.50,0.00,-1.50",
        "paid_cheap_usd,0.00,0.00,0.00",
        "paid_premium_usd,1.50,0.00,-1.50",
    ]
    assert lines[-2] == "change,one more seat like claude-max-1,,"


@pytest.mark.parametrize(
    ("ask", "message"),
    [
        pytest.param(
            ReplayAsk(T0, T0, add_seat_like="claude-max-1"),
            "The period must end after it starts.",
            id="empty-period",
        ),
        pytest.param(
            ReplayAsk(NOW, NOW + timedelta(hours=1), add_seat_like="claude-max-1"),
            "The period must start in the past: a replay reads what was recorded.",
            id="future",
        ),
        pytest.param(
            ReplayAsk(T0 - timedelta(days=93), T0, add_seat_like="claude-max-1"),
            "The period can span at most 92 days.",
            id="too-long",
        ),
        pytest.param(
            ReplayAsk(T0, NOW, add_seat_like="claude-key"),
            "add_seat_like: 'claude-key' is not an active plan connection "
            "(those are: claude-max-1).",
            id="not-a-plan",
        ),
        pytest.param(
            ReplayAsk(T0, NOW, budgets={"cheap": "-1"}),
            "The cheap budget must be between 0 and 1,000,000 USD.",
            id="negative-budget",
        ),
        pytest.param(
            ReplayAsk(T0, NOW, budgets={"free": "1"}),
            "budgets: 'free' is not a paid rung (cheap or premium).",
            id="free-rung",
        ),
        pytest.param(
            ReplayAsk(T0, NOW),
            "Name a change to replay: one more seat like a plan connection, one seat "
            "fewer, or a budget per rung.",
            id="no-change",
        ),
    ],
)
def test_a_bad_ask_is_refused_and_nothing_is_queued(
    period: None, ask: ReplayAsk, message: str
) -> None:
    sent: list[int] = []

    with pytest.raises(ReplayError) as refused:
        ledger_replays.start_replay(ask, "op", send=sent.append, now=NOW)

    assert str(refused.value) == message
    assert (sent, LedgerReplayRun.objects.count()) == ([], 0)


def test_a_second_replay_is_refused_while_one_is_active(period: None) -> None:
    ask = ReplayAsk(T0, NOW, add_seat_like="claude-max-1")
    first = ledger_replays.start_replay(ask, "op", send=lambda _: None, now=NOW)

    with pytest.raises(ReplayBusy) as busy:
        ledger_replays.start_replay(ask, "op", send=lambda _: None, now=NOW)

    assert busy.value.run.pk == first.pk
    assert LedgerReplayRun.objects.count() == 1


def test_a_replay_whose_task_cannot_be_queued_comes_back_failed(period: None) -> None:
    def unreachable(_: int) -> None:
        raise ConnectionError("broker down")

    done = ledger_replays.start_replay(
        ReplayAsk(T0, NOW, add_seat_like="claude-max-1"), "op", send=unreachable, now=NOW
    )

    assert (done.state, done.active) == ("failed", None)
    assert done.error.startswith("The task queue could not be reached")


# --- the REST API ---------------------------------------------------------------------------


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    published: list[int] = []
    monkeypatch.setattr(enqueue, "send_ledger_replay", published.append)
    return published


def test_the_api_starts_a_replay_and_answers_its_result_as_json_and_csv(
    period: None, sent: list[int]
) -> None:
    operator = make_token("ops", ApiToken.Scope.OPERATOR)
    body = {
        "period_start": iso(PERIOD.period_start),
        "period_end": iso(PERIOD.period_end),
        "add_seat_like": "claude-max-1",
    }

    started = api("post", "/api/v1/what-if/ledger-replays", operator, body)
    (run_id,) = sent
    tasks.run_ledger_replay_task(run_id=run_id)
    done = api("get", f"/api/v1/what-if/ledger-replays/{run_id}", operator)
    as_csv = api("get", f"/api/v1/what-if/ledger-replays/{run_id}?format=csv", operator)

    assert started.status_code == 202
    assert (started.json()["state"], started.json()["change"]) == (
        "queued",
        "one more seat like claude-max-1",
    )
    assert done.status_code == 200
    result = done.json()["result"]
    assert (result["recorded_paid_usd"], result["recorded_saved_usd"]) == (4.5, 6.0)
    assert result["as_bought"] == {
        "paid_usd": 1.5,
        "paid_cheap_usd": 0.0,
        "paid_premium_usd": 1.5,
        "saved_usd": 9.0,
        "plan_requests": 6,
        "paid_requests": 1,
        "empty_subscription_requests": 1,
        "unserved_requests": 0,
    }
    assert (result["changed"]["paid_usd"], result["changed"]["saved_usd"]) == (0.0, 10.5)
    assert as_csv.status_code == 200
    assert as_csv["Content-Type"] == "text/csv; charset=utf-8"
    assert as_csv.content.decode().split("\r\n")[1] == "paid_usd,1.50,0.00,-1.50"


def test_the_api_refuses_a_bad_ask_a_gateway_token_and_a_second_replay(
    period: None, sent: list[int]
) -> None:
    operator = make_token("ops", ApiToken.Scope.OPERATOR)
    gateway = make_token()
    body = {"period_start": iso(T0), "period_end": iso(NOW), "remove_seat": "claude-max-1"}

    no_change = api(
        "post",
        "/api/v1/what-if/ledger-replays",
        operator,
        {"period_start": iso(T0), "period_end": iso(NOW)},
    )
    by_gateway = api("post", "/api/v1/what-if/ledger-replays", gateway, body)
    first = api("post", "/api/v1/what-if/ledger-replays", operator, body)
    second = api("post", "/api/v1/what-if/ledger-replays", operator, body)
    early_csv = api("get", f"/api/v1/what-if/ledger-replays/{sent[0]}?format=csv", gateway)
    missing = api("get", f"/api/v1/what-if/ledger-replays/{2**63}", gateway)

    assert (no_change.status_code, no_change.json()["detail"]) == (
        422,
        "Name a change to replay: one more seat like a plan connection, one seat fewer, "
        "or a budget per rung.",
    )
    assert [r.status_code for r in (by_gateway, first, second, early_csv, missing)] == [
        403,
        202,
        409,
        409,
        404,
    ]
    assert len(sent) == 1
