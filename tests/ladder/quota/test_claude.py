from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from ladder.core.types import OverageEvidence, OverageSays, QuotaStatus, WindowReading
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
            WindowReading("seven_day_opus", 100.0, None, "opus"),
            WindowReading("seven_day_sonnet", 88.0, SEVEN_DAY_RESET, "sonnet"),
        ),
        detail="binding window seven_day: 38.0 % left, resets 2026-12-03 08:00 UTC",
        evidence=OverageEvidence(
            OverageSays.HARD_STOP, "the usage says extra_usage.is_enabled: false"
        ),
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


def test_parse_model_window_binds_only_its_model() -> None:
    payload = load("claude")
    payload["seven_day_opus"] = {"utilization": 100.0, "resets_at": "2026-12-02T00:00:00+00:00"}

    reading = parse(payload, NOW)

    # The connection's reading is the unscoped binding window: Sonnet stays on the plan.
    assert (reading.status, reading.remaining_percent, reading.reset_at) == (
        QuotaStatus.SAFE,
        38.0,
        SEVEN_DAY_RESET,
    )
    assert reading.windows[2] == WindowReading(
        "seven_day_opus", 0.0, datetime(2026, 12, 2, tzinfo=UTC), "opus"
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
        pytest.param({"iguana_necktie": {"utilization": 50.0}}, id="only-other-keys"),
        pytest.param({"limits": []}, id="empty-limits"),
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


# --- the `limits` list, alone and mixed with the flat keys -----------------------------

LIMITS = [
    {
        "kind": "session",
        "group": "claude",
        "percent": 37.0,
        "severity": "normal",
        "resets_at": "2026-11-29T14:59:59.943648+00:00",
        "scope": None,
        "is_active": True,
    },
    {
        "kind": "weekly_all",
        "group": "claude",
        "percent": 62.0,
        "severity": "normal",
        "resets_at": "2026-12-03T08:00:00.123456+00:00",
        "scope": None,
        "is_active": True,
    },
    {
        "kind": "weekly_scoped",
        "group": "claude",
        "percent": 0.0,
        "severity": "normal",
        "resets_at": None,
        "scope": {"model": {"id": "opus", "display_name": "Opus"}},
        "is_active": False,
    },
    {
        "kind": "weekly_scoped",
        "group": "claude",
        "percent": 12.0,
        "severity": "normal",
        "resets_at": "2026-12-03T08:00:00.123456+00:00",
        "scope": {"model": {"id": "claude-sonnet-4-5", "display_name": "Sonnet"}},
        "is_active": True,
    },
]


def _flat_keys_only() -> dict[str, Any]:
    payload = load("claude")
    del payload["extra_usage"]
    return payload


def test_parse_limits_only_reads_exactly_as_its_flat_equivalent() -> None:
    limits_only = parse({"limits": LIMITS}, NOW)

    assert limits_only == parse(_flat_keys_only(), NOW)
    assert limits_only == ParsedQuota(
        status=QuotaStatus.SAFE,
        remaining_percent=38.0,
        reset_at=SEVEN_DAY_RESET,
        windows=(
            WindowReading("five_hour", 63.0, FIVE_HOUR_RESET),
            WindowReading("seven_day", 38.0, SEVEN_DAY_RESET),
            WindowReading("seven_day_opus", 100.0, None, "opus"),
            WindowReading("seven_day_sonnet", 88.0, SEVEN_DAY_RESET, "sonnet"),
        ),
        detail="binding window seven_day: 38.0 % left, resets 2026-12-03 08:00 UTC",
    )


def test_parse_mixed_shapes_keep_each_window_once_with_the_less_remaining() -> None:
    payload = _flat_keys_only()
    payload["limits"] = [
        *LIMITS[:1],
        {**LIMITS[1], "percent": 70.0},
        {
            "kind": "weekly_scoped",
            "percent": 100.0,
            "resets_at": "2026-12-02T09:00:00+00:00",
            "scope": {"model": {"id": "claude-opus-4-1", "display_name": "Opus"}},
        },
    ]

    reading = parse(payload, NOW)

    assert reading.windows == (
        WindowReading("five_hour", 63.0, FIVE_HOUR_RESET),
        WindowReading("seven_day", 30.0, SEVEN_DAY_RESET),
        WindowReading("seven_day_opus", 0.0, datetime(2026, 12, 2, 9, tzinfo=UTC), "opus"),
        WindowReading("seven_day_sonnet", 88.0, SEVEN_DAY_RESET, "sonnet"),
    )
    assert (reading.status, reading.remaining_percent) == (QuotaStatus.SAFE, 30.0)


def test_parse_scoped_limit_naming_a_model_id_is_scoped_to_that_id() -> None:
    entry = {
        "kind": "weekly_scoped",
        "percent": 40.0,
        "resets_at": "2026-12-02T09:00:00+00:00",
        "scope": {"model": {"id": "claude-opus-4-1", "display_name": "Claude Opus 4.1"}},
    }

    reading = parse({"limits": [LIMITS[0], entry]}, NOW)

    assert reading.windows[1] == WindowReading(
        "seven_day_claude-opus-4-1", 60.0, datetime(2026, 12, 2, 9, tzinfo=UTC), "claude-opus-4-1"
    )
    assert reading.remaining_percent == 63.0


@pytest.mark.parametrize(
    ("entry", "name"),
    [
        pytest.param(
            {"kind": "monthly_org", "group": "team", "percent": 100.0}, "limits.monthly_org.team"
        ),
        pytest.param({"percent": 100.0}, "limits.unknown", id="no-kind"),
        pytest.param(
            {"kind": "weekly_scoped", "percent": 100.0, "scope": None},
            "limits.weekly_scoped",
            id="scoped-without-model",
        ),
    ],
)
def test_parse_unknown_limit_kind_is_an_unscoped_window(entry: dict[str, Any], name: str) -> None:
    reading = parse({"limits": [LIMITS[0], entry]}, NOW)

    assert reading.windows[1] == WindowReading(name, 0.0, None, None)
    assert (reading.status, reading.remaining_percent) == (QuotaStatus.EXHAUSTED, 0.0)


def test_parse_only_scoped_windows_is_unknown_for_the_connection() -> None:
    reading = parse({"limits": LIMITS[3:]}, NOW)

    assert (reading.status, reading.remaining_percent, reading.detail) == (
        QuotaStatus.UNKNOWN,
        None,
        "no window says how much quota is left",
    )


def test_parse_limits_entry_of_the_wrong_type_is_unparseable() -> None:
    with pytest.raises(QuotaError) as caught:
        parse({"limits": [{"kind": "session", "percent": "37"}]}, NOW)

    assert caught.value.message == "limits[0].percent is a string, expected a number"


# --- billing evidence ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "spend", "expected"),
    [
        pytest.param(
            {"is_enabled": True},
            None,
            OverageEvidence(OverageSays.CAN_METER, "the usage says extra_usage.is_enabled: true"),
            id="extra-usage-on",
        ),
        pytest.param(
            {"is_enabled": False},
            None,
            OverageEvidence(OverageSays.HARD_STOP, "the usage says extra_usage.is_enabled: false"),
            id="extra-usage-off",
        ),
        pytest.param(None, None, None, id="absent"),
        pytest.param({"is_enabled": None}, None, None, id="extra-usage-null"),
        pytest.param(
            {"is_enabled": False},
            {"enabled": True},
            OverageEvidence(OverageSays.CAN_METER, "the usage says spend.enabled: true"),
            id="spend-on-overrides-extra-off",
        ),
        pytest.param(
            {"is_enabled": True},
            {"enabled": False},
            OverageEvidence(OverageSays.HARD_STOP, "the usage says spend.enabled: false"),
            id="spend-off-overrides-extra-on",
        ),
        pytest.param(
            {"is_enabled": True},
            {"enabled": None},
            OverageEvidence(OverageSays.CAN_METER, "the usage says extra_usage.is_enabled: true"),
            id="spend-null-falls-back",
        ),
    ],
)
def test_parse_billing_evidence(
    extra: dict[str, Any] | None, spend: dict[str, Any] | None, expected: OverageEvidence | None
) -> None:
    payload: dict[str, Any] = {"limits": LIMITS}
    if extra is not None:
        payload["extra_usage"] = extra
    if spend is not None:
        payload["spend"] = spend

    reading = parse(payload, NOW)

    assert reading.evidence == expected
    assert (reading.remaining_percent, len(reading.windows)) == (38.0, 4)


def test_parse_evidence_field_of_the_wrong_type_is_unparseable() -> None:
    with pytest.raises(QuotaError) as caught:
        parse({"spend": {"enabled": "yes"}}, NOW)

    assert caught.value.message == "usage.spend.enabled is a string, expected a boolean"
