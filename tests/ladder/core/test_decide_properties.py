"""Properties of a decision over any drawn world (hypothesis)."""

from __future__ import annotations

from hypothesis import given

from ladder.core import AutoId, Grouping, Rung, decide
from tests.ladder.core.strategies import (
    PROPERTY_SETTINGS,
    World,
    connection_ids_of,
    in_pool,
    is_subsequence,
    is_verified_plan_connection,
    known_models,
    run,
    worlds,
)


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
            assert is_verified_plan_connection(
                view, world.config, world.now, entry.model, known_models(world)
            ), connection_id


@PROPERTY_SETTINGS
@given(worlds())
def test_every_output_allowlist_is_a_subset_of_its_input_ordered_off_the_plan_rung(
    world: World,
) -> None:
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
            given_ids = source.allowed_connection_ids or ()
            assert set(entry.allowed_connection_ids) <= set(given_ids)
            assert len(set(entry.allowed_connection_ids)) == len(entry.allowed_connection_ids)
            if entry.rung is not Rung.SUBSCRIPTION:
                # The plan rung is in order of preference (test_preference_properties.py).
                assert is_subsequence(entry.allowed_connection_ids, given_ids)


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
