"""The real LiteLLM Router with omniroute_litellm against the real OmniRoute server
THROUGH A FAULT PROXY the tests own (tests/integration/tcp_proxy.py: refuse, freeze
without a reset, and back), issue #31: a frozen feed is blind within wait + margin and
subscription never reaches a plan deactivated meanwhile; an unreachable control plane
answers subscription at once and serves thrifty from its last decision or the static
fallback; start-up with the control plane down; a rejected token; spend served during an
outage lands exactly once per served request; a burst on a budgeted rung stops at its
budget. Counts from the fake upstreams' own logs and the ledger."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from omniroute_litellm import NoCapacity, OmniRouteRouter
from omniroute_litellm.dispatch import ControlPlaneDown, GatewayTokenRejected
from scenario import (
    CHEAP,
    CHEAP_BUDGET,
    MESSAGES,
    configure,
    cost,
    make_upstreams,
    model_list,
    served_by,
)
from server import ROOT, OmniRouteServer, wait_for
from upstreams import FakeUpstream

sys.path.insert(0, str(ROOT / "tests" / "integration"))
from tcp_proxy import TcpProxy

pytestmark = pytest.mark.integration


@pytest.fixture
def upstreams() -> Iterator[dict[str, FakeUpstream]]:
    made = make_upstreams()
    yield made
    for upstream in made.values():
        upstream.stop()


@pytest.fixture
def fault(omniroute: OmniRouteServer) -> Iterator[TcpProxy]:
    host, port = omniroute.base_url.removeprefix("http://").split(":")
    made = TcpProxy(host, int(port))
    yield made
    made.stop()


def through(fault: TcpProxy) -> str:
    return f"http://{fault.host}:{fault.port}"


def without_plan(models: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in models if not m["model_info"]["omniroute_connection_id"].endswith("-plan")]


def plan_has_quota(omniroute: OmniRouteServer, connection_id: str) -> None:
    reset = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + 3600))
    body = {"remaining_percent": 80.0, "reset_at": reset}
    path = f"/connections/{connection_id}/readings"
    assert omniroute.api("POST", path, body, operator=False).status_code == 201


def attempt(router: OmniRouteRouter, auto_id: str) -> str:
    """Who served one request, or why nothing did."""
    try:
        return served_by(router, router.completion(model=auto_id, messages=MESSAGES))
    except ControlPlaneDown:
        return "control plane down"
    except NoCapacity:
        return "no capacity"


def test_a_frozen_feed_is_blind_after_wait_and_margin_and_never_serves_an_inactive_plan(
    omniroute: OmniRouteServer, upstreams: dict[str, FakeUpstream], fault: TcpProxy
) -> None:
    router = OmniRouteRouter(
        model_list=model_list(upstreams, "a"),
        control_plane_url=through(fault),
        token=omniroute.gateway_token,
        client_options={"feed_wait_seconds": 2, "feed_margin_seconds": 1},
    )
    try:
        plan_has_quota(omniroute, "a-plan")
        wait_for(lambda: router.client.feed_live, what="the feed")
        assert attempt(router, "auto/subscription") == "plan"
        fault.hang()  # the feed's connection and every new one frozen, with no reset
        operator = {"provider": "claude", "auth_type": "oauth", "active": False}
        assert omniroute.api("PUT", "/connections/a-plan", operator).status_code == 200
        client = router.client
        wait_for(lambda: client.blind(time.time()) or not client.feed_live, 10, "blindness")

        outcomes = [attempt(router, "auto/subscription") for _ in range(5)]

        assert outcomes == ["control plane down"] * 5
        assert client.breaker.opened == 1  # one timed-out fetch; the rest answered at once
        fault.forward()
        wait_for(lambda: not client.breaker.is_open(time.time()), 10, "the breaker closing")
        assert attempt(router, "auto/subscription") == "no capacity"  # the plan is inactive
        assert (upstreams["plan"].served_count(), upstreams["plan"].refused) == (1, 0)
        assert upstreams["premium"].served_count() == 0
    finally:
        fault.forward()
        router.close()


def test_an_outage_serves_thrifty_from_its_last_decision_and_loses_no_spend(
    omniroute: OmniRouteServer, upstreams: dict[str, FakeUpstream], fault: TcpProxy
) -> None:
    router = OmniRouteRouter(
        model_list=without_plan(model_list(upstreams, "b")),
        control_plane_url=through(fault),
        token=omniroute.gateway_token,
    )
    try:
        before = [attempt(router, "auto/thrifty") for _ in range(3)]
        fault.refuse()  # the control plane restarts: refused, then back
        during = [attempt(router, "auto/thrifty") for _ in range(5)]
        subscription = attempt(router, "auto/subscription")
        assert router.client.reporter.metrics["retried"] + router.client.reporter.pending() > 0
        fault.forward()
    finally:
        fault.forward()
        drained = router.close()
    assert drained is True
    first = before[0]  # no price is set here: both keys are premium, in the list's order
    assert before == [first] * 3
    assert during == [first] * 5  # the last decision, through the outage
    assert router.client.stats["stale_served"] >= 1
    assert subscription == "control plane down"
    rows = omniroute.ledger("b-")
    assert sum(u.served_count() for u in upstreams.values()) == len(rows) == 8
    assert upstreams[first].served_count() == 8
    assert len({row["request_id"] for row in rows}) == 8  # exactly one entry per request
    assert router.client.reporter.metrics["dropped"] == 0


def test_start_up_with_the_control_plane_down_serves_the_fail_modes_then_registers(
    omniroute: OmniRouteServer, upstreams: dict[str, FakeUpstream], fault: TcpProxy
) -> None:
    fault.refuse()
    router = OmniRouteRouter(
        model_list=model_list(upstreams, "c"),
        control_plane_url=through(fault),
        token=omniroute.gateway_token,
        static_fallback=["c-cheap"],
    )
    try:
        assert router.dispatcher.registered.is_set() is False
        assert attempt(router, "auto/thrifty") == "cheap"  # the operator's static fallback
        assert attempt(router, "auto/subscription") == "control plane down"
        assert router.client.stats["static_served"] == 1
        fault.forward()
        wait_for(router.dispatcher.registered.is_set, 20, "the registration")
        assert omniroute.api("GET", "/connections/c-cheap").status_code == 200
    finally:
        fault.forward()
        router.close()
    assert (upstreams["cheap"].served_count(), upstreams["plan"].served_count()) == (1, 0)
    assert len(omniroute.ledger("c-")) == 1


def test_a_rejected_token_is_its_own_error_and_a_metric(
    omniroute: OmniRouteServer, upstreams: dict[str, FakeUpstream]
) -> None:
    router = OmniRouteRouter(
        model_list=model_list(upstreams, "d"),
        control_plane_url=omniroute.base_url,
        token="omr_revoked_or_unknown",
    )
    try:
        with pytest.raises(GatewayTokenRejected):
            router.completion(model="auto/thrifty", messages=MESSAGES)
        assert router.client.metrics()["token_rejected"] == 2  # at start-up, then the request
    finally:
        router.close(timeout=1)
    assert sum(u.served_count() for u in upstreams.values()) == 0


def test_a_burst_on_a_budgeted_rung_stops_at_its_budget(
    upstreams: dict[str, FakeUpstream], tmp_path: Path
) -> None:
    server = OmniRouteServer(tmp_path)  # its own ledger: the cheap budget is rung-wide
    try:
        configure(server)  # a cheap budget of five requests
        router = OmniRouteRouter(
            model_list=without_plan(model_list(upstreams, "e")),
            control_plane_url=server.base_url,
            token=server.gateway_token,
            client_options={"request_estimate_usd": {"cheap": float(cost(CHEAP))}},
        )

        async def burst() -> tuple[list[Any], bool]:
            answers = await asyncio.gather(
                *(router.acompletion(model="auto/thrifty", messages=MESSAGES) for _ in range(40))
            )
            return list(answers), await router.aclose()

        answers, drained = asyncio.run(burst())
        served = [served_by(router, answer) for answer in answers]

        # Closing again (an atexit hook after the explicit close) answers the same.
        assert (drained, router.close()) == (True, True)

        assert (served.count("cheap"), served.count("premium")) == (5, 35)
        assert upstreams["cheap"].served_count() == 5
        rows = server.ledger("e-")
        assert len(rows) == 40
        cheap = sum(float(r["billed_usd"]) for r in rows if r["connection_id"] == "e-cheap")
        assert cheap == pytest.approx(float(CHEAP_BUDGET))
    finally:
        server.stop()


def test_a_hung_control_plane_answers_a_burst_at_once_from_the_fail_modes(
    omniroute: OmniRouteServer, upstreams: dict[str, FakeUpstream], fault: TcpProxy
) -> None:
    # Point 3: with a round trip past the client's timeout, 20 concurrent misses waited on
    # one lock and each made its own attempt (thrifty up to 16.6 s). One fetch is shared.
    router = OmniRouteRouter(
        model_list=model_list(upstreams, "f"),
        control_plane_url=through(fault),
        token=omniroute.gateway_token,
        static_fallback=["f-cheap"],
    )
    wait_for(router.dispatcher.registered.is_set, 20, "the registration")

    async def burst() -> tuple[list[str], str, int, bool]:
        fault.hang()  # accepts, never answers: every fetch times out
        try:
            answers = await asyncio.gather(
                *(router.acompletion(model="auto/thrifty", messages=MESSAGES) for _ in range(20))
            )
            try:
                await router.acompletion(model="auto/subscription", messages=MESSAGES)
                subscription = "served"
            except ControlPlaneDown:
                subscription = "control plane down"
            opened = router.client.breaker.opened
        finally:
            fault.forward()
        # Inside the loop: LiteLLM's logging worker runs the spend callbacks on it.
        return [served_by(router, a) for a in answers], subscription, opened, await router.aclose()

    try:
        served, subscription, breaker_opened, drained = asyncio.run(burst())
    finally:
        fault.forward()
        router.close()
    assert served == ["cheap"] * 20  # the operator's static fallback, for every one
    assert breaker_opened == 1  # one timed-out fetch; its failure shared by the burst
    assert subscription == "control plane down"  # fails closed at once (breaker open)
    assert drained is True
    assert (upstreams["cheap"].served_count(), upstreams["plan"].served_count()) == (20, 0)
    rows = omniroute.ledger("f-")
    assert (len(rows), len({row["request_id"] for row in rows})) == (20, 20)


def test_close_sends_every_report_of_a_burst_it_ends(
    omniroute: OmniRouteServer, upstreams: dict[str, FakeUpstream]
) -> None:
    # Point 4: close() right after a burst lost 122 of 160 entries that LiteLLM's
    # logging worker had not yet handed over.
    router = OmniRouteRouter(
        model_list=without_plan(model_list(upstreams, "g")),
        control_plane_url=omniroute.base_url,
        token=omniroute.gateway_token,
    )
    try:
        with ThreadPoolExecutor(16) as pool:
            served = list(pool.map(lambda _: attempt(router, "auto/thrifty"), range(160)))
    finally:
        drained = router.close()  # at once
    assert drained is True
    assert len(served) == 160
    assert set(served) <= {"premium", "cheap"}
    assert sum(u.served_count() for u in upstreams.values()) == 160
    rows = omniroute.ledger("g-")
    assert (len(rows), len({row["request_id"] for row in rows})) == (160, 160)
    assert router.client.reporter.metrics["dropped"] == 0


def test_two_hundred_plan_requests_in_flight_report_their_headers_and_lose_none(
    omniroute: OmniRouteServer, upstreams: dict[str, FakeUpstream]
) -> None:
    # Point 7: one success event per plan request (each answer carries quota headers);
    # at 200 in flight the events batch answered 503 and the events were dropped.
    plan = FakeUpstream("anthropic")  # room for all of them
    router = OmniRouteRouter(
        model_list=model_list({**upstreams, "plan": plan}, "h"),
        control_plane_url=omniroute.base_url,
        token=omniroute.gateway_token,
    )
    try:
        plan_has_quota(omniroute, "h-plan")

        async def burst() -> tuple[list[Any], bool]:
            answers = await asyncio.gather(
                *(
                    router.acompletion(model="auto/subscription", messages=MESSAGES)
                    for _ in range(200)
                )
            )
            return list(answers), await router.aclose()

        answers, drained = asyncio.run(burst())
    finally:
        router.close()
        plan.stop()
    assert [served_by(router, answer) for answer in answers] == ["plan"] * 200
    assert drained is True
    reporter = router.client.reporter
    assert (reporter.metrics["dropped"], reporter.pending()) == (0, 0)
    # Headers-only successes coalesce per connection: far fewer events than requests.
    assert 1 <= reporter.sent["event"] < 200
    status = omniroute.api("GET", "/connections/h-plan/status").json()
    assert status["reading"]["source"] == "headers"
    assert len(omniroute.ledger("h-")) == 200
