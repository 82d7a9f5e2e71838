"""The connections (spec/api.md "Connections"): list, create or replace, read, delete,
a connection's status, and a refresh of its quota source."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from django.utils import timezone
from ninja import Router, Status

from ladder import services
from ladder.api.params import ConnectionIdPath, detail
from ladder.core import connection_rung, is_reading_current
from ladder.core.scopes import effective_overage
from ladder.models import Connection
from ladder.schemas import ConnectionIn, ConnectionOut, QueuedOut, StatusOut
from omniroute_admin.auth import actor_of, gateway_auth
from omniroute_admin.errors import BODY_ERRORS, GATEWAY_ERRORS, PATH_ERRORS

router = Router(tags=["ladder"])


# Models are returned as they are: ConnectionOut, ReadingOut, CandidateOut and SpendOut
# read their attributes (never a credential).


@router.get(
    "/connections", response={200: list[ConnectionOut], **GATEWAY_ERRORS}, auth=gateway_auth
)
def list_connections(request: HttpRequest) -> list[Connection]:
    """Every registered connection (credentials are never returned)."""
    return list(Connection.objects.all())


@router.put(
    "/connections/{connection_id}",
    response={200: ConnectionOut, **BODY_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
)
def put_connection(
    request: HttpRequest, connection_id: ConnectionIdPath, payload: ConnectionIn
) -> Any:
    """Create or replace a connection. `credential` is write-only and encrypted at rest;
    omit it to keep the stored one, send "" to clear it."""
    connection, _ = services.upsert_connection(
        connection_id,
        services.ConnectionInput(
            provider=payload.provider,
            auth_type=payload.auth_type,
            label=payload.label,
            active=payload.active,
            quota_source=payload.quota_source,
            credential=payload.credential,
            exit_cutoff_percent=payload.exit_cutoff_percent,
            reentry_min_remaining_percent=payload.reentry_min_remaining_percent,
        ),
        actor=actor_of(request),
    )
    return connection


@router.get(
    "/connections/{connection_id}",
    response={200: ConnectionOut, 404: dict, **PATH_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
)
def get_connection(request: HttpRequest, connection_id: ConnectionIdPath) -> Any:
    """One connection."""
    return services.get_connection(connection_id)


@router.delete(
    "/connections/{connection_id}",
    response={204: None, 404: dict, **PATH_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
)
def delete_connection(request: HttpRequest, connection_id: ConnectionIdPath) -> Any:
    """Delete a connection with its readings."""
    if not services.delete_connection(connection_id, actor=actor_of(request)):
        return Status(404, detail(f"No connection {connection_id!r}."))
    return Status(204, None)


def status_out(connection: Connection, *, now: Any = None) -> dict[str, Any]:
    """A connection's billing verdict, rung, reading, hysteresis, forecast and cooldown."""
    from billing.services import load_catalog

    now = now or timezone.now()
    config = services.load_config()
    verdict = load_catalog().classify(connection.provider, connection.auth_type)
    reading = connection.current_reading
    core_reading = services.reading_of(reading)
    evidence = services.evidence_of(connection.overage_evidence)
    rung = connection_rung(verdict)
    return {
        "connection_id": connection.connection_id,
        "provider": connection.provider,
        "auth_type": connection.auth_type,
        "active": connection.is_active,
        "billing": {
            "billing": verdict.billing.value,
            "overage": verdict.overage.value,
            "reason": verdict.reason,
            "catalog_entry_id": verdict.catalog_entry_id,
            "effective_overage": effective_overage(verdict, evidence).value,
            "evidence": evidence,
        },
        "rung": rung.label if rung is not None else None,
        "reading": reading,
        "reading_current": core_reading is not None
        and is_reading_current(core_reading, config, now),
        "hysteresis": {
            "state": connection.hysteresis_state,
            "since": connection.hysteresis_since,
            "reason": connection.hysteresis_reason,
        },
        "scoped": services.scoped_status(connection, now),
        "cooldown_until": connection.cooldown_until
        if connection.cooldown_until and connection.cooldown_until > now
        else None,
        "forecast": services.forecast_json(
            services.forecast_of(connection, now=now, config=config, billing=verdict.billing)
        ),
        "consecutive_failures": connection.consecutive_failures,
        "quota_error": connection.quota_error,
    }


@router.get(
    "/connections/{connection_id}/status",
    response={200: StatusOut, 404: dict, **PATH_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
)
def get_status(request: HttpRequest, connection_id: ConnectionIdPath) -> Any:
    """Billing verdict (and the catalog entry that decided it), rung, current reading,
    hysteresis state and cooldown of one connection."""
    return status_out(services.get_connection(connection_id))


@router.post(
    "/connections/{connection_id}/refresh",
    response={202: QueuedOut, 404: dict, 409: dict, **PATH_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
)
def refresh_connection(request: HttpRequest, connection_id: ConnectionIdPath) -> Any:
    """Enqueue an immediate background poll of the connection's quota source."""
    services.request_refresh(connection_id)
    return Status(202, {"queued": True})
