from __future__ import annotations

import pickle
from datetime import UTC, datetime, timedelta

import pytest

from ladder.core.types import QuotaStatus, WindowReading
from ladder.quota import REGISTRY, UnknownAdapter, env_var_for, get_adapter
from ladder.quota.base import (
    ErrorKind,
    ParsedQuota,
    QuotaError,
    make_window,
    parse_credential,
    quota_from_windows,
    unknown,
)

from .recorded import NOW

IN_1H = NOW + timedelta(hours=1)
IN_2H = NOW + timedelta(hours=2)


def window(name: str, remaining: float | None, reset_at: datetime | None) -> WindowReading:
    return WindowReading(name=name, remaining_percent=remaining, reset_at=reset_at)


@pytest.mark.parametrize(
    ("remaining", "reset_at", "expected"),
    [
        pytest.param(42.5, IN_1H, window("w", 42.5, IN_1H), id="as-given"),
        pytest.param(-12.0, IN_1H, window("w", 0.0, IN_1H), id="clamped-to-zero"),
        pytest.param(130.0, IN_1H, window("w", 100.0, IN_1H), id="clamped-to-hundred"),
        pytest.param(42.5, NOW, window("w", None, NOW), id="reset-now-is-unknown"),
        pytest.param(
            42.5,
            NOW - timedelta(seconds=1),
            window("w", None, NOW - timedelta(seconds=1)),
            id="reset-past",
        ),
        pytest.param(None, None, window("w", None, None), id="nothing-known"),
    ],
)
def test_make_window(
    remaining: float | None, reset_at: datetime | None, expected: WindowReading
) -> None:
    assert make_window("w", remaining, reset_at, NOW) == expected


def test_quota_from_windows_safe_names_the_binding_window() -> None:
    windows = (window("five_hour", 63.0, IN_1H), window("seven_day", 38.0, IN_2H))

    assert quota_from_windows(windows) == ParsedQuota(
        status=QuotaStatus.SAFE,
        remaining_percent=38.0,
        reset_at=IN_2H,
        windows=windows,
        detail="binding window seven_day: 38.0 % left, resets 2026-11-29 14:00 UTC",
    )


def test_quota_from_windows_zero_remaining_is_exhausted() -> None:
    windows = (window("five_hour", 0.0, IN_1H), window("seven_day", 38.0, IN_2H))

    assert quota_from_windows(windows) == ParsedQuota(
        status=QuotaStatus.EXHAUSTED,
        remaining_percent=0.0,
        reset_at=IN_1H,
        windows=windows,
        detail="used up; five_hour: 0.0 % left, resets 2026-11-29 13:00 UTC",
    )


def test_quota_from_windows_limit_reached_is_exhausted_whatever_the_numbers() -> None:
    windows = (window("primary", 12.0, IN_1H),)

    assert quota_from_windows(windows, is_limit_reached=True) == ParsedQuota(
        status=QuotaStatus.EXHAUSTED,
        remaining_percent=12.0,
        reset_at=IN_1H,
        windows=windows,
        detail="the provider reports its limit reached; primary: 12.0 % left, "
        "resets 2026-11-29 13:00 UTC",
    )


@pytest.mark.parametrize(
    ("windows", "detail"),
    [
        pytest.param((), "nothing here", id="no-windows"),
        pytest.param(
            (window("a", None, IN_1H),), "no window says how much quota is left", id="all-unknown"
        ),
    ],
)
def test_quota_from_windows_without_a_number_is_unknown(
    windows: tuple[WindowReading, ...], detail: str
) -> None:
    assert quota_from_windows(windows, empty_detail="nothing here") == ParsedQuota(
        status=QuotaStatus.UNKNOWN,
        remaining_percent=None,
        reset_at=None,
        windows=windows,
        detail=detail,
    )


def test_unknown_carries_its_cause() -> None:
    assert unknown("timeout: slow") == ParsedQuota(
        status=QuotaStatus.UNKNOWN,
        remaining_percent=None,
        reset_at=None,
        windows=(),
        detail="timeout: slow",
    )


def test_quota_error_survives_pickling() -> None:
    error = QuotaError(ErrorKind.RATE_LIMITED, "slow down", 30.0)

    copy = pickle.loads(pickle.dumps(error))

    assert (copy.kind, copy.message, copy.retry_after_seconds, str(copy)) == (
        "rate_limited",
        "slow down",
        30.0,
        "rate_limited: slow down",
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param("claude", "QUOTA_URL_CLAUDE", id="plain"),
        pytest.param("gemini-cli", "QUOTA_URL_GEMINI_CLI", id="dash"),
        pytest.param("a.b c", "QUOTA_URL_A_B_C", id="other-punctuation"),
    ],
)
def test_env_var_for(name: str, expected: str) -> None:
    assert env_var_for(name) == expected


def test_registry_holds_every_adapter_under_its_own_name() -> None:
    assert {name: adapter.name for name, adapter in REGISTRY.items()} == {
        "claude": "claude",
        "codex": "codex",
        "copilot": "copilot",
        "gemini-cli": "gemini-cli",
        "antigravity": "antigravity",
        "simulated": "simulated",
    }


