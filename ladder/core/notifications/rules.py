"""Notifications' rules, pure: given what was last notified about each subject and what
is observed now, the transitions to notify (one per transition, none while a state
holds), subject by subject."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from ladder.core.forecast import SAME_WINDOW_TOLERANCE
from ladder.core.notifications.subjects import (
    BUDGET_PREFIX,
    CAN_METER,
    CREDENTIAL_PREFIX,
    DROPPED_OUT,
    EMPTY,
    EMPTY_PENDING,
    FRESH,
    HARD_STOP,
    IN_PLAY,
    LOW,
    LOW_PREFIX,
    METERING_PREFIX,
    NON_EMPTY,
    OK,
    PLAN_PREFIX,
    READINGS,
    REJECTED,
    STALE,
    SUBSCRIPTION,
    THRESHOLDS,
    BudgetObservation,
    Evaluation,
    Kind,
    Notified,
    Observation,
    Transition,
    iso,
)

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
                "newest_reading_at": iso(newest),
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
            {"newest_reading_at": iso(newest), "max_state_age_seconds": limit},
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
                f"{_seconds(now - since)} s (since {iso(since)}): requests naming it get an "
                "empty pool." + (f" Excluded connections by reason: {why}." if why else ""),
                {
                    "auto_id": "auto/subscription",
                    "empty_since": iso(since),
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
            + (f" (it was empty since {iso(old.since)})." if old.since else "."),
            {"auto_id": "auto/subscription", "empty_since": iso(old.since)},
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
            "since": iso(plan.since),
            "reason": plan.reason,
        }
        if plan.is_dropped_out:
            details["reset_at"] = iso(plan.reset_at)
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
    # A model scope's window is its own subject: told once per window of that scope.
    for seen in sorted(observed.forecasts, key=lambda f: (f.connection_id, f.model_scope or "")):
        reset_at = seen.reset_at
        if seen.before_reset is not True or seen.has_run_out or reset_at is None:
            continue
        subject = LOW_PREFIX + seen.connection_id
        if seen.model_scope is not None:
            subject += "/" + seen.model_scope
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
                "model_scope": seen.model_scope,
                "runs_out_at": iso(seen.runs_out_at),
                "reset_at": iso(reset_at),
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
        when = "" if seen.seen_at is None else f" at {iso(seen.seen_at)}"
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
                "seen_at": iso(seen.seen_at),
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
                "window_start": iso(budget.window_start),
                "window_end": iso(budget.window_end),
            },
            scope=scope,
        )


def _seconds(delta: timedelta) -> int:
    return int(delta.total_seconds())


def _decimal_text(value: Decimal) -> str:
    """A decimal as typed ("100", "12.5"), never in exponent form ("1E+2")."""
    return format(value.normalize(), "f")
