from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ladder.core.types import OverageEvidence, OverageSays, WindowReading
from ladder.quota.headers import HeaderInfo, parse_rate_limit_headers

from .recorded import NOW

IN_1H = str(int((NOW + timedelta(hours=1)).timestamp()))
IN_3H = str(int((NOW + timedelta(hours=3)).timestamp()))
IN_4D = str(int((NOW + timedelta(days=4)).timestamp()))


def test_no_rate_limit_headers() -> None:
    assert parse_rate_limit_headers({"content-type": "application/json"}, NOW) == HeaderInfo(
        retry_after_seconds=None, reset_at=None, windows=(), is_exhausted=False
    )


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        pytest.param({"Retry-After": "30"}, 30.0, id="seconds"),
        pytest.param({"retry-after": "Sun, 29 Nov 2026 12:02:00 GMT"}, 120.0, id="http-date"),
        pytest.param({"RETRY-AFTER": "Sun, 29 Nov 2026 11:00:00 GMT"}, 0.0, id="date-past"),
        pytest.param({"retry-after-ms": "1500", "retry-after": "2"}, 1.5, id="ms-preferred"),
        pytest.param({"retry-after-ms": "x", "retry-after": "2"}, 2.0, id="bad-ms-falls-back"),
        pytest.param({"retry-after": "later"}, None, id="garbage"),
    ],
)
def test_retry_after(headers: dict[str, str], seconds: float | None) -> None:
    assert parse_rate_limit_headers(headers, NOW).retry_after_seconds == seconds


def test_anthropic_rejected_uses_the_unified_reset() -> None:
    headers = {
        "Anthropic-Ratelimit-Unified-Status": "rejected",
        "anthropic-ratelimit-unified-reset": IN_3H,
        "anthropic-ratelimit-unified-5h-utilization": "1.0",
        "anthropic-ratelimit-unified-5h-reset": IN_1H,
        "anthropic-ratelimit-unified-7d-utilization": "0.42",
        "anthropic-ratelimit-unified-7d-reset": IN_4D,
        "retry-after": "3600",
    }

    assert parse_rate_limit_headers(headers, NOW) == HeaderInfo(
        retry_after_seconds=3600.0,
        reset_at=NOW + timedelta(hours=3),
        windows=(
            WindowReading("five_hour", 0.0, NOW + timedelta(hours=1)),
            WindowReading("seven_day", 58.0, NOW + timedelta(days=4)),
        ),
        is_exhausted=True,
    )


def test_anthropic_allowed_warning_is_not_exhausted() -> None:
    headers = {
        "anthropic-ratelimit-unified-status": "allowed_warning",
        "anthropic-ratelimit-unified-reset": IN_1H,
        "anthropic-ratelimit-unified-5h-utilization": "0.91",
        "anthropic-ratelimit-unified-5h-reset": IN_1H,
    }

    assert parse_rate_limit_headers(headers, NOW) == HeaderInfo(
        retry_after_seconds=None,
        reset_at=None,
        windows=(WindowReading("five_hour", 9.0, NOW + timedelta(hours=1)),),
        is_exhausted=False,
    )


def test_anthropic_window_status_rejected_marks_exhaustion() -> None:
    headers = {
        "anthropic-ratelimit-unified-7d-status": "rejected",
        "anthropic-ratelimit-unified-7d-reset": IN_4D,
    }

    info = parse_rate_limit_headers(headers, NOW)

    assert (info.is_exhausted, info.reset_at) == (True, NOW + timedelta(days=4))


def test_latest_reset_among_exhausted_limits() -> None:
    headers = {
        "anthropic-ratelimit-unified-5h-utilization": "1.0",
        "anthropic-ratelimit-unified-5h-reset": IN_1H,
        "anthropic-ratelimit-unified-7d-utilization": "1.02",
        "anthropic-ratelimit-unified-7d-reset": IN_4D,
    }

    info = parse_rate_limit_headers(headers, NOW)

    assert (info.is_exhausted, info.reset_at) == (True, NOW + timedelta(days=4))


def test_reset_of_a_limit_that_is_not_exhausted_is_not_used() -> None:
    headers = {
        "anthropic-ratelimit-unified-5h-utilization": "1.0",
        "anthropic-ratelimit-unified-5h-reset": IN_1H,
        "anthropic-ratelimit-unified-7d-utilization": "0.5",
        "anthropic-ratelimit-unified-7d-reset": IN_4D,
    }

    assert parse_rate_limit_headers(headers, NOW).reset_at == NOW + timedelta(hours=1)


