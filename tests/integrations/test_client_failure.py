"""omniroute_client when the control plane or its feed fails (issue #31): a feed that
does not prove itself alive makes the client blind (it revalidates before serving a
kept decision; subscription serves nothing it could not revalidate); one fetch per key
whose failure every waiter shares; a short circuit breaker; thrifty's last decision
within its validity bound, then the operator's static fallback; a revoked token is its
own error; budgets debited locally under bursts."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from omniroute_client import ControlPlaneUnavailable, Decision, OmniRouteClient, TokenRejected
from omniroute_client.budget import BudgetTracker

from tests.integrations.conftest import Clock
from tests.integrations.test_client_feed import DECISION, FeedPlane, _until

CHEAP = [{"provider": "openai", "model": "m", "connection_id": "key-1", "ref": "static"}]


@pytest.fixture
def plane() -> Iterator[FeedPlane]:
    made = FeedPlane()
    yield made
    made.feed_thaw.set()
    made.pools_flow.set()
    made.server.shutdown()
    made.server.server_close()


def _client(plane: FeedPlane, clock: Clock, **options: Any) -> OmniRouteClient:
    return OmniRouteClient(plane.url, "t", clock=clock, **options)


def test_a_feed_silent_past_wait_and_margin_is_blind_and_the_kept_decision_is_revalidated(
    plane: FeedPlane, clock: Clock
) -> None:
    client = _client(plane, clock, feed_wait_seconds=20, feed_margin_seconds=2)
    try:
        _until(lambda: client.feed_live)
        decision = client.pool("auto/thrifty")
        clock.now += 21.9  # within wait + margin of the feed's last answer: kept
        assert client.pool("auto/thrifty") is decision
        assert plane.pool_requests() == 1
        clock.now += 0.2  # past it: blind until the feed answers again
        assert client.blind(clock.now) is True
        assert client.pool("auto/thrifty") is decision  # revalidated: a 304
        assert plane.pool_requests() == 2
        assert (client.stats["blind_revalidations"], client.stats["not_modified"]) == (1, 1)
        # Kept after that revalidation only for revalidate_seconds (no proof of the feed).
        clock.now += 1.1
        client.pool("auto/thrifty")
        assert plane.pool_requests() == 3
    finally:
        client.close()


def test_a_blind_subscription_serves_nothing_it_cannot_revalidate(
    plane: FeedPlane, clock: Clock
) -> None:
    client = _client(plane, clock, feed_wait_seconds=20, feed_margin_seconds=2, timeout=0.3)
    try:
        _until(lambda: client.feed_live)
        client.pool("auto/subscription")
        plane.pools_flow.clear()  # the control plane stops answering pools
        clock.now += 23
        with pytest.raises(ControlPlaneUnavailable):
            client.pool("auto/subscription")
        assert plane.pool_requests() == 2
    finally:
        plane.pools_flow.set()
        client.close()


def test_a_frozen_feed_connection_times_out_just_past_its_wait(
    plane: FeedPlane, clock: Clock
) -> None:
    plane.feed_frozen.set()  # every long poll is held without an answer or a reset
    client = _client(plane, clock, feed_wait_seconds=1, feed_margin_seconds=0.5)
    try:
        assert client.feed_live is False
        assert client.blind(clock.now) is False  # not followed live yet: revalidates anyway
        client.pool("auto/thrifty")
        clock.now += 1.1  # without a live feed: kept revalidate_seconds only
        client.pool("auto/thrifty")
        assert plane.pool_requests() == 2
    finally:
        plane.feed_thaw.set()
        client.close()


def test_concurrent_misses_share_one_failed_fetch_then_the_breaker_answers_at_once(
    plane: FeedPlane, clock: Clock
) -> None:
    client = _client(plane, clock, follow_changes=False, timeout=0.3)
    plane.pools_flow.clear()  # slower than the client's timeout
    outcomes: list[str] = []
    started = threading.Barrier(8)

    def ask() -> None:
        started.wait()
        try:
            client.pool("auto/subscription")
            outcomes.append("served")
        except ControlPlaneUnavailable:
            outcomes.append("unavailable")

    try:
        threads = [threading.Thread(target=ask) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert outcomes == ["unavailable"] * 8
        assert plane.pool_requests() == 1  # one fetch for the eight misses
        with pytest.raises(ControlPlaneUnavailable, match="circuit breaker open"):
            client.pool("auto/subscription")
        assert plane.pool_requests() == 1  # answered by the breaker, no round trip
        assert (client.breaker.opened, client.stats["short_circuited"]) == (1, 1)
        plane.pools_flow.set()
        clock.now += client.breaker.open_seconds  # half-open: one trial, which succeeds
        assert client.pool("auto/subscription").stale is False
        assert client.breaker.is_open(clock.now) is False
    finally:
        plane.pools_flow.set()
        client.close()


def test_thrifty_serves_its_last_decision_within_valid_until_then_the_static_fallback(
    plane: FeedPlane, clock: Clock
) -> None:
    valid_until = datetime.fromtimestamp(clock.now + 10, UTC).isoformat()
    plane.decision = {**DECISION, "valid_until": valid_until}
    client = _client(
        plane,
        clock,
        follow_changes=False,
        timeout=0.3,
        breaker_seconds=0,
        static_fallback={"auto/thrifty": CHEAP},
    )
    try:
        first = client.pool("auto/thrifty")
        plane.pools_flow.clear()
        clock.now += 5
        stale = client.pool("auto/thrifty")
        assert (stale.stale, stale.candidates) == (True, first.candidates)
        clock.now += 6  # past valid_until: the last decision says nothing any more
        static = client.pool("auto/thrifty")
        assert static.stale is True
        assert [(c["ref"], c["connection_id"]) for c in static.candidates] == [("static", "key-1")]
        assert (client.stats["stale_served"], client.stats["static_served"]) == (1, 1)
        with pytest.raises(ControlPlaneUnavailable):  # subscription has no fallback
            client.pool("auto/subscription")
    finally:
        plane.pools_flow.set()
        client.close()


def test_a_static_fallback_for_a_fail_closed_id_is_refused(clock: Clock) -> None:
    with pytest.raises(ValueError, match="auto/subscription fails closed"):
        OmniRouteClient(
            "http://127.0.0.1:9", "t", clock=clock, static_fallback={"auto/subscription": CHEAP}
        )


def test_a_revoked_token_is_its_own_error_and_counted(plane: FeedPlane, clock: Clock) -> None:
    plane.pool_status = 401
    client = _client(plane, clock, follow_changes=False, static_fallback={"auto/thrifty": CHEAP})
    try:
        with pytest.raises(TokenRejected):
            client.pool("auto/thrifty")
        assert client.metrics()["token_rejected"] == 1
        assert client.breaker.is_open(clock.now) is False  # reachable: not a fail mode
    finally:
        client.close()


def _decision(cheap_left: float | None, sent_at: float) -> Decision:
    body = {**DECISION, "budget_left_usd": {"cheap": cheap_left, "premium": None}}
    return Decision(body=body, etag='W/"x"', sent_at=sent_at)


def test_a_burst_is_refused_a_budgeted_rung_once_its_estimates_reach_what_was_left() -> None:
    budget = BudgetTracker({"cheap": 0.3})
    decision = _decision(1.0, sent_at=100.0)
    tickets = [budget.reserve(decision, "cheap") for _ in range(4)]
    assert [t is not None for t in tickets] == [True, True, True, False]
    assert budget.reserve(decision, "premium") == ""  # no budget: nothing debited
    assert budget.left(decision, "cheap") == pytest.approx(0.1)
    budget.release(tickets[0])  # that request failed: it billed nothing
    assert budget.reserve(decision, "cheap") is not None


def test_settled_spend_counts_until_a_decision_fetched_after_it_landed() -> None:
    budget = BudgetTracker()
    old = _decision(1.0, sent_at=0.0)
    ticket = budget.reserve(old, "cheap")
    assert budget.left(old, "cheap") == 1.0  # nothing known of a request's cost yet
    budget.settle(ticket, "r-1", 0.75)
    assert budget.left(old, "cheap") == pytest.approx(0.25)
    assert budget.estimate("cheap") == 0.75  # the next request is estimated from it
    budget.landed(["r-1"])
    assert budget.left(old, "cheap") == pytest.approx(0.25)
    newer = _decision(0.25, sent_at=datetime.now(UTC).timestamp() + 1)
    assert budget.left(newer, "cheap") == pytest.approx(0.25)  # counted once, by the server
    assert budget.reserve(newer, "cheap") is None  # 0.75 estimated > 0.25 left
