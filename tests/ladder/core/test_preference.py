"""Which plan connection first (ladder/core/preference.py): the order of preference of an
entry's plan connections on exact inputs, and its sentence."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta

from ladder.core import QuotaStatus
from ladder.core.changes import moves_preference
from ladder.core.decide import decide
from ladder.core.preference import (
    PreferenceKey,
    model_preference_key,
    preference_key,
    preference_order,
    preference_sentence,
    span_text,
)
from ladder.core.types import NEVER_READ, ConnectionView, ScopedQuota
from tests.ladder.core.factories import (
    CONFIG,
    DROPPED,
    NOW,
    SUBSCRIPTION,
    THRIFTY,
    allowlisted,
    pool,
    reading,
    run,
    view,
)

TUESDAY = NOW + timedelta(hours=19)
SATURDAY = NOW + timedelta(days=6)


def test_the_seat_that_resets_soonest_comes_first() -> None:
    views = [
        view("max-sat", quota=reading(90.0, reset_at=SATURDAY)),
        view("max-tue", quota=reading(40.0, reset_at=TUESDAY)),
    ]

    decision = run(SUBSCRIPTION, [allowlisted("max-sat", "max-tue")], views)

    assert pool(decision) == [(1, "subscription", ("max-tue", "max-sat"))]


def test_a_plan_of_another_provider_is_ranked_by_the_same_rule() -> None:
    views = [
        view("claude", quota=reading(80.0, reset_at=SATURDAY)),
        view("codex", provider="codex", quota=reading(30.0, reset_at=TUESDAY)),
        view("claude-2", quota=reading(10.0, reset_at=NOW + timedelta(days=3))),
    ]

    decision = run(SUBSCRIPTION, [allowlisted("claude", "codex", "claude-2")], views)

    assert pool(decision) == [(1, "subscription", ("codex", "claude-2", "claude"))]


def test_equal_resets_put_the_most_remaining_first() -> None:
    views = [
        view("a", quota=reading(20.0, reset_at=TUESDAY)),
        view("b", quota=reading(70.0, reset_at=TUESDAY)),
        view("c", quota=reading(45.0, reset_at=TUESDAY)),
    ]

    decision = run(SUBSCRIPTION, [allowlisted("a", "b", "c")], views)

    assert pool(decision) == [(1, "subscription", ("b", "c", "a"))]


def test_a_full_tie_keeps_the_original_order() -> None:
    views = [
        view("a", quota=reading(50.0, reset_at=TUESDAY)),
        view("b", quota=reading(50.0, reset_at=TUESDAY)),
    ]

    forward = run(SUBSCRIPTION, [allowlisted("a", "b")], views)
    backward = run(SUBSCRIPTION, [allowlisted("b", "a")], views)

    assert pool(forward) == [(1, "subscription", ("a", "b"))]
    assert pool(backward) == [(1, "subscription", ("b", "a"))]


def test_no_known_reset_goes_last_in_the_original_order() -> None:
    views = [
        view("no-reset-1", quota=reading(99.0)),
        view("saturday", quota=reading(10.0, reset_at=SATURDAY)),
        view("no-reset-2", quota=reading(60.0)),
        view("tuesday", quota=reading(50.0, reset_at=TUESDAY)),
    ]

    decision = run(
        SUBSCRIPTION, [allowlisted("no-reset-1", "saturday", "no-reset-2", "tuesday")], views
    )

    assert pool(decision) == [
        (1, "subscription", ("tuesday", "saturday", "no-reset-1", "no-reset-2"))
    ]


def test_thrifty_admits_an_unread_plan_and_puts_it_last() -> None:
    views = [
        view("unread", quota=None),
        view("stale", quota=reading(80.0, age_seconds=600, reset_at=TUESDAY)),
        view("saturday", quota=reading(10.0, reset_at=SATURDAY)),
    ]

    decision = run(THRIFTY, [allowlisted("unread", "stale", "saturday")], views)

    # The stale reading's reset is not trusted: no known reset, like the unread plan.
    assert pool(decision) == [(1, "subscription", ("saturday", "unread", "stale"))]


def test_only_passing_connections_are_ordered() -> None:
    views = [
        view("exhausted-soon", quota=reading(1.0, reset_at=NOW + timedelta(hours=1))),
        view("below-reentry", quota=reading(4.0, reset_at=TUESDAY), hysteresis=DROPPED),
        view("saturday", quota=reading(70.0, reset_at=SATURDAY)),
        view("tuesday", quota=reading(30.0, reset_at=TUESDAY)),
    ]

    decision = run(
        SUBSCRIPTION,
        [allowlisted("exhausted-soon", "below-reentry", "saturday", "tuesday")],
        views,
    )

    assert pool(decision) == [(1, "subscription", ("tuesday", "saturday"))]
    assert [row.connection_id for row in decision.excluded] == ["exhausted-soon", "below-reentry"]


def test_paid_rungs_keep_their_original_order() -> None:
    views = [
        view("plan-sat", quota=reading(90.0, reset_at=SATURDAY)),
        view(
            "key-b",
            provider="openrouter",
            auth_type="apikey",
            quota=reading(10.0, reset_at=TUESDAY),
        ),
        view("plan-tue", quota=reading(40.0, reset_at=TUESDAY)),
        view(
            "key-a",
            provider="openrouter",
            auth_type="apikey",
            quota=reading(90.0, reset_at=NOW + timedelta(hours=1)),
        ),
    ]

    decision = run(THRIFTY, [allowlisted("plan-sat", "key-b", "plan-tue", "key-a")], views)

    # The unpriced model is premium: the metered keys land there in their own order.
    assert pool(decision) == [
        (1, "subscription", ("plan-tue", "plan-sat")),
        (1, "premium", ("key-b", "key-a")),
    ]


def test_the_key_is_the_current_safe_readings_reset_and_percent() -> None:
    assert preference_key(view("p", quota=reading(40.0, reset_at=TUESDAY)), CONFIG, NOW) == (
        PreferenceKey(TUESDAY, 40)
    )
    assert preference_key(view("p", quota=reading(40.0)), CONFIG, NOW) is None
    assert preference_key(view("p", quota=None), CONFIG, NOW) is None
    assert preference_key(view("p", quota=reading(None, reset_at=TUESDAY)), CONFIG, NOW) is None
    unknown = reading(40.0, status=QuotaStatus.UNKNOWN, reset_at=TUESDAY)
    assert preference_key(view("p", quota=unknown), CONFIG, NOW) is None
    stale = reading(40.0, age_seconds=CONFIG.max_state_age_seconds + 1, reset_at=TUESDAY)
    assert preference_key(view("p", quota=stale), CONFIG, NOW) is None
    passed = reading(40.0, reset_at=NOW)
    assert preference_key(view("p", quota=passed), CONFIG, NOW) is None


def test_the_key_reads_a_reset_to_the_nearest_minute_and_a_whole_percent() -> None:
    def key(remaining: float, reset_at: datetime) -> PreferenceKey | None:
        return preference_key(view("p", quota=reading(remaining, reset_at=reset_at)), CONFIG, NOW)

    # Jitter of a couple of seconds around one instant is one reset.
    assert key(40.2, TUESDAY - timedelta(seconds=2)) == PreferenceKey(TUESDAY, 40)
    assert key(40.9, TUESDAY + timedelta(seconds=1, microseconds=900000)) == PreferenceKey(
        TUESDAY, 40
    )
    assert key(39.99, TUESDAY + timedelta(seconds=29)) == PreferenceKey(TUESDAY, 39)
    assert key(40.0, TUESDAY + timedelta(seconds=30)) == PreferenceKey(
        TUESDAY + timedelta(minutes=1), 40
    )


def test_resets_in_the_same_minute_tie_and_the_most_left_goes_first() -> None:
    views = [
        view("a", quota=reading(20.0, reset_at=TUESDAY - timedelta(seconds=2))),
        view("b", quota=reading(70.0, reset_at=TUESDAY + timedelta(seconds=2))),
    ]

    decision = run(SUBSCRIPTION, [allowlisted("a", "b")], views)

    assert pool(decision) == [(1, "subscription", ("b", "a"))]


def test_preference_order_counts_a_missing_key_as_no_known_reset() -> None:
    keys = {"b": PreferenceKey(SATURDAY, 5), "c": None}

    assert preference_order(("a", "c", "b"), keys) == ("b", "a", "c")


def test_the_sentence_says_why_the_first_comes_first() -> None:
    keys = {
        "claude-max-2": PreferenceKey(TUESDAY, 40),
        "claude-max-1": PreferenceKey(SATURDAY, 90),
        "copilot": None,
    }

    sentence = preference_sentence(("claude-max-2", "claude-max-1", "copilot"), keys, NOW)

    assert sentence == (
        "claude-max-2 first: resets in 19 h with 40 % left; "
        "claude-max-1 resets in 6 d with 90 % left; copilot no known reset"
    )


def test_the_sentence_names_a_tie_on_the_reset() -> None:
    keys = {
        "a": PreferenceKey(TUESDAY, 70),
        "b": PreferenceKey(TUESDAY, 20),
        "c": PreferenceKey(TUESDAY, 70),
    }

    assert preference_sentence(("a", "c", "b"), keys, NOW) == (
        "a first: resets in 19 h with 70 % left; "
        "c resets in 19 h with 70 % left (a tie: the given order stands); "
        "b resets in 19 h with 20 % left (the same reset: more left goes first)"
    )


def test_the_sentence_of_no_known_reset_says_the_original_order_stands() -> None:
    assert preference_sentence(("a", "b"), {}, NOW) == (
        "a first: no connection has a known reset, so the original order stands"
    )
    assert preference_sentence(("a",), {}, NOW) is None


def test_span_text_rounds_down_to_its_largest_unit() -> None:
    assert [span_text(s) for s in (6 * 86400 + 7000, 19 * 3600 + 59, 1500, 59.9, -3)] == [
        "6 d",
        "19 h",
        "25 min",
        "59 s",
        "0 s",
    ]


# --- windows scoped to a model ---------------------------------------------------------------

OPUS = "claude-opus-4-1"
SONNET = "claude-sonnet-4-5"
KNOWN = frozenset({OPUS, SONNET})
THREE_DAYS = NOW + timedelta(days=3)


def opus_capped(left: float) -> ConnectionView:
    """A seat whose unscoped window resets on Tuesday with 50 % left and whose weekly Opus
    cap resets on Saturday with `left` % left."""
    return replace(
        view("a", quota=reading(50.0, reset_at=TUESDAY)),
        scoped=(ScopedQuota("opus", reading(left, reset_at=SATURDAY), NEVER_READ, None),),
    )


def test_a_window_scoped_to_the_model_is_the_binding_window_of_its_key() -> None:
    views = {"a": opus_capped(30.0), "b": view("b", quota=reading(80.0, reset_at=THREE_DAYS))}
    candidates = [
        allowlisted("a", "b", id=1, model=OPUS),
        allowlisted("a", "b", id=2, model=SONNET),
    ]

    decision = decide(SUBSCRIPTION, candidates, views, {}, {}, CONFIG, NOW, known_models=KNOWN)

    # Opus: a's binding window is its Opus cap (30 % left, Saturday), so b (3 days) comes
    # first; Sonnet: a's unscoped window (Tuesday) comes first.
    assert pool(decision) == [(1, "subscription", ("b", "a")), (2, "subscription", ("a", "b"))]
    assert decision.model_preference == {("a", OPUS): PreferenceKey(SATURDAY, 30)}
    assert decision.preference == {
        "a": PreferenceKey(TUESDAY, 50),
        "b": PreferenceKey(THREE_DAYS, 80),
    }


def test_the_scoped_key_is_the_least_remaining_of_the_binding_windows() -> None:
    seat = opus_capped(60.0)  # more left on the Opus cap than on the unscoped window

    assert model_preference_key(seat, OPUS, CONFIG, NOW, KNOWN) == PreferenceKey(TUESDAY, 50)
    assert model_preference_key(seat, SONNET, CONFIG, NOW, KNOWN) == PreferenceKey(TUESDAY, 50)


def test_a_write_that_moves_only_a_scopes_key_moves_the_preference() -> None:
    assert moves_preference(opus_capped(30.0), opus_capped(20.0), CONFIG, NOW) is True
    assert moves_preference(opus_capped(30.0), opus_capped(30.4), CONFIG, NOW) is False
