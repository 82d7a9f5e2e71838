"""The scoped-window scenario: one Claude Max seat whose Opus weekly cap runs out midweek
while its own windows have room, and the same seat with extra usage on (it bills past
its limit), each replayed under the rules before and after spec/ladder.md's "Windows
scoped to a model" and "Billing evidence from the wire".

The world: one seat with a five-hour window of `SESSION_TOKENS`, a weekly window of
`WEEKLY_TOKENS` and an Opus weekly cap of `OPUS_WEEKLY_TOKENS` (scoped `opus`), every
window restarting from Monday 00:00 UTC; behind it a metered Anthropic key for both models
(premium rung: Opus $15 / $75, Sonnet $3 / $15 per million tokens). The traffic: every
weekday from 08:00 to 17:00 UTC, `REQUESTS_PER_HOUR` requests, Opus and Sonnet alike,
and an agent run of `BURST_REQUESTS` Opus requests within two minutes at 15:00, each
about 6,000 tokens in and 600 out: the week fits the seat's own windows, but Opus alone
asks for about twice its cap.

What it reports: under auto/thrifty, what the single-window rule (the exhausted Opus cap
takes the whole seat out) paid for Sonnet requests the plan could still serve; with the
seat able to meter, what plans billed past their limit (outside every budget) and what
auto/subscription refused instead. `manage.py simulate --scoped` prints the comparison.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Final

from billing.classify import Billing, BillingVerdict, Overage
from billing.tiers import PriceBook, PriceRow
from ladder.core import CandidateIn, LadderConfig, Rung
from ladder.simulator.results import Policy, PolicyResult
from ladder.simulator.run import simulate
from ladder.simulator.trace import Request, Selection, Trace
from ladder.simulator.world import PlanUnit, PlanWindow, SimConnection, World

START: Final = datetime(2025, 6, 2, tzinfo=UTC)  # a Monday
WEEKS: Final = 2
SEED: Final = 32
SEAT: Final = "claude-max"
KEY: Final = "anthropic-key"
OPUS: Final = ("claude", "claude-opus-4-1")
SONNET: Final = ("claude", "claude-sonnet-4-5")
SESSION_TOKENS: Final = 1_000_000
WEEKLY_TOKENS: Final = 5_000_000
OPUS_WEEKLY_TOKENS: Final = 1_500_000
REQUESTS_PER_HOUR: Final = 15
# An agent run every weekday at 15:00 UTC: `BURST_REQUESTS` Opus requests within two
# minutes, faster than any poll (what slips past the plan's limit between two readings).
BURST_REQUESTS: Final = 60
INPUT_TOKENS: Final = 6_000
OUTPUT_TOKENS: Final = 600

_PLAN = BillingVerdict(Billing.SUBSCRIPTION, Overage.HARD_STOP, "Max plan (scenario)", None)
_METERED = BillingVerdict(Billing.METERED, Overage.METERS_TO_PAID, "API key (scenario)", None)


def scoped_world(start: datetime = START, *, can_meter: bool = False) -> World:
    """One plan seat with an Opus weekly cap, and a metered key behind it for both
    models; `can_meter`: the seat has extra usage on (bills past its limit)."""
    windows = (
        PlanWindow("five_hour", SESSION_TOKENS, PlanUnit.TOKENS, timedelta(hours=5), start),
        PlanWindow("seven_day", WEEKLY_TOKENS, PlanUnit.TOKENS, timedelta(days=7), start),
        PlanWindow(
            "seven_day_opus",
            OPUS_WEEKLY_TOKENS,
            PlanUnit.TOKENS,
            timedelta(days=7),
            start,
            model_scope="opus",
        ),
    )
    seat = SimConnection(
        SEAT, "claude", "oauth", _PLAN, is_polled=True, windows=windows, can_meter=can_meter
    )
    key = SimConnection(KEY, "claude", "apikey", _METERED)
    candidates = (
        CandidateIn(1, *OPUS, ("coding",), None, (SEAT, KEY)),
        CandidateIn(2, *SONNET, ("coding",), None, (SEAT, KEY)),
    )
    prices = PriceBook(
        (
            PriceRow(*OPUS, Decimal("15"), Decimal("75")),
            PriceRow(*SONNET, Decimal("3"), Decimal("15")),
        )
    )
    return World((seat, key), candidates, prices, LadderConfig())


def scoped_trace(start: datetime = START, weeks: int = WEEKS, seed: int = SEED) -> Trace:
    """Working hours on weekdays, Opus and Sonnet requests alike."""
    rng = random.Random(seed)
    selections = (Selection(None, *OPUS), Selection(None, *SONNET))
    requests: list[Request] = []
    for day in range(weeks * 7):
        if day % 7 >= 5:
            continue  # weekends are quiet
        opens = start + timedelta(days=day, hours=8)
        for _ in range(REQUESTS_PER_HOUR * 9):
            requests.append(
                Request(
                    opens + timedelta(seconds=rng.uniform(0, 9 * 3600)),
                    rng.choice(selections),
                    int(INPUT_TOKENS * rng.uniform(0.8, 1.2)),
                    int(OUTPUT_TOKENS * rng.uniform(0.8, 1.2)),
                )
            )
        burst = start + timedelta(days=day, hours=15)
        for _ in range(BURST_REQUESTS):
            requests.append(
                Request(
                    burst + timedelta(seconds=rng.uniform(0, 120)),
                    selections[0],
                    int(INPUT_TOKENS * rng.uniform(0.8, 1.2)),
                    int(OUTPUT_TOKENS * rng.uniform(0.8, 1.2)),
                )
            )
    requests.sort(key=lambda request: request.at)
    return Trace(start, start + timedelta(days=weeks * 7), tuple(requests), "scoped windows")


@dataclass(frozen=True, slots=True)
class Comparison:
    """The scenario's runs: the window rule before and after, and the seat able to meter
    with its evidence ignored (the catalog alone) and heeded."""

    single_window: PolicyResult
    scoped: PolicyResult
    metering_ignored: PolicyResult
    metering_heeded: PolicyResult
    metering_thrifty: PolicyResult

    def rows(self) -> list[tuple[str, PolicyResult]]:
        return [
            ("thrifty, every window binds the seat", self.single_window),
            ("thrifty, windows scoped to a model", self.scoped),
            ("plans only, can meter, evidence ignored", self.metering_ignored),
            ("plans only, can meter, evidence heeded", self.metering_heeded),
            ("thrifty, can meter, evidence heeded", self.metering_thrifty),
        ]


def compare(trace: Trace | None = None) -> Comparison:
    """Replay the scenario five ways."""
    trace = trace or scoped_trace()
    world = scoped_world(trace.start)
    metering = scoped_world(trace.start, can_meter=True)
    return Comparison(
        single_window=simulate(world, trace, Policy.THRIFTY, single_window=True),
        scoped=simulate(world, trace, Policy.THRIFTY),
        metering_ignored=simulate(metering, trace, Policy.SUBSCRIPTION_ONLY, heed_evidence=False),
        metering_heeded=simulate(metering, trace, Policy.SUBSCRIPTION_ONLY),
        metering_thrifty=simulate(metering, trace, Policy.THRIFTY),
    )


def format_comparison(comparison: Comparison) -> str:
    """The comparison as a plain table and the two sentences it supports."""
    header = (
        f"{'run':<42} {'on the plan':>12} {'unused (weeks)':>14} {'paid (USD)':>11} "
        f"{'paid requests':>14} {'paid, plan had room':>20} {'billed past plan (USD)':>23} "
        f"{'refused':>8}"
    )
    lines = [header, "-" * len(header)]
    for name, result in comparison.rows():
        on_plan = result.served_by_rung[Rung.SUBSCRIPTION]
        paid = result.spend_usd - result.plan_overage_usd
        lines.append(
            f"{name:<42} {on_plan:>12} {result.plan_windows_expired_unused:>14.2f} "
            f"{paid:>11.2f} {result.paid_requests:>14} "
            f"{result.paid_while_plan_had_headroom:>20} {result.plan_overage_usd:>23.2f} "
            f"{result.refused:>8}"
        )
    old, new = comparison.single_window, comparison.scoped
    lines.append(
        f"the single-window rule paid {old.spend_usd - new.spend_usd:.2f} USD more "
        f"({old.paid_while_plan_had_headroom - new.paid_while_plan_had_headroom} requests "
        "paid while the plan had room for their model) and left "
        f"{old.plan_windows_expired_unused:.2f} of the seat's weeks unused against "
        f"{new.plan_windows_expired_unused:.2f}"
    )
    ignored, heeded = comparison.metering_ignored, comparison.metering_heeded
    lines.append(
        f"with extra usage on, plans only billed {ignored.plan_overage_usd:.2f} USD past the "
        f"plan ({ignored.plan_overage_requests} requests) when the evidence was ignored; "
        f"heeded, it billed {heeded.plan_overage_usd:.2f} USD and refused {heeded.refused}"
    )
    return "\n".join(lines)
