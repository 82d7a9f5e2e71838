"""The core's vocabulary: enums and frozen data handed between the shell and the rules.

No ORM, no clock, no IO. All datetimes are timezone-aware UTC.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from enum import IntEnum, StrEnum
from typing import Any, Final, NamedTuple

from billing.classify import BillingVerdict
from billing.tiers import DEFAULT_CHEAP_MAX_INPUT_USD_PER_MTOK
from ladder.core.settings_bounds import SETTINGS_BOUNDS, TUNING_FIELD_NAMES

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


# Reasons that follow from what an auto id is for, not from anything gone wrong: a
# metered, keyless or uncurated connection is out of auto/subscription whatever its
# state (the candidates matrix says "out by design" and spells nothing out).
BY_DESIGN_REASONS: Final = frozenset(
    {Reason.METERED, Reason.KEYLESS_NOT_SUBSCRIPTION, Reason.UNCURATED}
)

# Reasons that hold for a whole paid rung, the same for every pair on it (its budget):
# said once, at the rung, never per candidate.
RUNG_WIDE_REASONS: Final = frozenset({Reason.BUDGET_EXHAUSTED, Reason.RUNG_DISABLED})


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
    # Deployment facts, not tuning (no setting edits them): the beat's period and the
    # delay of a reset-time refresh after its reset (QUOTA_BEAT_SECONDS and
    # QUOTA_RESET_GRACE_SECONDS), which say when a refresh already due is expected.
    beat_seconds: float = 10.0
    reset_grace_seconds: float = 1.5

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

    @classmethod
    def from_settings(cls, values: Mapping[str, Any]) -> LadderConfig:
        """The config of a full set of tuning values (ladder/core/settings_bounds.py
        declares the nine); ValueError on a value outside the rules."""
        fields: dict[str, Any] = {name: values[name] for name in TUNING_FIELD_NAMES}
        fields["budget_window"] = BudgetWindow(fields["budget_window"])
        return cls(**fields)

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


@dataclass(frozen=True, slots=True)
class WindowReading:
    """One quota window as the provider reports it (remaining percent 0..100).

    `model_scope`: the model family or id the window binds (a per-model weekly cap);
    None binds every request on the connection (spec/ladder.md, "Windows scoped to a
    model")."""

    name: str
    remaining_percent: float | None
    reset_at: datetime | None
    model_scope: str | None = None


class OverageSays(StrEnum):
    """What live billing evidence says about a plan past its limit."""

    CAN_METER = "can_meter"
    HARD_STOP = "hard_stop"


@dataclass(frozen=True, slots=True)
class OverageEvidence:
    """What the wire said about billing past the plan's limit (spec/ladder.md, "Billing
    evidence from the wire"): what, from where (`usage`, `headers` or `push`), when, and
    the field that said it."""

    says: OverageSays
    detail: str
    source: str = ""
    seen_at: datetime | None = None


# A connection never read is in play (since: none).
NEVER_READ: Final = Hysteresis(HysteresisState.IN_PLAY, None, "never read")


@dataclass(frozen=True, slots=True)
class ScopedQuota:
    """One model scope of a connection: its binding window as a reading (checked with the
    connection's reading), its own hysteresis and its own cooldown."""

    model_scope: str
    reading: Reading | None
    hysteresis: Hysteresis
    cooldown_until: datetime | None


@dataclass(frozen=True, slots=True)
class ConnectionView:
    """Everything the ladder needs to know about one connection.

    `evidence`: the newest billing evidence from the wire; `scoped`: the connection's
    model scopes; `exit_cutoff_percent` / `reentry_min_remaining_percent`: its own
    reserve (None: the settings')."""

    connection_id: str
    provider: str
    auth_type: str | None
    billing: BillingVerdict
    is_active: bool
    cooldown_until: datetime | None
    reading: Reading | None
    hysteresis: Hysteresis
    evidence: OverageEvidence | None = None
    scoped: tuple[ScopedQuota, ...] = ()
    exit_cutoff_percent: float | None = None
    reentry_min_remaining_percent: float | None = None


@dataclass(frozen=True, slots=True)
class CandidateIn:
    """One ranked pool candidate: pinned to `connection_id`, or allowlisted."""

    id: int | None
    provider: str
    model: str
    categories: tuple[str, ...]
    connection_id: str | None
    allowed_connection_ids: tuple[str, ...] | None
    # The gateway's own opaque handle (a deployment id), echoed in every entry made from it.
    ref: str | None = None

    @property
    def connection_ids(self) -> tuple[str, ...]:
        """The connections the candidate names: its pinned one, else its allowlist with
        each id once, in order."""
        pinned = self.connection_id
        if pinned is not None:
            # A pinned candidate keeps its connection or is dropped.
            return (pinned,)
        allowed = self.allowed_connection_ids
        if not allowed:
            return ()
        if len(allowed) > 1 and len(set(allowed)) < len(allowed):
            # One verdict and one exclusion row per (candidate, connection).
            return tuple(dict.fromkeys(allowed))
        return allowed


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
    ref: str | None = None

    @property
    def connection_ids(self) -> tuple[str, ...]:
        """The connections the entry may dispatch to."""
        if self.connection_id is not None:
            return (self.connection_id,)
        return self.allowed_connection_ids or ()


class Exclusion(NamedTuple):
    """One (candidate, connection) pair left out of a pool, and why."""

    provider: str
    model: str
    connection_id: str
    rung: Rung | None
    reason: Reason
    detail: str
