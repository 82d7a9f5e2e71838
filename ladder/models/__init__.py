"""The ladder's models, one module per subject, every one importable from here (the app
label is `ladder` whichever module declares a model). There is deliberately no `enabled`
flag anywhere (see the spec)."""

from ladder.models.connections import (
    CONNECTION_ID_BODY,
    CONNECTION_ID_MESSAGE,
    CONNECTION_ID_PATTERN,
    AppliedEvent,
    Candidate,
    Connection,
    HysteresisChoices,
    HysteresisTransition,
    QuotaReading,
    QuotaStatusChoices,
    WindowForecast,
    connection_id_validator,
    is_connection_id,
    validate_connection_id,
)
from ladder.models.notifications import NotificationDelivery, NotificationState, Webhook
from ladder.models.operations import ApiToken, BeatHeartbeat, SimulationRun
from ladder.models.pools import PoolMembership, PoolTransition
from ladder.models.replays import LedgerReplayRun
from ladder.models.settings import BudgetWindowChoices, LadderSettings, tuning_column
from ladder.models.spend import BudgetCrossing, SpendDayTotal, SpendEntry

__all__ = [
    "CONNECTION_ID_BODY",
    "CONNECTION_ID_MESSAGE",
    "CONNECTION_ID_PATTERN",
    "ApiToken",
    "AppliedEvent",
    "BeatHeartbeat",
    "BudgetCrossing",
    "BudgetWindowChoices",
    "Candidate",
    "Connection",
    "HysteresisChoices",
    "HysteresisTransition",
    "LadderSettings",
    "LedgerReplayRun",
    "NotificationDelivery",
    "NotificationState",
    "PoolMembership",
    "PoolTransition",
    "QuotaReading",
    "QuotaStatusChoices",
    "SimulationRun",
    "SpendDayTotal",
    "SpendEntry",
    "Webhook",
    "WindowForecast",
    "connection_id_validator",
    "is_connection_id",
    "tuning_column",
    "validate_connection_id",
]
