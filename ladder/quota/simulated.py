"""A deterministic in-process provider for the demo and the tests; it does no IO.

Credential: a JSON config; every key is optional and an empty credential means all
defaults. Unknown keys are refused, so a typo never silently falls back to a default.

=================  ======================  ============================================
key                default                 meaning
=================  ======================  ============================================
plan_size          1000                    units in one window (requests, tokens...)
burn_per_minute    20                      units used per minute since the window began
window_seconds     3600                    the window restarts this often (>= 1)
phase_seconds      0                       shifts every window start later by this much
epoch              "1970-01-01T00:00:00Z"  when the first window starts (before phase)
=================  ======================  ============================================

Windows start at ``epoch + phase_seconds + k * window_seconds``. Within a window usage
grows linearly, remaining = max(0, 100 - used %), and reset_at is the window's end. With
the defaults the plan drains in 50 minutes, reads EXHAUSTED for the last 10 minutes of
every hour and refills on the hour.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from .base import (
    Adapter,
    ParsedQuota,
    expect_object,
    invalid_credential,
    make_window,
    optional_iso_instant,
    optional_number,
    quota_from_windows,
    unparseable,
)

NAME = "simulated"
# Not fetched: the value only keeps the registry uniform (and an env override harmless).
DEFAULT_URL = "simulated://local"
DEFAULT_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
DEFAULT_CONFIG: dict[str, Any] = {
    "plan_size": 1000.0,
    "burn_per_minute": 20.0,
    "window_seconds": 3600.0,
    "phase_seconds": 0.0,
    "epoch": None,
}
WHERE = "simulated config"


def _number(config: dict[str, Any], key: str, *, minimum: float | None = None) -> float:
    value = optional_number(config, key, WHERE)
    number = float(DEFAULT_CONFIG[key]) if value is None else value
    if minimum is not None and number < minimum:
        # The config is the credential (write-only): its values are never quoted back.
        raise unparseable(f"{WHERE}.{key} must be at least {minimum:g}")
    return number


def parse(payload: Any, now: datetime) -> ParsedQuota:
    """Compute remaining quota from where now falls in the current simulated window."""
    config = expect_object(payload, WHERE)
    unknown_keys = set(config) - set(DEFAULT_CONFIG)
    if unknown_keys:
        # Counted, not named: the keys are the credential's text; the known ones help.
        raise unparseable(
            f"{WHERE} has unknown keys ({len(unknown_keys)});"
            f" known keys: {', '.join(DEFAULT_CONFIG)}"
        )
    plan_size = _number(config, "plan_size")
    if plan_size <= 0:
        raise unparseable(f"{WHERE}.plan_size must be positive")
    burn_per_minute = _number(config, "burn_per_minute", minimum=0.0)
    window_seconds = _number(config, "window_seconds", minimum=1.0)
    phase_seconds = _number(config, "phase_seconds")
    epoch = optional_iso_instant(config, "epoch", WHERE) or DEFAULT_EPOCH
    try:
        window = timedelta(seconds=window_seconds)
        origin = epoch + timedelta(seconds=phase_seconds)
    except OverflowError:
        raise unparseable(f"{WHERE} puts the window outside the calendar") from None
    # timedelta arithmetic is exact to the microsecond, so equal inputs give equal readings;
    # the modulo is non-negative even for a now before the origin.
    elapsed = (now - origin) % window
    used_percent = burn_per_minute * (elapsed.total_seconds() / 60.0) / plan_size * 100.0
    reading = make_window(NAME, 100.0 - used_percent, now + (window - elapsed), now)
    return quota_from_windows([reading])


def fetch(*, url: str, credential: str, client: httpx.Client) -> Any:
    """Return the config held in the credential; no HTTP (url and client are unused)."""
    try:
        config = json.loads(credential.strip() or "{}")
    except (ValueError, RecursionError):
        raise invalid_credential(NAME, "is not a JSON config") from None
    if not isinstance(config, dict):
        raise invalid_credential(NAME, "must be a JSON object")
    return config


ADAPTER = Adapter(
    name=NAME,
    default_url=DEFAULT_URL,
    fetch=fetch,
    parse=parse,
    credential_keys=frozenset(DEFAULT_CONFIG),
)
