"""Pure, lenient parsers for the small values providers send: instants, durations, delays.

Every function here returns None for a value it cannot read and never raises: callers
decide whether an unreadable value is an error (a usage payload) or noise to ignore
(a response header). All returned instants are timezone-aware UTC.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime

# Headers carry plain non-negative decimals; signs, exponents and "nan" are garbage.
_DECIMAL = re.compile(r"\d+(?:\.\d+)?")
# Go's time.Duration.String() format, as sent by OpenAI-style x-ratelimit-reset-* headers.
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:h|m|s|ms|us|µs|ns))+")
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|us|µs|ns|h|m|s)")
_UNIT_SECONDS = {
    "h": 3600.0,
    "m": 60.0,
    "s": 1.0,
    "ms": 1e-3,
    "us": 1e-6,
    "µs": 1e-6,
    "ns": 1e-9,
}


def as_utc(moment: datetime) -> datetime:
    """Return the instant in UTC, reading a naive datetime as UTC."""
    if moment.tzinfo is None:
        return moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def parse_decimal(text: str) -> float | None:
    """Read a plain non-negative decimal such as "12" or "0.75"."""
    text = text.strip()
    if not _DECIMAL.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def epoch_to_datetime(seconds: float) -> datetime | None:
    """Convert Unix epoch seconds to a UTC instant, or None when out of range."""
    if not math.isfinite(seconds):
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def parse_epoch_text(text: str) -> datetime | None:
    """Read epoch seconds written as text, as in reset headers."""
    seconds = parse_decimal(text)
    return None if seconds is None else epoch_to_datetime(seconds)


def parse_iso_instant(text: str) -> datetime | None:
    """Read an ISO 8601 instant or a bare date (midnight UTC); naive values count as UTC."""
    text = text.strip()
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    # fromisoformat also accepts a bare date; it then means the start of that day in UTC.
    return as_utc(moment)


def parse_http_date(text: str) -> datetime | None:
    """Read an RFC 9110 HTTP date such as "Sun, 29 Nov 2026 12:02:00 GMT"."""
    try:
        moment = parsedate_to_datetime(text.strip())
    except (TypeError, ValueError, IndexError):
        return None
    return as_utc(moment)


def parse_duration(text: str) -> float | None:
    """Read a Go-style duration ("6m0s", "20ms", "1h2m3.5s") or plain seconds, in seconds."""
    text = text.strip()
    plain = parse_decimal(text)
    if plain is not None:
        return plain
    if not _DURATION.fullmatch(text):
        return None
    total = sum(
        float(amount) * _UNIT_SECONDS[unit] for amount, unit in _DURATION_PART.findall(text)
    )
    return total if math.isfinite(total) else None


def parse_retry_after(text: str, now: datetime) -> float | None:
    """Read a Retry-After value (delay seconds or an HTTP date) as seconds from now, never < 0."""
    seconds = parse_decimal(text)
    if seconds is not None:
        return seconds
    moment = parse_http_date(text)
    if moment is None:
        return None
    # A date already past means "retry now", not a negative delay.
    return max(0.0, (moment - now).total_seconds())


def seconds_from_now(now: datetime, seconds: float) -> datetime | None:
    """Return now + seconds, or None when the sum leaves the datetime range."""
    if not math.isfinite(seconds):
        return None
    try:
        return now + timedelta(seconds=seconds)
    except OverflowError:
        return None
