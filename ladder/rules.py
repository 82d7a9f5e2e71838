"""Pure rules of the subscription-first ladder: rungs, quota, cooldowns, budgets, pools.

No ORM, no clock, no IO: the shell hands in plain frozen data, `now` and a frozen
`LadderConfig`, and gets plain frozen data back. All datetimes are timezone-aware UTC.

The ladder keeps no state of its own, deliberately: rung eligibility is recomputed from
current readings at every pool build, so no "currently on rung 3" record can outlive a
reset. Per-connection quota memory (hysteresis) is stored by the shell next to each
reading; `hysteresis_after` computes its transitions.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import IntEnum, StrEnum
from typing import Final, NamedTuple

from billing.classify import UNCURATED_VERDICT, Billing, BillingVerdict, Overage
from billing.tiers import DEFAULT_CHEAP_MAX_INPUT_USD_PER_MTOK, Tier
from ladder.settings_bounds import SETTINGS_BOUNDS

# --------------------------------------------------------------------------- enums


class Rung(IntEnum):
    """The five rungs, in escalation order; the value is the rung index."""

    SUBSCRIPTION = 0
    KEYLESS = 1
    FREE = 2
    CHEAP = 3
    PREMIUM = 4

    @property
    def label(self) -> str:
        """The API string of the rung ("subscription", "keyless", "free", ...)."""
        return _LABELS[self]  # precomputed: this is read for every entry of every response

    @property
    def is_quota_gated(self) -> bool:
        """True for rungs 0-2: they run out on quota, which is observable."""
        return self <= Rung.FREE

    @property
    def is_budget_gated(self) -> bool:
        """True for rungs 3-4: a paid connection serves forever, only a budget stops it."""
        return self >= Rung.CHEAP

    @classmethod
    def from_label(cls, label: str) -> Rung:
        """The rung named by its API string; ValueError for anything else."""
        try:
            return _RUNG_BY_LABEL[label]
        except KeyError:
            known = ", ".join(_RUNG_BY_LABEL)
            raise ValueError(f"unknown rung {label!r}: known rungs are {known}") from None


_RUNG_BY_LABEL: Final[dict[str, Rung]] = {rung.name.lower(): rung for rung in Rung}
_LABELS: Final[dict[Rung, str]] = {rung: label for label, rung in _RUNG_BY_LABEL.items()}
_RUNG_BY_TIER: Final[dict[str, Rung]] = {
    Tier.FREE: Rung.FREE,
    Tier.CHEAP: Rung.CHEAP,
    Tier.PREMIUM: Rung.PREMIUM,
}


class Grouping(StrEnum):
    """The two opt-in groupings: stop at the plan, or escalate one rung at a time."""

    SUBSCRIPTION = "subscription"
    THRIFTY = "thrifty"


class QuotaStatus(StrEnum):
    """What a quota reading says: headroom, none left, or not known."""

    SAFE = "SAFE"
    EXHAUSTED = "EXHAUSTED"
    UNKNOWN = "UNKNOWN"


class HysteresisState(StrEnum):
    """Whether a connection is in play or dropped out of its quota band."""

    IN_PLAY = "in_play"
    DROPPED_OUT = "dropped_out"


class Reason(StrEnum):
    """Why one (candidate, connection) pair was left out of a pool (api.md "Reason")."""

    UNCURATED = "uncurated"
    METERED = "metered"
    KEYLESS_NOT_SUBSCRIPTION = "keyless_not_subscription"
    OVERAGE_NOT_HARD_STOP = "overage_not_hard_stop"
    QUOTA_EXHAUSTED = "quota_exhausted"
    BELOW_REENTRY = "below_reentry"
    QUOTA_UNKNOWN = "quota_unknown"
    QUOTA_STALE = "quota_stale"
    RESET_PASSED = "reset_passed"
    COOLING_DOWN = "cooling_down"
    INACTIVE = "inactive"
    RUNG_DISABLED = "rung_disabled"
    BUDGET_EXHAUSTED = "budget_exhausted"

    @property
    def summary(self) -> str:
        """A generic human sentence for the reason (the exclusion's detail has the numbers)."""
        return _REASON_SUMMARY[self]


_REASON_SUMMARY: Final[dict[Reason, str]] = {
    Reason.UNCURATED: "No catalog entry covers this connection: uncurated is treated as metered",
    Reason.METERED: "The connection bills per token, outside the plan",
    Reason.KEYLESS_NOT_SUBSCRIPTION: "The keyless path is not a subscription",
    Reason.OVERAGE_NOT_HARD_STOP: "Past the plan the connection could keep billing",
    Reason.QUOTA_EXHAUSTED: "The quota is exhausted or at the exit cutoff",
    Reason.BELOW_REENTRY: "The connection dropped out and has not refilled past the re-entry floor",
    Reason.QUOTA_UNKNOWN: "No usable quota reading",
    Reason.QUOTA_STALE: "The latest quota reading is too old",
    Reason.RESET_PASSED: "The latest quota reading describes a window that has reset",
    Reason.COOLING_DOWN: "The connection is cooling down after a failure",
    Reason.INACTIVE: "The connection is marked inactive",
    Reason.RUNG_DISABLED: "The rung's budget is 0: the rung is disabled",
    Reason.BUDGET_EXHAUSTED: "The rung's budget for the current window is spent",
}

# Reasons that say "the quota could not be verified", not "the quota is gone":
# subscription excludes on them (fails closed), thrifty admits them (fails open).
UNVERIFIED_QUOTA_REASONS: Final = frozenset(
    {Reason.QUOTA_UNKNOWN, Reason.RESET_PASSED, Reason.QUOTA_STALE}
)


class BudgetWindow(StrEnum):
    """The calendar window (UTC) over which a paid rung's budget is counted."""

    DAY = "day"
    WEEK = "week"
    MONTH = "month"


class Staleness(StrEnum):
    """Why a reading is not current."""

    RESET_PASSED = "reset_passed"
    TOO_OLD = "too_old"


class EventKind(StrEnum):
    """The gateway events that write or clear a cooldown."""

    RATE_LIMITED = "rate_limited"
    QUOTA_EXHAUSTED = "quota_exhausted"
    SUCCESS = "success"
    ERROR = "error"


# --------------------------------------------------------------------------- data


@dataclass(frozen=True, slots=True)
class LadderConfig:
    """The tuning settings of the ladder, frozen; there is deliberately no `enabled` flag.

    A switch that could turn the ladder off would let `auto/subscription` quietly serve
    the whole pool, paid models included, under a name that promises the opposite.
    """

    exit_cutoff_percent: float = 2.0
    reentry_min_remaining_percent: float = 5.0
    cheap_budget_usd: Decimal | None = None
    premium_budget_usd: Decimal | None = None
    budget_window: BudgetWindow = BudgetWindow.MONTH
    max_state_age_seconds: int = 180
    base_cooldown_seconds: float = 5.0
    max_cooldown_seconds: float = 120.0
    cheap_max_input_usd_per_mtok: Decimal = DEFAULT_CHEAP_MAX_INPUT_USD_PER_MTOK

    def __post_init__(self) -> None:
        # Bad settings fail at construction, never halfway through a pool build. The
        # rules are the settings' one definition; the services read a stored row
        # outside them as its nearest legal values, so this never fails on a row.
        for name, bound in SETTINGS_BOUNDS.items():
            value = getattr(self, name)
            problem = bound.problem(value)
            if problem is not None:
                raise ValueError(f"{name}: {problem} Got {value!r}.")
        BudgetWindow(self.budget_window)  # ValueError naming a bad window

    @property
    def reentry_floor(self) -> float:
        """The re-entry threshold; a floor configured below the exit cutoff is raised to it."""
        return max(self.reentry_min_remaining_percent, self.exit_cutoff_percent)

    def budget_for(self, rung: Rung) -> Decimal | None:
        """The budget of a paid rung (None: never gated); plan-included rungs have none."""
        if rung == Rung.CHEAP:
            return self.cheap_budget_usd
        if rung == Rung.PREMIUM:
            return self.premium_budget_usd
        return None


@dataclass(frozen=True, slots=True)
class Reading:
    """One quota reading of a connection."""

    status: QuotaStatus
    remaining_percent: float | None
    reset_at: datetime | None
    checked_at: datetime


@dataclass(frozen=True, slots=True)
class Hysteresis:
    """A connection's quota memory: in play or dropped out, since when, and why."""

    state: HysteresisState
    since: datetime | None
    reason: str


# A connection never read is in play (since: none).
NEVER_READ: Final = Hysteresis(HysteresisState.IN_PLAY, None, "never read")


@dataclass(frozen=True, slots=True)
class ConnectionView:
    """Everything the ladder needs to know about one connection."""

    connection_id: str
    provider: str
    auth_type: str | None
    billing: BillingVerdict
    is_active: bool
    cooldown_until: datetime | None
    reading: Reading | None
    hysteresis: Hysteresis


@dataclass(frozen=True, slots=True)
class CandidateIn:
    """One ranked pool candidate: pinned to `connection_id`, or allowlisted."""

    id: int | None
    provider: str
    model: str
    categories: tuple[str, ...]
    connection_id: str | None
    allowed_connection_ids: tuple[str, ...] | None


@dataclass(frozen=True, slots=True)
class RungSpend:
    """The spend recorded for one paid rung in the current budget window."""

    spent_usd: Decimal
    window_end: datetime


@dataclass(frozen=True, slots=True)
class Cause:
    """Why something is unusable, with the numbers, and when it may come back (if known)."""

    reason: Reason
    detail: str
    may_return_at: datetime | None


@dataclass(frozen=True, slots=True)
class CooldownChange:
    """The cooldown written by one gateway event (the API's EventResult)."""

    cooldown_until: datetime | None
    cooldown_seconds: float
    clamped_to_reset: bool
    consecutive_failures: int


# The two values `decide` makes per (candidate, connection) pair are named tuples rather
# than frozen dataclasses: as immutable, and built several times faster (a frozen
# dataclass sets each field through object.__setattr__), which at 2,000 candidates is a
# large share of a decision.
class DecidedCandidate(NamedTuple):
    """One pool entry: pinned (`connection_id`) or allowlisted (`allowed_connection_ids`)."""

    id: int | None
    provider: str
    model: str
    rung: Rung
    connection_id: str | None
    allowed_connection_ids: tuple[str, ...] | None


class Exclusion(NamedTuple):
    """One (candidate, connection) pair left out of a pool, and why."""

    provider: str
    model: str
    connection_id: str
    rung: Rung | None
    reason: Reason
    detail: str


# --------------------------------------------------------------------------- auto ids

AUTO_PREFIX: Final = "auto/"
KNOWN_TIERS: Final[tuple[str, ...]] = tuple(grouping.value for grouping in Grouping)
# A category is a short slug; the colon is reserved as the category/tier separator.
_CATEGORY_PATTERN: Final = re.compile(r"[A-Za-z0-9._-]{1,64}")
_CATEGORY_RULE: Final = "1 to 64 of A-Z a-z 0-9 . _ -"


class InvalidAutoId(ValueError):
    """Base of the auto id parsing errors."""


class NotAnAutoId(InvalidAutoId):
    """The value is not shaped like one of this product's auto ids."""

    def __init__(self, value: str, why: str) -> None:
        self.value = value
        self.why = why
        super().__init__(
            f"{value!r} is not an auto id ({why}); expected auto/subscription, "
            "auto/thrifty or auto/<category>:<tier>"
        )


class UnknownTier(InvalidAutoId):
    """The auto id names a tier other than the known ones."""

    def __init__(self, tier: str, known: tuple[str, ...] = KNOWN_TIERS) -> None:
        self.tier = tier
        self.known = known
        super().__init__(f"unknown tier {tier!r}: known tiers are {', '.join(known)}")


@dataclass(frozen=True, slots=True)
class AutoId:
    """A parsed auto id: a grouping, optionally composed with a category."""

    grouping: Grouping
    category: str | None = None

    def __post_init__(self) -> None:
        if self.category is not None and not _CATEGORY_PATTERN.fullmatch(self.category):
            raise NotAnAutoId(
                f"{AUTO_PREFIX}{self.category}:{self.grouping}",
                f"the category must be {_CATEGORY_RULE}",
            )

    @property
    def auto_id(self) -> str:
        """The canonical string: auto/<tier> or auto/<category>:<tier>."""
        if self.category is None:
            return f"{AUTO_PREFIX}{self.grouping}"
        return f"{AUTO_PREFIX}{self.category}:{self.grouping}"

    @property
    def fail_mode(self) -> str:
        """How ambiguity is treated: subscription fails "closed", thrifty fails "open"."""
        return "closed" if self.grouping == Grouping.SUBSCRIPTION else "open"

    def __str__(self) -> str:
        return self.auto_id


SUBSCRIPTION_AUTO_ID: Final = AutoId(Grouping.SUBSCRIPTION)
THRIFTY_AUTO_ID: Final = AutoId(Grouping.THRIFTY)
# Only the flat ids are advertised; category composites are accepted, not listed.
ADVERTISED_AUTO_IDS: Final = (SUBSCRIPTION_AUTO_ID, THRIFTY_AUTO_ID)


def parse_auto_id(value: str) -> AutoId:
    """Parse auto/subscription, auto/thrifty or auto/<category>:<tier>."""
    if not value.startswith(AUTO_PREFIX):
        raise NotAnAutoId(value, f"it does not start with {AUTO_PREFIX!r}")
    rest = value[len(AUTO_PREFIX) :]
    if not rest:
        raise NotAnAutoId(value, f"nothing follows {AUTO_PREFIX!r}")
    category_text, colon, tier = rest.rpartition(":")
    category: str | None = None
    if colon:
        if not _CATEGORY_PATTERN.fullmatch(category_text):
            raise NotAnAutoId(value, f"the category must be {_CATEGORY_RULE}")
        category = category_text
    # A flat id that is not a known tier (auto/coding) is an unknown tier: the error
    # names the known tiers, which is what the caller needs to fix it.
    try:
        grouping = Grouping(tier)
    except ValueError:
        raise UnknownTier(tier) from None
    return AutoId(grouping, category)


# --------------------------------------------------------------------------- rungs

# Enum members that the per-connection code below compares against, bound once. On
# Python 3.11 reading a member through its class (`Billing.SUBSCRIPTION`) costs about
# 0.3 µs, and a decision over 2,000 candidates does tens of thousands of such reads.
_PLAN: Final = Billing.SUBSCRIPTION
_KEYLESS: Final = Billing.KEYLESS
_RUNG_PLAN: Final = Rung.SUBSCRIPTION
_RUNG_KEYLESS: Final = Rung.KEYLESS
_SUBSCRIPTION: Final = Grouping.SUBSCRIPTION
_THRIFTY: Final = Grouping.THRIFTY
_EXHAUSTED: Final = QuotaStatus.EXHAUSTED
_UNKNOWN: Final = QuotaStatus.UNKNOWN
_DROPPED_OUT: Final = HysteresisState.DROPPED_OUT
_RESET_PASSED: Final = Staleness.RESET_PASSED
_TOO_OLD: Final = Staleness.TOO_OLD
_PREMIUM_TIER: Final = Tier.PREMIUM


def connection_rung(billing: BillingVerdict) -> Rung | None:
    """The rung fixed by the connection alone; None when it depends on the model (metered)."""
    kind = billing.billing
    if kind == _PLAN:
        return _RUNG_PLAN
    if kind == _KEYLESS:
        return _RUNG_KEYLESS
    return None


def rung_for(billing: BillingVerdict, tier: Tier) -> Rung:
    """Rung of a (candidate, connection) pair: subscription, keyless, else the model's tier."""
    # Uncurated is not free: unknown billing falls through with metered, onto the tier.
    fixed = connection_rung(billing)
    return fixed if fixed is not None else _RUNG_BY_TIER[tier]


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


def is_reading_current(reading: Reading, config: LadderConfig, now: datetime) -> bool:
    """True unless the reading is too old or its own reset has passed (see `reading_staleness`)."""
    return reading_staleness(reading, config, now) is None


def status_for_remaining(remaining_percent: float | None) -> QuotaStatus:
    """The status derived when a reading is written without one (api.md "Quota readings")."""
    if remaining_percent is None:
        return QuotaStatus.UNKNOWN
    if remaining_percent <= 0:
        return QuotaStatus.EXHAUSTED
    return QuotaStatus.SAFE


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


def supersedes(
    checked_at: datetime, current_checked_at: datetime | None, received: datetime
) -> bool:
    """Whether a reading stored with `checked_at`, received at `received`, replaces the
    current reading (checked at `current_checked_at`, None when there is none)."""
    # The current reading is the one with the latest checked_at, ties to the one received
    # later (api.md "Quota readings"). Every checked_at is capped at its receive time
    # (`stored_checked_at`), so no reading can outrank the ones received after it by
    # claiming a later instant, and a server-stamped truth (a worker poll, a
    # `quota_exhausted` event, rate-limit headers, a push without checked_at) always
    # becomes current. A late reading observed before the current one stays history.
    # One exception, the decision for rows stored in the future: a current reading dated
    # ahead of `received` was stored so by code before the cap, or by a web process whose
    # clock runs ahead. When it was received is unknown, only that it was before this
    # reading, so it cannot be proven newer: it is ordered by receipt, and replaced.
    if current_checked_at is None or current_checked_at > received:
        return True
    return checked_at >= current_checked_at


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
            else f", {_percent(reading.remaining_percent)} % left"
        )
        return Hysteresis(
            HysteresisState.DROPPED_OUT,
            reading.checked_at,
            f"Upstream reported EXHAUSTED{left}; re-entry needs more than {_number(floor)} %",
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
                f"{_percent(remaining)} % left, at or below the exit cutoff of "
                f"{_number(config.exit_cutoff_percent)} %",
            )
        return previous
    if remaining > floor:
        return Hysteresis(
            HysteresisState.IN_PLAY,
            reading.checked_at,
            f"{_percent(remaining)} % left, above the re-entry floor of {_number(floor)} %",
        )
    return previous


