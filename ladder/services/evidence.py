"""Billing evidence, model scopes and a connection's own reserve, on the stored row:
the newest evidence kept (and its "started to meter" transition audited), the model
scopes moved by a current reading or cooled by an event, and the settings a connection's
own reserve makes. Callers hold the row lock, inside their transaction."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from billing import services as billing_services
from billing.classify import Catalog, Overage
from ladder.core import LadderConfig, WindowReading, outranks
from ladder.core.scopes import cooled_scope, reserve_config, scoped_after, started_metering
from ladder.core.types import OverageEvidence, OverageSays, ScopedQuota
from ladder.models import Connection
from ladder.services.loading import evidence_of, scoped_of

# Who the audit names for a transition the wire caused, not a person.
EVIDENCE_ACTOR = "evidence"


def own_config(connection: Connection, config: LadderConfig) -> LadderConfig:
    """The settings with the connection's own reserve applied."""
    return reserve_config(
        config, connection.exit_cutoff_percent, connection.reentry_min_remaining_percent
    )


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat()


def scoped_json(scoped: Iterable[ScopedQuota]) -> dict[str, Any]:
    """The stored form of a connection's model scopes."""
    stored: dict[str, Any] = {}
    for entry in scoped:
        reading = entry.reading
        stored[entry.model_scope] = {
            "has_window": reading is not None,
            "remaining": None if reading is None else reading.remaining_percent,
            "reset_at": None if reading is None else _iso(reading.reset_at),
            "state": entry.hysteresis.state.value,
            "since": _iso(entry.hysteresis.since),
            "reason": entry.hysteresis.reason[:300],
            "cooldown_until": _iso(entry.cooldown_until),
        }
    return stored


def _current_checked_at(connection: Connection) -> datetime | None:
    current = connection.current_reading
    return None if current is None else current.checked_at


def move_scopes(
    connection: Connection,
    windows: Iterable[WindowReading],
    checked_at: datetime,
    config: LadderConfig,
    now: datetime,
) -> bool:
    """Set the connection's model scopes from its new current reading's windows; True
    when the stored scopes changed (the caller saves `scoped_state`)."""
    previous = scoped_of(connection.scoped_state, checked_at)
    stored = scoped_json(scoped_after(previous, windows, checked_at, config, now))
    if stored == (connection.scoped_state or {}):
        return False
    connection.scoped_state = stored
    return True


def cool_scope(connection: Connection, scope: str, cooldown_until: datetime | None) -> bool:
    """Cool one model scope of the connection; True when the stored scopes changed."""
    previous = scoped_of(connection.scoped_state, _current_checked_at(connection))
    stored = scoped_json(cooled_scope(previous, scope, cooldown_until))
    if stored == (connection.scoped_state or {}):
        return False
    connection.scoped_state = stored
    return True


def evidence_json(evidence: OverageEvidence) -> dict[str, Any]:
    """The stored form of billing evidence."""
    return {
        "says": evidence.says.value,
        "source": evidence.source,
        "seen_at": _iso(evidence.seen_at),
        "detail": evidence.detail[:300],
    }


def note_evidence(
    connection: Connection, evidence: OverageEvidence, catalog: Catalog, now: datetime
) -> bool:
    """Keep `evidence` if it outranks the connection's (core.outranks: the newer, but
    "can meter" within a minute of "hard stop" either way; saved at once); a transition
    of a hard-stop plan to "can meter" (or back) is audited with the evidence. True when
    the stored evidence changed."""
    before = evidence_of(connection.overage_evidence)
    if (
        before is not None
        and before.seen_at is not None
        and evidence.seen_at is not None
        and not outranks(
            evidence.seen_at,
            evidence.says is OverageSays.HARD_STOP,
            before.seen_at,
            before.says is OverageSays.HARD_STOP,
        )
    ):
        # Older than what the connection holds, or "hard stop" less than a minute after
        # "can meter" (the less safe one wins): history, not news.
        return False
    stored = evidence_json(evidence)
    if stored == connection.overage_evidence:
        return False
    connection.overage_evidence = stored
    connection.save(update_fields=["overage_evidence", "updated_at"])
    verdict = catalog.classify(connection.provider, connection.auth_type)
    started = started_metering(verdict, before, evidence)
    stopped = (
        not started
        and before is not None
        and before.says == OverageSays.CAN_METER
        and evidence.says == OverageSays.HARD_STOP
        and verdict.overage == Overage.HARD_STOP
    )
    if started or stopped:
        # The audit names the wire as its actor (source `evidence`), with the overage
        # the pools used before and after and the evidence that moved it.
        meters, hard = Overage.METERS_TO_PAID.value, Overage.HARD_STOP.value
        billing_services.record_audit(
            target_type="connection",
            target_id=connection.connection_id,
            action="update",
            actor=EVIDENCE_ACTOR,
            before={
                "effective_overage": hard if started else meters,
                "evidence": None if before is None else evidence_json(before),
            },
            after={"effective_overage": meters if started else hard, "evidence": stored},
            now=now,
        )
    return True


def pushed_evidence(says: str | None) -> OverageEvidence | None:
    """The evidence a pushed reading carries (`overage_evidence`); seen when checked."""
    if says is None:
        return None
    return OverageEvidence(
        says=OverageSays(says), detail=f"the gateway pushed overage_evidence: {says}", source="push"
    )


def scoped_status(connection: Connection, now: datetime) -> list[dict[str, Any]]:
    """The status API's `scoped`: one entry per model scope the connection has a window
    or a cooldown for, sorted by scope."""
    entries = []
    for scoped in scoped_of(connection.scoped_state, _current_checked_at(connection)):
        reading = scoped.reading
        cooldown = scoped.cooldown_until
        entries.append(
            {
                "model_scope": scoped.model_scope,
                "remaining_percent": None if reading is None else reading.remaining_percent,
                "reset_at": None if reading is None else reading.reset_at,
                "hysteresis": {
                    "state": scoped.hysteresis.state.value,
                    "since": scoped.hysteresis.since,
                    "reason": scoped.hysteresis.reason,
                },
                "cooldown_until": cooldown if cooldown is not None and cooldown > now else None,
            }
        )
    return entries
