"""What can change a pool (ladder/core/changes.py): exact cases of writes that must move
the state counter and of writes that must not."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

import pytest

from ladder.core import (
    NEVER_READ,
    ConnectionView,
    Grouping,
    QuotaStatus,
    Reading,
    Reason,
    Standing,
    can_change_pool,
    changes_on_its_own_at,
    standing,
)
from tests.ladder.core.factories import CONFIG, DROPPED, NOW, reading, view

RESET = NOW + timedelta(hours=2)
SOON = NOW + timedelta(seconds=30)


def _moves(before: ConnectionView | None, after: ConnectionView | None) -> bool:
    return can_change_pool(before, after, CONFIG, NOW)


def _read(remaining: float | None, **fields: object) -> Reading:
    return replace(reading(remaining), **fields)  # type: ignore[arg-type]


def test_standing_names_the_connection_wide_cause_first_with_its_end_and_what_it_hides() -> None:
    cooling = view("plan", cooldown_until=SOON, quota=reading(1.0))

    assert standing(cooling, Grouping.SUBSCRIPTION, CONFIG, NOW) == Standing(
        Reason.COOLING_DOWN, SOON, Reason.QUOTA_EXHAUSTED
    )
    assert standing(cooling, Grouping.THRIFTY, CONFIG, NOW) == Standing(
        Reason.COOLING_DOWN, SOON, Reason.QUOTA_EXHAUSTED
    )


def test_a_reading_that_lifts_a_cooling_plan_above_its_cutoff_moves_the_counter() -> None:
    # A decision computed just after the cooldown's end, before this reading committed,
    # read the 1 % reading: it must not stay cached (issue #30, a warm process serving
    # what a fresh one would not).
    before = view("plan", cooldown_until=SOON, quota=reading(1.0))
    after = view("plan", cooldown_until=SOON, quota=reading(70.0))

    assert _moves(before, after) is True


def test_a_reading_that_keeps_a_cooling_plans_quota_standing_moves_nothing() -> None:
    before = view("plan", cooldown_until=SOON, quota=reading(60.0))
    after = view("plan", cooldown_until=SOON, quota=reading(70.0))

    assert _moves(before, after) is False


def test_standing_applies_thrifty_fail_open_to_unverified_quota() -> None:
    never_read = view("plan", quota=None)

    assert standing(never_read, Grouping.SUBSCRIPTION, CONFIG, NOW) == Standing(
        Reason.QUOTA_UNKNOWN, None
    )
    assert standing(never_read, Grouping.THRIFTY, CONFIG, NOW) == Standing(None, None)


def test_standing_of_an_exhausted_reading_comes_back_at_its_reset() -> None:
    exhausted = view("plan", quota=reading(0.0, status=QuotaStatus.EXHAUSTED, reset_at=RESET))

    assert standing(exhausted, Grouping.THRIFTY, CONFIG, NOW) == Standing(
        Reason.QUOTA_EXHAUSTED, RESET
    )


def test_changes_on_its_own_at_is_the_earliest_future_instant_of_the_connection() -> None:
    fresh = view("plan", quota=reading(50.0, age_seconds=100))
    cooling = view("plan", cooldown_until=SOON, quota=reading(50.0, age_seconds=100))

    assert changes_on_its_own_at(fresh, CONFIG, NOW) == NOW + timedelta(seconds=80, microseconds=1)
    assert changes_on_its_own_at(cooling, CONFIG, NOW) == SOON
    assert changes_on_its_own_at(view("plan", quota=None), CONFIG, NOW) is None


@pytest.mark.parametrize(
    ("before", "after", "moves"),
    [
        # A fresh reading with a different percent, same standing, later validity: no.
        pytest.param(
            view("plan", quota=reading(50.0, age_seconds=60)),
            view("plan", quota=reading(42.5)),
            False,
            id="new-percent-same-standing",
        ),
        # The same reading again: nothing changes.
        pytest.param(view("plan"), view("plan"), False, id="identical"),
        # Dropping below the exit cutoff excludes it.
        pytest.param(
            view("plan", quota=reading(50.0, age_seconds=60)),
            view("plan", quota=reading(1.5)),
            True,
            id="crosses-the-exit-cutoff",
        ),
        # In the hysteresis band: dropped out at 4 % is below re-entry, in play is not.
        pytest.param(
            view("plan", quota=reading(4.0), hysteresis=NEVER_READ),
            view("plan", quota=reading(4.0), hysteresis=DROPPED),
            True,
            id="hysteresis-flips-in-the-band",
        ),
        # Dropped out, still below re-entry at another percent and the same (no) reset.
        pytest.param(
            view("plan", quota=reading(3.0, age_seconds=30), hysteresis=DROPPED),
            view("plan", quota=reading(4.5), hysteresis=DROPPED),
            False,
            id="stays-below-reentry",
        ),
        # Below re-entry with a new reset: next_change_at moves.
        pytest.param(
            view("plan", quota=reading(3.0, age_seconds=30), hysteresis=DROPPED),
            view("plan", quota=reading(3.0, reset_at=RESET), hysteresis=DROPPED),
            True,
            id="below-reentry-new-reset",
        ),
        # Exhausted at 0 % becomes exhausted at the cutoff, same reset: same standing.
        pytest.param(
            view("plan", quota=reading(0.0, status=QuotaStatus.EXHAUSTED, reset_at=RESET)),
            view("plan", quota=reading(1.0, reset_at=RESET)),
            False,
            id="exhausted-either-way-same-reset",
        ),
        # A fresh reading whose reset comes before the old reading would turn stale.
        pytest.param(
            view("plan", quota=reading(50.0)),
            view("plan", quota=reading(50.0, reset_at=SOON)),
            True,
            id="earlier-validity",
        ),
        # The first reading of a never-read connection admits it in subscription.
        pytest.param(
            view("plan", quota=None), view("plan", quota=reading(50.0)), True, id="first-reading"
        ),
        # A metered connection's first reading: thrifty admits unknown quota anyway, but
        # the reading brings an instant at which it turns stale (earlier than never).
        pytest.param(
            view("or", provider="openrouter", auth_type="apikey", quota=None),
            view("or", provider="openrouter", auth_type="apikey", quota=reading(50.0)),
            True,
            id="metered-first-reading-brings-a-validity",
        ),
        # A new cooldown.
        pytest.param(view("plan"), view("plan", cooldown_until=SOON), True, id="new-cooldown"),
        # A cooldown replaced by one with another end: next_change_at moves.
        pytest.param(
            view("plan", cooldown_until=SOON),
            view("plan", cooldown_until=SOON + timedelta(seconds=5)),
            True,
            id="cooldown-other-end",
        ),
        # A cooldown cleared while in force.
        pytest.param(view("plan", cooldown_until=SOON), view("plan"), True, id="cooldown-cleared"),
        # A cooldown that already ended, cleared: no standing moves, no validity earlier.
        pytest.param(
            view("plan", cooldown_until=NOW - timedelta(seconds=1)),
            view("plan"),
            False,
            id="past-cooldown-cleared",
        ),
        # An inactive connection's reading changes nothing it shows...
        pytest.param(
            view("plan", is_active=False, quota=reading(50.0, age_seconds=10)),
            view("plan", is_active=False, quota=reading(1.0)),
            False,
            id="inactive-new-reading",
        ),
        # ... unless the new reading turns stale or resets before the old one would.
        pytest.param(
            view("plan", is_active=False, quota=reading(50.0)),
            view("plan", is_active=False, quota=reading(1.0, reset_at=SOON)),
            True,
            id="inactive-earlier-validity",
        ),
        # A reading that is history (older than the current one) changes nothing.
        pytest.param(view("plan"), view("plan"), False, id="history"),
        # A stale reading replaced by a fresh one in subscription.
        pytest.param(
            view("plan", quota=reading(50.0, age_seconds=200)),
            view("plan", quota=reading(50.0)),
            True,
            id="stale-to-fresh",
        ),
        # A plan in play with a known reset: its percent places it among the plan
        # connections of the same reset (order of preference), so a new percent moves it.
        pytest.param(
            view("plan", quota=reading(50.0, age_seconds=60, reset_at=RESET)),
            view("plan", quota=reading(42.5, reset_at=RESET)),
            True,
            id="new-percent-known-reset-moves-the-preference",
        ),
        # A new, later reset (the window rolled over) with the same percent: validity is
        # later, but the connection's place in the order of preference may move.
        pytest.param(
            view("plan", quota=reading(50.0, age_seconds=60, reset_at=RESET)),
            view("plan", quota=reading(50.0, reset_at=RESET + timedelta(days=7))),
            True,
            id="later-reset-moves-the-preference",
        ),
        # A reset that jitters by 2 s and a percent within the same whole percent (the
        # headers of every answer): the key is read to the minute and whole percent.
        pytest.param(
            view("plan", quota=reading(50.7, age_seconds=60, reset_at=RESET)),
            view("plan", quota=reading(50.2, reset_at=RESET + timedelta(seconds=2))),
            False,
            id="jittered-reset-same-whole-percent",
        ),
        # The same key read again later: nothing to move.
        pytest.param(
            view("plan", quota=reading(50.0, age_seconds=60, reset_at=RESET)),
            view("plan", quota=reading(50.0, reset_at=RESET)),
            False,
            id="same-preference-key",
        ),
        # Dropped out below re-entry, a new percent at the same reset: it serves nowhere,
        # so its key places it nowhere.
        pytest.param(
            view("plan", quota=reading(3.0, age_seconds=30, reset_at=RESET), hysteresis=DROPPED),
            view("plan", quota=reading(4.5, reset_at=RESET), hysteresis=DROPPED),
            False,
            id="below-reentry-new-percent-same-reset",
        ),
        # A metered key's percent at a known reset: only plan connections are ordered.
        pytest.param(
            view(
                "or",
                provider="openrouter",
                auth_type="apikey",
                quota=reading(50.0, age_seconds=60, reset_at=RESET),
            ),
            view(
                "or", provider="openrouter", auth_type="apikey", quota=reading(40.0, reset_at=RESET)
            ),
            False,
            id="metered-new-percent-known-reset",
        ),
        # No such connection before, or after.
        pytest.param(None, view("plan"), True, id="created"),
        pytest.param(view("plan"), None, True, id="deleted"),
        pytest.param(None, None, False, id="absent"),
    ],
)
def test_can_change_pool(
    before: ConnectionView | None, after: ConnectionView | None, moves: bool
) -> None:
    assert _moves(before, after) is moves


def test_a_later_validity_is_safe_and_an_earlier_one_is_not() -> None:
    old = view("plan", quota=reading(50.0, age_seconds=120))
    fresh = view("plan", quota=reading(50.0))

    assert (_moves(old, fresh), _moves(fresh, old)) == (False, True)


def test_a_thrifty_only_difference_is_enough() -> None:
    # Subscription excludes the metered key on billing either way; thrifty sees it
    # start cooling down.
    metered = view("or", provider="openrouter", auth_type="apikey", quota=None)
    cooling = replace(metered, cooldown_until=SOON)

    assert [standing(v, Grouping.SUBSCRIPTION, CONFIG, NOW) for v in (metered, cooling)] == [
        Standing(Reason.METERED, None),
        Standing(Reason.METERED, None),
    ]
    assert standing(cooling, Grouping.THRIFTY, CONFIG, NOW) == Standing(Reason.COOLING_DOWN, SOON)
    assert _moves(metered, cooling) is True


def test_the_write_instant_decides_what_is_in_force() -> None:
    ends: datetime = NOW + timedelta(seconds=10)
    cooling = view("plan", cooldown_until=ends)
    cleared = view("plan")

    assert can_change_pool(cooling, cleared, CONFIG, NOW) is True
    assert can_change_pool(cooling, cleared, CONFIG, ends) is False
