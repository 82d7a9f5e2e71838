"""omniroute_client's refresh after the change feed moves, key by key (issue #34): each
refetched decision is served the moment its own refetch lands; a request for a pool
whose refetch is in flight awaits that refetch, with no round trip of its own and never
the decision from before the move; a refetch that fails leaves its pool to its fail mode.

Driven by the small control plane of test_client_feed.py: a pool path is held at the
plane until the test releases it, and the test waits for what the plane sees arrive.
No jitter delay (the refresh starts at once) and an injected clock; the client's
timeout is long so that a held refetch is never cut off on a loaded machine."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from omniroute_client import AsyncOmniRouteClient, ControlPlaneUnavailable, OmniRouteClient

from tests.integrations.conftest import Clock
from tests.integrations.test_client_feed import FeedPlane

THRIFTY = "/api/v1/pools/auto/thrifty"
SUBSCRIPTION = "/api/v1/pools/auto/subscription"
OPTIONS: dict[str, Any] = {"jitter": lambda low, high: 0.0, "timeout": 30.0}


@pytest.fixture
def plane() -> Iterator[FeedPlane]:
    made = FeedPlane()
    yield made
    for gate in made.gates.values():
        gate.set()
    made.feed_thaw.set()
    made.server.shutdown()
    made.server.server_close()


def _moved_with(plane: FeedPlane, held: str, refetches: list[str]) -> None:
    """A write elsewhere changed every pool (a new tag: 200s): the feed moves, and the
    client's refresh has sent `refetches` (in that order), the last of them held."""
    seen = len(plane.paths())
    plane.tag = 'W/"b"'
    plane.hold(held)
    plane.bump()
    plane.wait_for(lambda: plane.paths()[seen:] == refetches)


def test_a_refetched_decision_is_served_while_another_refetch_is_in_flight(
    plane: FeedPlane, clock: Clock
) -> None:
    client = OmniRouteClient(plane.url, "t", clock=clock, **OPTIONS)
    try:
        plane.followed()
        client.pool("auto/subscription")
        before = client.pool("auto/thrifty")  # the most recent: refetched first
        _moved_with(plane, SUBSCRIPTION, [THRIFTY, SUBSCRIPTION])

        thrifty = client.pool("auto/thrifty")  # subscription's refetch still held

        assert (before.etag, thrifty.etag) == ('W/"a"', 'W/"b"')
        assert plane.paths() == [SUBSCRIPTION, THRIFTY, THRIFTY, SUBSCRIPTION]
        assert (client.stats["hits"], client.stats["refresh_awaited"]) == (1, 0)
    finally:
        plane.release(SUBSCRIPTION)
        client.close()


def test_a_request_during_its_pools_refetch_awaits_that_refetch(
    plane: FeedPlane, clock: Clock
) -> None:
    async def run() -> tuple[Any, bool, Any, dict[str, int]]:
        client = AsyncOmniRouteClient(plane.url, "t", clock=clock, **OPTIONS)
        try:
            await asyncio.to_thread(plane.followed)
            before = await client.pool("auto/thrifty")
            await asyncio.to_thread(_moved_with, plane, THRIFTY, [THRIFTY])
            asking = asyncio.ensure_future(client.pool("auto/thrifty"))
            await asyncio.sleep(0)  # one turn of the loop: the request runs until it waits
            waited = not asking.done()
            plane.release(THRIFTY)
            return before, waited, await asking, dict(client.stats)
        finally:
            await client.aclose()

    before, waited, after, stats = asyncio.run(run())

    assert waited  # neither the decision from before the move nor a round trip of its own
    assert (before.etag, after.etag) == ('W/"a"', 'W/"b"')
    assert plane.paths() == [THRIFTY, THRIFTY]  # the first fetch and the refresh's refetch
    assert (stats["refresh_awaited"], stats["hits"], stats["fetches"]) == (1, 0, 2)


def test_request_threads_during_a_refetch_share_it(plane: FeedPlane, clock: Clock) -> None:
    client = OmniRouteClient(plane.url, "t", clock=clock, **OPTIONS)
    try:
        plane.followed()
        client.pool("auto/thrifty")
        _moved_with(plane, THRIFTY, [THRIFTY])
        answers: list[Any] = []
        threads = [
            threading.Thread(target=lambda: answers.append(client.pool("auto/thrifty")))
            for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        plane.release(THRIFTY)
        for thread in threads:
            thread.join()

        # Each awaited the refetch or found it landed: one decision, no round trip.
        assert [answer.etag for answer in answers] == ['W/"b"'] * 4
        assert len({id(answer) for answer in answers}) == 1
        assert plane.paths() == [THRIFTY, THRIFTY]
        assert client.stats["refresh_awaited"] + client.stats["hits"] == 4
    finally:
        client.close()


def test_a_refetch_that_fails_leaves_its_pool_failing_closed(
    plane: FeedPlane, clock: Clock
) -> None:
    async def run() -> tuple[bool, list[str], dict[str, int]]:
        client = AsyncOmniRouteClient(plane.url, "t", clock=clock, **OPTIONS)
        try:
            await asyncio.to_thread(plane.followed)
            await client.pool("auto/subscription")
            plane.statuses[SUBSCRIPTION] = 503  # the control plane fails the refetch
            await asyncio.to_thread(_moved_with, plane, SUBSCRIPTION, [SUBSCRIPTION])
            asking = asyncio.ensure_future(client.pool("auto/subscription"))
            await asyncio.sleep(0)  # one turn of the loop: the request runs until it waits
            waited = not asking.done()
            plane.release(SUBSCRIPTION)
            failures = []
            for request in (asking, client.pool("auto/subscription")):
                with pytest.raises(ControlPlaneUnavailable) as raised:
                    await request
                failures.append(str(raised.value))
            return waited, failures, dict(client.stats)
        finally:
            await client.aclose()

    waited, failures, stats = asyncio.run(run())

    assert waited  # never the decision from before the move
    assert failures == [
        "auto/subscription: control plane unreachable (503)",  # the refetch's, shared
        "auto/subscription: circuit breaker open",  # then the breaker, no round trip
    ]
    assert plane.paths() == [SUBSCRIPTION, SUBSCRIPTION]
    assert (stats["refresh_awaited"], stats["short_circuited"], stats["unavailable"]) == (1, 1, 2)


def test_an_own_event_during_the_refresh_retires_its_refetched_decision_too(
    plane: FeedPlane, clock: Clock
) -> None:
    client = OmniRouteClient(plane.url, "t", clock=clock, flush_interval=0.05, **OPTIONS)
    try:
        plane.followed()
        client.pool("auto/thrifty")
        _moved_with(plane, THRIFTY, [THRIFTY])
        # The gateway's own event lands mid-refresh: the refetch may predate it.
        client.report_event("key-1", {"kind": "rate_limited", "retry_after_seconds": 3.0})
        plane.release(THRIFTY)

        client.pool("auto/thrifty")

        assert plane.paths() == [THRIFTY, THRIFTY, THRIFTY]  # the refetch, then its own
        assert client.stats["refresh_awaited"] == 0
    finally:
        client.close()
