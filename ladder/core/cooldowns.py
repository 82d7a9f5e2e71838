"""Cooldowns: what a gateway event writes, backed off, clamped to the upstream's reset."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from typing import Final

from ladder.core.quota import outranks
from ladder.core.types import CooldownChange, EventKind, LadderConfig


def backoff_seconds(consecutive_failures: int, config: LadderConfig) -> float:
    """Cooldown of the n-th consecutive failure: min(base * 2^(n-1), max), no jitter."""
    if consecutive_failures < 1:
        raise ValueError(f"consecutive_failures must be >= 1, got {consecutive_failures}")
    try:
        seconds = math.ldexp(config.base_cooldown_seconds, consecutive_failures - 1)
    except OverflowError:
        # Far past the cap: a long failure streak must not crash the event endpoint.
        return config.max_cooldown_seconds
    return min(seconds, config.max_cooldown_seconds)


def parse_reset_at(value: datetime | str | None) -> datetime | None:
    """An aware reset instant in UTC, or None when absent, unparseable or naive."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
    if not isinstance(value, datetime) or value.utcoffset() is None:
        return None
    return value.astimezone(UTC)


def clamp_cooldown_to_reset(
    cooldown_until: datetime, reset_at: datetime | str | None, now: datetime
) -> datetime:
    """Shorten a cooldown to the upstream's own future reset instant; never lengthen it."""
    reset = parse_reset_at(reset_at)
    # An absent, unparseable or already-past reset leaves the cooldown untouched.
    if reset is None or reset <= now or reset >= cooldown_until:
        return cooldown_until
    return reset


def event_kind(kind: str) -> EventKind:
    """The event kind named by `kind`; ValueError naming the known kinds otherwise."""
    try:
        return EventKind(kind)
    except ValueError:
        known = ", ".join(EventKind)
        raise ValueError(f"unknown event kind {kind!r}: known kinds are {known}") from None


CLEARED_COOLDOWN: Final = CooldownChange(None, 0.0, False, 0)


def apply_event(
    kind: str,
    *,
    consecutive_failures: int,
    retry_after_seconds: float | None,
    reset_at: datetime | str | None,
    config: LadderConfig,
    now: datetime,
    cooldown_until: datetime | None = None,
    observed_at: datetime | None = None,
    failure_observed_at: datetime | None = None,
    success_observed_at: datetime | None = None,
) -> CooldownChange:
    """The cooldown written by a gateway event observed at `observed_at` (default `now`,
    when it is received); a failure replaces any cooldown in force. Events apply in the
    order they were observed (api.md): a success clears only a failure it outranks (the
    one that set `cooldown_until`, observed at `failure_observed_at`), and a failure
    observed before the success that last cleared (`success_observed_at`), outranked by
    it, is stale. An event that applies not leaves the state as it is."""
    event = event_kind(kind)
    observed = observed_at or now
    held = CooldownChange(
        cooldown_until,
        max((cooldown_until - now).total_seconds(), 0.0) if cooldown_until else 0.0,
        False,
        consecutive_failures,
    )
    if event == EventKind.SUCCESS:
        if failure_observed_at is None or outranks(
            observed, True, failure_observed_at, False, other_ends=cooldown_until
        ):
            return CLEARED_COOLDOWN
        return held  # within a minute of the failure, or before it: the failure stands
    if success_observed_at is not None and not outranks(observed, False, success_observed_at, True):
        return held  # a failure a later success already cleared
    failures = max(consecutive_failures, 0) + 1
    if retry_after_seconds is not None and _is_usable_retry_after(retry_after_seconds):
        # The upstream's Retry-After is preferred and used as given: not capped.
        seconds = float(retry_after_seconds)
    else:
        seconds = backoff_seconds(failures, config)
    # Counted from its receipt, not its observation: of the two, the later end.
    cooldown_end = _seconds_after(now, seconds)
    # Applied every time a cooldown is written: the clamp comes last.
    clamped = clamp_cooldown_to_reset(cooldown_end, reset_at, now)
    return CooldownChange(
        cooldown_until=clamped,
        cooldown_seconds=(clamped - now).total_seconds(),
        clamped_to_reset=clamped < cooldown_end,
        consecutive_failures=failures,
    )


def _is_usable_retry_after(value: float) -> bool:
    # A negative or non-finite Retry-After is garbage, not an instruction: back off instead.
    return math.isfinite(value) and value >= 0


def _seconds_after(now: datetime, seconds: float) -> datetime:
    try:
        return now + timedelta(seconds=seconds)
    except OverflowError:
        return datetime.max.replace(tzinfo=UTC)
