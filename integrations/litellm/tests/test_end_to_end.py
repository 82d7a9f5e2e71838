"""The real LiteLLM Router with omniroute_litellm, against the real OmniRoute server and
local fake upstreams that serve N requests per short window, then 429 until it resets."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import litellm
import pytest
from omniroute_litellm import NoCapacity, OmniRouteRouter
from server import OmniRouteServer
from upstreams import INPUT_TOKENS, OUTPUT_TOKENS, FakeUpstream

pytestmark = pytest.mark.integration

WINDOW = 6  # seconds: the plan's window
PLAN_CAPACITY = 3
CHEAP = ("gpt-cheap-fake", Decimal("0.5"), Decimal("1"))  # model, USD per Mtok in, out
PREMIUM = ("claude-premium-fake", Decimal("3"), Decimal("15"))
MESSAGES = [{"role": "user", "content": "hello"}]


def cost(price: tuple[str, Decimal, Decimal]) -> Decimal:
    return (INPUT_TOKENS * price[1] + OUTPUT_TOKENS * price[2]) / Decimal(1_000_000)


CHEAP_BUDGET = cost(CHEAP) * 5  # five cheap requests


@pytest.fixture
def upstreams() -> Iterator[dict[str, FakeUpstream]]:
    made = {
        "plan": FakeUpstream("anthropic", capacity=PLAN_CAPACITY, window_seconds=WINDOW),
        "premium": FakeUpstream("anthropic"),
        "cheap": FakeUpstream("openai"),
    }
    yield made
    for upstream in made.values():
        upstream.stop()


def model_list(up: dict[str, FakeUpstream], tag: str) -> list[dict[str, Any]]:
    """The plan login and an API key serve one model group; a cheap model another."""
    return [
        {
            "model_name": "sonnet",
            "litellm_params": {
                "model": f"anthropic/{PREMIUM[0]}",
                "api_key": "plan",
                "api_base": up["plan"].base_url,
            },
            "model_info": {
                "omniroute_connection_id": f"{tag}-plan",
                "omniroute_auth_type": "oauth",
            },
        },
        {
            "model_name": "sonnet",
            "litellm_params": {
                "model": f"anthropic/{PREMIUM[0]}",
                "api_key": "key",
                "api_base": up["premium"].base_url,
            },
            "model_info": {
                "omniroute_connection_id": f"{tag}-premium",
                "omniroute_auth_type": "apikey",
            },
        },
        {
            "model_name": "mini",
            "litellm_params": {
                "model": f"openai/{CHEAP[0]}",
                "api_key": "key",
                "api_base": up["cheap"].base_url + "/v1",
            },
            "model_info": {"omniroute_connection_id": f"{tag}-cheap"},
        },
    ]


def configure(omniroute: OmniRouteServer, provider_of_premium: str) -> None:
    for provider, (model, pin, pout) in (("openai", CHEAP), (provider_of_premium, PREMIUM)):
        body = {
            "provider": provider,
            "model": model,
            "input_usd_per_mtok": float(pin),
            "output_usd_per_mtok": float(pout),
        }
        assert omniroute.api("POST", "/prices", body).status_code in (200, 201)
    settings = omniroute.api("GET", "/settings/ladder").json()
    settings["rung_budget_usd"] = {"cheap": float(CHEAP_BUDGET), "premium": None}
    answer = omniroute.api("PUT", "/settings/ladder", settings)
    assert answer.status_code == 200, answer.text


def await_window_start(upstream: FakeUpstream) -> float:
    """Wait for the plan's next window to begin (a real window of a few seconds)."""
    start = upstream.reset_at(time.time())
    time.sleep(max(0.0, start - time.time()) + 0.02)
    return start


def served_by(router: OmniRouteRouter, response: Any) -> str:
    dispatch_id = response._hidden_params.get("model_id")
    return router.deployments[dispatch_id].connection_id.split("-", 1)[1]


