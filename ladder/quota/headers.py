"""Pure reading of the rate-limit headers a gateway forwards with an event.

Understood (names are case-insensitive; garbage values are ignored, never raised on):

- ``retry-after`` (delay seconds or an HTTP date) and ``retry-after-ms`` (preferred when
  both are sent, being the more precise);
- Anthropic's unified limiter: ``anthropic-ratelimit-unified-status`` ("allowed",
  "allowed_warning", "rejected") with ``-unified-reset`` (epoch seconds), and per window
  ``-5h-utilization`` / ``-7d-utilization`` (fraction USED, 0..1), ``-5h-reset`` /
  ``-7d-reset`` (epoch seconds) and ``-5h-status`` / ``-7d-status``; the windows are named
  ``five_hour`` and ``seven_day`` like the Claude usage payload's;
- Anthropic's per-model weekly limit: ``-7d_oi-utilization`` / ``-7d_oi-reset`` /
  ``-7d_oi-status``, a window named ``seven_day_oi`` scoped to the model of the request
  the event reports (unscoped when the event names none: it then binds the connection);
- billing evidence (spec/ladder.md, "Billing evidence from the wire"):
  ``anthropic-ratelimit-unified-overage-in-use: true`` or ``-overage-status: allowed`` /
  ``allowed_warning`` "can meter", ``-overage-status: rejected`` / ``org_level_disabled``
  "hard stop" (``-overage-disabled-reason`` is quoted with it);
  ``x-codex-credits-has-credits: true`` or ``x-codex-credits-unlimited: true`` "can
  meter", ``x-codex-credits-has-credits: false`` "hard stop";
- Codex: ``x-codex-primary-used-percent`` / ``x-codex-secondary-used-percent`` with
  ``...-reset-at`` (epoch seconds, preferred) or ``...-reset-after-seconds``; windows
  ``primary`` and ``secondary`` like the Codex usage payload's;
- OpenAI style: ``x-ratelimit-reset-requests`` / ``x-ratelimit-reset-tokens`` (durations
  such as "1s", "6m0s", "20ms", "1h2m3.5s", or plain seconds) with
  ``x-ratelimit-remaining-*`` and ``x-ratelimit-limit-*`` when sent; windows ``requests``
  and ``tokens``.

A limit indicates exhaustion when its window has nothing left, its own status is
"rejected", or its remaining count is zero. ``reset_at`` is chosen, deliberately, as:

1. for a unified status "rejected", the unified reset (Anthropic's own statement of when
   requests are allowed again);
2. otherwise the LATEST reset among the limits that indicate exhaustion, because the
   connection is usable again only once every exhausted limit has refilled (the earliest
   would clamp a cooldown too short and the retry would meet the same 429);
3. otherwise None: a reset that no exhausted limit vouches for is not used, since it
   would only shorten a cooldown on a guess.

When every exhausted limit is scoped to the event's model (``scoped_exhaustion``), the
rejection cools only (connection, that model); any other exhaustion cools the connection.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from ladder.core.scopes import normalise_scope
from ladder.core.types import OverageEvidence, WindowReading

from .base import evidence, make_window
from .values import (
    parse_decimal,
    parse_duration,
    parse_epoch_text,
    parse_retry_after,
    seconds_from_now,
)

_UNIFIED = "anthropic-ratelimit-unified"
_ANTHROPIC_WINDOWS = (("5h", "five_hour"), ("7d", "seven_day"), ("7d_oi", "seven_day_oi"))
_SCOPED_TAGS = frozenset({"7d_oi"})
_OVERAGE_CAN_METER = frozenset({"allowed", "allowed_warning"})
_OVERAGE_HARD_STOP = frozenset({"rejected", "org_level_disabled"})
_CODEX_WINDOWS = ("primary", "secondary")
_OPENAI_LIMITS = ("requests", "tokens")
_REJECTED = "rejected"


@dataclass(frozen=True, slots=True)
class HeaderInfo:
    """What a response's rate-limit headers say about cooldown, reset and remaining quota."""

    retry_after_seconds: float | None
    reset_at: datetime | None
    windows: tuple[WindowReading, ...]
    is_exhausted: bool
    evidence: OverageEvidence | None = None
    # The model scope when every exhausted limit is scoped to it (cools that scope only).
    scoped_exhaustion: str | None = None


@dataclass(frozen=True, slots=True)
class _Limit:
    window: WindowReading
    is_exhausted: bool


def _lowered(headers: Mapping[str, str]) -> dict[str, str]:
    lowered: dict[str, str] = {}
    for name, value in headers.items():
        # A forwarded header map is untrusted input; skip anything that is not text.
        if isinstance(name, str) and isinstance(value, str):
            lowered[name.strip().lower()] = value.strip()
    return lowered


def _retry_after(headers: Mapping[str, str], now: datetime) -> float | None:
    milliseconds = parse_decimal(headers.get("retry-after-ms", ""))
    if milliseconds is not None:
        return milliseconds / 1000.0
    value = headers.get("retry-after")
    return None if value is None else parse_retry_after(value, now)


def _has_nothing_left(window: WindowReading) -> bool:
    return window.remaining_percent is not None and window.remaining_percent <= 0


