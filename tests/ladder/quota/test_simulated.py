from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from ladder.core.types import QuotaStatus, WindowReading
from ladder.quota.base import ParsedQuota, QuotaError
from ladder.quota.simulated import fetch, parse

from .fake_upstream import FakeUpstream
from .recorded import NOW

HOURLY = {"plan_size": 1000, "burn_per_minute": 20, "window_seconds": 3600, "phase_seconds": 0}


def at(hour: int, minute: int, second: int = 0) -> datetime:
    return datetime(2026, 11, 29, hour, minute, second, tzinfo=UTC)


@pytest.mark.parametrize(
    ("now", "remaining", "status", "reset_at"),
    [
        pytest.param(at(12, 0), 100.0, QuotaStatus.SAFE, at(13, 0), id="window-start-full"),
        pytest.param(at(12, 15), 70.0, QuotaStatus.SAFE, at(13, 0), id="quarter-past"),
        pytest.param(at(12, 25), 50.0, QuotaStatus.SAFE, at(13, 0), id="half-drained"),
        pytest.param(at(12, 50), 0.0, QuotaStatus.EXHAUSTED, at(13, 0), id="drained"),
        pytest.param(at(12, 59, 59), 0.0, QuotaStatus.EXHAUSTED, at(13, 0), id="still-drained"),
        pytest.param(at(13, 0), 100.0, QuotaStatus.SAFE, at(14, 0), id="reset-at-window-end"),
        pytest.param(at(13, 30), 40.0, QuotaStatus.SAFE, at(14, 0), id="next-window"),
    ],
)
def test_parse_drains_and_resets(
    now: datetime, remaining: float, status: QuotaStatus, reset_at: datetime
) -> None:
    reading = parse(HOURLY, now)

    assert (reading.status, reading.remaining_percent, reading.reset_at) == (
        status,
        remaining,
        reset_at,
    )


def test_parse_full_reading() -> None:
    assert parse(HOURLY, at(12, 15)) == ParsedQuota(
        status=QuotaStatus.SAFE,
        remaining_percent=70.0,
        reset_at=at(13, 0),
        windows=(WindowReading("simulated", 70.0, at(13, 0)),),
        detail="binding window simulated: 70.0 % left, resets 2026-11-29 13:00 UTC",
    )


def test_parse_is_deterministic() -> None:
    assert parse(HOURLY, at(12, 7, 13)) == parse(dict(HOURLY), at(12, 7, 13))


def test_parse_phase_shifts_window_starts() -> None:
    config = {**HOURLY, "burn_per_minute": 10, "phase_seconds": 600}

    reading = parse(config, NOW)

    assert (reading.remaining_percent, reading.reset_at) == (50.0, at(12, 10))


def test_parse_epoch_anchors_the_windows() -> None:
    config = {**HOURLY, "window_seconds": 1800, "epoch": "2026-11-29T11:45:00Z"}

    reading = parse(config, NOW)

    assert (reading.remaining_percent, reading.reset_at) == (70.0, at(12, 15))


def test_parse_now_before_epoch_still_cycles() -> None:
    config = {**HOURLY, "epoch": "2026-11-29T12:30:00Z"}

    reading = parse(config, NOW)

    assert (reading.remaining_percent, reading.reset_at) == (40.0, at(12, 30))


def test_parse_defaults_drain_in_fifty_minutes() -> None:
    assert (parse({}, at(12, 49)).status, parse({}, at(12, 50)).status) == (
        QuotaStatus.SAFE,
        QuotaStatus.EXHAUSTED,
    )


def test_parse_zero_burn_stays_full() -> None:
    assert parse({"burn_per_minute": 0}, at(12, 59)).remaining_percent == 100.0


@pytest.mark.parametrize(
    ("config", "message"),
    [
        pytest.param([], "simulated config is a list, expected an object", id="not-object"),
        pytest.param(
            {"burn_rate": 5},
            "simulated config has unknown keys (1); known keys: plan_size, burn_per_minute,"
            " window_seconds, phase_seconds, epoch",
            id="unknown-key",
        ),
        pytest.param(
            {"plan_size": 0}, "simulated config.plan_size must be positive", id="zero-plan"
        ),
        pytest.param(
            {"plan_size": "big"},
            "simulated config.plan_size is a string, expected a number",
            id="plan-string",
        ),
        pytest.param(
            {"burn_per_minute": -1},
            "simulated config.burn_per_minute must be at least 0",
            id="negative-burn",
        ),
        pytest.param(
            {"window_seconds": 0.5},
            "simulated config.window_seconds must be at least 1",
            id="tiny-window",
        ),
        pytest.param(
            {"epoch": "yesterday"},
            "simulated config.epoch is not an ISO 8601 time",
            id="epoch-words",
        ),
        pytest.param(
            {"phase_seconds": 1e300},
            "simulated config puts the window outside the calendar",
            id="huge-phase",
        ),
    ],
)
def test_parse_bad_config_is_unparseable(config: Any, message: str) -> None:
    with pytest.raises(QuotaError) as caught:
        parse(config, NOW)

    assert (caught.value.kind, caught.value.message) == ("unparseable", message)


@pytest.mark.parametrize(
    ("credential", "expected"),
    [
        pytest.param('{"plan_size": 50}', {"plan_size": 50}, id="config"),
        pytest.param("", {}, id="empty-means-defaults"),
    ],
)
def test_fetch_returns_the_config_without_http(
    upstream: FakeUpstream, client: httpx.Client, credential: str, expected: dict[str, Any]
) -> None:
    assert fetch(url=upstream.url("/"), credential=credential, client=client) == expected
    assert upstream.received == []


@pytest.mark.parametrize(
    ("credential", "message"),
    [
        pytest.param("{plan", "the simulated credential is not a JSON config", id="not-json"),
        pytest.param("[1]", "the simulated credential must be a JSON object", id="not-object"),
    ],
)
def test_fetch_bad_credential_is_invalid(
    client: httpx.Client, credential: str, message: str
) -> None:
    with pytest.raises(QuotaError) as caught:
        fetch(url="simulated://local", credential=credential, client=client)

    assert (caught.value.kind, caught.value.message) == ("credential_invalid", message)
