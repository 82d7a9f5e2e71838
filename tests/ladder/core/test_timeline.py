"""The pool timeline's pure diff (ladder/core/timeline.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ladder.core import AutoId, Decision, Grouping, Reason, Rung
from ladder.core.timeline import (
    NO_LONGER_LISTED,
    Change,
    Lane,
    Transition,
    lanes,
    membership,
    membership_from_rows,
    membership_rows,
    transitions,
)
from ladder.core.types import DecidedCandidate, Exclusion

AT = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
THRIFTY = AutoId(Grouping.THRIFTY)


def _decision(candidates: list[DecidedCandidate], excluded: list[Exclusion] = ()) -> Decision:  # type: ignore[assignment]
    return Decision(THRIFTY, AT, tuple(candidates), tuple(excluded), None)


PINNED = DecidedCandidate(1, "claude", "sonnet", Rung.SUBSCRIPTION, "plan-a", None)
ALLOWED = DecidedCandidate(2, "openai", "mini", Rung.CHEAP, None, ("key-b", "key-a"))


def test_membership_is_every_pair_a_pool_may_dispatch_to_with_its_rung() -> None:
    members = membership(_decision([PINNED, ALLOWED, PINNED._replace(id=3, rung=Rung.CHEAP)]))

    assert members == {
        ("claude", "sonnet", "plan-a"): Rung.SUBSCRIPTION,
        ("openai", "mini", "key-b"): Rung.CHEAP,
        ("openai", "mini", "key-a"): Rung.CHEAP,
    }


def test_rows_round_trip_sorted_whatever_the_pool_order() -> None:
    members = membership(_decision([ALLOWED, PINNED]))

    rows = membership_rows(members)

    assert rows == [
        ["claude", "sonnet", "plan-a", 0],
        ["openai", "mini", "key-a", 3],
        ["openai", "mini", "key-b", 3],
    ]
    assert membership_from_rows(rows) == members
    assert membership_rows(membership(_decision([PINNED, ALLOWED]))) == rows


def test_transitions_name_who_left_with_the_new_decisions_reason_then_who_entered() -> None:
    before = membership(_decision([PINNED, ALLOWED]))
    after_decision = _decision(
        [ALLOWED._replace(allowed_connection_ids=("key-a", "key-c"))],
        [
            Exclusion(
                "claude", "sonnet", "plan-a", Rung.SUBSCRIPTION, Reason.COOLING_DOWN, "Cooling"
            )
        ],
    )

    found = transitions(
        "auto/thrifty", before, membership(after_decision), after_decision.excluded, AT
    )

    assert found == [
        Transition(
            AT,
            "auto/thrifty",
            Change.LEFT,
            "claude",
            "sonnet",
            "plan-a",
            Rung.SUBSCRIPTION,
            Reason.COOLING_DOWN,
            "Cooling",
        ),
        Transition(
            AT,
            "auto/thrifty",
            Change.LEFT,
            "openai",
            "mini",
            "key-b",
            Rung.CHEAP,
            None,
            NO_LONGER_LISTED,
        ),
        Transition(
            AT,
            "auto/thrifty",
            Change.ENTERED,
            "openai",
            "mini",
            "key-c",
            Rung.CHEAP,
            None,
            "In the pool on the cheap rung",
        ),
    ]


def test_a_rung_change_leaves_and_enters_and_no_change_is_no_transition() -> None:
    before = membership(_decision([ALLOWED]))
    after = membership(_decision([ALLOWED._replace(rung=Rung.PREMIUM)]))

    found = transitions("auto/thrifty", before, after, (), AT)

    assert [(t.change, t.connection_id, t.rung, t.detail) for t in found] == [
        (Change.LEFT, "key-a", Rung.CHEAP, "Moved to the premium rung"),
        (Change.LEFT, "key-b", Rung.CHEAP, "Moved to the premium rung"),
        (Change.ENTERED, "key-a", Rung.PREMIUM, "In the pool on the premium rung"),
        (Change.ENTERED, "key-b", Rung.PREMIUM, "In the pool on the premium rung"),
    ]
    assert transitions("auto/thrifty", before, before, (), AT) == []
    assert transitions("auto/thrifty", {}, {}, (), AT) == []


# --- lanes ---------------------------------------------------------------------------


def _at(minutes: float) -> datetime:
    return AT + timedelta(minutes=minutes)


A_SONNET = ("claude", "sonnet", "plan-a")
A_OPUS = ("claude", "opus", "plan-a")
B_SONNET = ("claude", "sonnet", "plan-b")


def test_lanes_follow_each_connection_and_shade_the_pool_empty_between_them() -> None:
    # Over [0, 60) min: plan-a in from the start (its first change is a departure) and
    # out at 10; plan-b in at 25 and out after the range (at 70): in to the end; the
    # pool empty from 10 to 25.
    changes = [
        (_at(10), Change.LEFT, A_SONNET),
        (_at(25), Change.ENTERED, B_SONNET),
        (_at(70), Change.LEFT, B_SONNET),
    ]

    found = lanes(changes, [], _at(0), _at(60))

    assert found.lanes == (
        Lane("plan-a", ((_at(0), _at(10)),)),
        Lane("plan-b", ((_at(25), _at(60)),)),
    )
    assert found.empty == ((_at(10), _at(25)),)
    assert (found.lanes[0].seconds_in, found.seconds_empty) == (600.0, 900.0)


def test_a_pair_unchanged_since_the_start_is_in_exactly_when_it_is_in_now() -> None:
    found = lanes([], [A_SONNET], _at(0), _at(60))
    nothing = lanes([], [], _at(0), _at(60))

    assert found.lanes == (Lane("plan-a", ((_at(0), _at(60)),)),)
    assert found.empty == ()
    assert (nothing.lanes, nothing.empty) == ((), ((_at(0), _at(60)),))


def test_a_rung_move_or_a_second_pair_keeps_the_lane_unbroken() -> None:
    # At 20 the sonnet pair moves rung (leaves and enters at once); from 30 to 40 plan-a
    # still serves opus while sonnet is out.
    changes = [
        (_at(20), Change.LEFT, A_SONNET),
        (_at(20), Change.ENTERED, A_SONNET),
        (_at(30), Change.LEFT, A_SONNET),
        (_at(40), Change.ENTERED, A_SONNET),
    ]

    found = lanes(changes, [A_SONNET, A_OPUS], _at(0), _at(60))

    assert found.lanes == (Lane("plan-a", ((_at(0), _at(60)),)),)
    assert found.empty == ()