def test_codex_headers() -> None:
    headers = {
        "x-codex-primary-used-percent": "100",
        "x-codex-primary-reset-after-seconds": "600",
        "x-codex-secondary-used-percent": "35.5",
        "x-codex-secondary-reset-after-seconds": "86400",
        "x-codex-primary-window-minutes": "300",
    }

    assert parse_rate_limit_headers(headers, NOW) == HeaderInfo(
        retry_after_seconds=None,
        reset_at=NOW + timedelta(minutes=10),
        windows=(
            WindowReading("primary", 0.0, NOW + timedelta(minutes=10)),
            WindowReading("secondary", 64.5, NOW + timedelta(days=1)),
        ),
        is_exhausted=True,
    )


def test_codex_absolute_reset_is_preferred() -> None:
    headers = {
        "x-codex-primary-used-percent": "20",
        "x-codex-primary-reset-at": IN_3H,
        "x-codex-primary-reset-after-seconds": "5",
    }

    assert parse_rate_limit_headers(headers, NOW).windows == (
        WindowReading("primary", 80.0, NOW + timedelta(hours=3)),
    )


def test_openai_style_headers() -> None:
    headers = {
        "x-ratelimit-limit-requests": "500",
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "6m0s",
        "x-ratelimit-limit-tokens": "200000",
        "x-ratelimit-remaining-tokens": "150000",
        "x-ratelimit-reset-tokens": "20ms",
    }

    assert parse_rate_limit_headers(headers, NOW) == HeaderInfo(
        retry_after_seconds=None,
        reset_at=NOW + timedelta(minutes=6),
        windows=(
            WindowReading("requests", 0.0, NOW + timedelta(minutes=6)),
            WindowReading("tokens", 75.0, NOW + timedelta(milliseconds=20)),
        ),
        is_exhausted=True,
    )


def test_openai_reset_without_remaining_is_not_exhaustion() -> None:
    headers = {"x-ratelimit-reset-requests": "1h2m3.5s", "x-ratelimit-reset-tokens": "1s"}

    assert parse_rate_limit_headers(headers, NOW) == HeaderInfo(
        retry_after_seconds=None,
        reset_at=None,
        windows=(
            WindowReading("requests", None, NOW + timedelta(seconds=3723.5)),
            WindowReading("tokens", None, NOW + timedelta(seconds=1)),
        ),
        is_exhausted=False,
    )


def test_rejected_without_unified_reset_falls_back_to_exhausted_limits() -> None:
    headers = {
        "anthropic-ratelimit-unified-status": "REJECTED",
        "anthropic-ratelimit-unified-reset": "tomorrow",
        "anthropic-ratelimit-unified-5h-utilization": "1",
        "anthropic-ratelimit-unified-5h-reset": IN_1H,
    }

    info = parse_rate_limit_headers(headers, NOW)

    assert (info.is_exhausted, info.reset_at) == (True, NOW + timedelta(hours=1))


@pytest.mark.parametrize(
    "headers",
    [
        pytest.param({"anthropic-ratelimit-unified-5h-utilization": "abc"}, id="words"),
        pytest.param({"anthropic-ratelimit-unified-5h-utilization": "-0.5"}, id="negative"),
        pytest.param({"anthropic-ratelimit-unified-5h-utilization": "nan"}, id="nan"),
        pytest.param({"anthropic-ratelimit-unified-5h-reset": "1e400"}, id="overflow"),
        pytest.param({"anthropic-ratelimit-unified-5h-reset": "99999999999999"}, id="year-range"),
        pytest.param({"x-codex-primary-used-percent": "inf"}, id="inf"),
        pytest.param({"x-codex-primary-reset-after-seconds": "1" + "0" * 400}, id="huge"),
        pytest.param({"x-ratelimit-reset-requests": "6 minutes"}, id="duration-words"),
        pytest.param({"x-ratelimit-remaining-tokens": "-1"}, id="negative-remaining"),
        pytest.param({"anthropic-ratelimit-unified-status": ""}, id="empty-status"),
    ],
)
def test_garbage_values_are_ignored(headers: dict[str, str]) -> None:
    assert parse_rate_limit_headers(headers, NOW) == HeaderInfo(
        retry_after_seconds=None, reset_at=None, windows=(), is_exhausted=False
    )


def test_non_string_header_values_are_ignored() -> None:
    headers: dict[str, object] = {"retry-after": 30, "x-codex-primary-used-percent": None}

    info = parse_rate_limit_headers(headers, NOW)  # type: ignore[arg-type]

    assert info == HeaderInfo(
        retry_after_seconds=None, reset_at=None, windows=(), is_exhausted=False
    )


