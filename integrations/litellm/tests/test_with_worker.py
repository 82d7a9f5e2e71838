"""End to end with everything real: the LiteLLM Router with omniroute_litellm, the
OmniRoute server (gunicorn), a Celery worker and beat on a real broker, the Claude quota
adapter polling the fake plan's usage endpoint, and fake upstreams that serve N requests
per short window, then 429 until it resets."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from omniroute_litellm import NoCapacity, OmniRouteRouter
from scenario import (
    CHEAP,
    MESSAGES,
    PLAN_CAPACITY,
    PREMIUM,
    WINDOW,
    await_window_start,
    configure,
    cost,
    ledger_by_name,
    make_upstreams,
    model_list,
    register_polled_plan,
    served_by,
    total,
)
from server import OmniRouteServer, wait_for
from upstreams import FakeUpstream

pytestmark = pytest.mark.integration
CLIENT_OPTIONS = {"revalidate_seconds": 0.2, "flush_interval": 0.02}
PACE = 0.2  # seconds between requests once the ladder is climbed: 5 requests per second


@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, FakeUpstream]]:
    made = make_upstreams()
    yield made
    for upstream in made.values():
        upstream.stop()


@pytest.fixture(scope="module")
def omniroute(
    tmp_path_factory: pytest.TempPathFactory, upstreams: dict[str, FakeUpstream]
) -> Iterator[OmniRouteServer]:
    server = OmniRouteServer(
        tmp_path_factory.mktemp("omniroute-worker"),
        {
            "QUOTA_URL_CLAUDE": upstreams["plan"].usage_url,
            "QUOTA_BEAT_SECONDS": "1",
            "QUOTA_RESET_GRACE_SECONDS": "0.5",
            "QUOTA_HTTP_TIMEOUT_SECONDS": "2",
        },
        worker=True,
    )
    configure(server)
    yield server
    server.stop()


@pytest.fixture(autouse=True)
def fresh_bills(upstreams: dict[str, FakeUpstream]) -> None:
    for upstream in upstreams.values():
        upstream.clear()


@pytest.fixture
def closing() -> Iterator[list[OmniRouteRouter]]:
    """The test's routers, closed after it whatever happened: their hooks are LiteLLM's
    globals, and one a failed test left open would route the next test's requests."""
    routers: list[OmniRouteRouter] = []
    yield routers
    for router in routers:
        router.close(timeout=1)  # again after the test's own close: answers the same


def first_poll(omniroute: OmniRouteServer, connection_id: str) -> dict[str, Any]:
    """Wait for the worker's first reading of the plan (the beat finds it never read)."""

    def polled() -> dict[str, Any] | None:
        reading = omniroute.api("GET", f"/connections/{connection_id}/status").json()["reading"]
        return reading if reading and reading["source"] == "claude" else None

    try:
        return dict(wait_for(polled, 30, f"the first poll of {connection_id}"))
    except AssertionError as error:
        raise AssertionError(f"{error}\n{omniroute.worker_log()}") from None


def plan_in_pool(router: OmniRouteRouter, connection_id: str) -> bool:
    decision = router._run(router.dispatcher.adecision("auto/subscription"))
    return any(
        connection_id in [c["connection_id"], *(c["allowed_connection_ids"] or [])]
        for c in decision.candidates
    )


