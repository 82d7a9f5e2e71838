"""omniroute_client.events: which event an upstream answer is (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

from omniroute_client import event_for_response
from omniroute_client.events import event_for_exception, says_can_meter

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def test_an_anthropic_plan_window_429_is_quota_exhausted() -> None:
    headers = {
        "Anthropic-Ratelimit-Unified-Status": "rejected",
        "anthropic-ratelimit-unified-reset": "1764590400",
        "retry-after": "120",
        "content-type": "application/json",
    }
    assert event_for_response(429, headers, now=NOW) == {
        "kind": "quota_exhausted",
        "retry_after_seconds": 120.0,
        "reset_at": "2025-12-01T12:00:00+00:00",
        "headers": {
            "anthropic-ratelimit-unified-status": "rejected",
            "anthropic-ratelimit-unified-reset": "1764590400",
            "retry-after": "120",
        },
    }


def test_a_codex_usage_limit_body_is_quota_exhausted_with_its_reset() -> None:
    body = {"error": {"type": "usage_limit_reached", "resets_in_seconds": 90}}
    assert event_for_response(429, {}, body, now=NOW) == {
        "kind": "quota_exhausted",
        "retry_after_seconds": None,
        "reset_at": "2026-12-01T12:01:30+00:00",
    }


def test_a_plain_429_is_rate_limited_and_a_5xx_is_an_error() -> None:
    assert event_for_response(429, {"retry-after-ms": "1500"}, "slow down", now=NOW) == {
        "kind": "rate_limited",
        "retry_after_seconds": 1.5,
        "headers": {"retry-after-ms": "1500"},
    }
    assert event_for_response(503, {}, now=NOW) == {"kind": "error", "retry_after_seconds": None}
    assert event_for_exception(TimeoutError("read timed out"), now=NOW) == {
        "kind": "error",
        "retry_after_seconds": None,
    }
    assert event_for_response(400, {}, now=NOW) is None


def test_success_only_after_a_failure_or_with_quota_headers() -> None:
    assert event_for_response(200, {"content-type": "application/json"}, now=NOW) is None
    assert event_for_response(200, {}, after_failure=True, now=NOW) == {"kind": "success"}
    quota = {"anthropic-ratelimit-unified-5h-utilization": "0.4"}
    assert event_for_response(200, quota, now=NOW) == {"kind": "success", "headers": quota}
    # OpenAI per-minute headers alone say nothing about a plan: no event.
    assert event_for_response(200, {"x-ratelimit-remaining-requests": "99"}, now=NOW) is None


def test_an_event_names_the_model_the_request_asked_for() -> None:
    headers = {"anthropic-ratelimit-unified-7d_oi-status": "rejected", "retry-after": "60"}

    event = event_for_response(429, headers, now=NOW, model="claude-opus-4-1")

    assert event is not None
    assert (event["kind"], event["model"]) == ("rate_limited", "claude-opus-4-1")
    assert event_for_exception(TimeoutError("slow"), model="claude-opus-4-1") == {
        "kind": "error",
        "retry_after_seconds": None,
        "model": "claude-opus-4-1",
    }


def test_which_headers_say_the_plan_bills_past_its_limit() -> None:
    assert says_can_meter({"Anthropic-Ratelimit-Unified-Overage-In-Use": "true"})
    assert says_can_meter({"anthropic-ratelimit-unified-overage-status": "allowed_warning"})
    assert says_can_meter({"x-codex-credits-unlimited": "True"})
    assert not says_can_meter({"anthropic-ratelimit-unified-overage-status": "rejected"})
    assert not says_can_meter({"x-codex-credits-has-credits": "false"})
    assert not says_can_meter({"anthropic-ratelimit-unified-status": "allowed"})


def test_a_codex_credits_header_alone_is_worth_a_success() -> None:
    credits = {"x-codex-credits-has-credits": "true"}

    assert event_for_response(200, credits, now=NOW) == {"kind": "success", "headers": credits}
