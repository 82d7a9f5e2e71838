"""The staggered-reset scenario: several plan seats whose weekly windows reset on
different days, replayed under the allowlist's own order (before "Which plan connection
first") and under the order of preference (soonest reset first), each with and without
conversation keys (the gateway's soft stickiness).

The world: three Claude Max seats, each a weekly window of `SEAT_TOKENS` tokens, resetting
on Saturday, Thursday and Tuesday at 00:00 UTC, listed in that order (the order they were
added), and a metered Anthropic key for the same model behind them (premium rung: $3 /
$15 per million tokens). The traffic: conversations of 4 to 16 turns, started through
working hours every weekday, each turn about 6,000 tokens in and 600 out, about 2.6 seats'
worth a week: more than two seats hold, less than three.

What it reports per run: plan capacity that expired unused (in seat-weeks: 1.0 is one
whole seat's week), paid spend, and how many consecutive turns of a conversation changed
connection. `manage.py simulate --staggered` prints the comparison.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Final

from billing.classify import Billing, BillingVerdict, Overage
from billing.tiers import PriceBook, PriceRow
from ladder.core import CandidateIn, LadderConfig
from ladder.simulator.results import Policy, PolicyResult
from ladder.simulator.run import simulate
from ladder.simulator.trace import Request, Selection, Trace
from ladder.simulator.world import PlanUnit, PlanWindow, SimConnection, World

START: Final = datetime(2025, 6, 2, tzinfo=UTC)  # a Monday
WEEKS: Final = 4
SEED: Final = 36
SEAT_TOKENS: Final = 6_000_000  # one seat's week
# (seat, day of its weekly reset counted from Monday): listed in this order.
SEATS: Final = (("claude-max-sat", 5), ("claude-max-thu", 3), ("claude-max-tue", 1))
KEY: Final = "anthropic-key"
MODEL: Final = ("claude", "claude-sonnet-4-5")
CONVERSATIONS_PER_WEEKDAY: Final = 64
TURNS: Final = (4, 16)
INPUT_TOKENS: Final = 6_000
OUTPUT_TOKENS: Final = 600

_PLAN = BillingVerdict(Billing.SUBSCRIPTION, Overage.HARD_STOP, "Max plan (scenario)", None)
_METERED = BillingVerdict(Billing.METERED, Overage.METERS_TO_PAID, "API key (scenario)", None)


def staggered_world(start: datetime = START) -> World:
    """Three plan seats resetting on different days, and a metered key behind them."""
    week = timedelta(days=7)
    seats = tuple(
        SimConnection(
            seat,
            "claude",
            "oauth",
            _PLAN,
            is_polled=True,
            windows=(
                PlanWindow(
                    "seven_day", SEAT_TOKENS, PlanUnit.TOKENS, week, start + timedelta(days=day)
                ),
            ),
        )
        for seat, day in SEATS
    )
    key = SimConnection(KEY, "claude", "apikey", _METERED)
    candidate = CandidateIn(1, *MODEL, ("coding",), None, (*(s for s, _ in SEATS), KEY))
    prices = PriceBook((PriceRow(*MODEL, Decimal("3"), Decimal("15")),))
    return World((*seats, key), (candidate,), prices, LadderConfig())


def staggered_trace(start: datetime = START, weeks: int = WEEKS, seed: int = SEED) -> Trace:
    """Conversations through working hours on weekdays, a turn every few minutes."""
    rng = random.Random(seed)
    selection = Selection(*(None, *MODEL))
    requests: list[Request] = []
    conversation = 0
    for day in range(weeks * 7):
        if day % 7 >= 5:
            continue  # weekends are quiet
        opens = start + timedelta(days=day, hours=8)
        for _ in range(CONVERSATIONS_PER_WEEKDAY):
            conversation += 1
            at = opens + timedelta(seconds=rng.uniform(0, 9 * 3600))
            for _ in range(rng.randint(*TURNS)):
                requests.append(
                    Request(
                        at,
                        selection,
                        int(INPUT_TOKENS * rng.uniform(0.8, 1.2)),
                        int(OUTPUT_TOKENS * rng.uniform(0.8, 1.2)),
                        conversation,
                    )
                )
                at += timedelta(seconds=rng.uniform(30, 300))
    requests.sort(key=lambda request: request.at)
    return Trace(start, start + timedelta(days=weeks * 7), tuple(requests), "staggered resets")


@dataclass(frozen=True, slots=True)
class Comparison:
    """The scenario under both orders, with conversation keys (sticky) and without."""

    given_order: PolicyResult
    preference: PolicyResult
    given_order_sticky: PolicyResult
    preference_sticky: PolicyResult

    def rows(self) -> list[tuple[str, PolicyResult]]:
        return [
            ("allowlist order, no keys", self.given_order),
            ("soonest reset first, no keys", self.preference),
            ("allowlist order, keys", self.given_order_sticky),
            ("soonest reset first, keys", self.preference_sticky),
        ]


def compare(world: World | None = None, trace: Trace | None = None) -> Comparison:
    """Replay the scenario (thrifty) four ways."""
    world = world or staggered_world()
    trace = trace or staggered_trace()

    def run(given_order: bool, sticky: bool) -> PolicyResult:
        return simulate(world, trace, Policy.THRIFTY, given_order=given_order, sticky=sticky)

    return Comparison(run(True, False), run(False, False), run(True, True), run(False, True))


def format_comparison(comparison: Comparison) -> str:
    """The comparison as a plain table, both orders side by side."""
    header = (
        f"{'run':<30} {'expired unused (seat-weeks)':>28} {'paid (USD)':>11} "
        f"{'paid requests':>14} {'turns switching account':>24}"
    )
    lines = [header, "-" * len(header)]
    for name, result in comparison.rows():
        switched = (
            f"{result.conversation_switches}/{result.conversation_turns} "
            f"({100 * result.switches_per_turn:.1f} %)"
        )
        lines.append(
            f"{name:<30} {result.plan_windows_expired_unused:>28.2f} "
            f"{result.spend_usd:>11.2f} {result.paid_requests:>14} {switched:>24}"
        )
    base, better = comparison.given_order, comparison.preference
    ratio = (
        better.plan_windows_expired_unused / base.plan_windows_expired_unused
        if base.plan_windows_expired_unused
        else 0.0
    )
    lines.append(
        f"soonest reset first leaves {100 * ratio:.0f} % of the allowlist order's expired plan "
        f"capacity and pays {better.spend_usd:.2f} USD against {base.spend_usd:.2f} USD"
    )
    return "\n".join(lines)
