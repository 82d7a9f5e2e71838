"""The simulator describes the product: one tiny trace replayed by the simulator and,
step by step, through the real shell (services on the test database, `now` injected)
gives the same pools and the same exclusions at every request."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from billing import services as billing_services
from billing.models import ModelPrice
from ladder import core, services
from ladder.core import Decision, Reading, Reason
from ladder.models import Connection
from ladder.simulator.results import Policy, Step
from ladder.simulator.run import simulate
from ladder.simulator.trace import Request, Selection, Trace
from ladder.simulator.world import (
    FIVE_HOURS,
    WEEK,
    PlanUnit,
    PlanWindow,
    RegisteredConnection,
    World,
    simulated_connections,
)
from tests.ladder.factories import make_candidate, make_connection

pytestmark = pytest.mark.django_db

T0 = datetime(2025, 6, 2, tzinfo=UTC)  # a Monday
H = timedelta(hours=1)
S = timedelta(seconds=1)
CODING = Selection(category="coding")
# Five requests fill the plan's 5-hour window; the sixth meets a 429 (the shell's
# `quota_exhausted` event) and falls through; one waits near the reset; three come after
# it, when the weekly window is inside the hysteresis band (or, for thrifty, full).
OFFSETS = (
    H,
    H + 60 * S,
    H + 120 * S,
    H + 180 * S,
    H + 240 * S,
    H + 290 * S,
    5 * H - 30 * S,
    5 * H + 1 * S,
    5 * H + 60 * S,
    5 * H + 240 * S,
)
TRACE = Trace(
    T0,
    T0 + 6 * H,
    tuple(Request(T0 + offset, CODING, 1000, 500) for offset in OFFSETS),
    source="test",
)
POLICY_AUTO_ID = {
    Policy.THRIFTY: core.THRIFTY_AUTO_ID,
    Policy.SUBSCRIPTION_ONLY: core.SUBSCRIPTION_AUTO_ID,
}


def _register() -> None:
    """The tiny world in the database: a polled Claude plan login and a metered key."""
    ModelPrice.objects.update_or_create(
        provider="openai",
        model="gpt-4o-mini",
        defaults={"input_usd_per_mtok": Decimal("1"), "output_usd_per_mtok": Decimal("2")},
    )
    make_connection("plan-1", provider="claude", auth_type="oauth", quota_source="claude")
    make_connection("key-1", provider="openai", auth_type="apikey")
    make_candidate("claude", "claude-sonnet-4-5", connection_id="plan-1", categories=("coding",))
    make_candidate(
        "openai", "gpt-4o-mini", connection_id="key-1", categories=("coding",), priority=1
    )


def _world() -> World:
    """The simulator's world, loaded from the database as `manage.py simulate` loads it;
    the plan holds 5 requests per 5 hours, and a week of 7,800 tokens: 5 requests of
    1,500 leave 3.8 %, above the exit cutoff (2 %) but not above the re-entry floor (5 %)."""
    config = services.load_config()
    catalog = billing_services.load_catalog()
    prices = billing_services.load_price_book()
    candidates = services.registered_candidates()
    registered = [
        RegisteredConnection(
            connection_id=row.connection_id,
            provider=row.provider,
            auth_type=row.auth_type,
            billing=catalog.classify(row.provider, row.auth_type),
            is_active=row.is_active,
            quota_source=row.quota_source,
        )
        for row in Connection.objects.order_by("connection_id")
    ]
    windows = (
        PlanWindow("5h", 5, PlanUnit.REQUESTS, FIVE_HOURS, T0),
        PlanWindow("weekly", 7800, PlanUnit.TOKENS, WEEK, T0),
    )
    connections = tuple(
        replace(c, windows=windows) if c.is_plan else c
        for c in simulated_connections(registered, candidates, prices, config, T0)
    )
    return World(connections, tuple(candidates), prices, config)


def _through_the_shell(step: Step, auto_id: core.AutoId) -> Decision | None:
    """Do what the simulator did at this step through the services; the shell's
    decision when the step was one."""
    assert step.connection_id is not None or step.decision is not None
    if step.reading is not None:
        reading: Reading = step.reading
        services.store_reading(
            step.connection_id or "",
            services.ReadingInput(
                status=reading.status.value,
                remaining_percent=reading.remaining_percent,
                reset_at=reading.reset_at,
                checked_at=reading.checked_at,
                source="claude",
            ),
            now=step.at,
        )
        return None
    if step.event is not None:
        services.apply_event(
            step.connection_id or "", kind=step.event.value, reset_at=step.reset_at, now=step.at
        )
        return None
    return services.decide_registered(auto_id, now=step.at)


@pytest.mark.parametrize("policy", [Policy.THRIFTY, Policy.SUBSCRIPTION_ONLY])
def test_the_simulator_and_the_shell_decide_the_same_pools_at_every_request(
    policy: Policy,
) -> None:
    # given the tiny world registered, and the simulator's replay of the trace
    _register()
    steps: list[Step] = []
    simulate(_world(), TRACE, policy, observer=steps.append)
    auto_id = POLICY_AUTO_ID[policy]

    # when every step it took is taken through the shell at the same instant
    compared = []
    for step in steps:
        shell = _through_the_shell(step, auto_id)
        if step.decision is not None:
            assert shell is not None
            compared.append(
                (
                    step.at,
                    (step.decision.candidates, step.decision.excluded),
                    (shell.candidates, shell.excluded),
                )
            )

    # then each request's pool and exclusions are the same, entry for entry
    assert len(compared) == len(TRACE.requests)
    for at, simulated, shell_decided in compared:
        assert (at, simulated) == (at, shell_decided)
    # and the trace exercised what it is for: the plan served, then was out for its
    # exhausted window, its passed reset, and the hysteresis band
    assert any(step.event is core.EventKind.QUOTA_EXHAUSTED for step in steps)
    assert compared[0][1][0][0].connection_id == "plan-1"
    plan_reasons = [
        [x.reason for x in simulated[1] if x.connection_id == "plan-1"]
        for _, simulated, _ in compared
    ]
    if policy is Policy.SUBSCRIPTION_ONLY:
        after_the_reset = [[Reason.RESET_PASSED], [Reason.BELOW_REENTRY], [Reason.BELOW_REENTRY]]
    else:
        # Thrifty admits the unread plan at once; that request fills its week.
        after_the_reset = [[], [Reason.QUOTA_EXHAUSTED], [Reason.QUOTA_EXHAUSTED]]
    assert plan_reasons == [[]] * 6 + [[Reason.QUOTA_EXHAUSTED], *after_the_reset]
