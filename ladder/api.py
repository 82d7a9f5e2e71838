"""REST endpoints of the ladder (spec/api.md): connections, readings, events, candidates,
pools, the models list, settings and spend. Each endpoint validates, calls a service,
and maps the result to a schema."""

from __future__ import annotations

import time
from decimal import Decimal
from typing import Annotated, Any

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from ninja import Path, Query, Router, Schema, Status

from ladder import event_batch, metrics, pool_answers, services
from ladder.core import (
    ADVERTISED_AUTO_IDS,
    AutoId,
    CandidateIn,
    WindowReading,
    connection_rung,
    is_reading_current,
)
from ladder.core.change_version import VERSION_REGEX, format_version, parse_version
from ladder.core.scopes import effective_overage
from ladder.core.settings_bounds import TUNING_FIELDS
from ladder.models import Candidate, Connection
from ladder.schemas import (
    CONNECTION_ID_REGEX,
    CandidateOut,
    ConnectionIn,
    ConnectionOut,
    DecisionOut,
    EventBatchIn,
    EventBatchOut,
    EventIn,
    EventResultOut,
    ModelListOut,
    PoolRequestIn,
    QueuedOut,
    ReadingIn,
    ReadingOut,
    SettingsSchema,
    StatusOut,
)
from ladder.schemas import CandidateIn as CandidateSchema
from omniroute_admin.auth import actor_of, gateway_auth, operator_auth
from omniroute_admin.change_feed import HOLD_HEADER, hold_value
from omniroute_admin.errors import (
    BODY_ERRORS,
    GATEWAY_ERRORS,
    OPERATOR_ERRORS,
    PATH_ERRORS,
    located,
)

router = Router(tags=["ladder"])

ConnectionIdPath = Annotated[
    str,
    Path(
        pattern=CONNECTION_ID_REGEX,
        description="The gateway's own connection id.",
        example="claude-max-1",
    ),
]


def _detail(message: str) -> dict[str, str]:
    return {"detail": message}


# --- connections -------------------------------------------------------------------------


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
        return Status(404, _detail(f"No connection {connection_id!r}."))
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


# --- readings and events -------------------------------------------------------------------


