from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ladder.core.types import OverageEvidence, OverageSays, QuotaStatus, WindowReading
from ladder.quota.base import ParsedQuota, QuotaError
from ladder.quota.codex import parse

from .recorded import NOW, load

PRIMARY_RESET = datetime(2026, 11, 29, 14, 0, tzinfo=UTC)
SECONDARY_RESET = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def test_parse_recorded_payload() -> None:
    assert parse(load("codex"), NOW) == ParsedQuota(
        status=QuotaStatus.SAFE,
        remaining_percent=59.0,
        reset_at=SECONDARY_RESET,
        windows=(
            WindowReading("primary", 77.0, PRIMARY_RESET),
            WindowReading("secondary", 59.0, SECONDARY_RESET),
        ),
        detail="binding window secondary: 59.0 % left, resets 2026-12-03 12:00 UTC",
        evidence=OverageEvidence(
            OverageSays.HARD_STOP, "the usage says credits.has_credits: false"
        ),
    )


def test_parse_limit_reached_is_exhausted() -> None:
    payload = load("codex")
    payload["rate_limit"]["limit_reached"] = True

    reading = parse(payload, NOW)

    assert (reading.status, reading.remaining_percent, reading.reset_at) == (
        QuotaStatus.EXHAUSTED,
        59.0,
        SECONDARY_RESET,
    )


def test_parse_limit_reached_without_windows_is_still_exhausted() -> None:
    payload = {"rate_limit": {"limit_reached": True, "primary_window": None}}

    assert parse(payload, NOW) == ParsedQuota(
        status=QuotaStatus.EXHAUSTED,
        remaining_percent=None,
        reset_at=None,
        windows=(),
        detail="the provider reports its limit reached",
    )


@pytest.mark.parametrize(
    ("used", "remaining"),
    [
        pytest.param(100, 0.0, id="exactly-full"),
        pytest.param(120.5, 0.0, id="over-full"),
    ],
)
def test_parse_primary_used_up_is_exhausted(used: float, remaining: float) -> None:
    payload = load("codex")
    payload["rate_limit"]["primary_window"]["used_percent"] = used

    reading = parse(payload, NOW)

    assert (reading.status, reading.remaining_percent, reading.reset_at) == (
        QuotaStatus.EXHAUSTED,
        remaining,
        PRIMARY_RESET,
    )


def test_parse_relative_reset_counts_from_now() -> None:
    payload = load("codex")
    del payload["rate_limit"]["primary_window"]["reset_at"]
    payload["rate_limit"]["primary_window"]["reset_after_seconds"] = 1800

    assert parse(payload, NOW).windows[0] == WindowReading(
        "primary", 77.0, NOW + timedelta(seconds=1800)
    )


def test_parse_absolute_reset_is_preferred_over_relative() -> None:
    payload = load("codex")
    payload["rate_limit"]["primary_window"]["reset_after_seconds"] = 60

    assert parse(payload, NOW).windows[0].reset_at == PRIMARY_RESET


def test_parse_null_secondary_window_is_skipped() -> None:
    payload = load("codex")
    payload["rate_limit"]["secondary_window"] = None

    reading = parse(payload, NOW)

    assert reading.windows == (WindowReading("primary", 77.0, PRIMARY_RESET),)
    assert (reading.remaining_percent, reading.reset_at) == (77.0, PRIMARY_RESET)


def test_parse_reset_in_the_past_makes_that_window_unknown() -> None:
    payload = load("codex")
    payload["rate_limit"]["primary_window"]["used_percent"] = 100
    payload["rate_limit"]["primary_window"]["reset_at"] = 1795953000  # ten minutes ago

    reading = parse(payload, NOW)

    assert reading.windows[0] == WindowReading(
        "primary", None, datetime(2026, 11, 29, 11, 50, tzinfo=UTC)
    )
    assert (reading.status, reading.remaining_percent) == (QuotaStatus.SAFE, 59.0)


@pytest.mark.parametrize(
    ("payload", "detail"),
    [
        pytest.param({"plan_type": "plus"}, "the usage has no rate_limit", id="no-rate-limit"),
        pytest.param({"rate_limit": None}, "the usage has no rate_limit", id="null-rate-limit"),
        pytest.param(
            {"rate_limit": {"primary_window": None, "secondary_window": None}},
            "the rate_limit has no primary or secondary window",
            id="null-windows",
        ),
    ],
)
def test_parse_no_window_is_unknown(payload: dict[str, Any], detail: str) -> None:
    assert parse(payload, NOW) == ParsedQuota(
        status=QuotaStatus.UNKNOWN,
        remaining_percent=None,
        reset_at=None,
        windows=(),
        detail=detail,
    )