def test_registry_default_urls() -> None:
    assert {name: adapter.default_url for name, adapter in REGISTRY.items()} == {
        "claude": "https://api.anthropic.com/api/oauth/usage",
        "codex": "https://chatgpt.com/backend-api/wham/usage",
        "copilot": "https://api.github.com/copilot_internal/user",
        "gemini-cli": "https://cloudcode-pa.googleapis.com/v1internal:retrieveUserQuota",
        "antigravity": "https://cloudcode-pa.googleapis.com/v1internal:fetchAvailableModels",
        "simulated": "simulated://local",
    }


def test_registry_is_read_only() -> None:
    with pytest.raises(TypeError):
        REGISTRY["claude"] = REGISTRY["codex"]


def test_get_adapter_returns_the_registered_adapter() -> None:
    assert get_adapter("gemini-cli") is REGISTRY["gemini-cli"]


def test_get_adapter_unknown_name_says_which_exist() -> None:
    with pytest.raises(UnknownAdapter) as caught:
        get_adapter("openrouter")

    assert str(caught.value) == (
        "no quota adapter named 'openrouter'; known adapters: "
        "antigravity, claude, codex, copilot, gemini-cli, simulated"
    )
    assert isinstance(caught.value, KeyError)


def test_adapter_poll_fetches_then_parses() -> None:
    adapter = get_adapter("simulated")

    reading = adapter.poll(url="", credential='{"burn_per_minute": 0}', client=None, now=NOW)  # type: ignore[arg-type]

    assert (reading.status, reading.remaining_percent) == (QuotaStatus.SAFE, 100.0)


@pytest.mark.parametrize(
    ("credential", "required", "optional", "expected"),
    [
        pytest.param("tok-1", (), (), {"access_token": "tok-1"}, id="bare-token"),
        pytest.param("  tok-1\n", (), (), {"access_token": "tok-1"}, id="bare-token-trimmed"),
        pytest.param(
            '{"access_token": "tok-1", "project": "p-1", "extra": 3}',
            ("project",),
            (),
            {"access_token": "tok-1", "project": "p-1"},
            id="json-with-required",
        ),
        pytest.param(
            '{"access_token": "tok-1"}',
            (),
            ("project",),
            {"access_token": "tok-1"},
            id="json-optional-absent",
        ),
    ],
)
def test_parse_credential_accepts(
    credential: str, required: tuple[str, ...], optional: tuple[str, ...], expected: dict[str, str]
) -> None:
    assert (
        parse_credential(credential, adapter="x", required=required, optional=optional) == expected
    )


@pytest.mark.parametrize(
    ("credential", "required", "message"),
    [
        pytest.param("   ", (), "the x credential is empty", id="empty"),
        pytest.param(
            "tok-1",
            ("project",),
            "the x credential must be a JSON object with access_token, project",
            id="bare-token-when-json-needed",
        ),
        pytest.param(
            '{"access_token": "secret-1"',
            (),
            "the x credential starts with '{' but is not valid JSON",
            id="broken-json",
        ),
        pytest.param(
            '{"project": "p"}', (), "the x credential lacks 'access_token'", id="no-token"
        ),
        pytest.param(
            '{"access_token": "t", "project": ""}',
            ("project",),
            "the x credential lacks 'project'",
            id="empty-required",
        ),
        pytest.param(
            '{"access_token": 12}',
            (),
            "the x credential has a non-string 'access_token'",
            id="number",
        ),
        pytest.param(
            "tok en",
            (),
            "the x credential holds a token with spaces or non-ASCII characters",
            id="space-in-token",
        ),
        pytest.param(
            '{"access_token": "t\\nX-Injected: 1"}',
            (),
            "the x credential holds a token with spaces or non-ASCII characters",
            id="header-injection",
        ),
    ],
)
def test_parse_credential_refuses(credential: str, required: tuple[str, ...], message: str) -> None:
    with pytest.raises(QuotaError) as caught:
        parse_credential(credential, adapter="x", required=required)

    assert (caught.value.kind, caught.value.message) == ("credential_invalid", message)


def test_parse_credential_does_not_chain_the_decode_error_holding_the_secret() -> None:
    with pytest.raises(QuotaError) as caught:
        parse_credential('{"access_token": "secret-1"', adapter="x")

    assert caught.value.__cause__ is None
    assert caught.value.__suppress_context__ is True
    assert "secret-1" not in str(caught.value)


def test_statuses_compare_equal_to_the_api_strings() -> None:
    assert [QuotaStatus.SAFE, QuotaStatus.EXHAUSTED, QuotaStatus.UNKNOWN] == [
        "SAFE",
        "EXHAUSTED",
        "UNKNOWN",
    ]


def test_every_datetime_is_utc() -> None:
    reading = quota_from_windows(
        [make_window("w", 50.0, datetime(2026, 11, 29, 13, tzinfo=UTC), NOW)]
    )

    assert reading.reset_at is not None
    assert reading.reset_at.utcoffset() == timedelta(0)
