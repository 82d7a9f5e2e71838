"""Notifications, pure: given what was last notified about each subject and what is
observed now, the transitions to notify (one per transition, none while a state holds).
Webhook targets, bodies, signatures and the retry backoff are in `ladder/core/webhooks.py`.

No Django, no clock, no IO: the shell (`ladder/services/notifications.py`) observes, stores the
last notified state, resolves host names and sends. All datetimes are aware UTC.

Subjects and their states (the first is the baseline a never-seen subject starts in, so
a subject first seen unhealthy is notified, one first seen healthy is not):

    readings            fresh | stale
    subscription        non_empty | empty_pending (empty, not yet for long enough) | empty
    plan:<connection>   in_play | dropped_out
    credential:<conn.>  ok | rejected
    metering:<conn.>    hard_stop | can_meter (its newest billing evidence)
    budget:<rung>       0 | 50 | 80 | 100 (the highest threshold notified), scoped to one
                        budget window and one budget amount
    low:<connection>    ok | low (forecast to run out before its reset), scoped to one
                        window (its reset): once per window
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from enum import StrEnum
from typing import Any, Final

from ladder.core.forecast import SAME_WINDOW_TOLERANCE

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


# --------------------------------------------------------------------------- evaluation


def readings_stale_since(
    newest_polled_reading_at: datetime | None, max_state_age_seconds: int, now: datetime
) -> datetime | None:
    """When polled readings went stale (the newest one is older than the maximum state
    age: the worker or the broker is likely down); None while fresh or with none."""
    if newest_polled_reading_at is None:
        return None
    limit = newest_polled_reading_at + timedelta(seconds=max_state_age_seconds)
    return limit if limit < now else None


def budget_level(spent_usd: Decimal, budget_usd: Decimal) -> int:
    """The highest threshold (percent of the budget) the spend has reached; 0 for none."""
    reached = [t for t in THRESHOLDS if spent_usd * 100 >= budget_usd * t]
    return reached[-1] if reached else 0


def budget_scope(budget: BudgetObservation) -> str:
    """The budget window and amount a budget state applies to: a new window, or a new
    budget amount, starts the thresholds afresh."""
    assert budget.budget_usd is not None
    return f"{budget.window_start.isoformat()} {_decimal_text(budget.budget_usd)}"


def evaluate(previous: Mapping[str, Notified], observed: Observation) -> Evaluation:
    """The transitions between the last notified states and the observed ones, in the
    order readings, subscription, plans, forecasts, credentials, budgets."""
    run = _Run(previous)
    _readings(run, observed)
    _subscription(run, observed)
    _plans(run, observed)
    _forecasts(run, observed)
    _metering(run, observed)
    _credentials(run, observed)
    _budgets(run, observed)
    return Evaluation(tuple(run.transitions), dict(run.changes))


class _Run:
    def __init__(self, previous: Mapping[str, Notified]) -> None:
        self.previous = previous
        self.transitions: list[Transition] = []
        self.changes: dict[str, Notified] = {}

    def status(self, subject: str, baseline: str) -> Notified:
        return self.previous.get(subject) or Notified(baseline)

    def notify(
        self,
        subject: str,
        status: str,
        kind: Kind,
        at: datetime,
        summary: str,
        details: Mapping[str, Any],
        *,
        since: datetime | None = None,
        scope: str = "",
    ) -> None:
        old = self.previous.get(subject)
        sequence = (old.sequence if old else 0) + 1
        self.changes[subject] = Notified(status, since, sequence, scope)
        self.transitions.append(Transition(kind, subject, sequence, at, summary, details))

    def quietly(
        self, subject: str, status: str, *, since: datetime | None = None, scope: str = ""
    ) -> None:
        old = self.previous.get(subject)
        new = Notified(status, since, old.sequence if old else 0, scope)
        if new != old:
            self.changes[subject] = new


def _readings(run: _Run, observed: Observation) -> None:
    old = run.status(READINGS, FRESH)
    newest = observed.newest_polled_reading_at
    stale_since = readings_stale_since(newest, observed.max_state_age_seconds, observed.now)
    limit = observed.max_state_age_seconds
    if stale_since is not None and old.status != STALE:
        assert newest is not None
        age = _seconds(observed.now - newest)
        run.notify(
            READINGS,
            STALE,
            Kind.READINGS_STALE,
            stale_since,
            f"The newest polled quota reading is {age} s old, past the {limit} s limit: the "
            "worker or the broker may be down, and auto/subscription excludes every "
            "connection whose reading is stale.",
            {
                "newest_reading_at": _iso(newest),
                "newest_reading_age_seconds": age,
                "max_state_age_seconds": limit,
            },
            since=stale_since,
        )
    elif stale_since is None and old.status == STALE:
        if newest is None:
            summary = "Quota readings are no longer stale: no connection is polled any more."
        else:
            age = _seconds(observed.now - newest)
            summary = f"Quota readings arrive again: the newest polled reading is {age} s old."
        run.notify(
            READINGS,
            FRESH,
            Kind.READINGS_FRESH,
            newest or observed.now,
            summary,
            {"newest_reading_at": _iso(newest), "max_state_age_seconds": limit},
        )


def _subscription(run: _Run, observed: Observation) -> None:
    old = run.status(SUBSCRIPTION, NON_EMPTY)
    now = observed.now
    if observed.subscription_is_empty:
        if old.status == EMPTY:
            return
        since = old.since if old.status == EMPTY_PENDING and old.since is not None else now
        if now - since >= observed.subscription_empty_after:
            reasons = dict(sorted(observed.subscription_reasons.items()))
            why = ", ".join(f"{reason} {count}" for reason, count in reasons.items())
            run.notify(
                SUBSCRIPTION,
                EMPTY,
                Kind.SUBSCRIPTION_EMPTY,
                since + observed.subscription_empty_after,
                f"auto/subscription has had no usable connection for "
                f"{_seconds(now - since)} s (since {_iso(since)}): requests naming it get an "
                "empty pool." + (f" Excluded connections by reason: {why}." if why else ""),
                {
                    "auto_id": "auto/subscription",
                    "empty_since": _iso(since),
                    "empty_for_seconds": _seconds(now - since),
                    "excluded_by_reason": reasons,
                },
                since=since,
            )
        elif old.status != EMPTY_PENDING:
            run.quietly(SUBSCRIPTION, EMPTY_PENDING, since=since)
        return
    if old.status == EMPTY:
        run.notify(
            SUBSCRIPTION,
            NON_EMPTY,
            Kind.SUBSCRIPTION_BACK,
            now,
            "auto/subscription has usable plan connections again"
            + (f" (it was empty since {_iso(old.since)})." if old.since else "."),
            {"auto_id": "auto/subscription", "empty_since": _iso(old.since)},
        )
    elif old.status == EMPTY_PENDING:
        # Empty for less than the set time: nothing was notified, nothing to take back.
        run.quietly(SUBSCRIPTION, NON_EMPTY)


def _plans(run: _Run, observed: Observation) -> None:
    # A plan connection no longer observed (deleted, inactive, re-curated) keeps its
    # state: should it come back in the same state, that is not a transition.
    for plan in sorted(observed.plans, key=lambda p: p.connection_id):
        subject = PLAN_PREFIX + plan.connection_id
        old = run.status(subject, IN_PLAY)
        status = DROPPED_OUT if plan.is_dropped_out else IN_PLAY
        if status == old.status:
            continue
        details = {
            "connection_id": plan.connection_id,
            "since": _iso(plan.since),
            "reason": plan.reason,
        }
        if plan.is_dropped_out:
            summary = (
                f"Plan connection {plan.connection_id} dropped out: {plan.reason}. "
                "Traffic that allows it escalates to the next rung."
            )
            kind = Kind.PLAN_EXHAUSTED
        else:
            summary = f"Plan connection {plan.connection_id} is back in play: {plan.reason}."
            kind = Kind.PLAN_BACK
        run.notify(subject, status, kind, plan.since or observed.now, summary, details)


def _same_window(scope: str, reset_at: datetime) -> bool:
    """Whether a stored scope (a reset instant) names the window of `reset_at`: a reset
    that moved by less than SAME_WINDOW_TOLERANCE is jitter, not a new window."""
    try:
        stored = datetime.fromisoformat(scope)
    except ValueError:
        return False
    return abs(stored - reset_at) < SAME_WINDOW_TOLERANCE


def _forecasts(run: _Run, observed: Observation) -> None:
    # Once per window: the state is scoped by the window's reset, so a forecast that
    # wavers (before the reset, after it, before it again) is told once, and the next
    # window starts afresh. A plan that has run out already is `plan_exhausted`'s news.
    for seen in sorted(observed.forecasts, key=lambda f: f.connection_id):
        reset_at = seen.reset_at
        if seen.before_reset is not True or seen.has_run_out or reset_at is None:
            continue
        subject = LOW_PREFIX + seen.connection_id
        old = run.previous.get(subject)
        if old is not None and old.status == LOW and _same_window(old.scope, reset_at):
            continue
        paid = seen.paid_until_reset_usd
        run.notify(
            subject,
            LOW,
            Kind.PLAN_LOW,
            observed.now,
            f"{seen.sentence} Forecast {seen.basis}.",
            {
                "connection_id": seen.connection_id,
                "runs_out_at": _iso(seen.runs_out_at),
                "reset_at": _iso(reset_at),
                "before_reset": True,
                "paid_until_reset_usd": float(paid) if paid is not None else None,
                "paid_by_rung": {
                    rung: float(usd) for rung, usd in sorted(seen.paid_by_rung.items())
                },
                "basis": seen.basis,
            },
            scope=reset_at.astimezone(UTC).isoformat(),
        )


def _metering(run: _Run, observed: Observation) -> None:
    # Once per transition to "can meter"; newer "hard stop" evidence (or a connection no
    # longer observed as metering) ends it quietly, so a later start is told again.
    for seen in sorted(observed.metering, key=lambda m: m.connection_id):
        subject = METERING_PREFIX + seen.connection_id
        old = run.status(subject, HARD_STOP)
        status = CAN_METER if seen.can_meter else HARD_STOP
        if status == old.status:
            continue
        if not seen.can_meter:
            run.quietly(subject, HARD_STOP)
            continue
        when = "" if seen.seen_at is None else f" at {_iso(seen.seen_at)}"
        run.notify(
            subject,
            CAN_METER,
            Kind.STARTED_METERING,
            seen.seen_at or observed.now,
            f"Plan connection {seen.connection_id} can bill past its limit: {seen.detail} "
            f"(seen via {seen.source}{when}). It is out of auto/subscription, and "
            "auto/thrifty uses it only while a current reading shows headroom.",
            {
                "connection_id": seen.connection_id,
                "evidence": seen.detail,
                "source": seen.source,
                "seen_at": _iso(seen.seen_at),
            },
            since=seen.seen_at,
        )


def _credentials(run: _Run, observed: Observation) -> None:
    rejected = {c.connection_id: c for c in observed.rejected_credentials}
    for connection_id in sorted(rejected):
        subject = CREDENTIAL_PREFIX + connection_id
        if run.status(subject, OK).status == REJECTED:
            continue
        message = rejected[connection_id].message
        run.notify(
            subject,
            REJECTED,
            Kind.CREDENTIAL_REJECTED,
            observed.now,
            f"The credential of connection {connection_id} was refused: {message} Its "
            "quota cannot be read until an operator replaces it.",
            {"connection_id": connection_id, "message": message},
        )
    for subject, old in sorted(run.previous.items()):
        connection_id = subject.removeprefix(CREDENTIAL_PREFIX)
        if (
            subject.startswith(CREDENTIAL_PREFIX)
            and old.status == REJECTED
            and connection_id not in rejected
        ):
            # Accepted again (or gone): the next rejection is a new transition.
            run.quietly(subject, OK)


def _budgets(run: _Run, observed: Observation) -> None:
    for budget in sorted(observed.budgets, key=lambda b: b.rung):
        # No budget: never gated, nothing to cross. Budget 0: the rung is disabled.
        if budget.budget_usd is None or budget.budget_usd <= 0:
            continue
        subject = BUDGET_PREFIX + budget.rung
        scope = budget_scope(budget)
        old = run.previous.get(subject)
        notified = int(old.status) if old is not None and old.scope == scope else 0
        level = budget_level(budget.spent_usd, budget.budget_usd)
        if level <= notified:
            continue
        percent = budget.spent_usd * 100 / budget.budget_usd
        passed = [t for t in THRESHOLDS if notified < t <= level]
        tail = (
            " The rung is exhausted: it is left out of every pool until the window ends."
            if level >= 100
            else ""
        )
        # One notification for the highest threshold reached: a jump from 40 % to 100 %
        # is one message naming every threshold it passed, not three.
        run.notify(
            subject,
            str(level),
            Kind.BUDGET_CROSSED,
            observed.now,
            f"The {budget.rung} rung has spent {budget.spent_usd:.2f} USD of its "
            f"{budget.budget_usd:.2f} USD {budget.budget_window} budget "
            f"({_decimal_text(round(percent, 1))} %), past the {level} % threshold." + tail,
            {
                "rung": budget.rung,
                "threshold_percent": level,
                "thresholds_passed": passed,
                "spent_usd": float(budget.spent_usd),
                "budget_usd": float(budget.budget_usd),
                "spent_percent": float(round(percent, 2)),
                "budget_window": budget.budget_window,
                "window_start": _iso(budget.window_start),
                "window_end": _iso(budget.window_end),
            },
            scope=scope,
        )


def _seconds(delta: timedelta) -> int:
    return int(delta.total_seconds())


def _iso(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).isoformat() if moment is not None else None


def _decimal_text(value: Decimal) -> str:
    """A decimal as typed ("100", "12.5"), never in exponent form ("1E+2")."""
    return format(value.normalize(), "f")
