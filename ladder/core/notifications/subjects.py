"""Notifications' vocabulary, pure: the kinds, the subjects and their states, what the
rules observe, what was last notified and the transitions to notify (the rules
themselves are in `rules.py`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Any, Final

# --------------------------------------------------------------------------- kinds


class Kind(StrEnum):
    """What a notification is about; a webhook subscribes to some of these."""

    PLAN_EXHAUSTED = "plan_exhausted"
    PLAN_BACK = "plan_back"
    BUDGET_CROSSED = "budget_crossed"
    READINGS_STALE = "readings_stale"
    READINGS_FRESH = "readings_fresh"
    CREDENTIAL_REJECTED = "credential_rejected"
    SUBSCRIPTION_EMPTY = "subscription_empty"
    SUBSCRIPTION_BACK = "subscription_back"
    PLAN_LOW = "plan_low"
    STARTED_METERING = "started_metering"
    TEST = "test"

    @property
    def headline(self) -> str:
        """A short human title, the first line of every body."""
        return _TITLES[self]


_TITLES: Final = {
    Kind.PLAN_EXHAUSTED: "Plan connection dropped out",
    Kind.PLAN_BACK: "Plan connection is back",
    Kind.BUDGET_CROSSED: "Paid rung budget threshold crossed",
    Kind.READINGS_STALE: "Quota readings are stale",
    Kind.READINGS_FRESH: "Quota readings are fresh again",
    Kind.CREDENTIAL_REJECTED: "Credential rejected",
    Kind.SUBSCRIPTION_EMPTY: "auto/subscription is empty",
    Kind.SUBSCRIPTION_BACK: "auto/subscription has usable connections again",
    Kind.PLAN_LOW: "Plan connection forecast to run out before its reset",
    Kind.STARTED_METERING: "Plan connection can bill past its limit",
    Kind.TEST: "Test notification",
}
# The kinds the rules produce (a webhook may subscribe to these; TEST is always sent).
SUBSCRIBABLE_KINDS: Final = tuple(kind for kind in Kind if kind is not Kind.TEST)

THRESHOLDS: Final = (50, 80, 100)

READINGS: Final = "readings"
SUBSCRIPTION: Final = "subscription"
PLAN_PREFIX: Final = "plan:"
CREDENTIAL_PREFIX: Final = "credential:"
METERING_PREFIX: Final = "metering:"
CAN_METER, HARD_STOP = "can_meter", "hard_stop"
BUDGET_PREFIX: Final = "budget:"
LOW_PREFIX: Final = "low:"

FRESH, STALE = "fresh", "stale"
NON_EMPTY, EMPTY_PENDING, EMPTY = "non_empty", "empty_pending", "empty"
IN_PLAY, DROPPED_OUT = "in_play", "dropped_out"
OK, REJECTED = "ok", "rejected"
LOW = "low"

# --------------------------------------------------------------------------- observations


@dataclass(frozen=True, slots=True)
class PlanObservation:
    """One active plan (billing `subscription`) connection's hysteresis state."""

    connection_id: str
    is_dropped_out: bool
    since: datetime | None
    reason: str
    # The reset of its current reading's window: when a dropped-out plan comes back.
    reset_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class CredentialObservation:
    """An active connection whose usage endpoint refused its credential."""

    connection_id: str
    message: str


@dataclass(frozen=True, slots=True)
class BudgetObservation:
    """One paid rung's spend against its budget in the current window."""

    rung: str
    spent_usd: Decimal
    budget_usd: Decimal | None
    budget_window: str
    window_start: datetime
    window_end: datetime


@dataclass(frozen=True, slots=True)
class ForecastObservation:
    """One active plan connection's forecast (ladder/core/forecast.py) with a run-out
    instant: its sentence and basis, and the paid spend expected until its reset."""

    connection_id: str
    runs_out_at: datetime
    reset_at: datetime | None
    before_reset: bool | None
    has_run_out: bool
    paid_until_reset_usd: Decimal | None
    paid_by_rung: Mapping[str, Decimal]
    basis: str
    sentence: str
    # The model scope whose window this forecasts (None: the connection's binding window).
    model_scope: str | None = None


@dataclass(frozen=True, slots=True)
class MeteringObservation:
    """One active plan connection and whether its newest billing evidence says it can
    bill past its limit, with that evidence."""

    connection_id: str
    can_meter: bool
    detail: str
    source: str
    seen_at: datetime | None


@dataclass(frozen=True, slots=True)
class Observation:
    """Everything the rules look at, observed at `now`."""

    now: datetime
    newest_polled_reading_at: datetime | None = None
    max_state_age_seconds: int = 180
    subscription_is_empty: bool = False
    # Distinct excluded connections of auto/subscription per reason, for the message.
    subscription_reasons: Mapping[str, int] = field(default_factory=dict)
    subscription_empty_after: timedelta = timedelta(minutes=5)
    plans: Sequence[PlanObservation] = ()
    rejected_credentials: Sequence[CredentialObservation] = ()
    budgets: Sequence[BudgetObservation] = ()
    forecasts: Sequence[ForecastObservation] = ()
    metering: Sequence[MeteringObservation] = ()


@dataclass(frozen=True, slots=True)
class Notified:
    """What was last notified about one subject. `sequence` counts the transitions
    notified so far; (subject, sequence) names each transition, so two evaluators that
    start from the same state name the same transition the same way."""

    status: str
    since: datetime | None = None
    sequence: int = 0
    scope: str = ""


@dataclass(frozen=True, slots=True)
class Transition:
    """One change to notify."""

    kind: Kind
    subject: str
    sequence: int
    at: datetime
    summary: str
    details: Mapping[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """The transition's stable name: the same for every webhook and every retry."""
        return f"{self.subject}#{self.sequence}"


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The transitions to notify, in a fixed order, and the subjects whose stored state
    changes (with or without a notification)."""

    transitions: tuple[Transition, ...]
    changes: Mapping[str, Notified]


def iso(moment: datetime | None) -> str | None:
    """An instant as bodies carry it: ISO 8601 in UTC (None stays None)."""
    return moment.astimezone(UTC).isoformat() if moment is not None else None
