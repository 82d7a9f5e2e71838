"""Decisions: auto/subscription and auto/thrifty pools, precedence, next change."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from billing.classify import KEYLESS_VERDICT, UNCURATED_VERDICT
from billing.tiers import Tier
from ladder.core import (
    NEVER_READ,
    AutoId,
    ConnectionView,
    DecidedCandidate,
    Exclusion,
    Grouping,
    Hysteresis,
    LadderConfig,
    QuotaStatus,
    Reading,
    Reason,
    Rung,
    RungSpend,
    rung_for,
)
from tests.ladder.core.factories import (
    CONFIG,
    CURATED,
    DROPPED,
    LADDER_TIERS,
    LADDER_VIEWS,
    METERED,
    NOW,
    SUBSCRIPTION,
    THRIFTY,
    allowlisted,
    pinned,
    pool,
    reading,
    reasons,
    run,
    view,
)


@pytest.mark.parametrize(
    ("provider", "auth_type", "tier", "expected"),
    [
        pytest.param("claude", "oauth", Tier.PREMIUM, Rung.SUBSCRIPTION, id="plan-beats-tier"),
        pytest.param("cursor", "oauth", Tier.FREE, Rung.SUBSCRIPTION, id="plan-any-overage"),
        pytest.param("openrouter", "none", Tier.PREMIUM, Rung.KEYLESS, id="no-auth-is-keyless"),
        pytest.param("openrouter", "apikey", Tier.FREE, Rung.FREE, id="metered-free"),
        pytest.param("openrouter", "apikey", Tier.CHEAP, Rung.CHEAP, id="metered-cheap"),
        pytest.param("openrouter", "apikey", Tier.PREMIUM, Rung.PREMIUM, id="metered-premium"),
        pytest.param("claude", "apikey", Tier.CHEAP, Rung.CHEAP, id="uncurated-is-metered"),
        pytest.param("brand-new", "oauth", Tier.PREMIUM, Rung.PREMIUM, id="unknown-by-tier"),
    ],
)
def test_rung_for_classifies_subscription_then_keyless_then_tier(
    provider: str, auth_type: str, tier: Tier, expected: Rung
) -> None:
    verdict = CURATED.classify(provider, auth_type)

    assert rung_for(verdict, tier) is expected


def test_a_plan_connection_with_headroom_is_kept() -> None:
    decision = run(SUBSCRIPTION, [pinned("plan")], [view("plan", quota=reading(42.0))])

    assert decision.candidates == (
        DecidedCandidate(1, "claude", "sonnet", Rung.SUBSCRIPTION, "plan", None),
    )
    assert decision.excluded == ()
    assert (decision.auto_id, decision.computed_at, decision.next_change_at) == (
        SUBSCRIPTION,
        NOW,
        None,
    )


@pytest.mark.parametrize(
    ("provider", "overage"),
    [
        pytest.param("devin-desktop", "meters-to-paid", id="meters-to-paid"),
        pytest.param("cursor", "unknown", id="unknown-overage-counts-as-metering"),
    ],
)
def test_a_plan_that_meters_to_paid_is_excluded(provider: str, overage: str) -> None:
    decision = run(SUBSCRIPTION, [pinned("c", provider=provider)], [view("c", provider=provider)])

    assert decision.candidates == ()
    assert reasons(decision) == [("c", Reason.OVERAGE_NOT_HARD_STOP)]
    assert decision.excluded[0].detail.startswith(
        f"Overage is {overage}, not hard-stop: past the plan it could bill (catalog entry "
    )


def test_a_metered_credential_of_a_plan_provider_is_uncurated() -> None:
    # Given claude with an API key: no (claude, apikey) entry and no provider-wide entry.
    key = view("key", auth_type="apikey")

    # When
    decision = run(SUBSCRIPTION, [pinned("key")], [key], tiers={("claude", "sonnet"): Tier.PREMIUM})

    # Then
    assert key.billing == UNCURATED_VERDICT
    assert decision.candidates == ()
    assert decision.excluded == (
        Exclusion(
            "claude",
            "sonnet",
            "key",
            Rung.PREMIUM,
            Reason.UNCURATED,
            "No catalog entry covers claude with auth apikey: uncurated is treated as metered",
        ),
    )


def test_a_curated_metered_connection_is_excluded_as_metered() -> None:
    decision = run(
        SUBSCRIPTION,
        [pinned("or", provider="openrouter", model="llama")],
        [view("or", provider="openrouter", auth_type="apikey")],
        tiers={("openrouter", "llama"): Tier.FREE},
    )

    assert decision.excluded == (
        Exclusion(
            "openrouter",
            "llama",
            "or",
            Rung.FREE,
            Reason.METERED,
            "Billing is metered, outside the plan (catalog entry 7: per token)",
        ),
    )


def test_keyless_is_not_a_subscription() -> None:
    decision = run(
        SUBSCRIPTION,
        [pinned("free", provider="local")],
        [view("free", provider="local", auth_type="none")],
    )

    assert decision.candidates == ()
    assert reasons(decision) == [("free", Reason.KEYLESS_NOT_SUBSCRIPTION)]
    assert decision.excluded[0].rung is Rung.KEYLESS


@pytest.mark.parametrize(
    ("quota", "detail"),
    [
        pytest.param(None, "Never read: its quota is unknown", id="never-read"),
        pytest.param(
            reading(None, status=QuotaStatus.UNKNOWN),
            "The reading does not say how much quota is left",
            id="status-unknown",
        ),
        pytest.param(
            reading(None), "The reading does not say how much quota is left", id="remaining-unknown"
        ),
        pytest.param(
            reading(80.0, status=QuotaStatus.UNKNOWN),
            "The reading's status is UNKNOWN (80.0 % reported left)",
            id="status-unknown-with-percent",
        ),
    ],
)
def test_no_reading_and_unknown_quota_fail_closed(quota: Reading | None, detail: str) -> None:
    decision = run(SUBSCRIPTION, [pinned("plan")], [view("plan", quota=quota)])

    assert decision.candidates == ()
    assert decision.excluded == (
        Exclusion("claude", "sonnet", "plan", Rung.SUBSCRIPTION, Reason.QUOTA_UNKNOWN, detail),
    )


def test_a_stale_safe_reading_fails_closed() -> None:
    decision = run(
        SUBSCRIPTION, [pinned("plan")], [view("plan", quota=reading(90.0, age_seconds=300))]
    )

    assert decision.candidates == ()
    assert decision.excluded == (
        Exclusion(
            "claude",
            "sonnet",
            "plan",
            Rung.SUBSCRIPTION,
            Reason.QUOTA_STALE,
            "The reading is 300 s old, older than the 180 s maximum",
        ),
    )


def test_a_reading_whose_reset_passed_is_reset_passed_even_when_also_too_old() -> None:
    old_and_reset = reading(1.0, age_seconds=3600, reset_at=NOW - timedelta(minutes=5))

    decision = run(SUBSCRIPTION, [pinned("plan")], [view("plan", quota=old_and_reset)])

    assert decision.excluded == (
        Exclusion(
            "claude",
            "sonnet",
            "plan",
            Rung.SUBSCRIPTION,
            Reason.RESET_PASSED,
            "The reading's reset at 2026-11-29 11:55:00 UTC has passed: the window it "
            "describes is over and a refresh is due",
        ),
    )
    # The reset-time refresh was due at 11:55:01.5 (1.5 s of grace): long overdue, so it
    # is expected at the next beat tick counted from it (10 s beats): 12:00:01.5.
    assert decision.next_change_at == datetime(2026, 11, 29, 12, 0, 1, 500000, tzinfo=UTC)
    assert decision.valid_until == decision.next_change_at


def test_multi_account_keeps_only_the_safe_connections_in_order() -> None:
    views = [
        view("a", quota=reading(80.0)),
        view("b", quota=reading(1.0)),
        view("c", quota=reading(30.0)),
        view("d", auth_type="apikey"),
        view("e", quota=reading(60.0)),
    ]

    decision = run(SUBSCRIPTION, [allowlisted("e", "b", "a", "d", "c")], views)

    assert pool(decision) == [(1, "subscription", ("e", "a", "c"))]
    assert reasons(decision) == [("b", Reason.QUOTA_EXHAUSTED), ("d", Reason.UNCURATED)]


def test_multi_account_with_no_safe_connection_is_dropped() -> None:
    views = [view("a", quota=None), view("b", quota=reading(0.5))]

    decision = run(SUBSCRIPTION, [allowlisted("a", "b"), pinned("a", id=2)], views)

    assert decision.candidates == ()
    assert reasons(decision) == [
        ("a", Reason.QUOTA_UNKNOWN),
        ("b", Reason.QUOTA_EXHAUSTED),
        ("a", Reason.QUOTA_UNKNOWN),
    ]


def test_a_connection_listed_twice_is_decided_once() -> None:
    decision = run(SUBSCRIPTION, [allowlisted("a", "b", "a")], [view("a"), view("b", quota=None)])

    assert pool(decision) == [(1, "subscription", ("a",))]
    assert reasons(decision) == [("b", Reason.QUOTA_UNKNOWN)]


def test_an_unregistered_connection_is_uncurated_never_safe() -> None:
    decision = run(SUBSCRIPTION, [pinned("ghost")], [])

    assert decision.excluded == (
        Exclusion(
            "claude",
            "sonnet",
            "ghost",
            Rung.PREMIUM,
            Reason.UNCURATED,
            "No catalog entry covers claude with no auth type: uncurated is treated as metered",
        ),
    )


def test_an_unregistered_connection_sits_on_its_model_tier_in_thrifty() -> None:
    decision = run(THRIFTY, [pinned("ghost")], [], tiers={("claude", "sonnet"): Tier.CHEAP})

    assert pool(decision) == [(1, "cheap", "ghost")]


def test_a_category_keeps_only_the_candidates_that_list_it() -> None:
    candidates = [
        pinned("plan", id=1, categories=("coding", "chat")),
        pinned("plan", id=2, categories=("chat",)),
        pinned("plan", id=3),
    ]

    decision = run(AutoId(Grouping.SUBSCRIPTION, "coding"), candidates, [view("plan")])

    assert pool(decision) == [(1, "subscription", "plan")]
    assert decision.excluded == ()


def test_an_inactive_plan_connection_is_excluded() -> None:
    decision = run(SUBSCRIPTION, [pinned("plan")], [view("plan", is_active=False)])

    assert decision.excluded == (
        Exclusion(
            "claude",
            "sonnet",
            "plan",
            Rung.SUBSCRIPTION,
            Reason.INACTIVE,
            "Connection plan is marked inactive",
        ),
    )


def test_a_cooling_plan_connection_is_excluded_until_the_cooldown_ends() -> None:
    until = NOW + timedelta(seconds=90)

    decision = run(SUBSCRIPTION, [pinned("plan")], [view("plan", cooldown_until=until)])

    assert decision.excluded == (
        Exclusion(
            "claude",
            "sonnet",
            "plan",
            Rung.SUBSCRIPTION,
            Reason.COOLING_DOWN,
            "Cooling down until 2026-11-29 12:01:30 UTC (90 s from now)",
        ),
    )
    assert decision.next_change_at == until


def test_a_cooldown_that_ended_does_not_exclude() -> None:
    decision = run(SUBSCRIPTION, [pinned("plan")], [view("plan", cooldown_until=NOW)])

    assert pool(decision) == [(1, "subscription", "plan")]


@pytest.mark.parametrize(
    ("hysteresis", "remaining", "expected_pool", "expected_reasons"),
    [
        pytest.param(NEVER_READ, 3.0, [(1, "subscription", "plan")], [], id="3-stays-in-play"),
        pytest.param(DROPPED, 3.0, [], [("plan", Reason.BELOW_REENTRY)], id="3-after-drop-out"),
        pytest.param(DROPPED, 6.0, [(1, "subscription", "plan")], [], id="6-re-enters"),
        pytest.param(DROPPED, 2.0, [], [("plan", Reason.QUOTA_EXHAUSTED)], id="2-is-exhausted"),
    ],
)
def test_hysteresis_band_in_the_pool(
    hysteresis: Hysteresis,
    remaining: float,
    expected_pool: list[tuple[int, str, str]],
    expected_reasons: list[tuple[str, Reason]],
) -> None:
    plan = view("plan", quota=reading(remaining), hysteresis=hysteresis)

    decision = run(SUBSCRIPTION, [pinned("plan")], [plan])

    assert pool(decision) == expected_pool
    assert reasons(decision) == expected_reasons


def test_below_reentry_says_the_numbers() -> None:
    plan = view("plan", quota=reading(3.0), hysteresis=DROPPED)

    decision = run(SUBSCRIPTION, [pinned("plan")], [plan])

    assert decision.excluded[0].detail == "3.0 % left, re-entry needs more than 5 %"


def test_a_reentry_floor_below_the_exit_cutoff_is_raised_in_the_pool() -> None:
    config = LadderConfig(exit_cutoff_percent=10.0, reentry_min_remaining_percent=5.0)
    plan = view("plan", quota=reading(12.0), hysteresis=DROPPED)

    decision = run(SUBSCRIPTION, [pinned("plan")], [plan], config=config)

    assert pool(decision) == [(1, "subscription", "plan")]


def test_thrifty_orders_subscription_keyless_free_cheap_premium() -> None:
    candidates = [
        pinned("or", id=5, provider="openrouter", model="opus"),
        pinned("or", id=4, provider="openrouter", model="mini"),
        pinned("or", id=3, provider="openrouter", model="llama-free"),
        pinned("local", id=2, provider="local", model="qwen"),
        pinned("plan", id=1),
    ]

    decision = run(THRIFTY, candidates, LADDER_VIEWS, tiers=LADDER_TIERS)

    assert pool(decision) == [
        (1, "subscription", "plan"),
        (2, "keyless", "local"),
        (3, "free", "or"),
        (4, "cheap", "or"),
        (5, "premium", "or"),
    ]
    assert decision.excluded == ()


def test_an_unpriced_model_is_premium() -> None:
    decision = run(
        THRIFTY,
        [pinned("or", provider="openrouter", model="mystery")],
        LADDER_VIEWS,
        tiers=LADDER_TIERS,
    )

    assert pool(decision) == [(1, "premium", "or")]


def test_the_order_within_a_rung_is_the_incoming_order() -> None:
    candidates = [
        pinned("or", id=30, provider="openrouter", model="mini"),
        pinned("plan", id=20),
        pinned("or", id=10, provider="openrouter", model="mini"),
        pinned("plan", id=40, model="opus"),
        pinned("or", id=5, provider="openrouter", model="mini"),
    ]

    decision = run(THRIFTY, candidates, LADDER_VIEWS, tiers=LADDER_TIERS)

    assert [entry.id for entry in decision.candidates] == [20, 40, 30, 10, 5]


def test_an_exhausted_plan_steps_aside() -> None:
    reset = NOW + timedelta(hours=3)
    views = [
        view("plan", quota=reading(0.0, status=QuotaStatus.EXHAUSTED, reset_at=reset)),
        *LADDER_VIEWS[1:],
    ]
    candidates = [pinned("plan", id=1), pinned("or", id=2, provider="openrouter", model="mini")]

    decision = run(THRIFTY, candidates, views, tiers=LADDER_TIERS)

    assert pool(decision) == [(2, "cheap", "or")]
    assert decision.excluded == (
        Exclusion(
            "claude",
            "sonnet",
            "plan",
            Rung.SUBSCRIPTION,
            Reason.QUOTA_EXHAUSTED,
            "Upstream reports EXHAUSTED with 0.0 % left, until its reset at "
            "2026-11-29 15:00:00 UTC",
        ),
    )
    assert decision.next_change_at == reset


@pytest.mark.parametrize(
    "quota",
    [
        pytest.param(None, id="never-read"),
        pytest.param(reading(None, status=QuotaStatus.UNKNOWN), id="status-unknown"),
        pytest.param(reading(90.0, age_seconds=600), id="stale"),
        pytest.param(reading(1.0, reset_at=NOW - timedelta(seconds=1)), id="reset-passed"),
    ],
)
def test_an_unverifiable_plan_connection_is_admitted_by_thrifty(quota: Reading | None) -> None:
    decision = run(THRIFTY, [pinned("plan")], [view("plan", quota=quota)])

    assert pool(decision) == [(1, "subscription", "plan")]
    assert decision.excluded == ()


def test_thrifty_admits_any_billing_class() -> None:
    candidates = [
        pinned("cursor", id=1, provider="cursor"),
        pinned("key", id=2),
    ]
    views = [view("cursor", provider="cursor"), view("key", auth_type="apikey", quota=None)]

    decision = run(THRIFTY, candidates, views, tiers={("claude", "sonnet"): Tier.PREMIUM})

    assert pool(decision) == [(1, "subscription", "cursor"), (2, "premium", "key")]


def test_paid_rungs_never_consult_readings() -> None:
    key = view("key", provider="openrouter", auth_type="apikey", quota=reading(0.0, age_seconds=9))

    decision = run(
        THRIFTY, [pinned("key", provider="openrouter", model="mini")], [key], tiers=LADDER_TIERS
    )

    assert pool(decision) == [(1, "cheap", "key")]


def test_the_free_rung_consults_readings() -> None:
    key = view("key", provider="openrouter", auth_type="apikey", quota=reading(0.0))

    decision = run(
        THRIFTY,
        [pinned("key", provider="openrouter", model="llama-free")],
        [key],
        tiers=LADDER_TIERS,
    )

    assert reasons(decision) == [("key", Reason.QUOTA_EXHAUSTED)]
    assert decision.excluded[0].rung is Rung.FREE


def test_a_candidate_on_several_rungs_is_split_by_rung() -> None:
    # Given one model reachable through two plan logins, a keyless path and two keys.
    views = [
        view("key1", auth_type="apikey", quota=None),
        view("plan1"),
        view("local", provider="local", auth_type="none", quota=None),
        view("key2", auth_type="apikey", quota=None),
        view("plan2", quota=reading(70.0)),
    ]
    candidate = allowlisted("key1", "plan1", "local", "key2", "plan2", id=7)

    # When
    decision = run(THRIFTY, [candidate], views, tiers={("claude", "sonnet"): Tier.CHEAP})

    # Then one entry per rung, each with only that rung's connections, in the original order.
    assert decision.candidates == (
        DecidedCandidate(7, "claude", "sonnet", Rung.SUBSCRIPTION, None, ("plan1", "plan2")),
        DecidedCandidate(7, "claude", "sonnet", Rung.KEYLESS, None, ("local",)),
        DecidedCandidate(7, "claude", "sonnet", Rung.CHEAP, None, ("key1", "key2")),
    )


def test_split_entries_slot_into_the_rung_order_of_the_whole_pool() -> None:
    views = [view("plan"), view("key", auth_type="apikey", quota=None)]
    candidates = [
        allowlisted("key", "plan", id=1),
        pinned("plan", id=2, model="haiku"),
    ]

    decision = run(THRIFTY, candidates, views, tiers={("claude", "sonnet"): Tier.PREMIUM})

    assert pool(decision) == [
        (1, "subscription", ("plan",)),
        (2, "subscription", "plan"),
        (1, "premium", ("key",)),
    ]


COOLING = NOW + timedelta(minutes=1)


EXHAUSTED_READING = reading(0.0, status=QuotaStatus.EXHAUSTED, reset_at=NOW + timedelta(hours=1))


SPENT = {Rung.CHEAP: RungSpend(Decimal("50"), datetime(2026, 12, 1, tzinfo=UTC))}


CHEAP_BUDGET_0 = LadderConfig(cheap_budget_usd=Decimal("0"))


CHEAP_BUDGET_5 = LadderConfig(cheap_budget_usd=Decimal("5"))


CURSOR = CURATED.classify("cursor", "oauth")


@pytest.mark.parametrize(
    ("auto_id", "connection", "config", "expected"),
    [
        pytest.param(
            SUBSCRIPTION,
            view("c", auth_type="apikey", is_active=False, cooldown_until=COOLING, quota=None),
            CONFIG,
            Reason.INACTIVE,
            id="inactive-beats-billing-cooldown-quota",
        ),
        pytest.param(
            SUBSCRIPTION,
            view("c", billing=UNCURATED_VERDICT, cooldown_until=COOLING, quota=None),
            CONFIG,
            Reason.UNCURATED,
            id="uncurated-beats-cooldown-quota",
        ),
        pytest.param(
            SUBSCRIPTION,
            view("c", billing=METERED, cooldown_until=COOLING),
            CONFIG,
            Reason.METERED,
            id="metered-beats-cooldown",
        ),
        pytest.param(
            SUBSCRIPTION,
            view("c", billing=KEYLESS_VERDICT, cooldown_until=COOLING, quota=EXHAUSTED_READING),
            CONFIG,
            Reason.KEYLESS_NOT_SUBSCRIPTION,
            id="keyless-beats-cooldown-quota",
        ),
        pytest.param(
            SUBSCRIPTION,
            view("c", billing=CURSOR, cooldown_until=COOLING, quota=EXHAUSTED_READING),
            CONFIG,
            Reason.OVERAGE_NOT_HARD_STOP,
            id="overage-beats-cooldown-quota",
        ),
        pytest.param(
            SUBSCRIPTION,
            view("c", cooldown_until=COOLING, quota=EXHAUSTED_READING),
            CONFIG,
            Reason.COOLING_DOWN,
            id="cooldown-beats-quota",
        ),
        pytest.param(
            THRIFTY,
            view("c", billing=METERED, cooldown_until=COOLING),
            CHEAP_BUDGET_0,
            Reason.COOLING_DOWN,
            id="cooldown-beats-disabled-rung",
        ),
        pytest.param(
            THRIFTY,
            view("c", billing=METERED),
            CHEAP_BUDGET_0,
            Reason.RUNG_DISABLED,
            id="disabled-beats-spent",
        ),
        pytest.param(
            THRIFTY,
            view("c", billing=METERED, quota=EXHAUSTED_READING),
            CHEAP_BUDGET_5,
            Reason.BUDGET_EXHAUSTED,
            id="budget-not-readings-on-paid-rungs",
        ),
        pytest.param(
            SUBSCRIPTION,
            view("c", quota=reading(0.0, age_seconds=900, reset_at=NOW - timedelta(seconds=1))),
            CONFIG,
            Reason.RESET_PASSED,
            id="reset-passed-beats-age",
        ),
        pytest.param(
            SUBSCRIPTION,
            view("c", quota=reading(0.0, status=QuotaStatus.EXHAUSTED, age_seconds=900)),
            CONFIG,
            Reason.QUOTA_STALE,
            id="stale-beats-exhausted-without-reset",
        ),
        pytest.param(
            SUBSCRIPTION,
            view("c", quota=reading(None, status=QuotaStatus.EXHAUSTED)),
            CONFIG,
            Reason.QUOTA_EXHAUSTED,
            id="exhausted-beats-unknown-remaining",
        ),
        pytest.param(
            THRIFTY,
            view("c", quota=reading(40.0, status=QuotaStatus.EXHAUSTED), hysteresis=DROPPED),
            CONFIG,
            Reason.QUOTA_EXHAUSTED,
            id="exhausted-status-whatever-remaining",
        ),
        pytest.param(
            SUBSCRIPTION,
            view("c", quota=reading(1.5), hysteresis=DROPPED),
            CONFIG,
            Reason.QUOTA_EXHAUSTED,
            id="cutoff-beats-below-reentry",
        ),
    ],
)
def test_reason_precedence_first_applicable_wins(
    auto_id: AutoId, connection: ConnectionView, config: LadderConfig, expected: Reason
) -> None:
    decision = run(
        auto_id,
        [pinned("c")],
        [connection],
        tiers={("claude", "sonnet"): Tier.CHEAP},
        spend=SPENT,
        config=config,
    )

    assert reasons(decision) == [("c", expected)]


def test_next_change_at_picks_the_earliest_known_instant() -> None:
    # Given four excluded connections, each coming back at a different known instant.
    config = LadderConfig(premium_budget_usd=Decimal("1"))
    views = [
        view("cooling", cooldown_until=NOW + timedelta(minutes=5)),
        view(
            "empty",
            quota=reading(0.0, status=QuotaStatus.EXHAUSTED, reset_at=NOW + timedelta(minutes=30)),
        ),
        view("band", quota=reading(3.0, reset_at=NOW + timedelta(minutes=2)), hysteresis=DROPPED),
        view("key", auth_type="apikey", quota=None),
        view("unknown", quota=None),
    ]
    spend = {Rung.PREMIUM: RungSpend(Decimal("2"), datetime(2026, 12, 1, tzinfo=UTC))}
    candidates = [allowlisted("cooling", "empty", "band", "key", "unknown")]

    # When
    decision = run(THRIFTY, candidates, views, spend=spend, config=config)

    # Then
    assert pool(decision) == [(1, "subscription", ("unknown",))]
    assert reasons(decision) == [
        ("cooling", Reason.COOLING_DOWN),
        ("empty", Reason.QUOTA_EXHAUSTED),
        ("band", Reason.BELOW_REENTRY),
        ("key", Reason.BUDGET_EXHAUSTED),
    ]
    assert decision.next_change_at == NOW + timedelta(minutes=2)


def test_next_change_at_is_none_when_no_return_is_known() -> None:
    views = [
        view("never", quota=None),
        view("low", quota=reading(1.0)),  # exhausted, but the reading names no reset
        view("key", auth_type="apikey"),
    ]

    decision = run(SUBSCRIPTION, [allowlisted("never", "low", "key")], views)

    assert decision.candidates == ()
    assert decision.next_change_at is None


def test_next_change_at_ignores_excluded_pairs_outside_the_category() -> None:
    views = [view("plan", cooldown_until=NOW + timedelta(minutes=1))]
    candidates = [pinned("plan", categories=("chat",))]

    decision = run(AutoId(Grouping.SUBSCRIPTION, "coding"), candidates, views)

    assert (decision.candidates, decision.excluded, decision.next_change_at) == ((), (), None)
