"""The simulator's runs: accounting on tiny hand-checked traces. No database."""

from __future__ import annotations

from dataclasses import replace
from decimal import Decimal

import pytest

from billing.classify import Billing, BillingVerdict, Overage
from ladder.core import LadderConfig, Rung
from ladder.simulator.results import Policy
from ladder.simulator.run import simulate, simulate_all
from ladder.simulator.trace import (
    Request,
    Selection,
)
from ladder.simulator.world import (
    FIVE_HOURS,
    WEEK,
    PlanUnit,
    PlanWindow,
)
from tests.ladder.simulator.helpers import (
    KEY,
    ONE_REQUEST_USD,
    T0,
    TINY_TRACE,
    H,
    S,
    plan,
    request,
    trace,
    world,
)


@pytest.mark.parametrize(
    ("policy", "spend", "refused", "paid", "paid_with_headroom", "attempts_429", "flips", "lags"),
    [
        # Plan for 1-5, the 429 at 1h+290s falls through to the key, the key again near
        # the reset; the passed reset admits the plan at once (fails open), so 8-10 go
        # back to it.
        pytest.param(Policy.THRIFTY, 2, 0, 2, 0, 1, 2, (0.0,), id="thrifty"),
        # The 429 has nowhere to fall; near the reset the plan is exhausted; at 5h+1s
        # the reading's reset has passed but nothing verifies it yet: refused, not paid.
        pytest.param(Policy.SUBSCRIPTION_ONLY, 0, 3, 0, 0, 1, 0, (0.0,), id="subscription"),
        # The plan login priced as metered at $3/$15 loses to the $1/$2 key every time,
        # though the plan sits full the whole trace.
        pytest.param(Policy.CHEAPEST_FIRST, 10, 0, 10, 10, 0, 0, (), id="cheapest-first"),
        # The cache (filled at 1h+180s: 40 % left) still admits the plan at 1h+290s; the
        # cache refilled at 5h-30s says EXHAUSTED until it expires at 5h+150s, so 8 and
        # 9 are paid while the plan is full again; 10 returns to the plan.
        pytest.param(Policy.ORIGINAL_DESIGN, 4, 0, 4, 2, 1, 2, (60.0,), id="original"),
    ],
)
def test_tiny_trace_accounting_is_exact(
    policy: Policy,
    spend: int,
    refused: int,
    paid: int,
    paid_with_headroom: int,
    attempts_429: int,
    flips: int,
    lags: tuple[float, ...],
) -> None:
    # given one 5-request plan, a 0.002 USD metered key and ten requests across a reset
    # when the trace is replayed
    result = simulate(world(), TINY_TRACE, policy)
    # then every number is the hand-checked one
    assert result.requests == 10
    assert result.spend_usd == ONE_REQUEST_USD * spend
    assert result.refused == refused
    assert result.paid_requests == paid
    assert result.paid_while_plan_had_headroom == paid_with_headroom
    assert result.paid_while_plan_in_band == 0
    assert result.failed_attempts == attempts_429
    assert result.rung_flips == flips
    assert result.rung_flips_per_hour == pytest.approx(flips / 6)
    assert result.paid_seconds_after_resets == lags


def test_tiny_trace_serving_connections_per_policy() -> None:
    # given the tiny trace, when every policy replays it
    results = {r.policy: r for r in simulate_all(world(), TINY_TRACE)}
    # then each request landed where the hand check says
    served = {
        policy: "".join(
            "-" if o.connection_id is None else o.connection_id[0] for o in result.outcomes
        )
        for policy, result in results.items()
    }
    assert served == {
        Policy.THRIFTY: "ppppp" + "kk" + "ppp",
        Policy.SUBSCRIPTION_ONLY: "ppppp" + "---" + "pp",
        Policy.CHEAPEST_FIRST: "k" * 10,
        Policy.ORIGINAL_DESIGN: "ppppp" + "kkkk" + "p",
    }
    assert results[Policy.THRIFTY].served_by_rung == (8, 0, 0, 2, 0)