@router.post(
    "/connections/{connection_id}/readings",
    response={201: ReadingOut, 404: dict, **BODY_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
)
def post_reading(request: HttpRequest, connection_id: ConnectionIdPath, payload: ReadingIn) -> Any:
    """Store a quota reading. Status is derived when absent (UNKNOWN without a number,
    EXHAUSTED at or below 0, else SAFE); windows reduce to the binding (lowest) one."""
    data = services.ReadingInput(
        status=payload.status,
        remaining_percent=payload.remaining_percent,
        reset_at=payload.reset_at,
        checked_at=payload.checked_at,
        windows=tuple(
            WindowReading(w.name, w.remaining_percent, w.reset_at, w.model_scope)
            for w in payload.windows
        )
        if payload.windows is not None
        else None,
        evidence=services.pushed_evidence(payload.overage_evidence),
    )
    stored = services.store_reading(connection_id, data)
    return Status(201, stored.reading)


@router.post(
    "/connections/{connection_id}/events",
    response={200: EventResultOut, 404: dict, **BODY_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
)
def post_event(request: HttpRequest, connection_id: ConnectionIdPath, payload: EventIn) -> Any:
    """Report an upstream outcome: failures write a cooldown (Retry-After, else backoff),
    clamped to the upstream's reset; `quota_exhausted` also stores an EXHAUSTED reading;
    `success` clears the failure count and the cooldown."""
    result = services.apply_event(
        connection_id,
        kind=payload.kind,
        retry_after_seconds=payload.retry_after_seconds,
        reset_at=payload.reset_at,
        headers=payload.headers,
        model=payload.model,
    )
    metrics.EVENTS.labels(kind=payload.kind).inc()
    return result


@router.post(
    "/events/batch",
    response={200: EventBatchOut, **BODY_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
)
def post_event_batch(request: HttpRequest, payload: EventBatchIn) -> Any:
    """Report up to 1,000 events, each `Event` plus its `connection_id`, applied in
    order; each result (an EventResult, or `{"error": ...}` for a bad entry or an unknown
    connection) is in the slot of its entry."""
    return {"results": event_batch.apply_batch(payload.events)}


# --- candidates ----------------------------------------------------------------------------


def _candidate_input(payload: CandidateSchema) -> services.CandidateInput:
    return services.CandidateInput(
        provider=payload.provider,
        model=payload.model,
        categories=tuple(payload.categories),
        priority=payload.priority,
        connection_id=payload.connection_id,
        allowed_connection_ids=tuple(payload.allowed_connection_ids)
        if payload.allowed_connection_ids
        else None,
        ref=payload.ref,
    )


@router.get("/candidates", response={200: list[CandidateOut], **GATEWAY_ERRORS}, auth=gateway_auth)
def list_candidates(request: HttpRequest) -> list[Candidate]:
    """Registered candidates, by priority (lower first), ties by id."""
    return list(Candidate.objects.order_by("priority", "id"))


@router.post(
    "/candidates", response={201: CandidateOut, **BODY_ERRORS, **GATEWAY_ERRORS}, auth=gateway_auth
)
def create_candidate(request: HttpRequest, payload: CandidateSchema) -> Any:
    """Register a candidate: exactly one of `connection_id` and a non-empty
    `allowed_connection_ids`."""
    return Status(201, services.save_candidate(_candidate_input(payload), actor=actor_of(request)))


@router.put(
    "/candidates/{int:candidate_id}",
    response={200: CandidateOut, 404: dict, **BODY_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
)
def update_candidate(request: HttpRequest, candidate_id: int, payload: CandidateSchema) -> Any:
    """Replace a candidate's fields."""
    return services.save_candidate(_candidate_input(payload), candidate_id, actor=actor_of(request))


@router.delete(
    "/candidates/{int:candidate_id}",
    response={204: None, 404: dict, **GATEWAY_ERRORS},
    auth=gateway_auth,
)
def delete_candidate(request: HttpRequest, candidate_id: int) -> Any:
    """Remove a candidate."""
    if not services.delete_candidate(candidate_id, actor=actor_of(request)):
        return Status(404, _detail(f"No candidate {candidate_id}."))
    return Status(204, None)


# --- pools: the hot path -------------------------------------------------------------------


@router.get(
    "/pools/{path:auto_id}",
    response={200: DecisionOut, 404: dict, **GATEWAY_ERRORS},
    auth=gateway_auth,
    summary="Pool of an auto id over the registered candidates",
    openapi_extra=pool_answers.POOL_CACHING_OPENAPI,
)
def get_pool(
    request: HttpRequest, auto_id: str, if_none_match: pool_answers.IfNoneMatch = None
) -> Any:
    """The ordered pool of `auto/subscription`, `auto/thrifty` or
    `auto/<category>:<tier>` over the registered candidates, with every excluded
    connection and why. An empty pool is a 200: the intended answer of a fail-closed
    grouping; `next_change_at` tells when it may change. `ETag`, `Cache-Control` and a
    304 for `If-None-Match` of the current tag: ladder.pool_answers."""
    started = time.perf_counter()
    parsed = pool_answers.parse_pool_id(auto_id)
    if not isinstance(parsed, AutoId):
        return Status(404, parsed)
    now = timezone.now()
    decision = services.decide_registered(
        parsed, now=now, counters=pool_answers.request_counters(request)
    )
    pool_answers.observe(parsed, decision, started)
    return pool_answers.decision_response(decision, now, if_none_match)


@router.post(
    "/pools/{path:auto_id}",
    response={200: DecisionOut, 404: dict, **BODY_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
    summary="Pool of an auto id over the gateway's own ranked candidates",
    openapi_extra=pool_answers.POOL_CACHING_OPENAPI,
)
def post_pool(
    request: HttpRequest,
    auto_id: str,
    payload: PoolRequestIn,
    if_none_match: pool_answers.IfNoneMatch = None,
) -> Any:
    """Filter and order the gateway's own pool (its order is the ranking; `priority` is
    ignored, `id` is echoed back). A category id keeps only the candidates that list it.
    Caching headers and 304s as for the GET."""
    started = time.perf_counter()
    parsed = pool_answers.parse_pool_id(auto_id)
    if not isinstance(parsed, AutoId):
        return Status(404, parsed)
    candidates = []
    errors: list[dict[str, Any]] = []
    for index, item in enumerate(payload.candidates):
        if (item.connection_id is None) == (not item.allowed_connection_ids):
            errors.append(
                {
                    "loc": ["body", "payload", "candidates", index],
                    "msg": "Give exactly one of connection_id and a non-empty "
                    "allowed_connection_ids.",
                    "type": "value_error",
                }
            )
            continue
        candidates.append(
            CandidateIn(
                id=item.id,
                provider=item.provider,
                model=item.model,
                categories=tuple(item.categories),
                connection_id=item.connection_id,
                allowed_connection_ids=tuple(item.allowed_connection_ids)
                if item.allowed_connection_ids
                else None,
                ref=item.ref,
            )
        )
    if errors:
        return Status(422, {"detail": errors})
    now = timezone.now()
    decision = services.decide_for(
        parsed,
        candidates,
        now=now,
        cache_key=pool_answers.body_key(request.META.get("CONTENT_TYPE", ""), request.body),
        counters=pool_answers.request_counters(request),
        input_bytes=len(request.body),
    )
    pool_answers.observe(parsed, decision, started)
    return pool_answers.decision_response(decision, now, if_none_match)


# --- the change feed (spec/api.md "Caching a decision in the gateway") --------------------


class ChangesOut(Schema):
    model_config = {"json_schema_extra": {"example": {"version": "12.345"}}}

    version: str


MAX_FEED_WAIT_SECONDS = 30


@router.get(
    "/changes",
    response={200: ChangesOut, **PATH_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
    summary="The change version, long-polled",
)
def get_changes(
    request: HttpRequest,
    response: HttpResponse,
    after: Annotated[
        str | None,
        Query(pattern=VERSION_REGEX, description="The version you hold.", example="12.345"),
    ] = None,
    wait: Annotated[
        int,
        Query(
            ge=0, le=MAX_FEED_WAIT_SECONDS, description="Seconds to wait for a change.", example=30
        ),
    ] = 0,
) -> Any:
    """The control plane's change version. With `after` equal to it, waits up to `wait`
    seconds for the next change before answering; otherwise answers at once. The wait
    is the server layer's (omniroute_admin.change_feed): this view only decides."""
    counters = pool_answers.request_counters(request)  # read with the token
    assert counters is not None
    if wait > 0 and after is not None and parse_version(after) == counters:
        response[HOLD_HEADER] = hold_value(counters, wait)
    response["Cache-Control"] = "no-store"
    return {"version": format_version(counters)}


# --- models list ----------------------------------------------------------------------------


def models_list() -> dict[str, Any]:
    """The OpenAI-style list of the advertised (flat) auto ids."""
    return {
        "object": "list",
        "data": [
            {"id": auto_id.auto_id, "object": "model", "created": 0, "owned_by": "omniroute"}
            for auto_id in ADVERTISED_AUTO_IDS
        ],
    }


@router.get("/models", response={200: ModelListOut, **GATEWAY_ERRORS}, auth=gateway_auth)
def list_models(request: HttpRequest) -> dict[str, Any]:
    """`auto/subscription` and `auto/thrifty`, OpenAI-style. Category composites are
    accepted by the pools endpoint but not listed. Also served at /v1/models."""
    return models_list()


# --- settings -----------------------------------------------------------------------------------


def _money(value: Decimal | None) -> float | None:
    return float(value) if value is not None else None


def settings_out() -> dict[str, Any]:
    """The tuning fields, exactly, as the ladder applies them: a stored row outside the
    rules (an older release's, or edited by hand) answers its nearest legal values, the
    ones every decision uses, never a 500 (ladder.services.effective_settings_of)."""
    values, _ = services.effective_settings_of(services.get_settings_row())
    body: dict[str, Any] = {}
    for field in TUNING_FIELDS:
        value = values[field.name]
        *parents, key = SETTINGS_LOCATIONS.get(field.name, [field.name])
        place = body
        for parent in parents:
            place = place.setdefault(parent, {})
        place[key] = _money(value) if field.kind == "usd" else value
    return body


# The services name the budgets by column; the API nests them. Every other tuning field
# (ladder/core/settings_bounds.TUNING_FIELDS) sits at the top level under its own name.
SETTINGS_LOCATIONS = {
    "cheap_budget_usd": ["rung_budget_usd", "cheap"],
    "premium_budget_usd": ["rung_budget_usd", "premium"],
}


@router.get("/settings/ladder", response={200: SettingsSchema, **GATEWAY_ERRORS}, auth=gateway_auth)
def get_settings(request: HttpRequest) -> dict[str, Any]:
    """The ladder's tuning. There is no `enabled` field, deliberately."""
    return settings_out()


def _usd_6dp(value: float | None) -> Decimal | None:
    # The settings columns hold 6 decimals: round, rather than refuse 0.1234567 with a
    # 422 that names a model field the API does not have.
    return Decimal(str(value)).quantize(Decimal("0.000001")) if value is not None else None


@router.put(
    "/settings/ladder",
    response={200: SettingsSchema, **BODY_ERRORS, **OPERATOR_ERRORS},
    auth=operator_auth,
)
def put_settings(request: HttpRequest, payload: SettingsSchema) -> Any:
    """Replace every tuning field (a missing field, or an `enabled` field, is a 422)."""
    body = payload.model_dump()
    values: dict[str, Any] = {}
    for field in TUNING_FIELDS:
        value: Any = body
        for key in SETTINGS_LOCATIONS.get(field.name, [field.name]):
            value = value[key]
        values[field.name] = _usd_6dp(value) if field.kind == "usd" else value
    with located(SETTINGS_LOCATIONS):
        services.update_settings(values, actor=actor_of(request))
    return settings_out()
