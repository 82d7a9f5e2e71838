"""What the end-to-end tests share: a plan login and an API key serving one model group
(the plan on a fake upstream with a short window), a cheap model of another group, the
prices and the cheap rung's budget."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from server import OmniRouteServer
from upstreams import INPUT_TOKENS, OUTPUT_TOKENS, FakeUpstream

WINDOW = 6  # seconds: the plan's window
PLAN_CAPACITY = 3
CHEAP = ("gpt-cheap-fake", Decimal("0.5"), Decimal("1"))  # model, USD per Mtok in, out
PREMIUM = ("claude-premium-fake", Decimal("3"), Decimal("15"))
MESSAGES = [{"role": "user", "content": "hello"}]
PLAN_CREDENTIAL = "sk-ant-oat01-e2e-plan-token"


def cost(price: tuple[str, Decimal, Decimal]) -> Decimal:
    return (INPUT_TOKENS * price[1] + OUTPUT_TOKENS * price[2]) / Decimal(1_000_000)


CHEAP_BUDGET = cost(CHEAP) * 5  # five cheap requests


def make_upstreams() -> dict[str, FakeUpstream]:
    return {
        "plan": FakeUpstream("anthropic", capacity=PLAN_CAPACITY, window_seconds=WINDOW),
        "premium": FakeUpstream("anthropic"),
        "cheap": FakeUpstream("openai"),
    }


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


def configure(omniroute: OmniRouteServer) -> None:
    """The two models' prices (the premium one under LiteLLM's provider name: the server
    maps `anthropic` to `claude`) and a budget of five cheap requests."""
    for provider, (model, pin, pout) in (("openai", CHEAP), ("anthropic", PREMIUM)):
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


def register_polled_plan(omniroute: OmniRouteServer, connection_id: str) -> None:
    """The plan login as an operator registers it: polled by the Claude quota adapter."""
    body = {
        "provider": "claude",
        "auth_type": "oauth",
        "label": "Claude plan (e2e)",
        "quota_source": "claude",
        "credential": PLAN_CREDENTIAL,
    }
    answer = omniroute.api("PUT", f"/connections/{connection_id}", body)
    assert answer.status_code == 200, answer.text


def await_window_start(upstream: FakeUpstream) -> float:
    """Wait for the plan's next window to begin (a real window of a few seconds)."""
    start = upstream.reset_at(time.time())
    time.sleep(max(0.0, start - time.time()) + 0.02)
    return start


def served_by(router: Any, response: Any) -> str:
    dispatch_id = response._hidden_params.get("model_id")
    return str(router.deployments[dispatch_id].connection_id.split("-", 1)[1])


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat()


def ledger_by_name(rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Ledger rows by the name after the connection id's tag (`t-plan` -> `plan`)."""
    by_name: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_name.setdefault(str(row["connection_id"]).split("-", 1)[1], []).append(row)
    return by_name


def total(rows: list[dict[str, Any]], field: str = "billed_usd") -> Decimal:
    return sum((Decimal(str(r[field])) for r in rows), Decimal(0))
