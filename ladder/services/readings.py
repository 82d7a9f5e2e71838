"""Quota readings: normalised, stored in one transaction with the hysteresis they move,
and pruned after the retention period."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from billing import services as billing_services
from billing.bounds import OutOfRange, bounds_of, check_float
from billing.models import ChangeCounter
from ladder import core
from ladder.core import ConnectionView, HysteresisState, LadderConfig, WindowReading
from ladder.core.types import OverageEvidence
from ladder.models import AppliedEvent, Connection, HysteresisTransition, QuotaReading
from ladder.services import evidence as evidence_services
from ladder.services.common import MAX_CLOCK_SKEW, NotFound, known_id
from ladder.services.decisions import Snapshot, current_snapshot
from ladder.services.enqueue import schedule_refresh_at_reset
from ladder.services.loading import hysteresis_of, reading_of, view_of


@dataclass(frozen=True, slots=True)
class ReadingInput:
    status: str | None = None
    remaining_percent: float | None = None
    reset_at: datetime | None = None
    checked_at: datetime | None = None
    windows: tuple[WindowReading, ...] | None = None
    source: str = "push"
    detail: str = ""
    # What the reading says about billing past the plan's limit (None: nothing).
    evidence: OverageEvidence | None = None


def check_reading_percents(data: ReadingInput) -> None:
    """Every percent of a reading is a finite number within its column's 0..100, from
    whichever path it came (API, adapters, events); ValidationError naming the field."""
    bounds = bounds_of(QuotaReading, "remaining_percent")
    named = [("remaining_percent", data.remaining_percent)]
    named += [("windows", w.remaining_percent) for w in data.windows or ()]
    for name, value in named:
        if value is None:
            continue
        try:
            check_float(value, bounds)
        except OutOfRange as error:
            raise ValidationError({name: [f"A remaining percent: {error}"]}) from None


def claimed_instant(claimed: datetime | None, now: datetime, field: str) -> datetime:
    """The instant a gateway says it saw something (a reading's `checked_at`, an event's
    `observed_at`) as stored: `now` when absent, capped at `now`; ValidationError naming
    `field` when it is more than MAX_CLOCK_SKEW in the future."""
    if claimed is not None and claimed - now > MAX_CLOCK_SKEW:
        raise ValidationError(
            {field: [f"More than {int(MAX_CLOCK_SKEW.total_seconds())} s in the future."]}
        )
    return core.stored_checked_at(claimed, now)


def normalise_reading(data: ReadingInput, now: datetime) -> ReadingInput:
    """Reduce windows to the binding window, derive the status, default checked_at and
    cap it at `now` (the receive time)."""
    check_reading_percents(data)
    remaining, reset_at = data.remaining_percent, data.reset_at
    if data.windows and remaining is None:
        remaining, window_reset = core.binding_window(data.windows)
        reset_at = window_reset if window_reset is not None else reset_at
    checked_at = claimed_instant(data.checked_at, now, "checked_at")
    status = data.status or core.derive_status(remaining)
    return ReadingInput(
        status=status,
        remaining_percent=remaining,
        reset_at=reset_at,
        checked_at=checked_at,
        windows=data.windows,
        source=data.source,
        detail=data.detail,
        evidence=data.evidence,
    )


@dataclass
class StoredReading:
    reading: QuotaReading
    is_current: bool
    transition: HysteresisTransition | None
    on_commit: list[Any] = field(default_factory=list)


def _windows_json(windows: tuple[WindowReading, ...] | None) -> list[dict[str, Any]]:
    return [
        {
            "name": w.name,
            "remaining_percent": w.remaining_percent,
            "reset_at": w.reset_at.isoformat() if w.reset_at else None,
            "model_scope": w.model_scope,
        }
        for w in windows or ()
    ]


def server_clock() -> datetime:
    """The server's own clock (a seam: tests freeze it)."""
    return timezone.now()


def received_at(now: datetime) -> datetime:
    """The instant a reading is received: the caller's `now`, or the server's clock when
    that is later (a worker's `now` is the start of its poll, seconds earlier; a reading
    stored meanwhile must not look dated ahead of it)."""
    return max(now, server_clock())


def write_snapshot() -> Snapshot:
    """The cached snapshot of catalog, prices and settings a write is judged with (one
    query, the change counters, while the config counter stands)."""
    return current_snapshot(billing_services.change_counters()[0])


def lock_connection(connection_id: str) -> Connection:
    """The connection row locked for this transaction, its current reading joined in;
    NotFound when there is none."""
    connection = (
        Connection.objects.select_for_update(of=("self",))
        .select_related("current_reading")
        .filter(connection_id=connection_id)
        .first()
    )
    if connection is None:
        raise NotFound(f"No connection {connection_id!r}.")
    return connection


def lock_connections(connection_ids: Iterable[str]) -> None:
    """Lock the rows of these connections for the caller's transaction, in id order (two
    writers that lock several never wait on each other in a cycle). Unknown ids are
    skipped. One query."""
    ids = sorted(set(connection_ids))
    if ids:
        rows = Connection.objects.select_for_update().filter(connection_id__in=ids)
        list(rows.order_by("connection_id").values_list("pk", flat=True))


