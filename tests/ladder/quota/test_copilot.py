from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from ladder.core.types import OverageEvidence, OverageSays, QuotaStatus, WindowReading
from ladder.quota.base import ParsedQuota, QuotaError
from ladder.quota.copilot import parse

from .recorded import NOW, load

MONTH_END = datetime(2026, 12, 1, tzinfo=UTC)


def test_parse_recorded_payload() -> None:
    assert parse(load("copilot"), NOW) == ParsedQuota(
        status=QuotaStatus.SAFE,
        remaining_percent=27.5,
        reset_at=MONTH_END,
        windows=(
            WindowReading("premium_interactions", 27.5, MONTH_END),
            WindowReading("chat", 100.0, None),
            WindowReading("completions", 100.0, None),
        ),
        detail="binding window premium_interactions: 27.5 % left, resets 2026-12-01 00:00 UTC",
        evidence=OverageEvidence(
            OverageSays.CAN_METER,
            "the usage says quota_snapshots.premium_interactions.overage_permitted: true",
        ),
    )


def test_parse_all_unlimited_is_safe_at_100() -> None:
    payload = load("copilot")
    payload["quota_snapshots"]["premium_interactions"]["unlimited"] = True

    reading = parse(payload, NOW)

    assert (reading.status, reading.remaining_percent, reading.reset_at) == (
        QuotaStatus.SAFE,
        100.0,
        None,
    )


def test_parse_unlimited_never_masks_an_unknown_limited_window() -> None:
    payload = load("copilot")
    premium = payload["quota_snapshots"]["premium_interactions"]
    for key in ("percent_remaining", "remaining", "quota_remaining"):
        del premium[key]

    reading = parse(payload, NOW)

    assert (reading.status, reading.remaining_percent, reading.reset_at) == (
        QuotaStatus.UNKNOWN,
        None,
        None,
    )
    assert reading.windows[0] == WindowReading("premium_interactions", None, MONTH_END)


def test_parse_counts_stand_in_for_a_missing_percent() -> None:
    payload = load("copilot")
    del payload["quota_snapshots"]["premium_interactions"]["percent_remaining"]

    assert parse(payload, NOW).remaining_percent == 27.333333


@pytest.mark.parametrize(
    "percent",
    [
        pytest.param(0, id="zero"),
        pytest.param(-4.2, id="negative-after-overage"),
    ],
)
def test_parse_premium_used_up_is_exhausted(percent: float) -> None:
    payload = load("copilot")
    payload["quota_snapshots"]["premium_interactions"]["percent_remaining"] = percent

    reading = parse(payload, NOW)

    assert (reading.status, reading.remaining_percent, reading.reset_at) == (
        QuotaStatus.EXHAUSTED,
        0.0,
        MONTH_END,
    )


def test_parse_exact_utc_reset_is_preferred_over_the_date() -> None:
    payload = load("copilot")
    payload["quota_reset_date_utc"] = "2026-12-01T00:00:00.000Z"
    payload["quota_reset_date"] = "2026-12-02"

    assert parse(payload, NOW).reset_at == MONTH_END


def test_parse_reset_date_as_a_full_time() -> None:
    payload = load("copilot")
    payload["quota_reset_date"] = "2026-12-01T06:30:00+02:00"

    assert parse(payload, NOW).reset_at == datetime(2026, 12, 1, 4, 30, tzinfo=UTC)


def test_parse_reset_date_in_the_past_makes_limited_windows_unknown() -> None:
    payload = load("copilot")
    payload["quota_reset_date"] = "2026-11-01"

    reading = parse(payload, NOW)

    assert reading.windows[0] == WindowReading(
        "premium_interactions", None, datetime(2026, 11, 1, tzinfo=UTC)
    )
    assert reading.status == QuotaStatus.UNKNOWN


def test_parse_missing_reset_date_keeps_the_percent() -> None:
    payload = load("copilot")
    del payload["quota_reset_date"]

    reading = parse(payload, NOW)

    assert (reading.status, reading.remaining_percent, reading.reset_at) == (
        QuotaStatus.SAFE,
        27.5,
        None,
    )


@pytest.mark.parametrize(
    ("payload", "detail"),
    [
        pytest.param({"login": "octocat"}, "the user has no quota_snapshots", id="no-snapshots"),
        pytest.param({"quota_snapshots": None}, "the user has no quota_snapshots", id="null"),
        pytest.param(
            {"quota_snapshots": {"chat": None, "other": {"unlimited": True}}},
            "quota_snapshots holds no known window",
            id="no-known-window",
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
    ("payload", "message"),
    [
        pytest.param("octocat", "user is a string, expected an object", id="string-payload"),
        pytest.param(
            {"quota_snapshots": []},
            "user.quota_snapshots is a list, expected an object",
            id="snapshots-list",
        ),
        pytest.param(
            {"quota_snapshots": {"chat": {"unlimited": "true"}}},
            "quota_snapshots.chat.unlimited is a string, expected a boolean",
            id="unlimited-string",
        ),
        pytest.param(
            {"quota_snapshots": {"chat": {"percent_remaining": "50"}}},
            "quota_snapshots.chat.percent_remaining is a string, expected a number",
            id="percent-string",
        ),
        pytest.param(
            {"quota_reset_date": 20261201, "quota_snapshots": {}},
            "user.quota_reset_date is a number, expected a string",
            id="reset-number",
        ),
        pytest.param(
            {"quota_reset_date": "next month", "quota_snapshots": {}},
            "user.quota_reset_date is not an ISO 8601 time",
            id="reset-words",
        ),
    ],
)
def test_parse_wrong_types_are_unparseable(payload: Any, message: str) -> None:
    with pytest.raises(QuotaError) as caught:
        parse(payload, NOW)

    assert (caught.value.kind, caught.value.message) == ("unparseable", message)


def test_parse_overage_permitted_false_everywhere_is_hard_stop() -> None:
    payload = load("copilot")
    payload["quota_snapshots"]["premium_interactions"]["overage_permitted"] = False

    assert parse(payload, NOW).evidence == OverageEvidence(
        OverageSays.HARD_STOP, "the usage says overage_permitted: false on every quota snapshot"
    )


def test_parse_overage_permitted_absent_somewhere_says_nothing() -> None:
    payload = load("copilot")
    payload["quota_snapshots"]["premium_interactions"]["overage_permitted"] = False
    del payload["quota_snapshots"]["chat"]["overage_permitted"]

    assert parse(payload, NOW).evidence is None