def test_reset_in_the_past_makes_the_window_unknown() -> None:
    past = str(int(datetime(2026, 11, 29, 11, 0, tzinfo=UTC).timestamp()))
    headers = {
        "anthropic-ratelimit-unified-5h-utilization": "1.0",
        "anthropic-ratelimit-unified-5h-reset": past,
    }

    assert parse_rate_limit_headers(headers, NOW) == HeaderInfo(
        retry_after_seconds=None,
        reset_at=None,
        windows=(WindowReading("five_hour", None, datetime(2026, 11, 29, 11, 0, tzinfo=UTC)),),
        is_exhausted=False,
    )


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        pytest.param(
            {"anthropic-ratelimit-unified-overage-in-use": "true"},
            OverageEvidence(
                OverageSays.CAN_METER,
                "the response said anthropic-ratelimit-unified-overage-in-use: true",
            ),
            id="overage-in-use",
        ),
        pytest.param(
            {"anthropic-ratelimit-unified-overage-status": "allowed_warning"},
            OverageEvidence(
                OverageSays.CAN_METER,
                "the response said anthropic-ratelimit-unified-overage-status: allowed_warning",
            ),
            id="overage-allowed-warning",
        ),
        pytest.param(
            {
                "anthropic-ratelimit-unified-overage-status": "rejected",
                "anthropic-ratelimit-unified-overage-disabled-reason": "out_of_credits",
            },
            OverageEvidence(
                OverageSays.HARD_STOP,
                "the response said anthropic-ratelimit-unified-overage-status: rejected "
                "(out_of_credits)",
            ),
            id="overage-rejected",
        ),
        pytest.param(
            {"Anthropic-Ratelimit-Unified-Overage-Status": "ORG_LEVEL_DISABLED"},
            OverageEvidence(
                OverageSays.HARD_STOP,
                "the response said anthropic-ratelimit-unified-overage-status: org_level_disabled",
            ),
            id="overage-org-disabled",
        ),
        pytest.param(
            {"x-codex-credits-has-credits": "True", "x-codex-credits-unlimited": "false"},
            OverageEvidence(
                OverageSays.CAN_METER, "the response said x-codex-credits-has-credits: true"
            ),
            id="codex-has-credits",
        ),
        pytest.param(
            {"x-codex-credits-has-credits": "false", "x-codex-credits-unlimited": "true"},
            OverageEvidence(
                OverageSays.CAN_METER, "the response said x-codex-credits-unlimited: true"
            ),
            id="codex-unlimited",
        ),
        pytest.param(
            {"x-codex-credits-has-credits": "false"},
            OverageEvidence(
                OverageSays.HARD_STOP, "the response said x-codex-credits-has-credits: false"
            ),
            id="codex-no-credits",
        ),
        pytest.param({"anthropic-ratelimit-unified-overage-status": "maybe"}, None, id="garbage"),
    ],
)
def test_billing_evidence_headers(
    headers: dict[str, str], expected: OverageEvidence | None
) -> None:
    assert parse_rate_limit_headers(headers, NOW).evidence == expected


def test_per_model_weekly_limit_is_scoped_to_the_events_model() -> None:
    headers = {
        "anthropic-ratelimit-unified-status": "rejected",
        "anthropic-ratelimit-unified-reset": IN_4D,
        "anthropic-ratelimit-unified-5h-utilization": "0.3",
        "anthropic-ratelimit-unified-5h-reset": IN_1H,
        "anthropic-ratelimit-unified-7d_oi-status": "rejected",
        "anthropic-ratelimit-unified-7d_oi-reset": IN_3H,
    }

    assert parse_rate_limit_headers(headers, NOW, model="Claude-Opus-4-1") == HeaderInfo(
        retry_after_seconds=None,
        reset_at=NOW + timedelta(hours=3),
        windows=(
            WindowReading("five_hour", 70.0, NOW + timedelta(hours=1)),
            WindowReading("seven_day_oi", None, NOW + timedelta(hours=3), "claude-opus-4-1"),
        ),
        is_exhausted=True,
        scoped_exhaustion="claude-opus-4-1",
    )


def test_per_model_limit_without_a_model_binds_the_connection() -> None:
    headers = {
        "anthropic-ratelimit-unified-status": "rejected",
        "anthropic-ratelimit-unified-reset": IN_4D,
        "anthropic-ratelimit-unified-7d_oi-status": "rejected",
        "anthropic-ratelimit-unified-7d_oi-reset": IN_3H,
    }

    info = parse_rate_limit_headers(headers, NOW)

    assert info.windows == (WindowReading("seven_day_oi", None, NOW + timedelta(hours=3)),)
    assert (info.is_exhausted, info.scoped_exhaustion, info.reset_at) == (
        True,
        None,
        NOW + timedelta(days=4),
    )


def test_unscoped_exhaustion_beside_a_scoped_one_cools_the_connection() -> None:
    headers = {
        "anthropic-ratelimit-unified-5h-status": "rejected",
        "anthropic-ratelimit-unified-5h-reset": IN_1H,
        "anthropic-ratelimit-unified-7d_oi-status": "rejected",
        "anthropic-ratelimit-unified-7d_oi-reset": IN_3H,
    }

    info = parse_rate_limit_headers(headers, NOW, model="claude-opus-4-1")

    assert (info.is_exhausted, info.scoped_exhaustion, info.reset_at) == (
        True,
        None,
        NOW + timedelta(hours=3),
    )
