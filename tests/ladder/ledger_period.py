"""A hand-written period for the ledger replay's tests: a plan seat's readings and
ledger, a metered key's paid requests (the figures worked out in the comments)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from billing import services as billing_services
from ladder import services
from ladder.services.ledger_replays import ReplayAsk
from tests.ladder.factories import NOW, make_connection, make_reading
from tests.ladder.spend_ledger import PRICES

T0 = NOW - timedelta(hours=10)
RESET = T0 + timedelta(hours=5)
PERIOD = ReplayAsk(T0, T0 + timedelta(hours=5))


def request(request_id: str, connection_id: str, at: Any, cost: str | None) -> None:
    """A sonnet request: 0.5 Mtok in, 1.50 at list price (premium: 3 USD in)."""
    services.record_spend(
        services.SpendInput(
            request_id=request_id,
            connection_id=connection_id,
            provider="claude",
            model="claude-sonnet-4-5",
            cost_usd=None if cost is None else Decimal(cost),
            input_tokens=500_000,
            output_tokens=0,
            occurred_at=at,
        ),
        now=at,
    )


def build_period() -> None:
    """The seat used 60 % of its window (100 % -> 40 %) for four requests listed at
    1.50 (6.00): 10.00 of list price a window. Three more went to the metered key at
    1.50 each (4.50 paid)."""
    for provider, model, inp, out in PRICES:
        billing_services.upsert_price(
            billing_services.PriceInput(provider, model, Decimal(inp), Decimal(out), None),
            actor="test",
        )
    make_connection("claude-max-1")
    make_connection("claude-key", provider="claude", auth_type="apikey")
    for minutes, left in ((0, 100.0), (60, 40.0)):
        at = T0 + timedelta(minutes=minutes)
        make_reading("claude-max-1", now=at, remaining_percent=left, reset_at=RESET)
    for n in range(4):
        request(f"plan-{n}", "claude-max-1", T0 + timedelta(minutes=10 + 10 * n), None)
    for n in range(3):
        request(f"paid-{n}", "claude-key", T0 + timedelta(minutes=120 + n), "1.50")
