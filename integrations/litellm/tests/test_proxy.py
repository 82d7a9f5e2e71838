"""The LiteLLM proxy server loading the plugin from its config.yaml (the shipped
examples/config.yaml, pointed at local fake upstreams), against the real OmniRoute
server: fall-through within a request, the 429 with Retry-After of an empty pool (never
a metered deployment for subscription), the reports, and other models untouched."""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from litellm_proxy import MASTER_KEY, LiteLLMProxy
from scenario import (
    CHEAP,
    PLAN_CAPACITY,
    PREMIUM,
    await_window_start,
    configure,
    cost,
    iso,
    ledger_by_name,
    make_upstreams,
    total,
)
from server import ROOT, OmniRouteServer, wait_for
from upstreams import FakeUpstream

sys.path.insert(0, str(ROOT / "tests" / "integration"))
from tcp_proxy import TcpProxy

pytestmark = pytest.mark.integration
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "config.yaml"
# The example's connections, and which fake upstream and model each one gets here.
UPSTREAM_OF = {"claude-max": "plan", "anthropic-key": "premium", "openai-key": "cheap"}


def proxy_config(up: dict[str, FakeUpstream]) -> dict[str, Any]:
    """examples/config.yaml with its deployments pointed at the fake upstreams (connection
    ids `x-plan`, `x-premium`, `x-cheap`); everything else as shipped."""
    config = yaml.safe_load(EXAMPLE.read_text())
    for deployment in config["model_list"]:
        info = deployment["model_info"]
        name = UPSTREAM_OF[info["omniroute_connection_id"]]
        info["omniroute_connection_id"] = f"x-{name}"
        params = deployment["litellm_params"]
        provider = params["model"].split("/", 1)[0]
        model = CHEAP[0] if provider == "openai" else PREMIUM[0]
        base = up[name].base_url + ("/v1" if provider == "openai" else "")
        params.update({"model": f"{provider}/{model}", "api_key": "key", "api_base": base})
    config["general_settings"]["master_key"] = MASTER_KEY
    return config


@pytest.fixture(scope="module")
def upstreams() -> Iterator[dict[str, FakeUpstream]]:
    made = make_upstreams()
    yield made
    for upstream in made.values():
        upstream.stop()


@pytest.fixture(scope="module")
def fault(omniroute: OmniRouteServer) -> Iterator[TcpProxy]:
    """A fault proxy between the LiteLLM proxy and OmniRoute (forwarding until told)."""
    host, port = omniroute.base_url.removeprefix("http://").split(":")
    made = TcpProxy(host, int(port))
    yield made
    made.stop()


