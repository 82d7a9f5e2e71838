"""The real LiteLLM Router with omniroute_litellm against the real OmniRoute server (no
worker: registration and the paths that need none). The ladder and the plan's return
after a reset, with a real worker: test_with_worker.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from omniroute_litellm import OmniRouteRouter
from scenario import CHEAP, MESSAGES, PREMIUM, make_upstreams, model_list, served_by
from server import OmniRouteServer
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