def _anthropic_limits(headers: Mapping[str, str], now: datetime, scope: str | None) -> list[_Limit]:
    limits = []
    for tag, name in _ANTHROPIC_WINDOWS:
        prefix = f"{_UNIFIED}-{tag}"
        utilization = parse_decimal(headers.get(f"{prefix}-utilization", ""))
        reset_at = parse_epoch_text(headers.get(f"{prefix}-reset", ""))
        status = headers.get(f"{prefix}-status", "").lower()
        if utilization is None and reset_at is None and not status:
            continue
        remaining = None if utilization is None else 100.0 - utilization * 100.0
        model_scope = scope if tag in _SCOPED_TAGS else None
        window = make_window(name, remaining, reset_at, now, model_scope=model_scope)
        limits.append(_Limit(window, status == _REJECTED or _has_nothing_left(window)))
    return limits


def _codex_limits(headers: Mapping[str, str], now: datetime) -> list[_Limit]:
    limits = []
    for name in _CODEX_WINDOWS:
        prefix = f"x-codex-{name}"
        used = parse_decimal(headers.get(f"{prefix}-used-percent", ""))
        reset_at = parse_epoch_text(headers.get(f"{prefix}-reset-at", ""))
        if reset_at is None:
            after = parse_decimal(headers.get(f"{prefix}-reset-after-seconds", ""))
            reset_at = None if after is None else seconds_from_now(now, after)
        if used is None and reset_at is None:
            continue
        window = make_window(name, None if used is None else 100.0 - used, reset_at, now)
        limits.append(_Limit(window, _has_nothing_left(window)))
    return limits


def _openai_limits(headers: Mapping[str, str], now: datetime) -> list[_Limit]:
    limits = []
    for name in _OPENAI_LIMITS:
        duration = parse_duration(headers.get(f"x-ratelimit-reset-{name}", ""))
        reset_at = None if duration is None else seconds_from_now(now, duration)
        remaining = parse_decimal(headers.get(f"x-ratelimit-remaining-{name}", ""))
        limit = parse_decimal(headers.get(f"x-ratelimit-limit-{name}", ""))
        if reset_at is None and remaining is None:
            continue
        percent = None
        if remaining is not None and limit is not None and limit > 0:
            percent = remaining / limit * 100.0
        window = make_window(name, percent, reset_at, now)
        limits.append(_Limit(window, remaining is not None and remaining <= 0))
    return limits


def _is_true(value: str | None) -> bool:
    return value is not None and value.lower() == "true"


def _evidence(headers: Mapping[str, str]) -> OverageEvidence | None:
    """What the response says about billing past the plan's limit; None: nothing."""
    if _is_true(headers.get(f"{_UNIFIED}-overage-in-use")):
        return evidence(True, f"the response said {_UNIFIED}-overage-in-use: true")
    status = headers.get(f"{_UNIFIED}-overage-status", "").lower()
    if status in _OVERAGE_CAN_METER:
        return evidence(True, f"the response said {_UNIFIED}-overage-status: {status}")
    if _is_true(headers.get("x-codex-credits-unlimited")):
        return evidence(True, "the response said x-codex-credits-unlimited: true")
    has_credits = headers.get("x-codex-credits-has-credits", "").lower()
    if has_credits == "true":
        return evidence(True, "the response said x-codex-credits-has-credits: true")
    if status in _OVERAGE_HARD_STOP:
        reason = headers.get(f"{_UNIFIED}-overage-disabled-reason", "")[:100]
        because = f" ({reason})" if reason else ""
        return evidence(False, f"the response said {_UNIFIED}-overage-status: {status}{because}")
    if has_credits == "false":
        return evidence(False, "the response said x-codex-credits-has-credits: false")
    return None


def parse_rate_limit_headers(
    headers: Mapping[str, str], now: datetime, model: str | None = None
) -> HeaderInfo:
    """Read retry delay, reset instant, windows, exhaustion and billing evidence from
    rate-limit headers; `model`: the model of the request (scopes the per-model limit)."""
    lowered = _lowered(headers)
    scope = None if model is None or not model.strip() else normalise_scope(model)
    limits = [
        *_anthropic_limits(lowered, now, scope),
        *_codex_limits(lowered, now),
        *_openai_limits(lowered, now),
    ]
    is_rejected = lowered.get(f"{_UNIFIED}-status", "").lower() == _REJECTED
    exhausted_resets = [
        limit.window.reset_at
        for limit in limits
        if limit.is_exhausted and limit.window.reset_at is not None
    ]
    reset_at = max(exhausted_resets, default=None)
    exhausted = [limit for limit in limits if limit.is_exhausted]
    scoped_exhaustion = None
    if exhausted and all(limit.window.model_scope is not None for limit in exhausted):
        # Only the per-model limit rejected: the unified status says so too, for this
        # model; the connection's other models are not exhausted.
        scoped_exhaustion = exhausted[0].window.model_scope
    elif is_rejected:
        reset_at = parse_epoch_text(lowered.get(f"{_UNIFIED}-reset", "")) or reset_at
    return HeaderInfo(
        retry_after_seconds=_retry_after(lowered, now),
        reset_at=reset_at,
        windows=tuple(limit.window for limit in limits),
        is_exhausted=is_rejected or bool(exhausted),
        evidence=_evidence(lowered),
        scoped_exhaustion=scoped_exhaustion,
    )
