"""Notifications, pure: given what was last notified about each subject and what is
observed now, the transitions to notify (one per transition, none while a state holds).
The vocabulary is in `subjects.py`, the rules in `rules.py`; webhook targets, bodies,
signatures and the retry backoff are in `ladder/core/webhooks.py`.

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
    low:<conn.>/<scope> the same for one model scope's window (a connection id has no `/`)
"""

from ladder.core.notifications.rules import (
    budget_level,
    budget_scope,
    evaluate,
    readings_stale_since,
)
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
    SUBSCRIBABLE_KINDS,
    SUBSCRIPTION,
    THRESHOLDS,
    BudgetObservation,
    CredentialObservation,
    Evaluation,
    ForecastObservation,
    Kind,
    MeteringObservation,
    Notified,
    Observation,
    PlanObservation,
    Transition,
    iso,
)

__all__ = [
    "BUDGET_PREFIX",
    "CAN_METER",
    "CREDENTIAL_PREFIX",
    "DROPPED_OUT",
    "EMPTY",
    "EMPTY_PENDING",
    "FRESH",
    "HARD_STOP",
    "IN_PLAY",
    "LOW",
    "LOW_PREFIX",
    "METERING_PREFIX",
    "NON_EMPTY",
    "OK",
    "PLAN_PREFIX",
    "READINGS",
    "REJECTED",
    "STALE",
    "SUBSCRIBABLE_KINDS",
    "SUBSCRIPTION",
    "THRESHOLDS",
    "BudgetObservation",
    "CredentialObservation",
    "Evaluation",
    "ForecastObservation",
    "Kind",
    "MeteringObservation",
    "Notified",
    "Observation",
    "PlanObservation",
    "Transition",
    "budget_level",
    "budget_scope",
    "evaluate",
    "iso",
    "readings_stale_since",
]