def test_original_design_lags_after_a_reset_where_thrifty_does_not() -> None:
    # given the tiny trace, whose plan resets at 5 h with traffic waiting
    # when thrifty and the original design replay it
    thrifty = simulate(world(), TINY_TRACE, Policy.THRIFTY)
    original = simulate(world(), TINY_TRACE, Policy.ORIGINAL_DESIGN)
    # then thrifty is back on the plan with the first request after the reset, while the
    # original keeps paying until its cached EXHAUSTED reading expires
    after_reset = slice(7, 10)
    assert [o.rung for o in thrifty.outcomes[after_reset]] == [Rung.SUBSCRIPTION] * 3
    assert [o.rung for o in original.outcomes[after_reset]] == [
        Rung.CHEAP,
        Rung.CHEAP,
        Rung.SUBSCRIPTION,
    ]
    assert thrifty.max_paid_seconds_after_reset == 0.0
    assert original.max_paid_seconds_after_reset == 60.0


def test_subscription_only_refuses_instead_of_paying() -> None:
    # given the tiny trace, when auto/subscription replays it
    result = simulate(world(), TINY_TRACE, Policy.SUBSCRIPTION_ONLY)
    # then nothing is billed and the requests the plan could not take are refused
    assert result.spend_usd == 0
    assert result.paid_requests == 0
    assert [o.at for o in result.outcomes if o.rung is None] == [
        T0 + H + 290 * S,
        T0 + 5 * H - 30 * S,
        T0 + 5 * H + 1 * S,
    ]


def test_thrifty_enforces_the_cheap_budget_then_refuses() -> None:
    # given a cheap budget of exactly one request
    config = LadderConfig(cheap_budget_usd=ONE_REQUEST_USD)
    # when thrifty replays the tiny trace
    result = simulate(world(config=config), TINY_TRACE, Policy.THRIFTY)
    # then the 429's fall-through spends it and the next request finds the rung gated
    assert result.spend_usd == ONE_REQUEST_USD
    assert result.refused == 1
    assert result.outcomes[6].rung is None


def test_cheapest_first_ignores_budgets() -> None:
    # given a cheap budget of one request
    config = LadderConfig(cheap_budget_usd=ONE_REQUEST_USD)
    # when the cost sort replays the tiny trace
    result = simulate(world(config=config), TINY_TRACE, Policy.CHEAPEST_FIRST)
    # then it pays for every request anyway
    assert result.spend_usd == ONE_REQUEST_USD * 10
    assert result.refused == 0


def test_a_plan_that_meters_to_paid_serves_thrifty_only_while_a_reading_shows_headroom() -> None:
    # given a plan whose overage meters to paid and a key, the plan polled or never read
    overage = BillingVerdict(Billing.SUBSCRIPTION, Overage.METERS_TO_PAID, "devin", 3)
    polled = replace(plan(is_polled=True), billing=overage)
    unread = replace(plan(is_polled=False), billing=overage)
    requests = trace(*(request(H + n * 60 * S) for n in range(7)))
    # when thrifty replays seven requests against its 5-request window
    read = simulate(world(polled, KEY), requests, Policy.THRIFTY)
    blind = simulate(world(unread, KEY), requests, Policy.THRIFTY)
    # then the polled plan serves its five, and the budgeted key the two past its window
    # (past the limit the plan would bill at the provider's price, outside every budget);
    # a plan that can meter and was never read is not tried at all: trying is not free
    assert [o.connection_id for o in read.outcomes] == ["plan-1"] * 5 + ["key-1"] * 2
    assert (read.spend_usd, read.paid_requests) == (Decimal("0.004"), 2)
    assert [o.connection_id for o in blind.outcomes] == ["key-1"] * 7
    assert (blind.spend_usd, blind.paid_requests) == (Decimal("0.014"), 7)


