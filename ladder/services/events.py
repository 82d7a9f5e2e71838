"""Gateway events: the cooldown a failure writes (clamped to the reset), and the
reading a `quota_exhausted` event or rate-limit headers imply, applied in the order
they were observed (`observed_at`), each batch entry with an `event_id` at most once."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from ladder import core
from ladder.core import EventKind, QuotaStatus
from ladder.core.types import OverageEvidence
from ladder.models import AppliedEvent, Connection
from ladder.quota.headers import parse_rate_limit_headers
from ladder.services import evidence as evidence_services
from ladder.services.common import NotFound, known_id
from ladder.services.decisions import Snapshot
from ladder.services.loading import view_of
from ladder.services.readings import (
    ReadingInput,
    bump_if_it_can_change_a_pool,
    claimed_instant,
    lock_connection,
    normalise_reading,
    settle_config_race,
    write_reading,
    write_snapshot,
)


@dataclass(frozen=True, slots=True)
class EventResult:
    connection_id: str
    cooldown_until: datetime | None
    cooldown_seconds: float
    clamped_to_reset: bool
    consecutive_failures: int


def apply_event(
    connection_id: str,
    *,
    kind: str,
    retry_after_seconds: float | None = None,
    reset_at: datetime | None = None,
    headers: dict[str, str] | None = None,
    now: datetime | None = None,
    snapshot: Snapshot | None = None,
    settle: bool = True,
    model: str | None = None,
    observed_at: datetime | None = None,
    event_id: str | None = None,
) -> EventResult:
    """Write the cooldown a gateway event implies (replacing any in force), clamped to
    the upstream's reset; `quota_exhausted` also stores an EXHAUSTED reading, and
    understood quota headers a reading. The `state` counter moves only when the event
    can change a pool (ladder/core/changes.py); a `success` with nothing to clear and no
    quota headers stores nothing (one query). `snapshot`: the one a batch shares.

    `observed_at` (default: `now`, capped there; more than a minute ahead is a
    ValidationError): when the gateway saw the answer. Its readings are dated so, a
    success clears only a failure it outranks and a failure a later success outranks is
    stale (core.apply_event). `event_id`: an event applied before under this id is
    answered as then and not applied again (a success that changed nothing is not
    recorded: applied again it changes nothing either)."""
    known_id(connection_id)
    now = now or timezone.now()
    event = core.event_kind(kind)  # ValueError naming the known kinds, before any query
    observed = claimed_instant(observed_at, now, "observed_at")
    if event_id is not None:
        kept = applied_before(event_id)
        if kept is not None:
            return kept
    implied_reading: ReadingInput | None = None
    # Model scopes and billing evidence (ladder/services/evidence.py): a rejection of a
    # model-scoped limit only cools (connection, that scope); evidence is kept if newest.
    scope: str | None = None
    evidence: OverageEvidence | None = None
    if headers:
        info = parse_rate_limit_headers(headers, now, model)
        scope = info.scoped_exhaustion
        if info.evidence is not None:
            evidence = replace(info.evidence, source="headers", seen_at=observed)
        if retry_after_seconds is None:
            retry_after_seconds = info.retry_after_seconds
        if reset_at is None:
            reset_at = info.reset_at
        # Headers that carry no percentage and no exhaustion (a bare reset time) say
        # nothing about quota: storing them would replace a good reading with UNKNOWN.
        # (Nor does a rejection of a model-scoped limit alone: it cools that scope.)
        if (info.is_exhausted and scope is None) or any(
            w.remaining_percent is not None and w.model_scope is None for w in info.windows
        ):
            implied_reading = ReadingInput(
                status=QuotaStatus.EXHAUSTED.value if info.is_exhausted and scope is None else None,
                windows=info.windows,
                reset_at=info.reset_at,
                checked_at=observed,
                source="headers",
            )
    if event is EventKind.QUOTA_EXHAUSTED and scope is None:
        implied_reading = ReadingInput(
            status=QuotaStatus.EXHAUSTED.value,
            remaining_percent=0.0,
            reset_at=reset_at,
            checked_at=observed,
            source="event",
            detail="The gateway reported the quota exhausted.",
        )
    if implied_reading is not None:
        implied_reading = normalise_reading(implied_reading, now)
    if (
        event is EventKind.SUCCESS
        and implied_reading is None
        and evidence is None
        and _has_nothing_to_clear(connection_id)
    ):
        # The common success: no failures, no cooldown, no quota headers. Nothing to
        # store, no counter to move: the lookup is the whole cost.
        return EventResult(connection_id, None, 0.0, False, 0)
    snapshot = snapshot or write_snapshot()
    try:
        with transaction.atomic():
            result, bumped = _apply_locked(
                connection_id,
                kind=kind,
                event=event,
                retry_after_seconds=retry_after_seconds,
                reset_at=reset_at,
                scope=scope,
                implied_reading=implied_reading,
                evidence=evidence,
                snapshot=snapshot,
                now=now,
                observed=observed,
            )
            if event_id is not None:
                AppliedEvent.objects.create(
                    event_id=event_id, result=_result_json(result), applied_at=now
                )
    except IntegrityError:
        # The same id applied at once by another request, committed first: its answer.
        kept = applied_before(event_id) if event_id is not None else None
        if kept is None:
            raise
        return kept
    if settle:
        settle_config_race(snapshot, bumped)
    return result


def _apply_locked(
    connection_id: str,
    *,
    kind: str,
    event: EventKind,
    retry_after_seconds: float | None,
    reset_at: datetime | None,
    scope: str | None,
    implied_reading: ReadingInput | None,
    evidence: OverageEvidence | None,
    snapshot: Snapshot,
    now: datetime,
    observed: datetime,
) -> tuple[EventResult, bool]:
    """Inside the caller's transaction: lock the connection, write what the event says,
    and move the `state` counter when it can change a pool. The result and whether the
    counter moved."""
    connection = lock_connection(connection_id)
    before = view_of(connection, snapshot.catalog)
    change = core.apply_event(
        kind,
        consecutive_failures=connection.consecutive_failures,
        retry_after_seconds=retry_after_seconds,
        reset_at=reset_at,
        config=snapshot.config,
        now=now,
        cooldown_until=connection.cooldown_until,
        observed_at=observed,
        failure_observed_at=connection.failure_observed_at,
        success_observed_at=connection.success_observed_at,
    )
    changed: tuple[str, ...] = ()
    if scope is not None and event is not EventKind.SUCCESS:
        # Only a model-scoped limit rejected: that scope cools, the connection not.
        if evidence_services.cool_scope(connection, scope, change.cooldown_until):
            changed = ("scoped_state",)
    elif (connection.cooldown_until, connection.consecutive_failures) != (
        change.cooldown_until,
        change.consecutive_failures,
    ):
        connection.cooldown_until = change.cooldown_until
        connection.consecutive_failures = change.consecutive_failures
        changed = ("cooldown_until", "consecutive_failures")
        changed += _observed(connection, event, observed)
    if implied_reading is not None:
        write_reading(connection, implied_reading, snapshot.config, now, also_save=changed)
    elif changed:
        connection.save(update_fields=[*changed, "updated_at"])
    if evidence is not None:
        evidence_services.note_evidence(connection, evidence, snapshot.catalog, now)
    bumped = bump_if_it_can_change_a_pool(before, connection, snapshot, now)
    result = EventResult(
        connection_id=connection_id,
        cooldown_until=change.cooldown_until,
        cooldown_seconds=change.cooldown_seconds,
        clamped_to_reset=change.clamped_to_reset,
        consecutive_failures=change.consecutive_failures,
    )
    return result, bumped


def _observed(connection: Connection, event: EventKind, observed: datetime) -> tuple[str, ...]:
    """Stamp when the failure that now stands, or the success that cleared, was observed
    (the later of the stamp held and this one); the field written."""
    field = "success_observed_at" if event is EventKind.SUCCESS else "failure_observed_at"
    held: datetime | None = getattr(connection, field)
    setattr(connection, field, observed if held is None else max(held, observed))
    return (field,)


def _result_json(result: EventResult) -> dict[str, object]:
    return {
        "connection_id": result.connection_id,
        "cooldown_until": result.cooldown_until.isoformat() if result.cooldown_until else None,
        "cooldown_seconds": result.cooldown_seconds,
        "clamped_to_reset": result.clamped_to_reset,
        "consecutive_failures": result.consecutive_failures,
    }


def applied_before(event_id: str) -> EventResult | None:
    """The answer an event applied under `event_id` got, None when none was (one query)."""
    stored = AppliedEvent.objects.filter(event_id=event_id).values_list("result", flat=True).first()
    if stored is None:
        return None
    until = stored["cooldown_until"]
    return EventResult(
        connection_id=stored["connection_id"],
        cooldown_until=None if until is None else datetime.fromisoformat(until),
        cooldown_seconds=stored["cooldown_seconds"],
        clamped_to_reset=stored["clamped_to_reset"],
        consecutive_failures=stored["consecutive_failures"],
    )


def _has_nothing_to_clear(connection_id: str) -> bool:
    """True when the connection has no failures and no cooldown; NotFound when there is
    no such connection (one query, no lock: a success changes nothing then)."""
    row = (
        Connection.objects.filter(connection_id=connection_id)
        .values_list("consecutive_failures", "cooldown_until")
        .first()
    )
    if row is None:
        raise NotFound(f"No connection {connection_id!r}.")
    return row == (0, None)