def wait_for(predicate: Any, timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError("condition not met")
        time.sleep(0.05)
    return result


def test_thrifty_plan_then_cheap_then_premium_then_the_plan_again(
    omniroute: OmniRouteServer, upstreams: dict[str, FakeUpstream]
) -> None:
    router = OmniRouteRouter(
        model_list=model_list(upstreams, "t"),
        control_plane_url=omniroute.base_url,
        token=omniroute.gateway_token,
        client_options={"revalidate_seconds": 0.2, "flush_interval": 0.02},
    )
    configure(omniroute, "anthropic" if router.server_has_aliases else "claude")

    async def run() -> tuple[list[tuple[float, str]], float]:
        served: list[tuple[float, str]] = []
        await_window_start(upstreams["plan"])
        # Plan, then cheap until its budget is spent, then premium.
        while not any(name == "premium" for _, name in served[-2:]) or len(served) < 12:
            response = await router.acompletion(model="auto/thrifty", messages=MESSAGES)
            served.append((time.time(), served_by(router, response)))
            assert len(served) < 40
        reset = upstreams["plan"].reset_at(served[0][0])
        assert time.time() < reset, "the first window ended before the ladder was climbed"
        # At 5 requests per second across the reset: back on the plan.
        while served[-1][1] != "plan":
            await asyncio.sleep(0.2)
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
    print(f"back on the plan {back - reset:.3f} s after the reset; served: {names}")
    assert back - reset <= 1.0
    # The ledger equals the upstreams' own counts and bills.
    counts = {name: upstreams[name].served_count() for name in upstreams}
    assert counts == {name: names.count(name) for name in upstreams}
    rows = wait_for(lambda: (r := omniroute.ledger()) and len(r) == sum(counts.values()) and r)
    by_connection: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_connection.setdefault(row["connection_id"].split("-", 1)[1], []).append(row)
    assert {name: len(entries) for name, entries in by_connection.items()} == {
        k: v for k, v in counts.items() if v
    }
    assert (
        sum(Decimal(str(r["cost_usd"])) for r in by_connection["cheap"])
        == cost(CHEAP) * counts["cheap"]
    )
    assert (
        sum(Decimal(str(r["cost_usd"])) for r in by_connection["premium"])
        == cost(PREMIUM) * counts["premium"]
    )
    assert sum(Decimal(str(r["cost_usd"])) for r in by_connection["plan"]) == 0
    assert {r["rung"] for r in by_connection["plan"]} == {"subscription"}
    router.close()


def test_subscription_never_reaches_a_metered_deployment_and_says_when_to_retry(
    omniroute: OmniRouteServer, upstreams: dict[str, FakeUpstream]
) -> None:
    router = OmniRouteRouter(
        model_list=model_list(upstreams, "s"),
        control_plane_url=omniroute.base_url,
        token=omniroute.gateway_token,
        client_options={"revalidate_seconds": 0.2, "flush_interval": 0.02},
    )
    # What a quota refresh would have stored: the plan's window, fresh.
    start = await_window_start(upstreams["plan"])
    reading = {"remaining_percent": 100.0, "reset_at": _iso(start + WINDOW)}
    assert (
        omniroute.api("POST", "/connections/s-plan/readings", reading, operator=False).status_code
        == 201
    )

    async def run() -> tuple[list[str], NoCapacity, float, int]:
        served: list[str] = []
        refused = 0
        trail: list[float] = []
        for _ in range(PLAN_CAPACITY + 5):
            try:
                response = await router.acompletion(model="auto/subscription", messages=MESSAGES)
                served.append(served_by(router, response))
            except NoCapacity as error:
                return served, error, time.time(), refused
            except litellm.RateLimitError:  # the plan's own 429: nothing else to try
                refused += 1
            trail.append(time.time())
        raise AssertionError(
            f"no NoCapacity; served {served}, refused {refused}, "
            f"at {[round(t - trail[0], 3) for t in trail]}; {router.client.reporter.sent}"
        )

    try:
        started = time.monotonic()
        served, error, raised_at, refused = asyncio.run(run())
    finally:
        router.client.flush()
    assert served == ["plan"] * PLAN_CAPACITY
    assert refused <= 1
    assert upstreams["premium"].served_count() == 0
    assert upstreams["cheap"].served_count() == 0
    assert upstreams["premium"].refused == 0
    assert upstreams["cheap"].refused == 0
    real_reset = upstreams["plan"].reset_at(start)
    assert error.retry_after is not None
    assert raised_at + error.retry_after >= real_reset, (
        real_reset,
        served,
        refused,
        json.dumps(error.decision.body if error.decision else None),
    )
    assert raised_at + error.retry_after <= real_reset + 2
    assert time.monotonic() - started < WINDOW  # NoCapacity came at once, not after retries
    router.close()


def _iso(epoch: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(epoch, UTC).isoformat()


def test_registration_is_idempotent_and_keeps_an_operators_fields(
    omniroute: OmniRouteServer, upstreams: dict[str, FakeUpstream]
) -> None:
    operator = {
        "provider": "claude",
        "auth_type": "oauth",
        "label": "Ops' own",
        "quota_source": "claude",
    }
    assert omniroute.api("PUT", "/connections/r-plan", operator).status_code == 200
    models = model_list(upstreams, "r")
    for _ in range(2):
        router = OmniRouteRouter(
            model_list=models, control_plane_url=omniroute.base_url, token=omniroute.gateway_token
        )
        router.close()
    stored = omniroute.api("GET", "/connections/r-plan").json()
    assert (stored["label"], stored["quota_source"]) == ("Ops' own", "claude")
    cheap = omniroute.api("GET", "/connections/r-cheap").json()
    assert (cheap["provider"], cheap["auth_type"]) == ("openai", "apikey")
    premium = omniroute.api("GET", "/connections/r-premium").json()
    assert (premium["provider"], premium["auth_type"]) == ("claude", "apikey")
    candidates = [
        c
        for c in omniroute.api("GET", "/candidates").json()
        if any(
            cid.startswith("r-")
            for cid in (c.get("allowed_connection_ids") or [c.get("connection_id") or ""])
        )
    ]
    assert [
        (c["provider"], c["model"], c["connection_id"], c["allowed_connection_ids"])
        for c in candidates
    ] == [
        ("claude", PREMIUM[0], None, ["r-plan", "r-premium"]),
        ("openai", CHEAP[0], "r-cheap", None),
    ]


def test_other_models_pass_through_untouched(
    omniroute: OmniRouteServer, upstreams: dict[str, FakeUpstream]
) -> None:
    router = OmniRouteRouter(
        model_list=model_list(upstreams, "p"),
        control_plane_url=omniroute.base_url,
        token=omniroute.gateway_token,
    )
    fetches = router.client.stats["fetches"]
    response = router.completion(model="mini", messages=MESSAGES)
    assert response.choices[0].message.content == "ok"
    assert router.client.stats["fetches"] == fetches  # no pool was asked for
    assert upstreams["cheap"].served_count() == 1
    router.close()


def test_sync_completion_routes_auto_models(
    omniroute: OmniRouteServer, upstreams: dict[str, FakeUpstream]
) -> None:
    router = OmniRouteRouter(
        model_list=model_list(upstreams, "y"),
        control_plane_url=omniroute.base_url,
        token=omniroute.gateway_token,
    )
    response = router.completion(model="auto/thrifty", messages=MESSAGES)
    assert served_by(router, response) in ("plan", "cheap", "premium")
    router.close()