def quota_cause(
    reading: Reading | None, hysteresis: Hysteresis, config: LadderConfig, now: datetime
) -> Cause | None:
    """Why a connection's quota is not verified usable now; None when it is."""
    return _quota_cause(
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


def _quota_cause(
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
            f"The reading's reset at {_instant(reset_at)} has passed: the window it "
            "describes is over and a refresh is due",
            None,
        )
    if staleness is _TOO_OLD:
        return Cause(
            Reason.QUOTA_STALE,
            f"The reading is {_duration((now - reading.checked_at).total_seconds())} s old, "
            f"older than the {_number(config.max_state_age_seconds)} s maximum",
            None,
        )
    # Past this point reset_at is either absent or in the future.
    remaining = reading.remaining_percent
    status = reading.status
    if status == _EXHAUSTED:
        left = "" if remaining is None else f" with {_percent(remaining)} % left"
        until = "" if reset_at is None else f", until its reset at {_instant(reset_at)}"
        return Cause(Reason.QUOTA_EXHAUSTED, f"Upstream reports EXHAUSTED{left}{until}", reset_at)
    if remaining is None:
        return Cause(Reason.QUOTA_UNKNOWN, "The reading does not say how much quota is left", None)
    if status == _UNKNOWN:
        return Cause(
            Reason.QUOTA_UNKNOWN,
            f"The reading's status is UNKNOWN ({_percent(remaining)} % reported left)",
            None,
        )
    cutoff = config.exit_cutoff_percent
    if remaining <= cutoff:
        return Cause(
            Reason.QUOTA_EXHAUSTED,
            f"{_percent(remaining)} % left, at or below the exit cutoff of {_number(cutoff)} %",
            reset_at,
        )
    if hysteresis.state == _DROPPED_OUT:
        floor = config.reentry_floor
        if remaining <= floor:
            return Cause(
                Reason.BELOW_REENTRY,
                f"{_percent(remaining)} % left, re-entry needs more than {_number(floor)} %",
                reset_at,
            )
    return None


# --------------------------------------------------------------------------- cooldowns


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


CLEARED_COOLDOWN: Final = CooldownChange(None, 0.0, False, 0)


def apply_event(
    kind: str,
    *,
    consecutive_failures: int,
    retry_after_seconds: float | None,
    reset_at: datetime | str | None,
    config: LadderConfig,
    now: datetime,
) -> CooldownChange:
    """The cooldown written by a gateway event; a failure replaces any cooldown in force."""
    try:
        event = EventKind(kind)
    except ValueError:
        known = ", ".join(EventKind)
        raise ValueError(f"unknown event kind {kind!r}: known kinds are {known}") from None
    if event == EventKind.SUCCESS:
        # A success clears the failure count and the cooldown.
        return CLEARED_COOLDOWN
    failures = max(consecutive_failures, 0) + 1
    if retry_after_seconds is not None and _is_usable_retry_after(retry_after_seconds):
        # The upstream's Retry-After is preferred and used as given: not capped.
        seconds = float(retry_after_seconds)
    else:
        seconds = backoff_seconds(failures, config)
    cooldown_until = _seconds_after(now, seconds)
    # Applied every time a cooldown is written: the clamp comes last.
    clamped = clamp_cooldown_to_reset(cooldown_until, reset_at, now)
    return CooldownChange(
        cooldown_until=clamped,
        cooldown_seconds=(clamped - now).total_seconds(),
        clamped_to_reset=clamped < cooldown_until,
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


# --------------------------------------------------------------------------- budgets


def budget_window_bounds(window: BudgetWindow, now: datetime) -> tuple[datetime, datetime]:
    """The calendar budget window (UTC) holding `now`: [start, end)."""
    midnight = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if window == BudgetWindow.DAY:
        return midnight, midnight + timedelta(days=1)
    if window == BudgetWindow.WEEK:
        monday = midnight - timedelta(days=midnight.weekday())
        return monday, monday + timedelta(days=7)
    if window == BudgetWindow.MONTH:
        first = midnight.replace(day=1)
        if first.month == 12:
            return first, first.replace(year=first.year + 1, month=1)
        return first, first.replace(month=first.month + 1)
    raise ValueError(f"unknown budget window {window!r}")


def budget_cause(
    rung: Rung, spend: RungSpend | None, config: LadderConfig, now: datetime
) -> Cause | None:
    """Why a paid rung is gated by its budget; None when it is not (or has no budget)."""
    budget = config.budget_for(rung)
    if budget is None:
        # A rung with no budget set is ordered but never gated.
        return None
    if budget == 0:
        return Cause(
            Reason.RUNG_DISABLED,
            f"The {rung.label} rung's budget is 0 USD: the rung is disabled",
            None,
        )
    spent = Decimal(0) if spend is None else spend.spent_usd
    if spent < budget:
        return None
    window_end = None if spend is None else spend.window_end
    return Cause(
        Reason.BUDGET_EXHAUSTED,
        f"The {rung.label} rung spent {_money(spent)} USD of its {_money(budget)} USD "
        f"{config.budget_window} budget; the window ends "
        f"{'at an unknown time' if window_end is None else _instant(window_end)}",
        window_end if window_end is not None and window_end > now else None,
    )


# --------------------------------------------------------------------------- decisions


# Weak-referenceable: ladder.api keeps rendered bodies by decision without keeping the
# decision itself alive.
@dataclass(frozen=True, slots=True, weakref_slot=True)
class Decision:
    """The pool of one auto id at `computed_at`: ordered entries, exclusions, next change."""

    auto_id: AutoId
    computed_at: datetime
    candidates: tuple[DecidedCandidate, ...]
    excluded: tuple[Exclusion, ...]
    next_change_at: datetime | None


def connection_cause(view: ConnectionView, grouping: Grouping, now: datetime) -> Cause | None:
    """The connection-wide reasons, in precedence order: inactive, billing, cooling down."""
    if not view.is_active:
        return Cause(Reason.INACTIVE, f"Connection {view.connection_id} is marked inactive", None)
    if grouping == _SUBSCRIPTION:
        # Only auto/subscription excludes on billing; thrifty orders every billing class.
        billing_cause = subscription_billing_cause(view)
        if billing_cause is not None:
            return billing_cause
    cooldown_until = view.cooldown_until
    if cooldown_until is not None and cooldown_until > now:
        return Cause(
            Reason.COOLING_DOWN,
            f"Cooling down until {_instant(cooldown_until)} "
            f"({_duration((cooldown_until - now).total_seconds())} s from now)",
            cooldown_until,
        )
    return None


def subscription_billing_cause(view: ConnectionView) -> Cause | None:
    """Why a connection's billing keeps it out of auto/subscription; None when it qualifies."""
    verdict = view.billing
    billing = verdict.billing
    if billing == Billing.SUBSCRIPTION:
        if verdict.overage == Overage.HARD_STOP:
            return None
        # Unknown overage counts as meters-to-paid: past the plan it could bill.
        return Cause(
            Reason.OVERAGE_NOT_HARD_STOP,
            f"Overage is {verdict.overage}, not hard-stop: past the plan it could bill "
            f"({_entry(verdict)})",
            None,
        )
    if billing == Billing.KEYLESS:
        # Deliberately: this grouping means "the plan I pay for"; keyless is thrifty's.
        return Cause(
            Reason.KEYLESS_NOT_SUBSCRIPTION,
            "The no-auth path is keyless, not a subscription: "
            "use auto/thrifty for keyless capacity",
            None,
        )
    if billing == Billing.METERED:
        return Cause(
            Reason.METERED, f"Billing is metered, outside the plan ({_entry(verdict)})", None
        )
    auth = "no auth type" if view.auth_type is None else f"auth {view.auth_type}"
    return Cause(
        Reason.UNCURATED,
        f"No catalog entry covers {view.provider} with {auth}: uncurated is treated as metered",
        None,
    )


# Per connection and decision: the rung fixed by its billing (None: the model's tier
# decides) and the cause that keeps it out on each rung (None: usable there). Computed
# once per connection per decision, because many candidates share connections.
_Verdict = tuple[Rung | None, tuple[Cause | None, ...]]
_RUNGS: Final = len(Rung)
_RUNG_OF: Final[tuple[Rung, ...]] = tuple(Rung)  # by rung number


def _connection_verdict(
    view: ConnectionView,
    grouping: Grouping,
    budget_causes: tuple[Cause | None, Cause | None],
    config: LadderConfig,
    now: datetime,
    max_age: timedelta,
) -> _Verdict:
    fixed_rung = connection_rung(view.billing)
    gate = connection_cause(view, grouping, now)
    if gate is not None:
        return fixed_rung, (gate,) * _RUNGS
    quota = _quota_cause(view.reading, view.hysteresis, config, now, max_age)
    if quota is not None and grouping == _THRIFTY and quota.reason in UNVERIFIED_QUOTA_REASONS:
        # Thrifty fails open where subscription fails closed: trying a plan connection
        # with no usable reading costs nothing; refusing it would send the request to a
        # paid rung on missing telemetry.
        quota = None
    # Rungs 0-2 run out on quota; paid rungs 3-4 never consult readings, only budgets.
    return fixed_rung, (quota, quota, quota, *budget_causes)


def _uncurated_view(connection_id: str, provider: str) -> ConnectionView:
    # What the shell synthesizes for an unregistered id; never "safe" by omission.
    return ConnectionView(
        connection_id=connection_id,
        provider=provider,
        auth_type=None,
        billing=UNCURATED_VERDICT,
        is_active=True,
        cooldown_until=None,
        reading=None,
        hysteresis=NEVER_READ,
    )


def decide(
    auto_id: AutoId,
    candidates: Sequence[CandidateIn],
    connections: Mapping[str, ConnectionView],
    tiers: Mapping[tuple[str, str], Tier],
    spend: Mapping[Rung, RungSpend],
    config: LadderConfig,
    now: datetime,
) -> Decision:
    """The verified pool of an auto id now, ordered by rung, with every exclusion and why."""
    grouping = auto_id.grouping
    category = auto_id.category
    max_age = timedelta(seconds=config.max_state_age_seconds)
    budget_causes = (
        budget_cause(Rung.CHEAP, spend.get(Rung.CHEAP), config, now),
        budget_cause(Rung.PREMIUM, spend.get(Rung.PREMIUM), config, now),
    )
    verdicts: dict[str, _Verdict] = {}
    buckets: tuple[list[DecidedCandidate], ...] = tuple([] for _ in Rung)
    excluded: list[Exclusion] = []
    next_change_at: datetime | None = None

    for candidate in candidates:
        if category is not None and category not in candidate.categories:
            continue
        provider = candidate.provider
        model = candidate.model
        pinned = candidate.connection_id
        if pinned is not None:
            # A pinned candidate keeps its connection or is dropped.
            connection_ids: Sequence[str] = (pinned,)
        else:
            connection_ids = candidate.allowed_connection_ids or ()
            if len(connection_ids) > 1 and len(set(connection_ids)) < len(connection_ids):
                # One verdict and one exclusion row per (candidate, connection).
                connection_ids = tuple(dict.fromkeys(connection_ids))
        tier_rung: Rung | None = None
        # The connections passing on each rung, by rung number (a list: enum keys hash
        # through Python code).
        passing: list[list[str] | None] = [None] * _RUNGS
        for connection_id in connection_ids:
            verdict = verdicts.get(connection_id)
            if verdict is None:
                view = connections.get(connection_id) or _uncurated_view(connection_id, provider)
                verdict = _connection_verdict(view, grouping, budget_causes, config, now, max_age)
                verdicts[connection_id] = verdict
            rung, causes = verdict
            if rung is None:
                if tier_rung is None:
                    # An unpriced model is premium: it must never land on free.
                    tier_rung = _RUNG_BY_TIER[tiers.get((provider, model), _PREMIUM_TIER)]
                rung = tier_rung
            cause = causes[rung]
            if cause is None:
                passed = passing[rung]
                if passed is None:
                    passing[rung] = [connection_id]
                else:
                    passed.append(connection_id)
                continue
            excluded.append(
                Exclusion(provider, model, connection_id, rung, cause.reason, cause.detail)
            )
            may_return_at = cause.may_return_at
            if may_return_at is not None and (
                next_change_at is None or may_return_at < next_change_at
            ):
                next_change_at = may_return_at
        # Split by rung, deliberately: a plan connection and a metered key for the same
        # model become separate entries so dispatch can never pick the paid key while the
        # plan connection is still usable. Allowlists keep exactly the passing subset, in
        # order: never the full original list, never one arbitrary member.
        # (Each rung gets at most one entry per candidate, in its own bucket, so the
        # order in which the rungs are visited here does not matter.)
        for number, connections_passed in enumerate(passing):
            if connections_passed is None:
                continue
            rung = _RUNG_OF[number]
            if pinned is not None:
                entry = DecidedCandidate(candidate.id, provider, model, rung, pinned, None)
            else:
                entry = DecidedCandidate(
                    candidate.id, provider, model, rung, None, tuple(connections_passed)
                )
            buckets[number].append(entry)

    # Ordered by rung; within a rung the incoming order stands: the gateway's scorer
    # ranks, this layer never reshuffles it. Subscription only ever fills rung 0.
    return Decision(
        auto_id=auto_id,
        computed_at=now,
        candidates=tuple(entry for bucket in buckets for entry in bucket),
        excluded=tuple(excluded),
        next_change_at=next_change_at,
    )


def usable_connections(decision: Decision) -> dict[Rung, int]:
    """How many distinct connections serve at least one entry of the decision on each
    rung (every rung present, 0 when none)."""
    usable: list[set[str]] = [set() for _ in Rung]
    for entry in decision.candidates:
        ids = usable[entry.rung]
        if entry.connection_id is not None:
            ids.add(entry.connection_id)
        else:
            ids.update(entry.allowed_connection_ids or ())
    return {rung: len(usable[rung]) for rung in Rung}


# --------------------------------------------------------------------------- prose


def _number(value: float | int | Decimal) -> str:
    # Thresholds and durations: "5", "2.5", "180" (no trailing ".0").
    number = float(value)
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    return repr(number)


def _percent(value: float) -> str:
    # A remaining percent keeps at least one decimal ("3.0 % left"), never rounds.
    return repr(float(value))


def _money(value: Decimal) -> str:
    return format(Decimal(value).normalize(), "f")


def _instant(value: datetime) -> str:
    # Operators read these: whole seconds, UTC spelled out ("2026-11-29 17:00:00 UTC").
    return f"{value.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def _duration(seconds: float) -> str:
    # Whole seconds, rounded up, so "0 s" never describes a cooldown still running.
    return str(math.ceil(seconds))


def _entry(verdict: BillingVerdict) -> str:
    if verdict.catalog_entry_id is None:
        return verdict.reason
    return f"catalog entry {verdict.catalog_entry_id}: {verdict.reason}"


# --------------------------------------------------------------------------- caching


def inputs_valid_until(
    connections: Iterable[ConnectionView],
    spend: Mapping[Rung, RungSpend],
    config: LadderConfig,
    now: datetime,
) -> datetime | None:
    """The earliest future instant at which a decision over these inputs can change on
    its own (a reading going stale, a reset, a cooldown ending, a budget window ending);
    None when nothing in them is time-dependent. Writes invalidate separately."""
    max_age = timedelta(seconds=config.max_state_age_seconds)
    instants: list[datetime] = []
    for view in connections:
        if view.cooldown_until is not None:
            instants.append(view.cooldown_until)
        reading = view.reading
        if reading is not None:
            # A reading exactly max_age old is still current: it changes just after.
            instants.append(reading.checked_at + max_age + timedelta(microseconds=1))
            if reading.reset_at is not None:
                instants.append(reading.reset_at)
    if config.cheap_budget_usd is not None or config.premium_budget_usd is not None:
        instants.extend(rung_spend.window_end for rung_spend in spend.values())
    future = [instant for instant in instants if instant > now]
    return min(future, default=None)