@pytest.fixture(scope="module")
def proxy(
    omniroute: OmniRouteServer,
    upstreams: dict[str, FakeUpstream],
    fault: TcpProxy,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[LiteLLMProxy]:
    configure(omniroute)
    through = f"http://{fault.host}:{fault.port}"
    env = {"OMNIROUTE_URL": through, "OMNIROUTE_TOKEN": omniroute.gateway_token}
    running = LiteLLMProxy(proxy_config(upstreams), env, tmp_path_factory.mktemp("proxy"))
    yield running
    running.stop()


def served_by(answer: httpx.Response, config: dict[str, Any]) -> str:
    """The connection of the deployment that served (LiteLLM's `x-litellm-model-id`: a
    dispatch copy is `<group>:<index in the model list>`)."""
    model_id = answer.headers["x-litellm-model-id"]
    index = int(model_id.rsplit(":", 1)[1])
    return str(config["model_list"][index]["model_info"]["omniroute_connection_id"])


def test_the_example_config_loads_the_handler() -> None:
    config = yaml.safe_load(EXAMPLE.read_text())
    assert config["litellm_settings"]["callbacks"] == "omniroute_litellm.proxy.handler"
    assert config["router_settings"]["disable_cooldowns"] is True


def test_a_plans_429_falls_through_within_the_request_and_subscription_answers_429(
    omniroute: OmniRouteServer, upstreams: dict[str, FakeUpstream], proxy: LiteLLMProxy
) -> None:
    config = proxy_config(upstreams)
    plan = upstreams["plan"]
    start = await_window_start(plan)
    reset = plan.reset_at(start)
    # The plan's window is used up elsewhere (another client of the same login), so
    # OmniRoute still ranks it first.
    for _ in range(PLAN_CAPACITY):
        assert httpx.post(plan.base_url + "/v1/messages", json={"model": "m"}).status_code == 200

    answer = proxy.chat("auto/thrifty")

    assert answer.status_code == 200, answer.text + "\n" + proxy.tail()
    assert served_by(answer, config) == "x-cheap"
    assert answer.headers["x-litellm-attempted-retries"] == "1"
    assert (plan.refused, upstreams["cheap"].served_count()) == (1, 1)
    # The plan's 429 was reported as quota_exhausted, with its reset.
    status = wait_for(
        lambda: (s := omniroute.api("GET", "/connections/x-plan/status").json())["reading"] and s,
        what="the plan's reading",
    )
    assert (status["reading"]["status"], status["reading"]["reset_at"]) == (
        "EXHAUSTED",
        iso(reset).replace("+00:00", "Z"),
    )

    empty = proxy.chat("auto/subscription")

    assert empty.status_code == 429, empty.text
    assert time.time() + int(empty.headers["retry-after"]) >= reset
    assert int(empty.headers["retry-after"]) <= math.ceil(reset - start)
    assert "auto/subscription: no capacity" in empty.json()["error"]["message"]
    # Never a metered deployment for subscription; the plan not asked again either.
    assert (plan.refused, upstreams["premium"].served_count(), upstreams["premium"].refused) == (
        1,
        0,
        0,
    )
    assert upstreams["cheap"].served_count() == 1
    rows = wait_for(lambda: (r := omniroute.ledger("x-")) and r, what="the ledger")
    assert [r["connection_id"] for r in rows] == ["x-cheap"]
    assert total(ledger_by_name(rows)["cheap"]) == cost(CHEAP)


def test_other_models_pass_through_the_proxy_untouched(
    omniroute: OmniRouteServer, upstreams: dict[str, FakeUpstream], proxy: LiteLLMProxy
) -> None:
    served = upstreams["cheap"].served_count()
    before = len(omniroute.ledger("x-"))

    answer = proxy.chat("mini")

    assert answer.status_code == 200, answer.text
    assert answer.headers["x-litellm-model-group"] == "mini"
    assert upstreams["cheap"].served_count() == served + 1
    assert len(omniroute.ledger("x-")) == before  # not an OmniRoute request: nothing reported


def test_the_dispatch_group_is_hidden_refused_and_the_auto_ids_go_through_the_ladder(
    omniroute: OmniRouteServer, upstreams: dict[str, FakeUpstream], proxy: LiteLLMProxy
) -> None:
    routed = proxy.chat("auto/thrifty")
    assert routed.status_code == 200, routed.text
    group = routed.headers["x-litellm-model-group"]
    assert group.startswith("omniroute-dispatch-")
    served = {name: upstream.served_count() for name, upstream in upstreams.items()}
    auth = {"Authorization": f"Bearer {MASTER_KEY}"}

    listed = httpx.get(proxy.base_url + "/v1/models", headers=auth, timeout=10).json()
    direct = proxy.chat(group)

    assert not [m["id"] for m in listed["data"] if m["id"].startswith("omniroute-dispatch-")]
    assert direct.status_code == 400, direct.text
    assert {name: upstream.served_count() for name, upstream in upstreams.items()} == served


def test_an_unreachable_control_plane_is_a_503_never_a_500_and_recovers(
    upstreams: dict[str, FakeUpstream], proxy: LiteLLMProxy, fault: TcpProxy
) -> None:
    # Point 8: the proxy answered 500 where the docs promise 429 or 503.
    served = {name: upstream.served_count() for name, upstream in upstreams.items()}
    seen: list[httpx.Response] = []

    def asked() -> httpx.Response:
        seen.append(proxy.chat("auto/subscription"))
        return seen[-1]

    fault.refuse()
    try:
        # Until the client notices, a decision it may still use answers (a 429 for an
        # empty pool); then the control plane's absence is a 503.
        wait_for(lambda: asked().status_code == 503, 20, "a 503 for the absent control plane")
        more = [asked() for _ in range(2)]
    finally:
        fault.forward()
    assert [answer.status_code for answer in more] == [503, 503], [a.text for a in more]
    # It says why: the control plane unreachable, or the breaker open after it was.
    assert "unreachable" in more[0].text or "circuit breaker open" in more[0].text
    assert {answer.status_code for answer in seen} <= {429, 503}  # never a 500
    # auto/subscription reached nothing while the control plane was away.
    assert {name: upstream.served_count() for name, upstream in upstreams.items()} == served
    wait_for(lambda: asked().status_code in (200, 429), 20, "the proxy back on the ladder")
