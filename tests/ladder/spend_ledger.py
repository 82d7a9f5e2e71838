"""A hand-checked spend ledger around NOW (2026-11-29 12:00 UTC, a month budget window):
round numbers in November (the current window), October (the previous one) and one
September entry that no window shows, a duplicate request id and plan-included entries
whose list price is what the plans saved. The tests state the figures, worked out by
hand from the comments beside the entries."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from billing import services as billing_services
from ladder import services
from ladder.models import LadderSettings
from tests.ladder.factories import NOW, make_connection

# Prices (USD per Mtok in / out): sonnet 3 / 15 (the plan's list price), gpt-4o-mini
# 0.15 / 0.6 (cheap: at most 1 USD in), gpt-4o 2.5 / 10 (premium).
PRICES = (
    ("claude", "claude-sonnet-4-5", "3", "15"),
    ("openai", "gpt-4o-mini", "0.15", "0.6"),
    ("openai", "gpt-4o", "2.5", "10"),
)


def _at(month: int, day: int, hour: int, minute: int = 0, second: int = 0) -> datetime:
    return datetime(2026, month, day, hour, minute, second, tzinfo=UTC)


# request id, connection, provider, model, cost (None: from the tokens), tokens in, out,
# when. Recorded in this order, each at its own time (the server's `now` then).
ENTRIES: tuple[tuple[str, str, str, str, str | None, int, int, datetime], ...] = (
    # September: before the previous window, shown nowhere.
    ("sep-premium", "prem", "openai", "gpt-4o", "100", 10, 10, _at(9, 30, 12)),
    # October (previous window): a plan request listed at 2 Mtok x 3 = 6.00 (saved), and
    # 2.00 on cheap one second before November starts.
    ("oct-plan", "plan", "claude", "claude-sonnet-4-5", None, 2_000_000, 0, _at(10, 15, 12)),
    ("oct-cheap", "key", "openai", "gpt-4o-mini", "2", 10, 10, _at(10, 31, 23, 59, 59)),
    # November (current window): a plan request at the window's first instant, 0.5 Mtok
    # x 3 = 1.50 saved; on the 28th 0.75 cheap, 4.00 premium and a keyless request listed
    # at 2 Mtok x 0.15 = 0.30 (saved); on the 29th a plan request, 1 Mtok x 3 = 3.00
    # saved, and 1.25 cheap.
    ("nov-plan-1", "plan", "claude", "claude-sonnet-4-5", None, 500_000, 0, _at(11, 1, 0)),
    ("nov-cheap-1", "key", "openai", "gpt-4o-mini", "0.75", 10, 10, _at(11, 28, 10)),
    ("nov-premium", "prem", "openai", "gpt-4o", "4", 10, 10, _at(11, 28, 11)),
    ("nov-keyless", "free-path", "openai", "gpt-4o-mini", None, 2_000_000, 0, _at(11, 28, 12)),
    ("nov-plan-2", "plan", "claude", "claude-sonnet-4-5", None, 1_000_000, 0, _at(11, 29, 8)),
    ("nov-cheap-2", "key", "openai", "gpt-4o-mini", "1.25", 10, 10, _at(11, 29, 9)),
)
# The same request id again with another cost: not counted (the ledger keeps the first).
DUPLICATE = ("nov-cheap-2", "key", "openai", "gpt-4o-mini", "9.99", 10, 10, _at(11, 29, 10))


def write_ledger(*, cheap_budget: str | None = "10") -> None:
    """The connections, prices, budgets and ledger above, recorded through the service
    (each entry at its own time, so October's is inside the retention rules)."""
    LadderSettings.objects.filter(pk=1).update(
        budget_window="month",
        cheap_budget_usd=None if cheap_budget is None else Decimal(cheap_budget),
        premium_budget_usd=None,
    )
    make_connection("plan", provider="claude", auth_type="oauth")
    make_connection("key", provider="openai", auth_type="apikey")
    make_connection("prem", provider="openai", auth_type="apikey")
    make_connection("free-path", provider="openai", auth_type="none")
    for provider, model, inp, out in PRICES:
        billing_services.upsert_price(
            billing_services.PriceInput(provider, model, Decimal(inp), Decimal(out), None),
            actor="test",
        )
    for entry in (*ENTRIES, DUPLICATE):
        request_id, connection_id, provider, model, cost, tin, tout, at = entry
        assert at <= NOW
        services.record_spend(
            services.SpendInput(
                request_id=request_id,
                connection_id=connection_id,
                provider=provider,
                model=model,
                cost_usd=None if cost is None else Decimal(cost),
                input_tokens=tin,
                output_tokens=tout,
                occurred_at=at,
            ),
            now=at,
        )
