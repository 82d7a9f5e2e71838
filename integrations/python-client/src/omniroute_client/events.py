"""Turning an upstream's answer (or failure) into the event the control plane expects.

Pure functions: no IO, no clock unless one is passed. The kinds (spec/api.md, "Events"):

- a 429 saying the plan's window is used up (Anthropic
  ``anthropic-ratelimit-unified-status: rejected``, Codex ``usage_limit_reached``, a body
  naming the quota) -> ``quota_exhausted``;
- any other 429 (requests or tokens per minute) -> ``rate_limited``;
- a 5xx, a timeout or a connection failure -> ``error`` (401/403 too: the credential is
  not serving);
- a 2xx -> ``success`` only when it carried quota headers or follows a failure of the
  same connection; otherwise nothing is sent (the server would store nothing).

Every event names the model the request asked for when the caller gives it: what the
headers say about one model (Anthropic's ``7d_oi`` headers: an Opus weekly cap) binds only
that model, and a model-scoped rejection cools only that model on the connection.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

# Header names (lower case) or prefixes the server reads (ladder/quota/headers.py).
_EXACT = ("retry-after", "retry-after-ms")
_PREFIXES = ("anthropic-ratelimit-", "x-codex-", "x-ratelimit-")
# Headers that say something about the plan's quota (a `success` carrying them stores a
# reading: the fastest way back onto the plan after a reset).
_QUOTA_PREFIXES = (
    "anthropic-ratelimit-unified",
    "x-codex-primary",
    "x-codex-secondary",
    "x-codex-credits",
)
_QUOTA_WORDS = ("usage_limit_reached", "quota", "usage limit", "insufficient_quota")


def understood_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    """The rate-limit and reset headers of `headers`, names lower-cased."""
    kept: dict[str, str] = {}
    for name, value in (headers or {}).items():
        if not isinstance(name, str) or not isinstance(value, str):
            continue
        lowered = name.strip().lower()
        if lowered in _EXACT or lowered.startswith(_PREFIXES):
            kept[lowered] = value.strip()[:256]
    return kept


def has_quota_headers(headers: Mapping[str, str]) -> bool:
    return any(name.startswith(_QUOTA_PREFIXES) for name in understood_headers(headers))


def says_can_meter(headers: Mapping[str, str] | None) -> bool:
    """Do these headers say the plan bills past its limit (spec/ladder.md, "Billing
    evidence from the wire")? Anthropic `overage-in-use: true` or `overage-status:
    allowed` / `allowed_warning`; Codex `credits-has-credits: true` or
    `credits-unlimited: true`. Such an answer is not routine: the plan must leave
    `auto/subscription` on the gateway's next decision."""
    kept = understood_headers(headers)
    flags = (
        "anthropic-ratelimit-unified-overage-in-use",
        "x-codex-credits-has-credits",
        "x-codex-credits-unlimited",
    )
    if any(kept.get(name, "").lower() == "true" for name in flags):
        return True
    status = kept.get("anthropic-ratelimit-unified-overage-status", "").lower()
    return status in ("allowed", "allowed_warning")


def retry_after_seconds(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """Retry-After (seconds or an HTTP date) or retry-after-ms, as seconds; None if absent."""
    kept = understood_headers(headers)
    if "retry-after-ms" in kept:
        try:
            return max(0.0, float(kept["retry-after-ms"]) / 1000.0)
        except ValueError:
            pass
    value = kept.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    from email.utils import parsedate_to_datetime

    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def _body_text(body: Any) -> str:
    if body is None:
        return ""
    if isinstance(body, bytes):
        return body[:4096].decode("utf-8", "replace")
    if isinstance(body, str):
        return body[:4096]
    try:
        return json.dumps(body)[:4096]
    except (TypeError, ValueError):
        return str(body)[:4096]


def _codex_reset(body: Any, now: datetime) -> datetime | None:
    """`resets_at` (epoch) or `resets_in_seconds` of a Codex usage_limit_reached body."""
    if isinstance(body, (str, bytes)):
        try:
            body = json.loads(body)
        except (TypeError, ValueError):
            return None
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict):
        return None
    try:
        if error.get("resets_at") is not None:
            return datetime.fromtimestamp(float(error["resets_at"]), UTC)
        if error.get("resets_in_seconds") is not None:
            return now + timedelta(seconds=float(error["resets_in_seconds"]))
    except (TypeError, ValueError, OverflowError, OSError):
        return None
    return None


def _unified_reset(kept: Mapping[str, str]) -> datetime | None:
    """Anthropic's own statement of when a rejected plan window opens again."""
    if kept.get("anthropic-ratelimit-unified-status", "").lower() != "rejected":
        return None
    try:
        return datetime.fromtimestamp(float(kept["anthropic-ratelimit-unified-reset"]), UTC)
    except (KeyError, ValueError, OverflowError, OSError):
        return None


def is_quota_exhaustion(headers: Mapping[str, str], body: Any = None) -> bool:
    """Does this 429 say the plan's window is used up (not a per-minute rate limit)?"""
    kept = understood_headers(headers)
    if kept.get("anthropic-ratelimit-unified-status", "").lower() == "rejected":
        return True
    for window in ("primary", "secondary"):
        try:
            if float(kept.get(f"x-codex-{window}-used-percent", "")) >= 100:
                return True
        except ValueError:
            pass
    text = _body_text(body).lower()
    return any(word in text for word in _QUOTA_WORDS)


def event_for_response(
    status_code: int,
    headers: Mapping[str, str] | None = None,
    body: Any = None,
    *,
    after_failure: bool = False,
    now: datetime | None = None,
    model: str | None = None,
) -> dict[str, Any] | None:
    """The event to report for an upstream answer, or None when there is nothing to say;
    `model`: the model the request asked for (named on the event)."""
    event = _event_for_response(status_code, headers, body, after_failure, now)
    if event is not None and model:
        event["model"] = model[:200]
    return event


def _event_for_response(
    status_code: int,
    headers: Mapping[str, str] | None,
    body: Any,
    after_failure: bool,
    now: datetime | None,
) -> dict[str, Any] | None:
    now = now or datetime.now(UTC)
    headers = headers or {}
    kept = understood_headers(headers)
    if 200 <= status_code < 300:
        if after_failure or has_quota_headers(headers):
            return {"kind": "success", "headers": kept} if kept else {"kind": "success"}
        return None
    if status_code == 429:
        quota = is_quota_exhaustion(headers, body)
        event: dict[str, Any] = {
            "kind": "quota_exhausted" if quota else "rate_limited",
            "retry_after_seconds": retry_after_seconds(headers, now),
        }
        reset = (_unified_reset(kept) or _codex_reset(body, now)) if quota else None
        if reset is not None:
            event["reset_at"] = reset.isoformat()
        if kept:
            event["headers"] = kept
        return event
    if status_code >= 500 or status_code in (401, 403, 408):
        event = {"kind": "error", "retry_after_seconds": retry_after_seconds(headers, now)}
        if kept:
            event["headers"] = kept
        return event
    return None


def event_for_exception(
    exc: BaseException, *, now: datetime | None = None, model: str | None = None
) -> dict[str, Any] | None:
    """The event for an exception raised by an upstream call: reads `status_code`,
    `response` (an httpx/requests-like response) and `headers` attributes when present;
    a timeout or connection failure with no status is `error`."""
    response = getattr(exc, "response", None)
    status = getattr(exc, "status_code", None) or getattr(response, "status_code", None)
    headers: Mapping[str, str] = {}
    # LiteLLM keeps the upstream's headers in `litellm_response_headers` (its `response`
    # is a rebuilt one without them); httpx and the SDKs in `response.headers`.
    for raw in (
        getattr(exc, "litellm_response_headers", None),
        getattr(exc, "headers", None),
        getattr(response, "headers", None),
    ):
        try:
            headers = {str(k): str(v) for k, v in dict(raw or {}).items()}
        except (TypeError, ValueError):
            headers = {}
        if headers:
            break
    body: Any = getattr(exc, "body", None) or getattr(exc, "message", None) or str(exc)
    if response is not None and body is None:
        body = getattr(response, "text", None)
    if isinstance(status, int):
        return event_for_response(status, headers, body, now=now, model=model)
    event: dict[str, Any] = {"kind": "error", "retry_after_seconds": None}
    if model:
        event["model"] = model[:200]
    return event
