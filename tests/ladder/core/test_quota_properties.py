"""Properties of hysteresis and of readings arriving in any order (hypothesis)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from billing.classify import Billing, BillingVerdict, Overage
from ladder.core import (
    NEVER_READ,
    AutoId,
    CandidateIn,
    ConnectionView,
    Grouping,
    Hysteresis,
    HysteresisState,
    LadderConfig,
    QuotaStatus,
    Reading,
    hysteresis_after,
    stored_checked_at,
    supersedes,
)
from tests.ladder.core.strategies import (
    BASE,
    PROPERTY_SETTINGS,
    World,
    configs,
    is_verified_plan_connection,
    percents,
    readings,
    run,
    statuses,
)


@PROPERTY_SETTINGS
@given(
    state=st.sampled_from(HysteresisState),
    reading=readings(BASE),
    config=configs,
)
def test_hysteresis_flips_only_across_the_band(
    state: HysteresisState, reading: Reading, config: LadderConfig
) -> None:
    previous = Hysteresis(state, BASE - timedelta(days=1), "before")

    after = hysteresis_after(previous, reading, config)

    if after is previous:
        return
    assert after.since == reading.checked_at
    assert after.state != previous.state
    remaining = reading.remaining_percent
    if after.state == HysteresisState.DROPPED_OUT:
        assert reading.status == QuotaStatus.EXHAUSTED or (
            remaining is not None and remaining <= config.exit_cutoff_percent
        )
    else:
        assert reading.status == QuotaStatus.SAFE
        assert remaining is not None
        assert remaining > config.reentry_floor


# --- readings arriving in any order, with any checked_at ---------------------------------


@dataclass(frozen=True)
class Arrival:
    """One reading as the server receives it."""

    gap_seconds: int  # after the previous arrival
    claimed_offset: int | None  # its checked_at from its receipt; None: server-stamped
    status: QuotaStatus
    remaining: float | None


arrivals = st.lists(
    st.builds(
        Arrival,
        gap_seconds=st.integers(0, 90),
        # Up to the API's minute ahead, and late (delayed, queued, replayed) readings.
        claimed_offset=st.one_of(st.none(), st.integers(-600, 60)),
        status=statuses,
        remaining=st.one_of(st.none(), st.sampled_from((0.0, 1.0, 3.0, 50.0, 99.0)), percents),
    ),
    min_size=1,
    max_size=12,
)


def fold_arrivals(
    history: list[Arrival],
    start: datetime,
    config: LadderConfig,
    legacy: Reading | None = None,
) -> tuple[Reading | None, int | None, Hysteresis, list[datetime]]:
    """What the shell stores: each reading's checked_at capped at its receipt, kept as
    current when it supersedes the current one, hysteresis updated when it does. Returns
    the current reading, its index (None: `legacy`), the hysteresis and the receipts."""
    current, index = legacy, None
    hysteresis = NEVER_READ
    received = start
    receipts = []
    for position, arrival in enumerate(history):
        received += timedelta(seconds=arrival.gap_seconds)
        receipts.append(received)
        claimed = (
            None
            if arrival.claimed_offset is None
            else received + timedelta(seconds=arrival.claimed_offset)
        )
        checked_at = stored_checked_at(claimed, received)
        assert checked_at <= received
        if supersedes(checked_at, current.checked_at if current else None, received):
            current = Reading(arrival.status, arrival.remaining, None, checked_at)
            index = position
            hysteresis = hysteresis_after(hysteresis, current, config)
    return current, index, hysteresis, receipts


def latest_truth(history: list[Arrival], receipts: list[datetime]) -> int:
    """An independent oracle: the reading observed last (an instant claimed after its own
    receipt counts as its receipt), ties to the one received last."""
    observed = [
        min(received + timedelta(seconds=arrival.claimed_offset or 0), received)
        for arrival, received in zip(history, receipts, strict=True)
    ]
    return max(range(len(history)), key=lambda position: (observed[position], position))


def plan_world(
    reading: Reading | None, hysteresis: Hysteresis, config: LadderConfig, now: datetime
) -> World:
    view = ConnectionView(
        connection_id="plan",
        provider="claude",
        auth_type="oauth",
        billing=BillingVerdict(Billing.SUBSCRIPTION, Overage.HARD_STOP, "curated", None),
        is_active=True,
        cooldown_until=None,
        reading=reading,
        hysteresis=hysteresis,
    )
    candidate = CandidateIn(0, "claude", "m0", (), "plan", None)
    return World(
        AutoId(Grouping.SUBSCRIPTION, None), (candidate,), {"plan": view}, {}, {}, config, now
    )


@PROPERTY_SETTINGS
@given(history=arrivals, config=configs, lag=st.integers(0, 30))
def test_whatever_order_readings_arrive_in_subscription_never_holds_a_plan_whose_latest_truth_is_exhausted(  # noqa: E501
    history: list[Arrival], config: LadderConfig, lag: int
) -> None:
    current, index, hysteresis, receipts = fold_arrivals(history, BASE, config)
    now = receipts[-1] + timedelta(seconds=lag)
    world = plan_world(current, hysteresis, config, now)

    decision = run(world)

    truth = latest_truth(history, receipts)
    assert index == truth
    served = {entry.connection_id for entry in decision.candidates}
    if history[truth].status == QuotaStatus.EXHAUSTED:
        assert served == set()
    if served:
        assert is_verified_plan_connection(world.connections["plan"], config, now)


@PROPERTY_SETTINGS
@given(history=arrivals, config=configs, ahead=st.integers(1, 60), legacy_status=statuses)
def test_a_reading_stored_in_the_future_never_hides_a_server_stamped_truth_received_after_it(
    history: list[Arrival], config: LadderConfig, ahead: int, legacy_status: QuotaStatus
) -> None:
    # Rows stored before checked_at was capped may lie up to a minute ahead of the clock.
    legacy = Reading(legacy_status, 80.0, None, BASE + timedelta(seconds=ahead))
    for end in range(1, len(history) + 1):
        current, index, hysteresis, receipts = fold_arrivals(history[:end], BASE, config, legacy)
        last = history[end - 1]
        if last.claimed_offset is None or last.claimed_offset >= 0:
            # A server-stamped truth (a worker poll, an event, headers, a push without
            # checked_at) is current as soon as it is received.
            assert index == end - 1
            if last.status == QuotaStatus.EXHAUSTED:
                decision = run(plan_world(current, hysteresis, config, receipts[-1]))
                assert decision.candidates == ()