def bump_if_it_can_change_a_pool(
    before: ConnectionView, connection: Connection, snapshot: Snapshot, now: datetime
) -> bool:
    """Move the `state` counter iff the write that made `connection` out of `before`
    can change a pool (ladder/core/changes.py); True when it did."""
    after = view_of(connection, snapshot.catalog)
    if not core.can_change_pool(before, after, snapshot.config, now):
        return False
    billing_services.bump(ChangeCounter.STATE)
    return True


def settle_config_race(snapshot: Snapshot, bumped: bool) -> bool:
    """Called once a write judged under `snapshot` has committed (outside any
    transaction): when it moved no counter but the `config` counter has moved since
    `snapshot` was taken, move `state` now. Its "can this change a pool?" was answered
    under a config that no longer holds, and a decision computed under the new config
    before this write committed would otherwise stay cached, blind to it. A config write
    that commits after this read commits after the write, so every decision made under
    it sees the write: read after the commit, the check leaves no gap (and takes no lock).
    One query when the write did not bump; True when this call bumped."""
    if bumped or billing_services.config_counter() == snapshot.config_version:
        return False
    billing_services.bump(ChangeCounter.STATE)
    return True


def store_reading(
    connection_id: str, data: ReadingInput, *, now: datetime | None = None
) -> StoredReading:
    """Store a reading; if it is the newest it becomes current and updates hysteresis,
    all in one transaction; the `state` counter moves only when this can change a pool
    under the config current when it commits (`settle_config_race`). NotFound for an
    unknown connection."""
    known_id(connection_id)
    now = now or timezone.now()
    data = normalise_reading(data, now)
    snapshot = write_snapshot()
    with transaction.atomic():
        connection = lock_connection(connection_id)
        before = view_of(connection, snapshot.catalog)
        stored = write_reading(connection, data, snapshot.config, now)
        if data.evidence is not None:
            seen = replace(data.evidence, seen_at=data.evidence.seen_at or data.checked_at)
            evidence_services.note_evidence(connection, seen, snapshot.catalog, now)
        bumped = bump_if_it_can_change_a_pool(before, connection, snapshot, now)
    settle_config_race(snapshot, bumped)
    return stored


def write_reading(
    connection: Connection,
    data: ReadingInput,
    config: LadderConfig,
    now: datetime,
    *,
    also_save: tuple[str, ...] = (),
) -> StoredReading:
    """Inside the caller's transaction, with `connection` locked: store a normalised
    reading; if it is the newest it becomes current and moves the hysteresis. Saves the
    connection (with `also_save`, fields the caller changed); never bumps a counter."""
    assert data.checked_at is not None
    assert data.status is not None
    reading = QuotaReading.objects.create(
        connection=connection,
        status=data.status,
        remaining_percent=data.remaining_percent,
        reset_at=data.reset_at,
        checked_at=data.checked_at,
        windows=_windows_json(data.windows),
        source=data.source,
        detail=data.detail[:500],
    )
    current = connection.current_reading
    core_reading = reading_of(reading)
    assert core_reading is not None
    # A late-arriving older reading is kept as history but does not change the state;
    # within the clock-skew bound, the less safe of the two is current.
    is_current = core.supersedes(core_reading, reading_of(current), received_at(now))
    transition = None
    update_fields = list(also_save)
    if is_current:
        connection.current_reading = reading
        previous = hysteresis_of(connection)
        config = evidence_services.own_config(connection, config)
        after = core.hysteresis_after(previous, core_reading, config)
        update_fields += ["current_reading"]
        if evidence_services.move_scopes(
            connection, data.windows or (), reading.checked_at, config, now
        ):
            update_fields += ["scoped_state"]
        if previous == core.NEVER_READ and after.state is HysteresisState.IN_PLAY:
            # The first reading starts the in-play period (no flip, so no transition row).
            connection.hysteresis_since = data.checked_at
            connection.hysteresis_reason = "in play since its first reading"
            update_fields += ["hysteresis_since", "hysteresis_reason"]
        if after.state is not previous.state:
            connection.hysteresis_state = after.state.value
            connection.hysteresis_since = after.since
            connection.hysteresis_reason = after.reason[:300]
            update_fields += ["hysteresis_state", "hysteresis_since", "hysteresis_reason"]
            transition = HysteresisTransition.objects.create(
                connection=connection,
                state=after.state.value,
                at=after.since or data.checked_at,
                reason=after.reason[:300],
            )
    if update_fields:
        connection.save(update_fields=[*update_fields, "updated_at"])
    stored = StoredReading(reading=reading, is_current=is_current, transition=transition)
    if is_current and core.should_schedule_reset_refresh(
        reading.reset_at,
        current.reset_at if current is not None else None,
        current.checked_at if current is not None else None,
        now,
    ):
        transaction.on_commit(lambda: schedule_refresh_at_reset(connection, reading.reset_at))
    return stored


def prune_readings(*, older_than: datetime) -> int:
    """Delete readings checked before `older_than`, never a connection's current one, and
    the batch event ids applied before it (a retry that late applies again). The count of
    readings deleted."""
    AppliedEvent.objects.filter(applied_at__lt=older_than).delete()
    current_ids = Connection.objects.filter(current_reading__isnull=False).values(
        "current_reading_id"
    )
    deleted, _ = (
        QuotaReading.objects.filter(checked_at__lt=older_than).exclude(pk__in=current_ids).delete()
    )
    return deleted