def test_thrifty_plan_then_cheap_then_premium_then_the_plan_again(
    omniroute: OmniRouteServer,
    upstreams: dict[str, FakeUpstream],
    closing: list[OmniRouteRouter],
) -> None:
    register_polled_plan(omniroute, "t-plan")
    # LiteLLM knows no price for the fake models, so the gateway states what a cheap
    # request costs, as an operator would (`request_estimate_usd`): the client then stops
    # sending to the rung when its own debits reach what the decision left, whatever the
    # host's speed. Without it nothing is debited locally and the climb rests on how fast
    # the crossing comes back through the feed against back-to-back requests: on a loaded
    # host CI saw 37 cheap requests in a row (test_failures.py covers that road alone).
    router = OmniRouteRouter(
        model_list=model_list(upstreams, "t"),
        control_plane_url=omniroute.base_url,
        token=omniroute.gateway_token,
        client_options={**CLIENT_OPTIONS, "request_estimate_usd": {"cheap": float(cost(CHEAP))}},
    )
    closing.append(router)
    assert first_poll(omniroute, "t-plan")["status"] == "SAFE"

    async def run() -> tuple[list[tuple[float, str]], float]:
        served: list[tuple[float, str]] = []
        await_window_start(upstreams["plan"])
        # Plan, then cheap until its budget is spent, then premium.
        while not any(name == "premium" for _, name in served[-2:]) or len(served) < 12:
            response = await router.acompletion(model="auto/thrifty", messages=MESSAGES)
            served.append((time.time(), served_by(router, response)))
            assert len(served) < 40, [name for _, name in served]
        reset = upstreams["plan"].reset_at(served[0][0])
        assert time.time() < reset, "the first window ended before the ladder was climbed"
        # At 5 requests per second across the reset: back on the plan.
        while served[-1][1] != "plan":
            await asyncio.sleep(PACE)
            response = await router.acompletion(model="auto/thrifty", messages=MESSAGES)
            served.append((time.time(), served_by(router, response)))
            assert time.time() < reset + 10
        return served, reset

    try:
        served, reset = asyncio.run(run())
    finally:
        router.client.flush()
    names = [name for _, name in served]
    first_window = [name for at, name in served if at < reset]
    assert first_window[:PLAN_CAPACITY] == ["plan"] * PLAN_CAPACITY
    assert first_window.count("plan") == PLAN_CAPACITY
    first_premium = first_window.index("premium")
    # Never premium while cheap had budget: five cheap requests spend it.
    assert first_window[PLAN_CAPACITY:first_premium] == ["cheap"] * (first_premium - PLAN_CAPACITY)
    assert first_premium - PLAN_CAPACITY >= 5
    assert set(first_window[first_premium:]) == {"premium"}
    back = next(at for at, name in served if at >= reset and name == "plan")
    print(f"thrifty: back on the plan {back - reset:.3f} s after the reset; served: {names}")
    # The ledger equals the upstreams' own counts and bills.
    counts = {name: upstreams[name].served_count() for name in upstreams}
    assert counts == {name: names.count(name) for name in upstreams}
    rows = wait_for(
        lambda: len(r := omniroute.ledger("t-")) == sum(counts.values()) and r, what="the ledger"
    )
    by_name = ledger_by_name(rows)
    assert {name: len(entries) for name, entries in by_name.items()} == {
        k: v for k, v in counts.items() if v
    }
    assert total(by_name["cheap"]) == cost(CHEAP) * counts["cheap"]
    assert total(by_name["premium"]) == cost(PREMIUM) * counts["premium"]
    assert total(by_name["plan"]) == 0
    assert {r["rung"] for r in by_name["plan"]} == {"subscription"}
    # The worker polled the plan again once its window had reset.
    wait_for(lambda: any(at >= reset for at in upstreams["plan"].usage_polls), what="a poll")
    router.close()


def test_subscription_never_reaches_a_metered_deployment_and_comes_back_by_the_worker(
    omniroute: OmniRouteServer,
    upstreams: dict[str, FakeUpstream],
    closing: list[OmniRouteRouter],
) -> None:
    register_polled_plan(omniroute, "s-plan")
    router = OmniRouteRouter(
        model_list=model_list(upstreams, "s"),
        control_plane_url=omniroute.base_url,
        token=omniroute.gateway_token,
        client_options=CLIENT_OPTIONS,
    )
    closing.append(router)
    assert first_poll(omniroute, "s-plan")["status"] == "SAFE"

    async def run() -> tuple[list[tuple[float, str]], list[tuple[float, float | None]], int]:
        served: list[tuple[float, str]] = []
        empty: list[tuple[float, float | None]] = []  # (raised at, retry_after) per NoCapacity
        refused = 0
        start = await_window_start(upstreams["plan"])
        reset = start + WINDOW
        # A reading whose reset has passed says nothing of the new window: subscription
        # leaves the plan out until the worker has read it again (`reset_passed`).
        wait_for(lambda: plan_in_pool(router, "s-plan"), 10, "the plan in the new window")
        # At 5 requests per second, from the window's start until the plan serves again
        # after its reset.
        while not any(at >= reset for at, _ in served):
            try:
                response = await router.acompletion(model="auto/subscription", messages=MESSAGES)
                served.append((time.time(), served_by(router, response)))
            except NoCapacity as error:
                empty.append((time.time(), error.retry_after))
            except litellm.RateLimitError:  # the plan's own 429: nothing else to try
                refused += 1
            assert time.time() < reset + 10, (served, empty, refused)
            await asyncio.sleep(PACE)
        return served, empty, refused

    try:
        served, empty, refused = asyncio.run(run())
    finally:
        router.client.flush()
    reset = upstreams["plan"].reset_at(served[0][0])
    assert [name for at, name in served if at < reset] == ["plan"] * PLAN_CAPACITY
    assert {name for _, name in served} == {"plan"}
    assert refused <= 1
    # Never a metered deployment: neither was even called.
    for name in ("premium", "cheap"):
        assert (upstreams[name].served_count(), upstreams[name].refused) == (0, 0)
    # NoCapacity, each with a Retry-After that lands at or after the real reset.
    assert any(at < reset for at, _ in empty)
    for raised_at, retry_after in empty:
        assert retry_after is not None
        assert raised_at + retry_after >= reset, (raised_at - reset, retry_after)
    # Back on the plan after the reset, by the worker: its poll of the usage endpoint
    # after the reset came before the first plan-served request.
    back = next(at for at, _ in served if at >= reset)
    assert any(reset <= at <= back for at in upstreams["plan"].usage_polls)
    print(f"subscription: back on the plan {back - reset:.3f} s after the reset")
    # The ledger equals the plan's own count, and billed nothing.
    count = upstreams["plan"].served_count()
    assert count == len(served)
    rows = wait_for(lambda: len(r := omniroute.ledger("s-")) == count and r, what="the ledger")
    assert {r["connection_id"] for r in rows} == {"s-plan"}
    assert total(rows) == 0
    router.close()
