"""The simulator's comparison of plan orders (ladder/simulator/staggered.py): the
allowlist's own order against soonest reset first, capacity expired unused, switches per
conversation with and without conversation keys, and the shipped scenario's figures."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

from ladder.core import CandidateIn, LadderConfig
from ladder.simulator.results import Policy
from ladder.simulator.run import simulate
from ladder.simulator.staggered import compare, format_comparison, staggered_trace, staggered_world
from ladder.simulator.trace import Request, Selection, Trace
from ladder.simulator.world import PlanUnit, PlanWindow, SimConnection, World
from tests.ladder.simulator.helpers import PLAN_VERDICT, PRICES, T0

SONNET = Selection(None, "claude", "sonnet")
HOUR = timedelta(hours=1)


def _seat(seat: str, length: timedelta, size: int = 100) -> SimConnection:
    window = PlanWindow("w", size, PlanUnit.REQUESTS, length, T0)
    return SimConnection(seat, "claude", "oauth", PLAN_VERDICT, is_polled=True, windows=(window,))


def _world(*seats: SimConnection) -> World:
    candidate = CandidateIn(1, "claude", "sonnet", (), None, tuple(s.connection_id for s in seats))
    return World(seats, (candidate,), PRICES, LadderConfig())


def _trace(*turns: tuple[timedelta, int | None]) -> Trace:
    requests = tuple(Request(T0 + at, SONNET, 1000, 500, conv) for at, conv in turns)
    return Trace(T0, T0 + timedelta(days=2), requests, "test")


def _served(world: World, trace: Trace, *, given_order: bool = False) -> list[str | None]:
    result = simulate(world, trace, Policy.THRIFTY, given_order=given_order)
    return [outcome.connection_id for outcome in result.outcomes]


def test_the_seat_that_resets_soonest_serves_unless_the_given_order_is_asked() -> None:
    world = _world(_seat("resets-tomorrow", timedelta(days=1)), _seat("resets-in-1h", HOUR))
    trace = _trace((timedelta(minutes=5), None))

    assert _served(world, trace) == ["resets-in-1h"]
    assert _served(world, trace, given_order=True) == ["resets-tomorrow"]


def test_capacity_left_at_a_window_restart_counts_as_expired_unused() -> None:
    world = _world(_seat("seat", timedelta(days=1), size=4))
    trace = _trace((HOUR, None), (timedelta(days=1, hours=1), None))

    result = simulate(world, trace, Policy.THRIFTY)

    # Three of its four requests were left when the day's window restarted.
    assert result.plan_windows_expired_unused == 0.75


def test_a_conversation_key_keeps_a_conversation_where_the_order_moved() -> None:
    # At 00:30 the one-hour seat resets first; at 01:00 it rolls over to 02:00, after the
    # 90-minute seat's 01:30, which then comes first. The conversation's second turn
    # switches account without a key and stays with one.
    world = _world(_seat("90-min", timedelta(minutes=90)), _seat("1-hour", HOUR))
    trace = _trace((timedelta(minutes=30), 7), (timedelta(minutes=70), 7))

    plain = simulate(world, trace, Policy.THRIFTY)
    sticky = simulate(world, trace, Policy.THRIFTY, sticky=True)

    assert [o.connection_id for o in plain.outcomes] == ["1-hour", "90-min"]
    assert (plain.conversation_turns, plain.conversation_switches) == (1, 1)
    assert [o.connection_id for o in sticky.outcomes] == ["1-hour", "1-hour"]
    assert (sticky.conversation_turns, sticky.conversation_switches) == (1, 0)


def test_requests_without_a_conversation_count_no_turns() -> None:
    world = _world(_seat("seat", HOUR))

    result = simulate(world, _trace((HOUR / 2, None), (HOUR / 2 + HOUR / 6, None)), Policy.THRIFTY)

    assert (result.conversation_turns, result.conversation_switches) == (0, 0)


def test_the_shipped_staggered_scenario_halves_expired_capacity_and_pays_less() -> None:
    world, trace = staggered_world(), staggered_trace()

    given = simulate(world, trace, Policy.THRIFTY, given_order=True)
    preferred = simulate(world, trace, Policy.THRIFTY)

    assert len(trace.requests) == 12_841
    assert round(given.plan_windows_expired_unused, 2) == 1.48
    assert round(preferred.plan_windows_expired_unused, 2) == 0.54
    assert preferred.plan_windows_expired_unused <= given.plan_windows_expired_unused / 2
    assert (
        given.spend_usd.quantize(Decimal("0.01")),
        preferred.spend_usd.quantize(Decimal("0.01")),
    ) == (
        Decimal("40.09"),
        Decimal("17.08"),
    )


def test_the_comparison_prints_both_orders_side_by_side() -> None:
    world = staggered_world()
    trace = Trace(
        world.connections[0].windows[0].anchor - timedelta(days=5),
        world.connections[0].windows[0].anchor,
        (),
        "empty",
    )

    text = format_comparison(compare(world, trace))

    assert [line.split("  ")[0] for line in text.splitlines()[2:6]] == [
        "allowlist order, no keys",
        "soonest reset first, no keys",
        "allowlist order, keys",
        "soonest reset first, keys",
    ]
    assert text.splitlines()[-1] == (
        "soonest reset first leaves 0 % of the allowlist order's expired plan capacity "
        "and pays 0.00 USD against 0.00 USD"
    )