@pytest.mark.parametrize(
    ("rate_limit", "message"),
    [
        pytest.param([], "usage.rate_limit is a list, expected an object", id="rate-limit-list"),
        pytest.param(
            {"limit_reached": "yes"},
            "rate_limit.limit_reached is a string, expected a boolean",
            id="limit-reached-string",
        ),
        pytest.param(
            {"primary_window": {"used_percent": "23"}},
            "rate_limit.primary_window.used_percent is a string, expected a number",
            id="used-string",
        ),
        pytest.param(
            {"primary_window": {"used_percent": 23, "reset_at": "2026-11-29T14:00:00Z"}},
            "rate_limit.primary_window.reset_at is a string, expected a number",
            id="reset-at-iso",
        ),
        pytest.param(
            {"secondary_window": {"used_percent": 23, "reset_at": 1e20}},
            "rate_limit.secondary_window.reset_at is not a usable epoch time",
            id="reset-at-out-of-range",
        ),
        pytest.param(
            {"primary_window": {"used_percent": 23, "reset_after_seconds": 1e300}},
            "rate_limit.primary_window.reset_after_seconds is out of range",
            id="reset-after-out-of-range",
        ),
    ],
)
def test_parse_wrong_types_are_unparseable(rate_limit: Any, message: str) -> None:
    with pytest.raises(QuotaError) as caught:
        parse({"rate_limit": rate_limit}, NOW)

    assert (caught.value.kind, caught.value.message) == ("unparseable", message)


@pytest.mark.parametrize(
    ("credits", "expected"),
    [
        pytest.param(
            {"has_credits": True, "unlimited": False, "balance": "12.5"},
            OverageEvidence(OverageSays.CAN_METER, "the usage says credits.has_credits: true"),
            id="has-credits",
        ),
        pytest.param(
            {"has_credits": False, "unlimited": False, "balance": "0"},
            OverageEvidence(OverageSays.HARD_STOP, "the usage says credits.has_credits: false"),
            id="no-credits",
        ),
        pytest.param(
            {"has_credits": False, "unlimited": True, "balance": None},
            OverageEvidence(OverageSays.CAN_METER, "the usage says credits.unlimited: true"),
            id="unlimited",
        ),
        pytest.param(None, None, id="absent"),
        pytest.param({"balance": "3"}, None, id="neither-flag"),
    ],
)
def test_parse_credits_evidence(
    credits: dict[str, Any] | None, expected: OverageEvidence | None
) -> None:
    payload = load("codex")
    if credits is None:
        del payload["credits"]
    else:
        payload["credits"] = credits

    reading = parse(payload, NOW)

    assert reading.evidence == expected
    assert (reading.status, reading.remaining_percent) == (QuotaStatus.SAFE, 59.0)


def test_parse_additional_rate_limits_are_scoped_by_limit_name() -> None:
    payload = load("codex")
    payload["additional_rate_limits"] = [
        {
            "limit_name": "GPT-5-Codex-Spark",
            "metered_feature": "codex_spark",
            "rate_limit": {
                "limit_reached": False,
                "primary_window": {"used_percent": 100, "reset_at": 1795960800},
                "secondary_window": {"used_percent": 20, "reset_at": 1796299200},
            },
        },
        {
            "limit_name": "gpt-5.1-codex-max",
            "rate_limit": {
                "limit_reached": True,
                "primary_window": {"used_percent": 60, "reset_at": 1795960800},
                "secondary_window": None,
            },
        },
    ]

    reading = parse(payload, NOW)

    assert reading.windows == (
        WindowReading("primary", 77.0, PRIMARY_RESET),
        WindowReading("secondary", 59.0, SECONDARY_RESET),
        WindowReading("gpt-5-codex-spark_primary", 0.0, PRIMARY_RESET, "gpt-5-codex-spark"),
        WindowReading("gpt-5-codex-spark_secondary", 80.0, SECONDARY_RESET, "gpt-5-codex-spark"),
        WindowReading("gpt-5.1-codex-max_primary", 0.0, PRIMARY_RESET, "gpt-5.1-codex-max"),
    )
    # Scoped limits bind their models only: the connection keeps its unscoped reading.
    assert (reading.status, reading.remaining_percent, reading.reset_at) == (
        QuotaStatus.SAFE,
        59.0,
        SECONDARY_RESET,
    )


def test_parse_additional_limit_without_a_name_binds_the_connection() -> None:
    payload = load("codex")
    payload["additional_rate_limits"] = [
        {"rate_limit": {"primary_window": {"used_percent": 100, "reset_at": 1795960800}}}
    ]

    reading = parse(payload, NOW)

    assert reading.windows[2] == WindowReading("additional_0_primary", 0.0, PRIMARY_RESET, None)
    assert (reading.status, reading.remaining_percent) == (QuotaStatus.EXHAUSTED, 0.0)
