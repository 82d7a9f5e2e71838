"""The tiny simulated world the simulator tests share: one plan, one metered key."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

from billing.classify import Billing, BillingVerdict, Overage
from billing.tiers import PriceBook, PriceRow
from ladder.core import CandidateIn, LadderConfig
from ladder.simulator.trace import (
    Request,
    Selection,
    Trace,
)
from ladder.simulator.world import (
    FIVE_HOURS,
    PlanUnit,
    PlanWindow,
    SimConnection,
    World,
)

T0 = datetime(2025, 6, 2, tzinfo=UTC)  # a Monday
PLAN_VERDICT = BillingVerdict(Billing.SUBSCRIPTION, Overage.HARD_STOP, "plan", 1)
METERED_VERDICT = BillingVerdict(Billing.METERED, Overage.METERS_TO_PAID, "key", 2)
CODING = Selection(category="coding")
# The metered key's model: $1 in / $2 out per million tokens, so a 1000 in / 500 out
# request costs exactly 0.002 USD (and $1 is the cheap rung's upper bound).
PRICE_ROWS = (
    PriceRow("claude", "sonnet", Decimal("3"), Decimal("15")),
    PriceRow("openai", "mini", Decimal("1"), Decimal("2")),
)
PRICES = PriceBook(PRICE_ROWS)
ONE_REQUEST_USD = Decimal("0.002")
CANDIDATES = (
    CandidateIn(1, "claude", "sonnet", ("coding",), "plan-1", None),
    CandidateIn(2, "openai", "mini", ("coding",), "key-1", None),
)


def plan(*windows: PlanWindow, is_polled: bool = True, **fields: object) -> SimConnection:
    """The plan connection: a Claude login whose only window holds 5 requests per 5 h."""
    return SimConnection(
        "plan-1",
        "claude",
        "oauth",
        PLAN_VERDICT,
        is_polled=is_polled,
        windows=windows or (PlanWindow("5h", 5, PlanUnit.REQUESTS, FIVE_HOURS, T0),),
        **fields,  # type: ignore[arg-type]
    )


KEY = SimConnection("key-1", "openai", "apikey", METERED_VERDICT)


def world(*connections: SimConnection, config: LadderConfig | None = None) -> World:
    return World(connections or (plan(), KEY), CANDIDATES, PRICES, config or LadderConfig())


def request(at: timedelta, *, input_tokens: int = 1000, output_tokens: int = 500) -> Request:
    return Request(T0 + at, CODING, input_tokens, output_tokens)


def trace(*requests: Request, hours: float = 6) -> Trace:
    return Trace(T0, T0 + timedelta(hours=hours), tuple(requests), source="test")


H = timedelta(hours=1)
S = timedelta(seconds=1)
# Ten requests: five fill the plan, one lands on it exhausted before any poll has seen
# it (a 429 and a fall-through), one waits near the reset, three come after the reset
# at 5 h (the second reset refresh is due at 5 h + 1.5 s).
TINY_TRACE = trace(
    request(H),
    request(H + 60 * S),
    request(H + 120 * S),
    request(H + 180 * S),
    request(H + 240 * S),
    request(H + 290 * S),
    request(5 * H - 30 * S),
    request(5 * H + 1 * S),
    request(5 * H + 60 * S),
    request(5 * H + 240 * S),
)
