"""The real LiteLLM Router with omniroute_litellm against the real OmniRoute server (no
worker: registration and the paths that need none). The ladder and the plan's return
after a reset, with a real worker: test_with_worker.py."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from omniroute_litellm import NoCapacity, OmniRouteRouter
from scenario import CHEAP, MESSAGES, PREMIUM, iso, make_upstreams, model_list, served_by
from server import OmniRouteServer, wait_for
from upstreams import FakeUpstream

pytestmark = pytest.mark.integration


@pytest.fixture
def upstreams() -> Iterator[dict[str, FakeUpstream]]:
    made = make_upstreams()
    yield made
    for upstream in made.values():
        upstream.stop()


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


def test_an_overage_header_takes_the_plan_out_of_subscription_on_the_next_decision(
    omniroute: OmniRouteServer, upstreams: dict[str, FakeUpstream]
) -> None:
    # The plan's account bills past its limit, and every answer says so.
    upstreams["plan"].extra_headers = {"anthropic-ratelimit-unified-overage-in-use": "true"}
    router = OmniRouteRouter(
        model_list=model_list(upstreams, "o"),
        control_plane_url=omniroute.base_url,
        token=omniroute.gateway_token,
    )
    reading = {"remaining_percent": 80.0, "reset_at": iso(time.time() + 3600)}
    assert omniroute.api("POST", "/connections/o-plan/readings", reading).status_code == 201

    first = router.completion(model="auto/subscription", messages=MESSAGES)
    assert served_by(router, first) == "plan"
    # LiteLLM runs its success callbacks after returning: the event, with its headers,
    # lands when it lands; the gateway dropped its kept decision when it queued it.
    wait_for(
        lambda: omniroute.api("GET", "/connections/o-plan/status").json()["billing"]["evidence"],
        what="the overage header's evidence to land",
    )

    with pytest.raises(NoCapacity):
        router.completion(model="auto/subscription", messages=MESSAGES)
    assert upstreams["plan"].served_count() == 1
    billing = omniroute.api("GET", "/connections/o-plan/status").json()["billing"]
    assert (billing["effective_overage"], billing["evidence"]["says"]) == (
        "meters-to-paid",
        "can_meter",
    )
    router.close()
