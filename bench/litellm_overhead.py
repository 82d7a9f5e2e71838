"""Added latency of omniroute_litellm over the same LiteLLM Router, both arms in one run.

Run with the integrations venv (`make test-integrations` creates it):
    OMNIROUTE_SERVER_PYTHON=.venv/bin/python \
        var/integrations-venv/bin/python bench/litellm_overhead.py
Prints p50/p99 of a request through the plain Router and through the plugin (a plan
connection, nothing changing: no round trip expected), the kept-decision lookup, and the
first pool answer after a write elsewhere (a revalidation)."""

import asyncio
import os
import pathlib
import sys
import tempfile
import time

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
sys.path.insert(
    0, str(pathlib.Path(__file__).resolve().parents[1] / "integrations" / "litellm" / "tests")
)
from litellm import Router
from omniroute_litellm import OmniRouteRouter
from server import OmniRouteServer
from upstreams import FakeUpstream

up = FakeUpstream("anthropic")
srv = OmniRouteServer(pathlib.Path(tempfile.mkdtemp()))
ml = [
    {
        "model_name": "mini",
        "litellm_params": {"model": "anthropic/claude-x", "api_key": "k", "api_base": up.base_url},
        "model_info": {"omniroute_connection_id": "k1", "omniroute_auth_type": "oauth"},
    }
]
plain = Router(model_list=ml)
omni = OmniRouteRouter(
    model_list=ml,
    control_plane_url=srv.base_url,
    token=srv.gateway_token,
    client_options={"revalidate_seconds": 3600},
)
M = [{"role": "user", "content": "hi"}]


def pct(xs, p):
    xs = sorted(xs)
    return xs[int(p * (len(xs) - 1))]


async def run():
    for _ in range(30):
        await plain.acompletion(model="mini", messages=M)
        await omni.acompletion(model="auto/thrifty", messages=M)
    a, b = [], []
    for _ in range(400):
        t = time.perf_counter()
        await plain.acompletion(model="mini", messages=M)
        a.append(time.perf_counter() - t)
        t = time.perf_counter()
        await omni.acompletion(model="auto/thrifty", messages=M)
        b.append(time.perf_counter() - t)
    print(f"plain p50 {pct(a, 0.5) * 1e3:.2f} ms p99 {pct(a, 0.99) * 1e3:.2f} ms")
    print(f"plugin p50 {pct(b, 0.5) * 1e3:.2f} ms p99 {pct(b, 0.99) * 1e3:.2f} ms")
    print(f"client stats {omni.client.stats}")
    # the pool lookup alone when nothing changed
    t = time.perf_counter()
    for _ in range(10000):
        omni.client.pool("auto/thrifty", omni.pool_body)
    print(f"kept-decision lookup {(time.perf_counter() - t) / 10000 * 1e6:.1f} us")
    # The first pool answer after a write elsewhere that changes the pool (a 200); the
    # change feed's notice is stood in for by invalidate().
    c = []
    for i in range(30):
        event = (
            {"kind": "rate_limited", "retry_after_seconds": 60}
            if i % 2 == 0
            else {"kind": "success"}
        )
        srv.api("POST", "/connections/k1/events", event, operator=False)
        omni.client.invalidate()
        t = time.perf_counter()
        omni.client.pool("auto/thrifty", omni.pool_body)
        c.append(time.perf_counter() - t)
    print(f"revalidation p50 {pct(c, 0.5) * 1e3:.2f} ms p99 {pct(c, 0.99) * 1e3:.2f} ms")


asyncio.run(run())
omni.close()
srv.stop()
up.stop()
