"""The ladder's pure core: rungs, quota, hysteresis, cooldowns, budgets and pools.

No database and no clock: every test injects `NOW` and a frozen `LadderConfig`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from billing.classify import (
    KEYLESS_VERDICT,
    UNCURATED_VERDICT,
    Billing,
    BillingVerdict,
    Catalog,
    CatalogRow,
    Overage,
)
from billing.tiers import Tier
from ladder.rules import (
    NEVER_READ,
    AutoId,
    BudgetWindow,
    CandidateIn,
    ConnectionView,
    CooldownChange,
    DecidedCandidate,
    Decision,
    Exclusion,
    Grouping,
    Hysteresis,
    HysteresisState,
    LadderConfig,
    NotAnAutoId,
    QuotaStatus,
    Reading,
    Reason,
    Rung,
    RungSpend,
    Staleness,
    UnknownTier,
    apply_event,
    backoff_seconds,
    budget_window_bounds,
    clamp_cooldown_to_reset,
    decide,
    hysteresis_after,
    is_quota_usable,
    is_reading_current,
    parse_auto_id,
    reading_staleness,
    rung_for,
)

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
CONFIG = LadderConfig()
SUBSCRIPTION = AutoId(Grouping.SUBSCRIPTION)
THRIFTY = AutoId(Grouping.THRIFTY)

# The spec's curated table, as the data migration seeds it.
CURATED = Catalog(
    [
        CatalogRow(1, "claude", "oauth", Billing.SUBSCRIPTION, Overage.HARD_STOP, "Pro/Max plan"),
        CatalogRow(2, "codex", "oauth", Billing.SUBSCRIPTION, Overage.HARD_STOP, "ChatGPT plan"),
        CatalogRow(3, "antigravity", "oauth", Billing.SUBSCRIPTION, Overage.HARD_STOP, "plan"),
        CatalogRow(4, "cursor", "oauth", Billing.SUBSCRIPTION, Overage.UNKNOWN, "usage pricing"),
        CatalogRow(5, "copilot", "apikey", Billing.SUBSCRIPTION, Overage.UNKNOWN, "per seat"),
        CatalogRow(
            6, "devin-desktop", "oauth", Billing.SUBSCRIPTION, Overage.METERS_TO_PAID, "units"
        ),
        CatalogRow(7, "openrouter", None, Billing.METERED, Overage.METERS_TO_PAID, "per token"),
    ]
)
PLAN = CURATED.classify("claude", "oauth")
METERED = CURATED.classify("openrouter", "apikey")
FRESH = Reading(QuotaStatus.SAFE, 50.0, None, NOW)
DROPPED = Hysteresis(HysteresisState.DROPPED_OUT, NOW - timedelta(hours=1), "1.0 % left")


def reading(
    remaining: float | None = 50.0,
    *,
    status: QuotaStatus = QuotaStatus.SAFE,
    age_seconds: float = 0,
    reset_at: datetime | None = None,
) -> Reading:
    return Reading(status, remaining, reset_at, NOW - timedelta(seconds=age_seconds))


def view(
    connection_id: str,
    *,
    provider: str = "claude",
    auth_type: str | None = "oauth",
    billing: BillingVerdict | None = None,
    is_active: bool = True,
    cooldown_until: datetime | None = None,
    quota: Reading | None = FRESH,
    hysteresis: Hysteresis = NEVER_READ,
) -> ConnectionView:
    """A connection classified against the curated table unless `billing` is given."""
    return ConnectionView(
        connection_id=connection_id,
        provider=provider,
        auth_type=auth_type,
        billing=billing if billing is not None else CURATED.classify(provider, auth_type),
        is_active=is_active,
        cooldown_until=cooldown_until,
        reading=quota,
        hysteresis=hysteresis,
    )


def pinned(
    connection_id: str,
    *,
    id: int = 1,
    provider: str = "claude",
    model: str = "sonnet",
    categories: tuple[str, ...] = (),
) -> CandidateIn:
    return CandidateIn(id, provider, model, categories, connection_id, None)


def allowlisted(
    *connection_ids: str,
    id: int = 1,
    provider: str = "claude",
    model: str = "sonnet",
    categories: tuple[str, ...] = (),
) -> CandidateIn:
    return CandidateIn(id, provider, model, categories, None, connection_ids)


def run(
    auto_id: AutoId,
    candidates: Sequence[CandidateIn],
    views: Sequence[ConnectionView],
    *,
    tiers: dict[tuple[str, str], Tier] | None = None,
    spend: dict[Rung, RungSpend] | None = None,
    config: LadderConfig = CONFIG,
) -> Decision:
    connections = {connection.connection_id: connection for connection in views}
    return decide(auto_id, candidates, connections, tiers or {}, spend or {}, config, NOW)


def pool(decision: Decision) -> list[tuple[int | None, str, str | tuple[str, ...] | None]]:
    """Each entry as (candidate id, rung label, pinned id or allowlist)."""
    return [
        (entry.id, entry.rung.label, entry.connection_id or entry.allowed_connection_ids)
        for entry in decision.candidates
    ]


def reasons(decision: Decision) -> list[tuple[str, Reason]]:
    return [(row.connection_id, row.reason) for row in decision.excluded]


# --------------------------------------------------------------------------- rungs


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


def test_rung_labels_are_the_api_strings() -> None:
    assert [rung.label for rung in Rung] == ["subscription", "keyless", "free", "cheap", "premium"]
    assert Rung.from_label("cheap") is Rung.CHEAP


def test_rung_from_label_refuses_unknown_names() -> None:
    with pytest.raises(ValueError, match="unknown rung 'gold'"):
        Rung.from_label("gold")


def test_reason_codes_are_the_api_contract() -> None:
    assert [reason.value for reason in Reason] == [
        "uncurated",
        "metered",
        "keyless_not_subscription",
        "overage_not_hard_stop",
        "quota_exhausted",
        "below_reentry",
        "quota_unknown",
        "quota_stale",
        "reset_passed",
        "cooling_down",
        "inactive",
        "rung_disabled",
        "budget_exhausted",
    ]
    assert all(reason.summary for reason in Reason)


# --------------------------------------------------------------------------- config


def test_reentry_floor_below_the_exit_cutoff_is_raised_to_it() -> None:
    config = LadderConfig(exit_cutoff_percent=10.0, reentry_min_remaining_percent=5.0)

    assert config.reentry_floor == 10.0


def test_budget_for_only_paid_rungs_have_budgets() -> None:
    config = LadderConfig(cheap_budget_usd=Decimal("10"), premium_budget_usd=Decimal("0"))

    assert [config.budget_for(rung) for rung in Rung] == [
        None,
        None,
        None,
        Decimal("10"),
        Decimal("0"),
    ]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param(
            {"exit_cutoff_percent": 101.0},
            "exit_cutoff_percent: Must be at most 100. Got 101.0.",
            id="cutoff-above-100",
        ),
        pytest.param(
            {"reentry_min_remaining_percent": -1.0},
            "reentry_min_remaining_percent: Must be at least 0. Got -1.0.",
            id="reentry-negative",
        ),
        pytest.param(
            {"cheap_budget_usd": Decimal("-1")},
            "cheap_budget_usd: Must be at least 0. Got Decimal('-1').",
            id="negative-budget",
        ),
        pytest.param(
            {"max_state_age_seconds": 0},
            "max_state_age_seconds: Must be at least 1. Got 0.",
            id="zero-max-age",
        ),
        pytest.param(
            {"base_cooldown_seconds": 0.0},
            "base_cooldown_seconds: Must be greater than 0. Got 0.0.",
            id="zero-base",
        ),
        pytest.param(
            {"max_cooldown_seconds": float("inf")},
            "max_cooldown_seconds: Must be a finite number. Got inf.",
            id="infinite-cap",
        ),
        pytest.param(
            {"max_state_age_seconds": 86_401},
            "max_state_age_seconds: Must be at most 86,400. Got 86401.",
            id="max-age-above-a-day",
        ),
        pytest.param(
            {"premium_budget_usd": Decimal("1000000.01")},
            "premium_budget_usd: Must be at most 1,000,000. Got Decimal('1000000.01').",
            id="budget-above-a-million",
        ),
        pytest.param({"budget_window": "year"}, "'year' is not a valid BudgetWindow", id="window"),
    ],
)
def test_config_refuses_out_of_range_settings(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        LadderConfig(**overrides)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- auto ids


@pytest.mark.parametrize(
    ("value", "grouping", "category", "fail_mode"),
    [
        pytest.param("auto/subscription", Grouping.SUBSCRIPTION, None, "closed", id="flat-sub"),
        pytest.param("auto/thrifty", Grouping.THRIFTY, None, "open", id="flat-thrifty"),
        pytest.param("auto/coding:thrifty", Grouping.THRIFTY, "coding", "open", id="category"),
        pytest.param(
            "auto/reasoning:subscription",
            Grouping.SUBSCRIPTION,
            "reasoning",
            "closed",
            id="category-subscription",
        ),
        pytest.param("auto/v1.2_x-y:thrifty", Grouping.THRIFTY, "v1.2_x-y", "open", id="charset"),
    ],
)
def test_parse_auto_id_accepts_flat_and_category_ids(
    value: str, grouping: Grouping, category: str | None, fail_mode: str
) -> None:
    parsed = parse_auto_id(value)

    assert (parsed.grouping, parsed.category, parsed.fail_mode) == (grouping, category, fail_mode)
    assert parsed.auto_id == value
    assert str(parsed) == value


@pytest.mark.parametrize(
    ("value", "tier"),
    [
        pytest.param("auto/coding:premium", "premium", id="category-premium"),
        pytest.param("auto/coding", "coding", id="flat-non-tier"),
        pytest.param("auto/Thrifty", "Thrifty", id="case-sensitive"),
        pytest.param("auto/coding:", "", id="empty-tier"),
    ],
)
def test_parse_auto_id_refuses_unknown_tiers_naming_the_known_ones(value: str, tier: str) -> None:
    with pytest.raises(UnknownTier) as raised:
        parse_auto_id(value)

    assert (raised.value.tier, raised.value.known) == (tier, ("subscription", "thrifty"))
    assert "known tiers are subscription, thrifty" in str(raised.value)
    assert isinstance(raised.value, ValueError)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("gpt-4o", id="plain-model"),
        pytest.param("auto/", id="nothing-after-prefix"),
        pytest.param("Auto/thrifty", id="prefix-case"),
        pytest.param(" auto/thrifty", id="leading-space"),
        pytest.param("auto/:thrifty", id="empty-category"),
        pytest.param("auto/co ding:thrifty", id="space-in-category"),
        pytest.param("auto/a/b:thrifty", id="slash-in-category"),
        pytest.param(f"auto/{'c' * 65}:thrifty", id="category-too-long"),
    ],
)
def test_parse_auto_id_refuses_what_is_not_an_auto_id(value: str) -> None:
    with pytest.raises(NotAnAutoId) as raised:
        parse_auto_id(value)

    assert isinstance(raised.value, ValueError)
    assert repr(value) in str(raised.value)


# --------------------------------------------------------------------------- readings


def test_a_fresh_reading_is_current() -> None:
    assert is_reading_current(reading(age_seconds=180), CONFIG, NOW) is True


def test_a_reading_older_than_the_maximum_is_too_old() -> None:
    old = reading(age_seconds=181)

    assert (is_reading_current(old, CONFIG, NOW), reading_staleness(old, CONFIG, NOW)) == (
        False,
        Staleness.TOO_OLD,
    )


def test_a_reading_whose_reset_passed_is_stale_regardless_of_age() -> None:
    young = reading(age_seconds=1, reset_at=NOW - timedelta(seconds=1))
    old = reading(age_seconds=3600, reset_at=NOW - timedelta(seconds=1))

    assert reading_staleness(young, CONFIG, NOW) is Staleness.RESET_PASSED
    assert reading_staleness(old, CONFIG, NOW) is Staleness.RESET_PASSED


def test_a_reset_exactly_now_has_passed() -> None:
    assert reading_staleness(reading(reset_at=NOW), CONFIG, NOW) is Staleness.RESET_PASSED


def test_an_exhausted_reading_with_a_future_reset_stays_current_even_when_old() -> None:
    dead = reading(
        0.0, status=QuotaStatus.EXHAUSTED, age_seconds=7200, reset_at=NOW + timedelta(hours=1)
    )

    assert is_reading_current(dead, CONFIG, NOW) is True


def test_an_exhausted_reading_without_a_reset_ages_like_any_other() -> None:
    dead = reading(0.0, status=QuotaStatus.EXHAUSTED, age_seconds=181)

    assert reading_staleness(dead, CONFIG, NOW) is Staleness.TOO_OLD


def test_an_old_safe_reading_with_a_future_reset_is_too_old() -> None:
    old = reading(50.0, age_seconds=181, reset_at=NOW + timedelta(hours=1))

    assert reading_staleness(old, CONFIG, NOW) is Staleness.TOO_OLD


@pytest.mark.parametrize(
    ("quota", "hysteresis", "admit_unknown", "expected"),
    [
        pytest.param(None, NEVER_READ, False, False, id="never-read-closed"),
        pytest.param(None, NEVER_READ, True, True, id="never-read-open"),
        pytest.param(reading(3.0), NEVER_READ, False, True, id="in-play-above-cutoff"),
        pytest.param(reading(3.0), DROPPED, True, False, id="dropped-below-floor"),
        pytest.param(reading(2.0), NEVER_READ, True, False, id="at-cutoff"),
        pytest.param(
            reading(None, status=QuotaStatus.EXHAUSTED), NEVER_READ, True, False, id="exhausted"
        ),
    ],
)
def test_is_quota_usable(
    quota: Reading | None, hysteresis: Hysteresis, admit_unknown: bool, expected: bool
) -> None:
    assert is_quota_usable(quota, hysteresis, CONFIG, NOW, admit_unknown=admit_unknown) is expected


# --------------------------------------------------------------------------- hysteresis

IN_PLAY_EARLIER = Hysteresis(HysteresisState.IN_PLAY, NOW - timedelta(hours=2), "60.0 % left")


@pytest.mark.parametrize(
    ("previous", "new_reading", "expected"),
    [
        pytest.param(
            NEVER_READ,
            reading(3.0),
            NEVER_READ,
            id="3-percent-stays-in-play",
        ),
        pytest.param(
            IN_PLAY_EARLIER,
            reading(2.0),
            Hysteresis(
                HysteresisState.DROPPED_OUT, NOW, "2.0 % left, at or below the exit cutoff of 2 %"
            ),
            id="at-cutoff-drops-out",
        ),
        pytest.param(
            IN_PLAY_EARLIER,
            reading(40.0, status=QuotaStatus.EXHAUSTED),
            Hysteresis(
                HysteresisState.DROPPED_OUT,
                NOW,
                "Upstream reported EXHAUSTED, 40.0 % left; re-entry needs more than 5 %",
            ),
            id="exhausted-drops-out-whatever-remaining",
        ),
        pytest.param(DROPPED, reading(3.0), DROPPED, id="3-percent-after-drop-stays-out"),
        pytest.param(DROPPED, reading(5.0), DROPPED, id="at-floor-stays-out"),
        pytest.param(
            DROPPED,
            reading(6.0),
            Hysteresis(HysteresisState.IN_PLAY, NOW, "6.0 % left, above the re-entry floor of 5 %"),
            id="6-percent-re-enters",
        ),
        pytest.param(
            DROPPED,
            reading(0.0, status=QuotaStatus.EXHAUSTED),
            DROPPED,
            id="exhausted-again-keeps-since",
        ),
        pytest.param(IN_PLAY_EARLIER, reading(None), IN_PLAY_EARLIER, id="unknown-remaining"),
        pytest.param(
            DROPPED, reading(None, status=QuotaStatus.UNKNOWN), DROPPED, id="unknown-keeps-out"
        ),
        pytest.param(
            IN_PLAY_EARLIER,
            reading(1.0, status=QuotaStatus.UNKNOWN),
            IN_PLAY_EARLIER,
            id="status-unknown-with-percent",
        ),
    ],
)
def test_hysteresis_after_a_reading(
    previous: Hysteresis, new_reading: Reading, expected: Hysteresis
) -> None:
    assert hysteresis_after(previous, new_reading, CONFIG) == expected


def test_hysteresis_uses_the_raised_reentry_floor() -> None:
    config = LadderConfig(exit_cutoff_percent=10.0, reentry_min_remaining_percent=5.0)

    assert hysteresis_after(DROPPED, reading(8.0), config) == DROPPED
    assert hysteresis_after(DROPPED, reading(10.5), config).state is HysteresisState.IN_PLAY


def test_unchanged_hysteresis_is_the_previous_object() -> None:
    assert hysteresis_after(IN_PLAY_EARLIER, reading(80.0), CONFIG) is IN_PLAY_EARLIER


# --------------------------------------------------------------------------- cooldowns


def test_backoff_sequence_doubles_up_to_the_cap() -> None:
    assert [backoff_seconds(n, CONFIG) for n in range(1, 8)] == [5, 10, 20, 40, 80, 120, 120]


def test_backoff_survives_a_very_long_failure_streak() -> None:
    assert backoff_seconds(5000, CONFIG) == 120.0


def test_backoff_refuses_a_zeroth_failure() -> None:
    with pytest.raises(ValueError, match="consecutive_failures must be >= 1"):
        backoff_seconds(0, CONFIG)


@pytest.mark.parametrize(
    ("reset_at", "expected"),
    [
        pytest.param(NOW + timedelta(seconds=30), NOW + timedelta(seconds=30), id="shortens"),
        pytest.param(
            "2026-11-29T12:00:30Z", NOW + timedelta(seconds=30), id="shortens-from-iso-string"
        ),
        pytest.param(
            "2026-11-29T13:00:30+01:00", NOW + timedelta(seconds=30), id="offset-string-to-utc"
        ),
        pytest.param(
            NOW + timedelta(seconds=90), NOW + timedelta(seconds=60), id="never-lengthens"
        ),
        pytest.param(None, NOW + timedelta(seconds=60), id="absent"),
        pytest.param("soon-ish", NOW + timedelta(seconds=60), id="unparseable"),
        pytest.param("2026-11-29T12:00:30", NOW + timedelta(seconds=60), id="naive-string"),
        pytest.param(
            datetime(2026, 11, 29, 12, 0, 30), NOW + timedelta(seconds=60), id="naive-datetime"
        ),
        pytest.param(NOW - timedelta(seconds=5), NOW + timedelta(seconds=60), id="already-past"),
        pytest.param(NOW, NOW + timedelta(seconds=60), id="exactly-now"),
    ],
)
def test_clamp_cooldown_to_reset(reset_at: datetime | str | None, expected: datetime) -> None:
    cooldown_until = NOW + timedelta(seconds=60)

    assert clamp_cooldown_to_reset(cooldown_until, reset_at, NOW) == expected


@pytest.mark.parametrize("kind", ["rate_limited", "quota_exhausted", "error"])
def test_a_failure_counts_and_backs_off(kind: str) -> None:
    change = apply_event(
        kind,
        consecutive_failures=2,
        retry_after_seconds=None,
        reset_at=None,
        config=CONFIG,
        now=NOW,
    )

    assert change == CooldownChange(NOW + timedelta(seconds=20), 20.0, False, 3)


def test_retry_after_is_used_as_given_without_the_cap() -> None:
    change = apply_event(
        "rate_limited",
        consecutive_failures=0,
        retry_after_seconds=300.0,
        reset_at=None,
        config=CONFIG,
        now=NOW,
    )

    assert change == CooldownChange(NOW + timedelta(seconds=300), 300.0, False, 1)


def test_a_cooldown_is_clamped_to_the_reset_after_retry_after() -> None:
    change = apply_event(
        "quota_exhausted",
        consecutive_failures=0,
        retry_after_seconds=3600.0,
        reset_at=NOW + timedelta(seconds=45),
        config=CONFIG,
        now=NOW,
    )

    assert change == CooldownChange(NOW + timedelta(seconds=45), 45.0, True, 1)


def test_a_past_reset_does_not_clamp_the_backoff() -> None:
    change = apply_event(
        "rate_limited",
        consecutive_failures=5,
        retry_after_seconds=None,
        reset_at=NOW - timedelta(seconds=10),
        config=CONFIG,
        now=NOW,
    )

    assert change == CooldownChange(NOW + timedelta(seconds=120), 120.0, False, 6)


@pytest.mark.parametrize(
    "retry_after",
    [pytest.param(-5.0, id="negative"), pytest.param(float("nan"), id="nan")],
)
def test_a_garbage_retry_after_falls_back_to_backoff(retry_after: float) -> None:
    change = apply_event(
        "rate_limited",
        consecutive_failures=0,
        retry_after_seconds=retry_after,
        reset_at=None,
        config=CONFIG,
        now=NOW,
    )

    assert change == CooldownChange(NOW + timedelta(seconds=5), 5.0, False, 1)


def test_a_success_clears_the_failures_and_the_cooldown() -> None:
    change = apply_event(
        "success",
        consecutive_failures=4,
        retry_after_seconds=30.0,
        reset_at=NOW + timedelta(seconds=10),
        config=CONFIG,
        now=NOW,
    )

    assert change == CooldownChange(None, 0.0, False, 0)


def test_an_unknown_event_kind_is_refused() -> None:
    with pytest.raises(
        ValueError,
        match="unknown event kind 'exploded': known kinds are rate_limited, quota_exhausted, ",
    ):
        apply_event(
            "exploded",
            consecutive_failures=0,
            retry_after_seconds=None,
            reset_at=None,
            config=CONFIG,
            now=NOW,
        )


# --------------------------------------------------------------------------- budget windows


@pytest.mark.parametrize(
    ("window", "now", "start", "end"),
    [
        pytest.param(
            BudgetWindow.DAY,
            NOW,
            datetime(2026, 11, 29, tzinfo=UTC),
            datetime(2026, 11, 30, tzinfo=UTC),
            id="day",
        ),
        pytest.param(
            BudgetWindow.WEEK,
            NOW,  # a Sunday
            datetime(2026, 11, 23, tzinfo=UTC),
            datetime(2026, 11, 30, tzinfo=UTC),
            id="week-from-sunday",
        ),
        pytest.param(
            BudgetWindow.WEEK,
            datetime(2026, 11, 30, 0, 0, tzinfo=UTC),  # a Monday, at midnight
            datetime(2026, 11, 30, tzinfo=UTC),
            datetime(2026, 12, 7, tzinfo=UTC),
            id="week-starts-monday",
        ),
        pytest.param(
            BudgetWindow.MONTH,
            NOW,
            datetime(2026, 11, 1, tzinfo=UTC),
            datetime(2026, 12, 1, tzinfo=UTC),
            id="month",
        ),
        pytest.param(
            BudgetWindow.MONTH,
            datetime(2026, 12, 31, 23, 59, 59, tzinfo=UTC),
            datetime(2026, 12, 1, tzinfo=UTC),
            datetime(2027, 1, 1, tzinfo=UTC),
            id="december-to-january",
        ),
        pytest.param(
            BudgetWindow.DAY,
            datetime(2026, 12, 31, 23, 30, tzinfo=UTC),
            datetime(2026, 12, 31, tzinfo=UTC),
            datetime(2027, 1, 1, tzinfo=UTC),
            id="day-across-new-year",
        ),
        pytest.param(
            BudgetWindow.DAY,
            datetime(2026, 11, 30, 0, 30, tzinfo=UTC),
            datetime(2026, 11, 30, tzinfo=UTC),
            datetime(2026, 12, 1, tzinfo=UTC),
            id="day-at-half-past-midnight",
        ),
    ],
)
def test_budget_window_bounds_are_calendar_utc(
    window: BudgetWindow, now: datetime, start: datetime, end: datetime
) -> None:
    assert budget_window_bounds(window, now) == (start, end)


def test_budget_window_bounds_use_utc_for_offset_clocks() -> None:
    tokyo_morning = datetime(2026, 12, 1, 8, 0, tzinfo=timezone(timedelta(hours=9)))  # Nov 30 UTC

    assert budget_window_bounds(BudgetWindow.MONTH, tokyo_morning) == (
        datetime(2026, 11, 1, tzinfo=UTC),
        datetime(2026, 12, 1, tzinfo=UTC),
    )


# --------------------------------------------------------------------------- auto/subscription


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
    assert decision.next_change_at is None


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


# --------------------------------------------------------------------------- hysteresis in pools


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


# --------------------------------------------------------------------------- auto/thrifty

LADDER_VIEWS = (
    view("plan"),
    view("local", provider="local", auth_type="none", quota=None),
    view("or", provider="openrouter", auth_type="apikey", quota=None),
)
LADDER_TIERS = {
    ("openrouter", "llama-free"): Tier.FREE,
    ("openrouter", "mini"): Tier.CHEAP,
    ("openrouter", "opus"): Tier.PREMIUM,
}


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


# --------------------------------------------------------------------------- budgets


def test_a_rung_budgeted_at_zero_is_disabled() -> None:
    config = LadderConfig(cheap_budget_usd=Decimal("0"))
    candidates = [pinned("or", provider="openrouter", model="mini")]

    decision = run(THRIFTY, candidates, LADDER_VIEWS, tiers=LADDER_TIERS, config=config)

    assert decision.candidates == ()
    assert decision.excluded == (
        Exclusion(
            "openrouter",
            "mini",
            "or",
            Rung.CHEAP,
            Reason.RUNG_DISABLED,
            "The cheap rung's budget is 0 USD: the rung is disabled",
        ),
    )
    assert decision.next_change_at is None


def test_a_spent_budget_drops_its_rung_until_the_window_ends() -> None:
    config = LadderConfig(premium_budget_usd=Decimal("10.00"))
    window_end = datetime(2026, 12, 1, tzinfo=UTC)
    spend = {Rung.PREMIUM: RungSpend(Decimal("10.25"), window_end)}
    candidates = [
        pinned("or", id=1, provider="openrouter", model="opus"),
        pinned("or", id=2, provider="openrouter", model="mini"),
    ]

    decision = run(
        THRIFTY, candidates, LADDER_VIEWS, tiers=LADDER_TIERS, spend=spend, config=config
    )

    assert pool(decision) == [(2, "cheap", "or")]
    assert decision.excluded == (
        Exclusion(
            "openrouter",
            "opus",
            "or",
            Rung.PREMIUM,
            Reason.BUDGET_EXHAUSTED,
            "The premium rung spent 10.25 USD of its 10 USD month budget; "
            "the window ends 2026-12-01 00:00:00 UTC",
        ),
    )
    assert decision.next_change_at == window_end


def test_a_budget_is_exhausted_exactly_when_reached() -> None:
    config = LadderConfig(cheap_budget_usd=Decimal("5"))
    window_end = datetime(2026, 12, 1, tzinfo=UTC)
    candidates = [pinned("or", provider="openrouter", model="mini")]

    under = run(
        THRIFTY,
        candidates,
        LADDER_VIEWS,
        tiers=LADDER_TIERS,
        spend={Rung.CHEAP: RungSpend(Decimal("4.99"), window_end)},
        config=config,
    )
    reached = run(
        THRIFTY,
        candidates,
        LADDER_VIEWS,
        tiers=LADDER_TIERS,
        spend={Rung.CHEAP: RungSpend(Decimal("5"), window_end)},
        config=config,
    )

    assert pool(under) == [(1, "cheap", "or")]
    assert reasons(reached) == [("or", Reason.BUDGET_EXHAUSTED)]


def test_no_budget_means_never_gated() -> None:
    spend = {Rung.CHEAP: RungSpend(Decimal("1000000"), datetime(2026, 12, 1, tzinfo=UTC))}
    candidates = [pinned("or", provider="openrouter", model="mini")]

    decision = run(THRIFTY, candidates, LADDER_VIEWS, tiers=LADDER_TIERS, spend=spend)

    assert pool(decision) == [(1, "cheap", "or")]


# --------------------------------------------------------------------------- precedence

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


# --------------------------------------------------------------------------- next change


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
