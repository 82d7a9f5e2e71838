from __future__ import annotations

from datetime import UTC, datetime

import pytest

from ladder.quota.values import (
    epoch_to_datetime,
    parse_duration,
    parse_iso_instant,
    parse_retry_after,
)

from .recorded import NOW


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("1s", 1.0, id="seconds"),
        pytest.param("6m0s", 360.0, id="minutes-and-zero-seconds"),
        pytest.param("20ms", 0.02, id="milliseconds"),
        pytest.param("1h2m3.5s", 3723.5, id="hours-minutes-fractional-seconds"),
        pytest.param("1.5m", 90.0, id="fractional-minutes"),
        pytest.param("250us", 0.00025, id="microseconds"),
        pytest.param("12", 12.0, id="plain-seconds"),
        pytest.param(" 0.5 ", 0.5, id="plain-fraction-padded"),
    ],
)
def test_parse_duration_reads_go_durations_and_plain_seconds(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("", id="empty"),
        pytest.param("soon", id="words"),
        pytest.param("-1s", id="negative"),
        pytest.param("1x", id="unknown-unit"),
        pytest.param("s", id="unit-only"),
        pytest.param("1h-2m", id="inner-sign"),
        pytest.param("nan", id="nan"),
        pytest.param("inf", id="inf"),
    ],
)
def test_parse_duration_ignores_garbage(text: str) -> None:
    assert parse_duration(text) is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("120", 120.0, id="delay-seconds"),
        pytest.param("1.5", 1.5, id="fractional-delay"),
        pytest.param("Sun, 29 Nov 2026 12:01:30 GMT", 90.0, id="http-date"),
        pytest.param("Sun, 29 Nov 2026 11:00:00 GMT", 0.0, id="http-date-past-is-now"),
        pytest.param("soon", None, id="words"),
        pytest.param("-5", None, id="negative"),
        pytest.param("", None, id="empty"),
    ],
)
def test_parse_retry_after(text: str, seconds: float | None) -> None:
    assert parse_retry_after(text, NOW) == seconds


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("2026-12-01", datetime(2026, 12, 1, tzinfo=UTC), id="bare-date-midnight"),
        pytest.param("2026-11-29T12:00:00", NOW, id="naive-is-utc"),
        pytest.param("2026-11-29T14:00:00+02:00", NOW, id="offset-converted"),
        pytest.param(
            "2026-11-29T12:00:00.123456789Z",
            datetime(2026, 11, 29, 12, 0, 0, 123456, tzinfo=UTC),
            id="nanoseconds-truncated",
        ),
        pytest.param("", None, id="empty"),
        pytest.param("29/11/2026", None, id="not-iso"),
    ],
)
def test_parse_iso_instant(text: str, expected: datetime | None) -> None:
    assert parse_iso_instant(text) == expected


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        pytest.param(1795953600, NOW, id="in-range"),
        pytest.param(1e20, None, id="beyond-year-9999"),
        pytest.param(float("nan"), None, id="nan"),
    ],
)
def test_epoch_to_datetime(seconds: float, expected: datetime | None) -> None:
    assert epoch_to_datetime(seconds) == expected
