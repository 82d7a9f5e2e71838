"""omniroute_client against the real server: cached decisions, revalidation, own writes,
coalescing, background reports, fail-open thrifty and fail-closed subscription."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from omniroute_client import AsyncOmniRouteClient, ControlPlaneUnavailable, OmniRouteClient

from tests.integration.tcp_proxy import TcpProxy
from tests.integrations.conftest import Clock

PLAN = {
    "provider": "claude",
    "model": "claude-sonnet-4",
    "connection_id": "plan-1",
    "ref": "d-plan",
}
KEY = {"provider": "openai", "model": "gpt-4o-mini", "connection_id": "key-1", "ref": "d-key"}


def _setup(client: OmniRouteClient) -> None:
    assert (
        client.call(
            "PUT", "/connections/plan-1", {"provider": "claude", "auth_type": "oauth"}
        ).status_code
        == 200
    )
    assert (
        client.call(
            "PUT", "/connections/key-1", {"provider": "openai", "auth_type": "apikey"}
        ).status_code
        == 200
    )
    reset = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    reading = {"remaining_percent": 80.0, "reset_at": reset}
    assert client.call("POST", "/connections/plan-1/readings", reading).status_code == 201


def _refs(decision: object) -> list[str | None]:
    return [c["ref"] for c in decision.candidates]  # type: ignore[attr-defined]


def test_a_kept_decision_costs_no_round_trip_and_revalidates_with_a_304(
    client: OmniRouteClient, clock: Clock
) -> None:
    _setup(client)
    first = client.pool("auto/thrifty", [PLAN, KEY])
    assert _refs(first) == ["d-plan", "d-key"]
    assert [c["rung"] for c in first.candidates] == ["subscription", "premium"]
    for _ in range(50):
        assert client.pool("auto/thrifty", [PLAN, KEY]) is first
    assert (client.stats["hits"], client.stats["fetches"], client.stats["not_modified"]) == (
        50,
        1,
        0,
    )
    # Not following the change feed: past revalidate_seconds it asks again, and the
    # same decision comes back as a 304.
    clock.now += 1.5
    again = client.pool("auto/thrifty", [PLAN, KEY])
    assert again is first
    assert client.stats["not_modified"] == 1
    assert client.feed_live is False


def test_its_own_event_invalidates_at_once(client: OmniRouteClient) -> None:
    _setup(client)
    first = client.pool("auto/subscription", [PLAN, KEY])
    assert _refs(first) == ["d-plan"], first.excluded
    reset = datetime.now(UTC) + timedelta(minutes=30)
    event = client.report_response(
        "plan-1",
        429,
        {
            "anthropic-ratelimit-unified-status": "rejected",
            "anthropic-ratelimit-unified-reset": str(int(reset.timestamp())),
            "retry-after": "1800",
        },
    )
    assert event is not None
    assert event["kind"] == "quota_exhausted"
    assert client.flush()
    decision = client.pool("auto/subscription", [PLAN, KEY])
    assert decision.candidates == []
    assert [(e["connection_id"], e["reason"]) for e in decision.excluded] == [
        ("plan-1", "cooling_down"),
        ("key-1", "uncurated"),
    ]
    assert 1790 <= decision.retry_after(datetime.now(UTC).timestamp()) <= 1800  # type: ignore[operator]
    thrifty = client.pool("auto/thrifty", [PLAN, KEY])
    assert _refs(thrifty) == ["d-key"]


def test_a_write_elsewhere_is_seen_after_revalidation(
    client: OmniRouteClient, clock: Clock, live_server: object, gateway_token: str
) -> None:
    _setup(client)
    assert _refs(client.pool("auto/subscription", [PLAN])) == ["d-plan"]
    other = httpx.post(
        f"{live_server}/api/v1/connections/plan-1/events",
        json={"kind": "rate_limited", "retry_after_seconds": 60},
        headers={"Authorization": f"Bearer {gateway_token}"},
    )
    assert other.status_code == 200
    assert _refs(client.pool("auto/subscription", [PLAN])) == ["d-plan"]  # still kept
    clock.now += 1.5
    assert client.pool("auto/subscription", [PLAN]).candidates == []


def test_concurrent_identical_requests_make_one_fetch(client: OmniRouteClient) -> None:
    _setup(client)
    barrier = threading.Barrier(8)
    answers: list[object] = []

    def ask() -> None:
        barrier.wait()
        answers.append(client.pool("auto/thrifty", [PLAN, KEY]))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(answers) == 8
    assert len({id(a) for a in answers}) == 1
    assert client.stats["fetches"] == 1


def test_the_async_client_coalesces_and_caches(
    live_server: object, gateway_token: str, client: OmniRouteClient
) -> None:
    _setup(client)

    async def run() -> tuple[list[object], dict[str, int]]:
        aclient = AsyncOmniRouteClient(str(live_server), gateway_token, follow_changes=False)
        try:
            answers = await asyncio.gather(
                *(aclient.pool("auto/thrifty", [PLAN, KEY]) for _ in range(10))
            )
            answers.append(await aclient.pool("auto/thrifty", [PLAN, KEY]))
            return list(answers), dict(aclient.stats)
        finally:
            await aclient.aclose()

    answers, stats = asyncio.run(run())
    assert len({id(a) for a in answers}) == 1
    assert stats["fetches"] == 1
    assert stats["hits"] == 1


def test_spend_goes_in_batches_and_lands_once(client: OmniRouteClient) -> None:
    from ladder.models import SpendEntry

    _setup(client)
    for n in range(25):
        entry = {
            "request_id": f"r-{n}",
            "connection_id": "key-1",
            "provider": "openai",
            "model": "gpt-4o-mini",
            "cost_usd": 0.01,
        }
        assert client.report_spend(entry)
    client.report_spend(dict(entry))  # the same request_id again: not counted twice
    assert client.flush()
    assert SpendEntry.objects.count() == 25
    assert client.reporter.sent == {"spend": 26, "event": 0}
    assert client.reporter.dropped == 0


def test_unreachable_thrifty_serves_the_last_good_decision_for_a_bounded_time(
    live_server: object, gateway_token: str, clock: Clock, client: OmniRouteClient
) -> None:
    _setup(client)
    host, port = str(live_server).removeprefix("http://").split(":")
    proxy = TcpProxy(host, int(port))
    cut = OmniRouteClient(
        f"http://{proxy.host}:{proxy.port}",
        gateway_token,
        clock=clock,
        stale_grace_seconds=60,
        follow_changes=False,
    )
    try:
        thrifty = cut.pool("auto/thrifty", [PLAN, KEY])
        assert _refs(cut.pool("auto/subscription", [PLAN, KEY])) == ["d-plan"]
        proxy.refuse()
        clock.now += 30
        stale = cut.pool("auto/thrifty", [PLAN, KEY])
        assert stale.stale is True
        assert _refs(stale) == _refs(thrifty)
        with pytest.raises(ControlPlaneUnavailable):
            cut.pool("auto/subscription", [PLAN, KEY])
        clock.now += 31  # past the grace period: thrifty fails closed too
        with pytest.raises(ControlPlaneUnavailable):
            cut.pool("auto/thrifty", [PLAN, KEY])
        proxy.forward()
        # The breaker opened at the last failure: for its open period nothing is asked.
        with pytest.raises(ControlPlaneUnavailable, match="circuit breaker open"):
            cut.pool("auto/thrifty", [PLAN, KEY])
        assert (cut.stats["short_circuited"], cut.breaker.opened) == (2, 2)
        clock.now += cut.breaker.open_seconds
        assert cut.pool("auto/thrifty", [PLAN, KEY]).stale is False
    finally:
        cut.close()
        proxy.stop()


def test_without_the_feed_only_spend_that_may_cross_a_budget_invalidates(
    client: OmniRouteClient,
) -> None:
    _setup(client)
    client.pool("auto/thrifty", [PLAN, KEY])
    entry = {"connection_id": "plan-1", "provider": "claude", "model": "claude-sonnet-4"}
    client.report_spend({**entry, "request_id": "plan-r1", "cost_usd": 0}, may_cross_budget=False)
    assert client.flush()
    client.pool("auto/thrifty", [PLAN, KEY])
    assert client.stats["hits"] == 1
    client.report_spend({**entry, "request_id": "key-r1", "connection_id": "key-1"})
    assert client.flush()
    client.pool("auto/thrifty", [PLAN, KEY])
    assert (client.stats["hits"], client.stats["not_modified"]) == (1, 1)


def test_a_routine_success_keeps_the_decision_and_the_success_after_a_failure_does_not(
    client: OmniRouteClient,
) -> None:
    _setup(client)
    quota = {"anthropic-ratelimit-unified-5h-utilization": "0.5"}
    generation = client.generation
    assert client.report_response("plan-1", 200, quota) == {"kind": "success", "headers": quota}
    assert client.flush()
    assert client.generation == generation  # neither queued nor landed, it invalidated
    client.report_response("plan-1", 503, {})
    after_failure = client.generation
    assert after_failure > generation
    assert client.report_response("plan-1", 200, {}) == {"kind": "success"}
    assert client.generation > after_failure
    assert client.flush()
    assert client.report_response("plan-1", 200, {}) is None  # nothing to say any more


def test_a_success_saying_the_plan_bills_past_its_limit_takes_it_out_on_the_next_decision(
    client: OmniRouteClient,
) -> None:
    _setup(client)
    assert _refs(client.pool("auto/subscription", [PLAN])) == ["d-plan"]
    overage = {"anthropic-ratelimit-unified-overage-in-use": "true"}
    generation = client.generation

    event = client.report_response("plan-1", 200, overage, model="claude-sonnet-4")
    assert client.flush()

    assert event == {"kind": "success", "headers": overage, "model": "claude-sonnet-4"}
    assert client.generation > generation  # not routine: it invalidated
    decision = client.pool("auto/subscription", [PLAN])
    assert decision.candidates == []
    assert [(e["connection_id"], e["reason"]) for e in decision.excluded] == [
        ("plan-1", "overage_not_hard_stop")
    ]
