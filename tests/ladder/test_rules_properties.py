"""Properties of `decide` over arbitrary catalogs, readings, settings, clocks and pools."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from hypothesis import given, settings
from hypothesis import strategies as st

from billing.classify import Billing, BillingVerdict, Overage
from billing.tiers import Tier
from ladder.rules import (
    NEVER_READ,
    AutoId,
    BudgetWindow,
    CandidateIn,
    ConnectionView,
    Decision,
    Grouping,
    Hysteresis,
    HysteresisState,
    LadderConfig,
    QuotaStatus,
    Reading,
    Rung,
    RungSpend,
    apply_event,
    clamp_cooldown_to_reset,
    decide,
    hysteresis_after,
    stored_checked_at,
    supersedes,
)

BASE = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
CONNECTION_IDS = ("c0", "c1", "c2", "c3", "c4", "c5")
PROVIDERS = ("claude", "openrouter")
CATEGORIES = ("coding", "chat")
PROPERTY_SETTINGS = settings(max_examples=200, deadline=None)
T = TypeVar("T")


@dataclass(frozen=True)
class World:
    """One arbitrary input of `decide`: every argument, generated together."""

    auto_id: AutoId
    candidates: tuple[CandidateIn, ...]
    connections: dict[str, ConnectionView]
    tiers: dict[tuple[str, str], Tier]
    spend: dict[Rung, RungSpend]
    config: LadderConfig
    now: datetime


seconds = st.integers(min_value=-7200, max_value=7200)
offsets = seconds.map(lambda s: timedelta(seconds=s))
percents = st.floats(min_value=0, max_value=100, allow_nan=False)
money = st.decimals(min_value=0, max_value=20, places=2, allow_nan=False, allow_infinity=False)
# Unbiased draws almost never yield a usable plan connection, which would leave the
# subscription property vacuous: the common case is drawn about three times in four.
is_common = st.sampled_from((True, True, True, False))
maybe_seconds = st.one_of(st.none(), seconds)
future_or_absent = st.one_of(st.none(), st.integers(1, 7200))
recent_age = st.integers(-60, 120)  # the API accepts a minute of clock skew
any_age = st.integers(-60, 1800)
statuses = st.sampled_from(QuotaStatus)
billings = st.sampled_from(Billing)
overages = st.sampled_from(Overage)
auth_types = st.sampled_from(("oauth", "apikey", "none", None))
providers = st.sampled_from(PROVIDERS)
connection_ids = st.sampled_from(CONNECTION_IDS)
allowlists = st.lists(connection_ids, min_size=1, max_size=6).map(tuple)
category_sets = st.lists(st.sampled_from(CATEGORIES), unique=True).map(tuple)
low_cutoffs = st.floats(0, 10)
low_floors = st.floats(0, 15)

configs = st.builds(
    LadderConfig,
    exit_cutoff_percent=st.one_of(low_cutoffs, percents),
    reentry_min_remaining_percent=st.one_of(low_floors, percents),
    cheap_budget_usd=st.one_of(st.none(), money),
    premium_budget_usd=st.one_of(st.none(), money),
    budget_window=st.sampled_from(BudgetWindow),
    max_state_age_seconds=st.integers(1, 900),
    base_cooldown_seconds=st.floats(0.5, 60),
    max_cooldown_seconds=st.floats(0.5, 600),
)


def mostly(draw: st.DrawFn, common: st.SearchStrategy[T], rare: st.SearchStrategy[T]) -> T:
    """Draw from `common` about three times in four, else from `rare`."""
    return draw(common if draw(is_common) else rare)


def at(now: datetime, offset_seconds: int | None) -> datetime | None:
    return None if offset_seconds is None else now + timedelta(seconds=offset_seconds)


def draw_reading(draw: st.DrawFn, now: datetime) -> Reading:
    status = QuotaStatus.SAFE if draw(is_common) else draw(statuses)
    remaining = draw(percents) if draw(is_common) else None
    reset_offset = mostly(draw, future_or_absent, maybe_seconds)
    age = mostly(draw, recent_age, any_age)
    return Reading(status, remaining, at(now, reset_offset), now - timedelta(seconds=age))


def draw_view(draw: st.DrawFn, connection_id: str, now: datetime) -> ConnectionView:
    billing = BillingVerdict(
        Billing.SUBSCRIPTION if draw(is_common) else draw(billings),
        Overage.HARD_STOP if draw(is_common) else draw(overages),
        "curated",
        None,
    )
    return ConnectionView(
        connection_id=connection_id,
        provider=draw(providers),
        auth_type=draw(auth_types),
        billing=billing,
        is_active=draw(is_common),
        cooldown_until=None if draw(is_common) else at(now, draw(seconds)),
        reading=draw_reading(draw, now) if draw(is_common) else None,
        hysteresis=Hysteresis(
            draw(st.sampled_from(HysteresisState)), at(now, draw(maybe_seconds)), "generated"
        ),
    )


@st.composite
def readings(draw: st.DrawFn, now: datetime) -> Reading:
    return draw_reading(draw, now)


@st.composite
def worlds(draw: st.DrawFn) -> World:
    now = BASE + timedelta(seconds=draw(st.integers(0, 400 * 86400)))
    # Some referenced ids are deliberately missing: they must never count as safe.
    connections = {
        connection_id: draw_view(draw, connection_id, now)
        for connection_id in CONNECTION_IDS
        if draw(is_common)
    }
    candidates = []
    for index in range(draw(st.integers(0, 8))):
        # Each candidate has its own id and model: its incoming position, so output
        # entries and exclusion rows map back to it.
        provider = draw(providers)
        categories = draw(category_sets)
        if draw(st.booleans()):
            pinned = draw(connection_ids)
            candidates.append(CandidateIn(index, provider, f"m{index}", categories, pinned, None))
        else:
            allowed = draw(allowlists)
            candidates.append(CandidateIn(index, provider, f"m{index}", categories, None, allowed))
    tiers = {
        (candidate.provider, candidate.model): draw(st.sampled_from(Tier))
        for candidate in candidates
        if draw(st.booleans())  # the others are unpriced
    }
    spend = {
        rung: RungSpend(draw(money), now + draw(offsets))
        for rung in (Rung.CHEAP, Rung.PREMIUM)
        if draw(st.booleans())
    }
    auto_id = AutoId(
        draw(st.sampled_from(Grouping)), draw(st.one_of(st.none(), st.sampled_from(CATEGORIES)))
    )
    return World(auto_id, tuple(candidates), connections, tiers, spend, draw(configs), now)


def run(world: World) -> Decision:
    return decide(
        world.auto_id,
        world.candidates,
        world.connections,
        world.tiers,
        world.spend,
        world.config,
        world.now,
    )


def in_pool(world: World) -> list[CandidateIn]:
    category = world.auto_id.category
    return [c for c in world.candidates if category is None or category in c.categories]


def connection_ids_of(
    entry_connection: str | None, allowed: tuple[str, ...] | None
) -> tuple[str, ...]:
    return (entry_connection,) if entry_connection is not None else allowed or ()


def is_verified_plan_connection(
    view: ConnectionView | None, config: LadderConfig, now: datetime
) -> bool:
    """An independent oracle of what auto/subscription may serve."""
    if view is None:
        return False
    if view.billing.billing != Billing.SUBSCRIPTION or view.billing.overage != Overage.HARD_STOP:
        return False
    if not view.is_active or (view.cooldown_until is not None and view.cooldown_until > now):
        return False
    reading = view.reading
    if reading is None or reading.status != QuotaStatus.SAFE or reading.remaining_percent is None:
        return False
    reset_in_future = reading.reset_at is None or reading.reset_at > now
    young = now - reading.checked_at <= timedelta(seconds=config.max_state_age_seconds)
    if not (reset_in_future and young):
        return False
    threshold = (
        config.exit_cutoff_percent
        if view.hysteresis.state == HysteresisState.IN_PLAY
        else max(config.exit_cutoff_percent, config.reentry_min_remaining_percent)
    )
    return reading.remaining_percent > threshold


def is_subsequence(part: tuple[str, ...], whole: tuple[str, ...]) -> bool:
    remaining = iter(whole)
    return all(item in remaining for item in part)


@PROPERTY_SETTINGS
@given(worlds())
def test_a_subscription_decision_holds_only_verified_plan_connections(world: World) -> None:
    world = World(
        AutoId(Grouping.SUBSCRIPTION, world.auto_id.category),
        world.candidates,
        world.connections,
        world.tiers,
        world.spend,
        world.config,
        world.now,
    )

    decision = run(world)

    for entry in decision.candidates:
        assert entry.rung is Rung.SUBSCRIPTION
        for connection_id in connection_ids_of(entry.connection_id, entry.allowed_connection_ids):
            view = world.connections.get(connection_id)
            assert is_verified_plan_connection(view, world.config, world.now), connection_id


@PROPERTY_SETTINGS
@given(worlds())
def test_every_output_allowlist_is_an_ordered_subset_of_its_input(world: World) -> None:
    decision = run(world)

    by_id = {candidate.id: candidate for candidate in world.candidates}
    for entry in decision.candidates:
        source = by_id[entry.id]
        if source.connection_id is not None:
            assert (entry.connection_id, entry.allowed_connection_ids) == (
                source.connection_id,
                None,
            )
        else:
            assert entry.connection_id is None
            assert entry.allowed_connection_ids  # never kept with an empty list
            assert is_subsequence(entry.allowed_connection_ids, source.allowed_connection_ids or ())


@PROPERTY_SETTINGS
@given(worlds())
def test_output_is_sorted_by_rung_and_stable_within_a_rung(world: World) -> None:
    decision = run(world)

    keys = [(entry.rung, entry.id) for entry in decision.candidates]
    assert keys == sorted(keys), "candidate ids are their incoming positions"


@PROPERTY_SETTINGS
@given(worlds())
def test_no_connection_sits_on_two_rungs_for_one_candidate(world: World) -> None:
    decision = run(world)

    seen: dict[tuple[int | None, str], Rung] = {}
    for entry in decision.candidates:
        for connection_id in connection_ids_of(entry.connection_id, entry.allowed_connection_ids):
            assert (entry.id, connection_id) not in seen
            seen[(entry.id, connection_id)] = entry.rung


@PROPERTY_SETTINGS
@given(worlds())
def test_every_pair_is_either_served_or_excluded_exactly_once(world: World) -> None:
    decision = run(world)

    expected = sorted(
        (candidate.model, connection_id)
        for candidate in in_pool(world)
        for connection_id in set(
            connection_ids_of(candidate.connection_id, candidate.allowed_connection_ids)
        )
    )
    served = [
        (entry.model, connection_id)
        for entry in decision.candidates
        for connection_id in connection_ids_of(entry.connection_id, entry.allowed_connection_ids)
    ]
    left_out = [(row.model, row.connection_id) for row in decision.excluded]
    assert sorted(served + left_out) == expected


@PROPERTY_SETTINGS
@given(worlds())
def test_exclusions_follow_candidate_order(world: World) -> None:
    decision = run(world)

    positions = [int(row.model.removeprefix("m")) for row in decision.excluded]
    assert positions == sorted(positions)


@PROPERTY_SETTINGS
@given(worlds())
def test_next_change_at_is_in_the_future_or_unknown(world: World) -> None:
    decision = run(world)

    assert decision.next_change_at is None or decision.next_change_at > world.now
    if not decision.excluded:
        assert decision.next_change_at is None


@PROPERTY_SETTINGS
@given(worlds())
def test_thrifty_serves_a_superset_of_subscription(world: World) -> None:
    def served(grouping: Grouping) -> set[tuple[int | None, str]]:
        decision = decide(
            AutoId(grouping, world.auto_id.category),
            world.candidates,
            world.connections,
            world.tiers,
            world.spend,
            world.config,
            world.now,
        )
        return {
            (entry.id, connection_id)
            for entry in decision.candidates
            for connection_id in connection_ids_of(
                entry.connection_id, entry.allowed_connection_ids
            )
        }

    assert served(Grouping.SUBSCRIPTION) <= served(Grouping.THRIFTY)


@PROPERTY_SETTINGS
@given(
    cooldown=offsets,
    reset=st.one_of(st.none(), offsets),
)
def test_the_clamp_never_lengthens_and_never_lands_in_the_past(
    cooldown: timedelta, reset: timedelta | None
) -> None:
    cooldown_until = BASE + cooldown
    reset_at = None if reset is None else BASE + reset

    clamped = clamp_cooldown_to_reset(cooldown_until, reset_at, BASE)

    assert clamped <= cooldown_until
    assert clamped == cooldown_until or clamped > BASE


@PROPERTY_SETTINGS
@given(
    kind=st.sampled_from(("rate_limited", "quota_exhausted", "error")),
    failures=st.integers(0, 50),
    retry_after=st.one_of(st.none(), st.floats(0, 86400)),
    reset=st.one_of(st.none(), offsets),
    config=configs,
)
def test_a_failure_always_counts_and_its_cooldown_matches_its_seconds(
    kind: str,
    failures: int,
    retry_after: float | None,
    reset: timedelta | None,
    config: LadderConfig,
) -> None:
    change = apply_event(
        kind,
        consecutive_failures=failures,
        retry_after_seconds=retry_after,
        reset_at=None if reset is None else BASE + reset,
        config=config,
        now=BASE,
    )

    assert change.consecutive_failures == failures + 1
    assert change.cooldown_until is not None
    assert change.cooldown_seconds == (change.cooldown_until - BASE).total_seconds()
    assert change.cooldown_seconds >= 0
    if retry_after is None and not change.clamped_to_reset:
        assert change.cooldown_seconds <= config.max_cooldown_seconds + 1e-6


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
