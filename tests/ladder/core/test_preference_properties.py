"""Properties of the order of preference (hypothesis): over any drawn world, an entry's
allowlist is a permutation of exactly the connections that pass, and on the subscription
rung a later reset never comes before an earlier reset with capacity left."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from random import Random

from hypothesis import given
from hypothesis import strategies as st

from ladder.core import (
    NEVER_READ,
    AutoId,
    CandidateIn,
    ConnectionView,
    Grouping,
    LadderConfig,
    QuotaStatus,
    Reading,
    Rung,
)
from tests.ladder.core.factories import PLAN
from tests.ladder.core.strategies import (
    BASE,
    PROPERTY_SETTINGS,
    World,
    configs,
    in_pool,
    is_subsequence,
    is_verified_plan_connection,
    run,
    worlds,
)


def known_reset(
    view: ConnectionView | None, config: LadderConfig, now: datetime
) -> tuple[datetime, int] | None:
    """An independent oracle of what the order reads: a current SAFE reading's reset
    (to the nearest minute: jitter of a few seconds is one reset) and whole remaining
    percent (rounded down)."""
    reading = view.reading if view is not None else None
    if (
        reading is None
        or reading.status != QuotaStatus.SAFE
        or reading.reset_at is None
        or reading.remaining_percent is None
        or reading.reset_at <= now
        or now - reading.checked_at > timedelta(seconds=config.max_state_age_seconds)
    ):
        return None
    whole_minutes = round_half_up((reading.reset_at - BASE).total_seconds() / 60)
    return BASE + timedelta(minutes=whole_minutes), math.floor(reading.remaining_percent)


def round_half_up(value: float) -> int:
    return math.floor(value + 0.5)


# Plan seats whose readings share a few resets and percents, so ties and unknown resets
# are common.
PLAN_IDS = ("p0", "p1", "p2", "p3", "p4", "p5")


@st.composite
def plan_worlds(draw: st.DrawFn) -> World:
    now = BASE
    config = draw(configs)
    connections: dict[str, ConnectionView] = {}
    for connection_id in PLAN_IDS:
        reset = draw(st.sampled_from((None, 600, 3600, 3600, 86400, -60)))
        jitter = draw(st.sampled_from((0, 0, -2, 2, 29, 31)))
        remaining = draw(st.sampled_from((None, 0.5, 20.0, 50.0, 50.4, 90.0)))
        age = draw(st.sampled_from((0, 60, 1000)))
        reading = (
            None
            if draw(st.integers(0, 7)) == 0
            else Reading(
                QuotaStatus.SAFE if remaining is not None else QuotaStatus.UNKNOWN,
                remaining,
                None if reset is None else now + timedelta(seconds=reset + jitter),
                now - timedelta(seconds=age),
            )
        )
        connections[connection_id] = ConnectionView(
            connection_id, "claude", "oauth", PLAN, True, None, reading, NEVER_READ
        )
    candidates = tuple(
        CandidateIn(
            index,
            "claude",
            f"m{index}",
            (),
            None,
            tuple(draw(st.permutations(PLAN_IDS))[: draw(st.integers(1, len(PLAN_IDS)))]),
        )
        for index in range(draw(st.integers(1, 4)))
    )
    grouping = draw(st.sampled_from(Grouping))
    return World(AutoId(grouping), candidates, connections, {}, {}, config, now)


def _check(world: World) -> None:
    decision = run(world)
    by_id = {candidate.id: candidate for candidate in in_pool(world)}
    for entry in decision.candidates:
        source = by_id[entry.id]
        if source.connection_id is not None:
            continue
        allowed = entry.allowed_connection_ids or ()
        given_ids = source.allowed_connection_ids or ()
        # A permutation of a subset of the input, each once.
        assert len(set(allowed)) == len(allowed)
        assert set(allowed) <= set(given_ids)
        passing_here = {
            row_id
            for row_id in given_ids
            if (source.model, row_id) not in {(r.model, r.connection_id) for r in decision.excluded}
        }
        served_elsewhere = {
            cid
            for other in decision.candidates
            if other.id == entry.id and other.rung != entry.rung
            for cid in other.connection_ids
        }
        # Exactly the connections that pass on this rung.
        assert set(allowed) == passing_here - served_elsewhere
        if world.auto_id.grouping is Grouping.SUBSCRIPTION:
            # Safety unchanged: exactly the verified plan connections (independent oracle).
            assert set(allowed) == {
                cid
                for cid in given_ids
                if is_verified_plan_connection(world.connections.get(cid), world.config, world.now)
            }
        if entry.rung is not Rung.SUBSCRIPTION:
            assert is_subsequence(allowed, given_ids)
            continue
        keys = [known_reset(world.connections.get(cid), world.config, world.now) for cid in allowed]
        for position, earlier in enumerate(keys):
            for later in keys[position + 1 :]:
                if later is None:
                    continue
                # A connection with a later reset (or none) never precedes one with an
                # earlier reset and capacity left; at the same reset, more left first.
                assert earlier is not None
                assert earlier[0] <= later[0]
                if earlier[0] == later[0]:
                    assert earlier[1] >= later[1]
        # Among equal keys (and among unknown resets) the original order stands.
        for key in set(keys):
            group = tuple(cid for cid, k in zip(allowed, keys, strict=True) if k == key)
            assert is_subsequence(group, given_ids)


@PROPERTY_SETTINGS
@given(plan_worlds())
def test_plan_seats_are_a_permutation_of_the_passing_ones_soonest_reset_first(
    world: World,
) -> None:
    _check(world)


@PROPERTY_SETTINGS
@given(worlds())
def test_every_allowlist_is_a_permutation_of_the_passing_ones_in_order_of_preference(
    world: World,
) -> None:
    _check(world)


@PROPERTY_SETTINGS
@given(plan_worlds(), st.randoms(use_true_random=False))
def test_the_order_of_known_resets_does_not_depend_on_the_given_order(
    world: World, random: Random
) -> None:
    candidate = world.candidates[0]
    shuffled_ids = list(candidate.allowed_connection_ids or ())
    random.shuffle(shuffled_ids)
    shuffled = World(
        world.auto_id,
        (CandidateIn(0, "claude", "m0", (), None, tuple(shuffled_ids)),),
        world.connections,
        {},
        {},
        world.config,
        world.now,
    )
    original = World(
        world.auto_id, (candidate,), world.connections, {}, {}, world.config, world.now
    )

    def keyed(w: World) -> list[tuple[datetime, int]]:
        entries = run(w).candidates
        allowed = entries[0].allowed_connection_ids if entries else ()
        keys = [known_reset(w.connections[cid], w.config, w.now) for cid in allowed or ()]
        return [key for key in keys if key is not None]

    assert keyed(shuffled) == keyed(original)
