"""The simulator's windows scoped to a model and plans that can meter
(ladder/simulator/scoped.py, providers.py, run.py): the ground truth counts a per-model
cap only for its models, the product's rule keeps the other models on the plan where the
single-window rule paid for them, a plan with extra usage on bills past its limit, and the
shipped scenario's figures."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from billing.tiers import PriceBook, PriceRow
from ladder.core import CandidateIn, LadderConfig, Rung
from ladder.simulator.providers import Provider
from ladder.simulator.results import Policy
from ladder.simulator.run import simulate
from ladder.simulator.scoped import compare, format_comparison
from ladder.simulator.trace import Request, Selection, Trace
from ladder.simulator.world import PlanUnit, PlanWindow, SimConnection, World
from tests.ladder.simulator.helpers import KEY, PLAN_VERDICT, T0

OPUS = "claude-opus-4-1"
SONNET = "claude-sonnet-4-5"
WEEK = timedelta(days=7)
MINUTE = timedelta(minutes=1)


def _seat(opus_cap: int = 2, size: int = 100, *, can_meter: bool = False) -> SimConnection:
    windows = (
        PlanWindow("seven_day", size, PlanUnit.REQUESTS, WEEK, T0),
        PlanWindow("seven_day_opus", opus_cap, PlanUnit.REQUESTS, WEEK, T0, model_scope="opus"),
    )
    return SimConnection(
        "plan-1", "claude", "oauth", PLAN_VERDICT, is_polled=True, windows=windows,
        can_meter=can_meter,
    )  # fmt: skip


def _world(seat: SimConnection) -> World:
    candidates = (
        CandidateIn(1, "claude", OPUS, (), None, ("plan-1", "key-1")),
        CandidateIn(2, "claude", SONNET, (), None, ("plan-1", "key-1")),
    )
    prices = PriceBook(
        (
            PriceRow("claude", OPUS, Decimal("15"), Decimal("75")),
            PriceRow("claude", SONNET, Decimal("3"), Decimal("15")),
        )
    )
    return World((seat, KEY), candidates, prices, LadderConfig())


def _trace(*requests: tuple[timedelta, str]) -> Trace:
    return Trace(
        T0,
        T0 + timedelta(days=1),
        tuple(
            Request(T0 + at, Selection(None, "claude", model), 1000, 500) for at, model in requests
        ),
        "test",
    )


def _served(result: object) -> list[str | None]:
    return [o.connection_id for o in result.outcomes]  # type: ignore[attr-defined]


def test_a_scoped_window_counts_and_binds_only_its_models() -> None:
    provider = Provider(_seat(opus_cap=2), T0)
    request = Request(T0, Selection(None, "claude", OPUS), 1000, 500)

    provider.consume(request, OPUS)
    provider.consume(request, OPUS)
    provider.consume(request, SONNET)

    assert [(w.name, w.remaining_percent, w.model_scope) for w in provider.windows_now()] == [
        ("seven_day", 97.0, None),
        ("seven_day_opus", 0.0, "opus"),
    ]
    assert (provider.has_headroom(OPUS), provider.has_headroom(SONNET)) == (False, True)
    assert (provider.full_scope(OPUS), provider.full_scope(SONNET)) == ("opus", None)
    reading = provider.reading(T0)
    assert (reading.remaining_percent, reading.reset_at) == (97.0, T0 + WEEK)
    assert provider.reading(T0, single_window=True).remaining_percent == 0.0


def test_an_exhausted_opus_cap_keeps_sonnet_on_the_plan_where_the_single_window_rule_paid() -> None:
    # Two Opus requests use the cap up; the poll 4 minutes later reads it; then one of each.
    trace = _trace((MINUTE, OPUS), (2 * MINUTE, OPUS), (10 * MINUTE, SONNET), (11 * MINUTE, OPUS))

    scoped = simulate(_world(_seat()), trace, Policy.THRIFTY)
    single = simulate(_world(_seat()), trace, Policy.THRIFTY, single_window=True)

    assert _served(scoped) == ["plan-1", "plan-1", "plan-1", "key-1"]
    assert _served(single) == ["plan-1", "plan-1", "key-1", "key-1"]
    assert (scoped.paid_requests, scoped.paid_while_plan_had_headroom) == (1, 0)
    assert (single.paid_requests, single.paid_while_plan_had_headroom) == (2, 1)


def test_an_opus_429_from_its_cap_alone_cools_only_opus() -> None:
    # The cap fills between polls: the third Opus request is refused by the cap alone and
    # falls through to the key; Sonnet right after still goes to the plan.
    trace = _trace(
        (MINUTE, OPUS), (MINUTE * 1.1, OPUS), (MINUTE * 1.2, OPUS), (MINUTE * 1.3, SONNET)
    )

    result = simulate(_world(_seat()), trace, Policy.THRIFTY)

    assert _served(result) == ["plan-1", "plan-1", "key-1", "plan-1"]
    assert result.failed_attempts == 1


def test_a_plan_that_can_meter_bills_past_its_limit_unless_its_evidence_is_heeded() -> None:
    trace = _trace((MINUTE, OPUS), (MINUTE * 1.1, OPUS), (MINUTE * 1.2, OPUS))
    world = _world(_seat(can_meter=True))

    ignored = simulate(world, trace, Policy.SUBSCRIPTION_ONLY, heed_evidence=False)
    heeded = simulate(world, trace, Policy.SUBSCRIPTION_ONLY)

    # 1000 in at $15 and 500 out at $75 per million tokens: 0.0525 USD past the plan.
    assert _served(ignored) == ["plan-1", "plan-1", "plan-1"]
    assert (ignored.plan_overage_requests, ignored.plan_overage_usd) == (1, Decimal("0.0525"))
    assert ignored.served_by_rung[Rung.SUBSCRIPTION] == 3
    # Heeded, the first poll's evidence takes the seat out before the first request.
    assert _served(heeded) == [None, None, None]
    assert (heeded.plan_overage_usd, heeded.refused) == (Decimal(0), 3)


def test_the_shipped_scenario_figures() -> None:
    comparison = compare()

    single, scoped = comparison.single_window, comparison.scoped
    assert (single.served_by_rung[Rung.SUBSCRIPTION], scoped.served_by_rung[Rung.SUBSCRIPTION]) == (
        711,
        1149,
    )
    assert (single.paid_while_plan_had_headroom, scoped.paid_while_plan_had_headroom) == (438, 0)
    assert (
        round(single.plan_windows_expired_unused, 3),
        round(scoped.plan_windows_expired_unused, 3),
    ) == (0.553, 0.247)
    assert single.spend_usd - scoped.spend_usd == Decimal("11.76186")
    ignored = comparison.metering_ignored
    assert (ignored.plan_overage_requests, ignored.refused) == (14, 787)
    assert comparison.metering_heeded.refused == comparison.metering_heeded.requests == 1950
    text = format_comparison(comparison)
    assert (
        "the single-window rule paid 11.76 USD more (438 requests paid while the plan had room "
        "for their model) and left 0.55 of the seat's weeks unused against 0.25" in text
    )
    assert "plans only billed 1.88 USD past the plan (14 requests) when the evidence" in text
