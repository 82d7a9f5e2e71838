from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from ladder.core.types import QuotaStatus, WindowReading
from ladder.quota.antigravity import parse
from ladder.quota.base import ParsedQuota, QuotaError

from .recorded import NOW, load

PRO_RESET = datetime(2026, 11, 29, 16, 0, tzinfo=UTC)
SONNET_RESET = datetime(2026, 11, 29, 15, 0, tzinfo=UTC)


def test_parse_recorded_payload_skips_internal_and_quota_less_models() -> None:
    assert parse(load("antigravity"), NOW) == ParsedQuota(
        status=QuotaStatus.SAFE,
        remaining_percent=60.0,
        reset_at=PRO_RESET,
        windows=(
            WindowReading("gemini-3-pro-high", 60.0, PRO_RESET),
            WindowReading("claude-sonnet-4-5", 80.0, SONNET_RESET),
        ),
        detail="binding window gemini-3-pro-high: 60.0 % left, resets 2026-11-29 16:00 UTC",
    )


def test_parse_missing_fraction_is_unknown_never_exhausted() -> None:
    payload = load("antigravity")
    del payload["models"]["gemini-3-pro-high"]["quotaInfo"]["remainingFraction"]

    reading = parse(payload, NOW)

    assert reading.windows[0] == WindowReading("gemini-3-pro-high", None, PRO_RESET)
    assert (reading.status, reading.remaining_percent, reading.reset_at) == (
        QuotaStatus.SAFE,
        80.0,
        SONNET_RESET,
    )


def test_parse_only_missing_fractions_is_unknown() -> None:
    payload = {"models": {"m": {"quotaInfo": {"resetTime": "2026-11-29T16:00:00Z"}}}}

    assert parse(payload, NOW) == ParsedQuota(
        status=QuotaStatus.UNKNOWN,
        remaining_percent=None,
        reset_at=None,
        windows=(WindowReading("m", None, PRO_RESET),),
        detail="no window says how much quota is left",
    )


def test_parse_zero_fraction_is_exhausted() -> None:
    payload = load("antigravity")
    payload["models"]["claude-sonnet-4-5"]["quotaInfo"]["remainingFraction"] = 0

    reading = parse(payload, NOW)

    assert (reading.status, reading.remaining_percent, reading.reset_at) == (
        QuotaStatus.EXHAUSTED,
        0.0,
        SONNET_RESET,
    )


def test_parse_reset_in_the_past_makes_that_window_unknown() -> None:
    payload = load("antigravity")
    payload["models"]["gemini-3-pro-high"]["quotaInfo"]["resetTime"] = "2026-11-29T11:00:00Z"

    reading = parse(payload, NOW)

    assert reading.windows[0] == WindowReading(
        "gemini-3-pro-high", None, datetime(2026, 11, 29, 11, tzinfo=UTC)
    )
    assert reading.remaining_percent == 80.0


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param({}, id="no-models"),
        pytest.param({"models": None}, id="null-models"),
        pytest.param({"models": {"m": {"displayName": "M"}}}, id="no-quota-info"),
        pytest.param({"models": {"m": {"quotaInfo": None}}}, id="null-quota-info"),
    ],
)
def test_parse_no_quota_info_is_unknown(payload: dict[str, Any]) -> None:
    assert parse(payload, NOW) == ParsedQuota(
        status=QuotaStatus.UNKNOWN,
        remaining_percent=None,
        reset_at=None,
        windows=(),
        detail="no model carries quotaInfo",
    )


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        pytest.param(
            {"models": []}, "models response.models is a list, expected an object", id="list"
        ),
        pytest.param({"models": {"m": 1}}, "models.m is a number, expected an object", id="entry"),
        pytest.param(
            {"models": {"m": {"quotaInfo": {"remainingFraction": "1"}}}},
            "models.m.quotaInfo.remainingFraction is a string, expected a number",
            id="fraction-string",
        ),
        pytest.param(
            {"models": {"m": {"quotaInfo": {"remainingFraction": 1, "resetTime": 0}}}},
            "models.m.quotaInfo.resetTime is a number, expected a string",
            id="reset-number",
        ),
        pytest.param(
            {"models": {"m": {"isInternal": "no", "quotaInfo": {}}}},
            "models.m.isInternal is a string, expected a boolean",
            id="internal-string",
        ),
    ],
)
def test_parse_wrong_types_are_unparseable(payload: Any, message: str) -> None:
    with pytest.raises(QuotaError) as caught:
        parse(payload, NOW)

    assert (caught.value.kind, caught.value.message) == ("unparseable", message)