def test_original_design_unclamped_cooldown_keeps_the_plan_out_past_its_reset() -> None:
    # given an unpolled plan of one request whose window resets at 5 h, and 429s piling
    # up before the reset (backoff 5, 10, 20, 40 s for the original: the last runs to
    # 5h+10s, past the reset)
    reset = 5 * H
    requests = trace(
        request(reset - 600 * S),
        request(reset - 100 * S),
        request(reset - 90 * S),
        request(reset - 60 * S),
        request(reset - 30 * S),
        request(reset + 5 * S),
    )
    one_request_plan = plan(PlanWindow("5h", 1, PlanUnit.REQUESTS, FIVE_HOURS, T0), is_polled=False)
    # when thrifty and the original replay it
    thrifty = simulate(world(one_request_plan, KEY), requests, Policy.THRIFTY)
    original = simulate(world(one_request_plan, KEY), requests, Policy.ORIGINAL_DESIGN)
    # then thrifty's one 429 stores an EXHAUSTED reading until the reset and takes the
    # plan back at 5h+5s; the original retries on every expiry and is still cooling down
    assert thrifty.failed_attempts == 1
    assert thrifty.outcomes[-1].connection_id == "plan-1"
    assert original.failed_attempts == 4
    assert original.outcomes[-1].connection_id == "key-1"
    assert original.paid_while_plan_had_headroom == 1
    assert original.paid_seconds_after_resets == (5.0,)


def test_original_design_without_hysteresis_readmits_a_plan_inside_the_band() -> None:
    # given a plan whose weekly window is left at 4 % once its 5-hour window resets:
    # between the exit cutoff (2 %) and the re-entry floor (5 %)
    windows = (
        PlanWindow("5h", 960, PlanUnit.TOKENS, FIVE_HOURS, T0),
        PlanWindow("weekly", 1000, PlanUnit.TOKENS, WEEK, T0),
    )
    requests = trace(
        request(H, input_tokens=900, output_tokens=60),
        request(5 * H + 600 * S, input_tokens=5, output_tokens=5),
    )
    # when thrifty and the original replay it
    thrifty = simulate(world(plan(*windows), KEY), requests, Policy.THRIFTY)
    original = simulate(world(plan(*windows), KEY), requests, Policy.ORIGINAL_DESIGN)
    # then thrifty keeps the dropped-out plan out until it refills past the floor (and
    # pays while 4 % sits unused), while the original, in play forever, uses the sliver
    assert thrifty.outcomes[1].connection_id == "key-1"
    assert (thrifty.paid_while_plan_had_headroom, thrifty.paid_while_plan_in_band) == (0, 1)
    assert original.outcomes[1].connection_id == "plan-1"
    # and a reset that leaves the plan inside the band is not a return to the plan
    assert thrifty.resets == 0


def test_rung_flips_count_changes_within_a_selection_only() -> None:
    # given alternating requests for two models that always serve from different rungs
    requests = tuple(
        Request(
            T0 + n * 60 * S,
            Selection(provider="openai", model="mini")
            if n % 2
            else Selection(provider="claude", model="sonnet"),
            1000,
            500,
        )
        for n in range(4)
    )
    # when thrifty replays them
    result = simulate(world(), trace(*requests, hours=1), Policy.THRIFTY)
    # then no selection ever changed rung: no flips
    assert [o.rung for o in result.outcomes] == [Rung.SUBSCRIPTION, Rung.CHEAP] * 2
    assert result.rung_flips == 0


def test_an_empty_trace_gives_empty_results() -> None:
    # given no requests, when thrifty replays them
    result = simulate(world(), trace(hours=0), Policy.THRIFTY)
    # then nothing happened and the rates are zero, not a division error
    assert (result.requests, result.spend_usd, result.rung_flips_per_hour) == (0, 0, 0.0)
    assert result.median_paid_seconds_after_reset is None
