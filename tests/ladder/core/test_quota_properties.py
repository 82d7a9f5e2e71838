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

_EXHAUSTED = QuotaStatus.EXHAUSTED


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
        reading = Reading(arrival.status, arrival.remaining, None, checked_at)
        if supersedes(reading, current, received):
            current = reading
            index = position
            hysteresis = hysteresis_after(hysteresis, current, config)
    return current, index, hysteresis, receipts


def observed_instants(history: list[Arrival], receipts: list[datetime]) -> list[datetime]:
    """When each reading was observed (an instant claimed after its own receipt counts as
    its receipt)."""
    return [
        min(received + timedelta(seconds=arrival.claimed_offset or 0), received)
        for arrival, received in zip(history, receipts, strict=True)
    ]


def latest_truth(history: list[Arrival], receipts: list[datetime]) -> int:
    """An independent oracle: the reading observed last, ties to the one received last."""
    observed = observed_instants(history, receipts)
    return max(range(len(history)), key=lambda position: (observed[position], position))


def in_conflict(history: list[Arrival], receipts: list[datetime]) -> bool:
    """Whether an exhaustion and a reading that is not one were observed less than a
    minute apart (in no certain order: api.md, the less safe one wins)."""
    observed = observed_instants(history, receipts)
    exhausted = [at for a, at in zip(history, observed, strict=True) if a.status == _EXHAUSTED]
    others = [at for a, at in zip(history, observed, strict=True) if a.status != _EXHAUSTED]
    return any(abs(e - o) < timedelta(seconds=60) for e in exhausted for o in others)


def exhausted_near_the_end(history: list[Arrival], receipts: list[datetime]) -> bool:
    """Whether an exhaustion was observed less than a minute before the last instant
    observed: then no reading can have outranked it."""
    observed = observed_instants(history, receipts)
    last = max(observed)
    return any(
        a.status == _EXHAUSTED and at > last - timedelta(seconds=60)
        for a, at in zip(history, observed, strict=True)
    )


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
def test_whatever_order_readings_arrive_in_subscription_never_holds_a_plan_exhausted_within_a_minute_of_its_latest_truth(  # noqa: E501
    history: list[Arrival], config: LadderConfig, lag: int
) -> None:
    current, index, hysteresis, receipts = fold_arrivals(history, BASE, config)
    now = receipts[-1] + timedelta(seconds=lag)
    world = plan_world(current, hysteresis, config, now)

    decision = run(world)

    truth = latest_truth(history, receipts)
    if not in_conflict(history, receipts):
        assert index == truth
    served = {entry.connection_id for entry in decision.candidates}
    if exhausted_near_the_end(history, receipts):
        # The latest truth, or one within a minute of it, is an exhaustion: the less safe
        # one wins whichever order they arrived in (a clock behind, a late success).
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
        previous = fold_arrivals(history[: end - 1], BASE, config, legacy)[0]
        received = receipts[-1]
        # A reading that is not an exhaustion, received less than a minute after the
        # exhaustion that is current, is held back (the less safe one wins).
        held_back = (
            last.status != _EXHAUSTED
            and previous is not None
            and previous.status == _EXHAUSTED
            and previous.checked_at <= received < previous.checked_at + timedelta(seconds=60)
        )
        if last.claimed_offset is None or last.claimed_offset >= 0:
            # A server-stamped truth (a worker poll, an event, headers, a push without
            # checked_at) is current as soon as it is received, but for that.
            assert (index == end - 1) is not held_back
            if last.status == QuotaStatus.EXHAUSTED:
                decision = run(plan_world(current, hysteresis, config, receipts[-1]))
                assert decision.candidates == ()
