"""Quota rules: windows reduced to one reading, staleness, which reading is current,
hysteresis, and the quota cause of one connection."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Final, Protocol, TypeVar

from ladder.core.prose import duration_text, instant_text, number_text, percent_text
from ladder.core.types import (
    UNVERIFIED_QUOTA_REASONS,
    Cause,
    Hysteresis,
    HysteresisState,
    LadderConfig,
    QuotaStatus,
    Reading,
    Reason,
    Staleness,
)

_EXHAUSTED: Final = QuotaStatus.EXHAUSTED
_UNKNOWN: Final = QuotaStatus.UNKNOWN
_DROPPED_OUT: Final = HysteresisState.DROPPED_OUT
_RESET_PASSED: Final = Staleness.RESET_PASSED
_TOO_OLD: Final = Staleness.TOO_OLD

# --------------------------------------------------------------------------- windows


class QuotaWindow(Protocol):
    """What the binding-window rule reads of a window."""

    @property
    def remaining_percent(self) -> float | None: ...

    @property
    def reset_at(self) -> datetime | None: ...


W = TypeVar("W", bound=QuotaWindow)


def _resets_later(candidate: datetime | None, current: datetime | None) -> bool:
    """True when candidate is the later reset; a known reset counts as later than none."""
    # Ties go to the later reset because the connection is back only when every tied
    # window has refilled; a known reset beats an unknown one so the reading keeps one.
    if candidate is None:
        return False
    return current is None or candidate > current


def binding_reading(windows: Iterable[W]) -> W | None:
    """Return the binding window of the whole connection (lowest remaining; ties: later
    reset) among the unscoped windows, or None. A window scoped to a model binds only
    that model's candidates (ladder/core/scopes.py), never the connection's reading."""
    binding: W | None = None
    binding_remaining = 0.0
    for window in windows:
        if getattr(window, "model_scope", None) is not None:
            continue
        remaining = window.remaining_percent
        if remaining is None:
            continue
        if (
            binding is None
            or remaining < binding_remaining
            or (remaining == binding_remaining and _resets_later(window.reset_at, binding.reset_at))
        ):
            binding, binding_remaining = window, remaining
    return binding


def binding_window(windows: Iterable[QuotaWindow]) -> tuple[float | None, datetime | None]:
    """Return (remaining percent, reset) of the binding window, or (None, None)."""
    binding = binding_reading(windows)
    if binding is None:
        return None, None
    return binding.remaining_percent, binding.reset_at


def derive_status(remaining_percent: float | None) -> QuotaStatus:
    """UNKNOWN without a number, EXHAUSTED at or below zero, else SAFE."""
    if remaining_percent is None:
        return QuotaStatus.UNKNOWN
    if remaining_percent <= 0:
        return QuotaStatus.EXHAUSTED
    return QuotaStatus.SAFE


# --------------------------------------------------------------------------- readings


def reading_staleness(reading: Reading, config: LadderConfig, now: datetime) -> Staleness | None:
    """Why a reading is not current (None when it is); a passed reset wins over age."""
    return _staleness(reading, now, timedelta(seconds=config.max_state_age_seconds))


def _staleness(reading: Reading, now: datetime, max_age: timedelta) -> Staleness | None:
    reset_at = reading.reset_at
    if reset_at is not None:
        if reset_at <= now:
            # The window it describes no longer exists: stale regardless of age.
            return _RESET_PASSED
        if reading.status == _EXHAUSTED:
            # Deliberately: the upstream itself said when it comes back, so an EXHAUSTED
            # reading stays current until that reset whatever its age (this spares a
            # re-probe of a dead account every few minutes).
            return None
    if now - reading.checked_at > max_age:
        return _TOO_OLD
    return None


def refresh_expected_at(
    reading: Reading, config: LadderConfig, now: datetime, max_age: timedelta
) -> datetime | None:
    """When the refresh already due for a reading that is not current is expected (None
    for a current reading): its reset-time refresh, `reset_grace_seconds` after a passed
    reset, or, once that instant is behind us (or for a reading that went stale), the
    next beat tick counted from it: `due + k * beat_seconds`, the first one after `now`.
    So it is at most one beat period from now, and it is the same instant for every
    `now` in one tick: a decision's `next_change_at` (and its tag) holds for a whole
    beat period; `inputs_valid_until` ends the decision's validity at that tick."""
    staleness = _staleness(reading, now, max_age)
    if staleness is None:
        return None
    if staleness is _RESET_PASSED and reading.reset_at is not None:
        due = reading.reset_at + timedelta(seconds=config.reset_grace_seconds)
    else:
        due = reading.checked_at + max_age
    if due > now:
        return due
    beat = timedelta(seconds=config.beat_seconds)
    return due + ((now - due) // beat + 1) * beat


def is_reading_current(reading: Reading, config: LadderConfig, now: datetime) -> bool:
    """True unless the reading is too old or its own reset has passed (see `reading_staleness`)."""
    return reading_staleness(reading, config, now) is None


def exhausted_reading(reset_at: datetime | None, now: datetime) -> Reading:
    """The reading stored by a `quota_exhausted` event: EXHAUSTED, 0 % left, until reset_at."""
    return Reading(QuotaStatus.EXHAUSTED, 0.0, reset_at, now)


def stored_checked_at(claimed: datetime | None, received: datetime) -> datetime:
    """The checked_at a reading is stored with: as claimed (default: when it was
    received), never after it was received."""
    # A reading never describes the future (ladder.md "Quota usability"): one stamped
    # ahead by a gateway whose clock runs fast would otherwise stay "latest" and hide
    # every reading received after it, an exhaustion report included.
    if claimed is None or claimed > received:
        return received
    return claimed


# Clocks differ by up to this much (api.md "Events from the gateway"): two truths observed
# less than this apart are in no certain order.
CLOCK_SKEW: Final = timedelta(seconds=60)


def outranks(
    observed_at: datetime,
    safe: bool,
    other_observed_at: datetime,
    other_safe: bool,
    *,
    ends: datetime | None = None,
    other_ends: datetime | None = None,
) -> bool:
    """Whether a truth observed at `observed_at` outranks one observed at
    `other_observed_at`. `safe` is False for a truth that takes capacity away (an
    exhaustion, a failure and its cooldown, "can meter"), True for any other (a reading
    that is not EXHAUSTED, a success, hard-stop evidence). `ends`: when what an unsafe
    truth says is over by its own word (an exhaustion's reset, a cooldown's end)."""
    # api.md: two truths less than CLOCK_SKEW apart are in no certain order, and between
    # them the less safe one wins, whichever arrived first; a safe truth outranks an
    # unsafe one only when it is at least CLOCK_SKEW newer, or observed once the unsafe
    # one's own reset (or its cooldown's end) had come. In reverse, an unsafe truth
    # observed before a safe one still wins within the bound, unless the safe one was
    # observed after the unsafe one's reset (a new window). Otherwise the newer wins,
    # ties to the one received later.
    if safe and not other_safe:
        return observed_at >= other_observed_at + CLOCK_SKEW or (
            other_ends is not None and observed_at >= other_ends
        )
    if other_safe and not safe:
        if ends is not None and other_observed_at >= ends:
            return False
        return observed_at > other_observed_at - CLOCK_SKEW
    return observed_at >= other_observed_at


def supersedes(reading: Reading, current: Reading | None, received: datetime) -> bool:
    """Whether `reading`, received at `received` (its checked_at already capped there),
    replaces the `current` reading (None when there is none)."""
    # The current reading is the one with the latest checked_at, ties to the one received
    # later (api.md "Quota readings"), except that between two readings less than
    # CLOCK_SKEW apart the less safe one wins (`outranks`). Every checked_at is capped at
    # its receive time (`stored_checked_at`), so no reading can outrank the ones received
    # after it by claiming a later instant. One exception, the decision for rows stored in
    # the future: a current reading dated ahead of `received` was stored so by code
    # before the cap, or by a web process whose clock runs ahead. When it was received is
    # unknown, only that it was before this reading, so it cannot be proven newer: it is
    # ordered by receipt, and replaced.
    if current is None or current.checked_at > received:
        return True
    # An UNKNOWN reading counts as safe here: it cannot hide an exhaustion observed
    # within the bound, and it does not lift the hysteresis either way.
    return outranks(
        reading.checked_at,
        reading.status is not _EXHAUSTED,
        current.checked_at,
        current.status is not _EXHAUSTED,
        ends=reading.reset_at,
        other_ends=current.reset_at,
    )


def hysteresis_after(previous: Hysteresis, reading: Reading, config: LadderConfig) -> Hysteresis:
    """The hysteresis state once `reading` is stored; `previous` itself when nothing flips."""
    floor = config.reentry_floor
    if reading.status == QuotaStatus.EXHAUSTED:
        # Any EXHAUSTED reading drops the connection out, whatever its remaining percent.
        if previous.state == HysteresisState.DROPPED_OUT:
            return previous
        left = (
            ""
            if reading.remaining_percent is None
            else f", {percent_text(reading.remaining_percent)} % left"
        )
        return Hysteresis(
            HysteresisState.DROPPED_OUT,
            reading.checked_at,
            f"Upstream reported EXHAUSTED{left}; re-entry needs more than {number_text(floor)} %",
        )
    remaining = reading.remaining_percent
    if remaining is None or reading.status == QuotaStatus.UNKNOWN:
        # Unknown remaining quota (an absent percent, or status UNKNOWN) says nothing
        # about the band: the state does not change.
        return previous
    if previous.state == HysteresisState.IN_PLAY:
        if remaining <= config.exit_cutoff_percent:
            return Hysteresis(
                HysteresisState.DROPPED_OUT,
                reading.checked_at,
                f"{percent_text(remaining, beside=config.exit_cutoff_percent)} % left, "
                f"at or below the exit cutoff of {number_text(config.exit_cutoff_percent)} %",
            )
        return previous
    if remaining > floor:
        return Hysteresis(
            HysteresisState.IN_PLAY,
            reading.checked_at,
            f"{percent_text(remaining, beside=floor)} % left, "
            f"above the re-entry floor of {number_text(floor)} %",
        )
    return previous


def quota_cause(
    reading: Reading | None, hysteresis: Hysteresis, config: LadderConfig, now: datetime
) -> Cause | None:
    """Why a connection's quota is not verified usable now; None when it is."""
    return quota_cause_within(
        reading, hysteresis, config, now, timedelta(seconds=config.max_state_age_seconds)
    )


def is_quota_usable(
    reading: Reading | None,
    hysteresis: Hysteresis,
    config: LadderConfig,
    now: datetime,
    *,
    admit_unknown: bool,
) -> bool:
    """Quota usability of one connection; unknown quota passes only when admitted (thrifty)."""
    cause = quota_cause(reading, hysteresis, config, now)
    return cause is None or (admit_unknown and cause.reason in UNVERIFIED_QUOTA_REASONS)


_NEVER_READ_CAUSE: Final = Cause(Reason.QUOTA_UNKNOWN, "Never read: its quota is unknown", None)


def quota_cause_within(
    reading: Reading | None,
    hysteresis: Hysteresis,
    config: LadderConfig,
    now: datetime,
    max_age: timedelta,
) -> Cause | None:
    # The order is api.md's, with ladder.md's refinement that a current EXHAUSTED
    # reading is exhausted even when its remaining percent is unknown.
    if reading is None:
        return _NEVER_READ_CAUSE
    reset_at = reading.reset_at
    staleness = _staleness(reading, now, max_age)
    if staleness is _RESET_PASSED and reset_at is not None:
        return Cause(
            Reason.RESET_PASSED,
            f"The reading's reset at {instant_text(reset_at)} has passed: the window it "
            "describes is over and a refresh is due",
            refresh_expected_at(reading, config, now, max_age),
        )
    if staleness is _TOO_OLD:
        return Cause(
            Reason.QUOTA_STALE,
            f"The reading is {duration_text((now - reading.checked_at).total_seconds())} s old, "
            f"older than the {number_text(config.max_state_age_seconds)} s maximum",
            refresh_expected_at(reading, config, now, max_age),
        )
    # Past this point reset_at is either absent or in the future.
    remaining = reading.remaining_percent
    status = reading.status
    if status == _EXHAUSTED:
        left = "" if remaining is None else f" with {percent_text(remaining)} % left"
        until = "" if reset_at is None else f", until its reset at {instant_text(reset_at)}"
        return Cause(Reason.QUOTA_EXHAUSTED, f"Upstream reports EXHAUSTED{left}{until}", reset_at)
    if remaining is None:
        return Cause(Reason.QUOTA_UNKNOWN, "The reading does not say how much quota is left", None)
    if status == _UNKNOWN:
        return Cause(
            Reason.QUOTA_UNKNOWN,
            f"The reading's status is UNKNOWN ({percent_text(remaining)} % reported left)",
            None,
        )
    cutoff = config.exit_cutoff_percent
    if remaining <= cutoff:
        return Cause(
            Reason.QUOTA_EXHAUSTED,
            f"{percent_text(remaining, beside=cutoff)} % left, at or below the exit cutoff of "
            f"{number_text(cutoff)} %",
            reset_at,
        )
    if hysteresis.state == _DROPPED_OUT:
        floor = config.reentry_floor
        if remaining <= floor:
            return Cause(
                Reason.BELOW_REENTRY,
                f"{percent_text(remaining, beside=floor)} % left, "
                f"re-entry needs more than {number_text(floor)} %",
                reset_at,
            )
    return None
