from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from ladder.core.types import QuotaStatus, WindowReading
from ladder.quota.base import ParsedQuota, QuotaError
from ladder.quota.gemini_cli import parse

from .recorded import NOW, load

RESET = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def test_parse_recorded_payload() -> None:
    assert parse(load("gemini_cli"), NOW) == ParsedQuota(
        status=QuotaStatus.SAFE,
        remaining_percent=35.0,
        reset_at=RESET,
        windows=(
            WindowReading("gemini-2.5-flash", 91.2, RESET),
            WindowReading("gemini-2.5-pro", 35.0, RESET),
            WindowReading("gemini-2.5-flash-lite", 100.0, RESET),
        ),
        detail="binding window gemini-2.5-pro: 35.0 % left, resets 2026-11-30 08:00 UTC",
    )


def test_parse_zero_fraction_is_exhausted() -> None:
    payload = load("gemini_cli")
    payload["buckets"][0]["remainingFraction"] = 0

    reading = parse(payload, NOW)

    assert (reading.status, reading.remaining_percent) == (QuotaStatus.EXHAUSTED, 0.0)


def test_parse_missing_fraction_is_an_unknown_window() -> None:
    payload = load("gemini_cli")
    del payload["buckets"][1]["remainingFraction"]

    reading = parse(payload, NOW)

    assert reading.windows[1] == WindowReading("gemini-2.5-pro", None, RESET)
    assert (reading.status, reading.remaining_percent) == (QuotaStatus.SAFE, 91.2)


def test_parse_fraction_above_one_is_clamped() -> None:
    payload = {"buckets": [{"modelId": "m", "remainingFraction": 1.5}]}

    assert parse(payload, NOW).windows == (WindowReading("m", 100.0, None),)


def test_parse_reset_in_the_past_makes_that_window_unknown() -> None:
    payload = load("gemini_cli")
    payload["buckets"][1]["resetTime"] = "2026-11-29T08:00:00Z"

    reading = parse(payload, NOW)

    assert reading.windows[1] == WindowReading(
        "gemini-2.5-pro", None, datetime(2026, 11, 29, 8, tzinfo=UTC)
    )
    assert reading.remaining_percent == 91.2


def test_parse_bucket_without_model_is_named_by_position() -> None:
    payload = {"buckets": [{"remainingFraction": 0.5, "resetTime": "2026-11-30T08:00:00Z"}]}

    assert parse(payload, NOW).windows == (WindowReading("bucket 0", 50.0, RESET),)


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param({}, id="no-buckets"),
        pytest.param({"buckets": None}, id="null-buckets"),
        pytest.param({"buckets": []}, id="empty-buckets"),
    ],
)
def test_parse_no_bucket_is_unknown(payload: dict[str, Any]) -> None:
    assert parse(payload, NOW) == ParsedQuota(
        status=QuotaStatus.UNKNOWN,
        remaining_percent=None,
        reset_at=None,
        windows=(),
        detail="the quota has no buckets",
    )


@pytest.mark.parametrize(
    ("payload", "message"),
    [
        pytest.param({"buckets": {}}, "quota.buckets is an object, expected a list", id="dict"),
        pytest.param({"buckets": ["m"]}, "buckets[0] is a string, expected an object", id="item"),
        pytest.param(
            {"buckets": [{"modelId": 7}]},
            "buckets[0].modelId is a number, expected a string",
            id="model-number",
        ),
        pytest.param(
            {"buckets": [{"remainingFraction": "0.5"}]},
            "buckets[0].remainingFraction is a string, expected a number",
            id="fraction-string",
        ),
        pytest.param(
            {"buckets": [{"remainingFraction": 0.5, "resetTime": "soon"}]},
            "buckets[0].resetTime is not an ISO 8601 time",
            id="reset-words",
        ),
    ],
)
def test_parse_wrong_types_are_unparseable(payload: Any, message: str) -> None:
    with pytest.raises(QuotaError) as caught:
        parse(payload, NOW)

    assert (caught.value.kind, caught.value.message) == ("unparseable", message)
