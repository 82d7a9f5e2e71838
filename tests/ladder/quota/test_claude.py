from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from ladder.core.types import QuotaStatus, WindowReading
from ladder.quota.base import ParsedQuota, QuotaError
from ladder.quota.claude import parse

from .recorded import NOW, load

FIVE_HOUR_RESET = datetime(2026, 11, 29, 14, 59, 59, 943648, tzinfo=UTC)
SEVEN_DAY_RESET = datetime(2026, 12, 3, 8, 0, 0, 123456, tzinfo=UTC)


def test_parse_recorded_payload() -> None:
    reading = parse(load("claude"), NOW)

    assert reading == ParsedQuota(
        status=QuotaStatus.SAFE,
        remaining_percent=38.0,
        reset_at=SEVEN_DAY_RESET,
        windows=(
            WindowReading("five_hour", 63.0, FIVE_HOUR_RESET),
            WindowReading("seven_day", 38.0, SEVEN_DAY_RESET),
            WindowReading("seven_day_opus", 100.0, None),
            WindowReading("seven_day_sonnet", 88.0, SEVEN_DAY_RESET),
        ),
        detail="binding window seven_day: 38.0 % left, resets 2026-12-03 08:00 UTC",
    )


def test_parse_utilization_over_100_is_exhausted_at_zero() -> None:
    payload = load("claude")
    payload["five_hour"]["utilization"] = 104.5

    reading = parse(payload, NOW)

    assert (reading.status, reading.remaining_percent, reading.reset_at) == (
        QuotaStatus.EXHAUSTED,
        0.0,
        FIVE_HOUR_RESET,
    )


def test_parse_exactly_100_used_is_exhausted() -> None:
    payload = load("claude")
    payload["seven_day"]["utilization"] = 100

    assert parse(payload, NOW).status == QuotaStatus.EXHAUSTED


def test_parse_model_window_can_bind() -> None:
    payload = load("claude")
    payload["seven_day_opus"] = {"utilization": 97.5, "resets_at": "2026-12-02T00:00:00+00:00"}

    reading = parse(payload, NOW)

    assert (reading.remaining_percent, reading.reset_at) == (
        2.5,
        datetime(2026, 12, 2, tzinfo=UTC),
    )


def test_parse_null_windows_are_skipped() -> None:
    payload = {
        "five_hour": None,
        "seven_day": {"utilization": 10.0, "resets_at": "2026-12-03T08:00:00+00:00"},
    }

    assert parse(payload, NOW).windows == (
        WindowReading("seven_day", 90.0, datetime(2026, 12, 3, 8, tzinfo=UTC)),
    )


def test_parse_reset_in_the_past_makes_that_window_unknown() -> None:
    payload = load("claude")
    payload["seven_day"] = {"utilization": 99.0, "resets_at": "2026-11-29T11:59:00+00:00"}

    reading = parse(payload, NOW)

    assert reading.windows[1] == WindowReading(
        "seven_day", None, datetime(2026, 11, 29, 11, 59, tzinfo=UTC)
    )
    assert (reading.status, reading.remaining_percent, reading.reset_at) == (
        QuotaStatus.SAFE,
        63.0,
        FIVE_HOUR_RESET,
    )


def test_parse_null_utilization_is_an_unknown_window() -> None:
    payload = {"five_hour": {"utilization": None, "resets_at": None}}

    assert parse(payload, NOW) == ParsedQuota(
        status=QuotaStatus.UNKNOWN,
        remaining_percent=None,
        reset_at=None,
        windows=(WindowReading("five_hour", None, None),),
        detail="no window says how much quota is left",
    )


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param({}, id="empty-object"),
        pytest.param({"five_hour": None, "seven_day": None}, id="all-null"),
        pytest.param({"extra_usage": {"utilization": 50.0}}, id="only-other-keys"),
    ],
)
def test_parse_no_usable_window_is_unknown(payload: dict[str, Any]) -> None:
    assert parse(payload, NOW) == ParsedQuota(
        status=QuotaStatus.UNKNOWN,
        remaining_percent=None,
        reset_at=None,
        windows=(),
        detail="no five_hour or seven_day window in the usage",
    )


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        pytest.param([], "usage is a list, expected an object", id="list-payload"),
        pytest.param(
            {"five_hour": 37.0}, "five_hour is a number, expected an object", id="window-number"
        ),
        pytest.param(
            {"five_hour": {"utilization": "37%"}},
            "five_hour.utilization is a string, expected a number",
            id="utilization-string",
        ),
        pytest.param(
            {"five_hour": {"utilization": True}},
            "five_hour.utilization is a boolean, expected a number",
            id="utilization-bool",
        ),
        pytest.param(
            {"five_hour": {"utilization": float("nan")}},
            "five_hour.utilization is not a finite number",
            id="utilization-nan",
        ),
        pytest.param(
            {"five_hour": {"utilization": 1.0, "resets_at": "tomorrow"}},
            "five_hour.resets_at is not an ISO 8601 time",
            id="reset-not-iso",
        ),
        pytest.param(
            {"seven_day_opus": {"utilization": 1.0, "resets_at": 1796299200}},
            "seven_day_opus.resets_at is a number, expected a string",
            id="reset-epoch",
        ),
    ],
)
def test_parse_wrong_types_are_unparseable(payload: Any, message: str) -> None:
    with pytest.raises(QuotaError) as caught:
        parse(payload, NOW)

    assert (caught.value.kind, caught.value.message) == ("unparseable", message)
