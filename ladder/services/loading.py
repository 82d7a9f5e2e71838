"""Loading what a decision needs in a constant number of queries, as the core's types:
views of connections, registered candidates, tiers and the window's spend."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from billing import services as billing_services
from billing.classify import Catalog
from billing.tiers import PriceBook, Tier
from ladder import core
from ladder.core import (
    CandidateIn,
    ConnectionView,
    Hysteresis,
    HysteresisState,
    LadderConfig,
    QuotaStatus,
    Reading,
    Rung,
    RungSpend,
)
from ladder.core.types import OverageEvidence, OverageSays, ScopedQuota
from ladder.models import Candidate, Connection, QuotaReading
from ladder.services.common import PAID_RUNGS
from ladder.services.config import load_config
from ladder.services.spend_totals import spend_by_rung, window_days, window_totals


def reading_of(row: QuotaReading | None) -> Reading | None:
    """The core's view of a stored reading."""
    if row is None:
        return None
    return Reading(
        status=QuotaStatus(row.status),
        remaining_percent=row.remaining_percent,
        reset_at=row.reset_at,
        checked_at=row.checked_at,
    )


def hysteresis_of(connection: Connection) -> Hysteresis:
    """The core's view of a connection's stored hysteresis state."""
    return Hysteresis(
        state=HysteresisState(connection.hysteresis_state),
        since=connection.hysteresis_since,
        reason=connection.hysteresis_reason,
    )


def _instant(text: Any) -> datetime | None:
    return datetime.fromisoformat(text) if isinstance(text, str) and text else None


def evidence_of(data: Any) -> OverageEvidence | None:
    """The core's view of a connection's stored billing evidence (None: none seen)."""
    if not isinstance(data, dict) or data.get("says") not in (OverageSays.CAN_METER, "hard_stop"):
        return None
    return OverageEvidence(
        says=OverageSays(data["says"]),
        detail=str(data.get("detail", "")),
        source=str(data.get("source", "")),
        seen_at=_instant(data.get("seen_at")),
    )


def scoped_of(data: Any, checked_at: datetime | None) -> tuple[ScopedQuota, ...]:
    """The core's view of a connection's stored model scopes, sorted by scope; a scope's
    window is checked when the connection's reading was."""
    if not data or not isinstance(data, dict):
        return ()
    scoped = []
    for scope in sorted(data):
        entry = data[scope]
        reading = None
        if entry.get("has_window") and checked_at is not None:
            remaining = entry.get("remaining")
            reading = Reading(
                core.derive_status(remaining),
                remaining,
                _instant(entry.get("reset_at")),
                checked_at,
            )
        hysteresis = Hysteresis(
            HysteresisState(entry.get("state", HysteresisState.IN_PLAY)),
            _instant(entry.get("since")),
            str(entry.get("reason", "never read")),
        )
        scoped.append(
            ScopedQuota(scope, reading, hysteresis, _instant(entry.get("cooldown_until")))
        )
    return tuple(scoped)


def view_of(connection: Connection, catalog: Catalog) -> ConnectionView:
    """The core's view of one connection row (its current reading joined in, or loaded)."""
    reading = reading_of(connection.current_reading)
    return ConnectionView(
        connection_id=connection.connection_id,
        provider=connection.provider,
        auth_type=connection.auth_type,
        billing=catalog.classify(connection.provider, connection.auth_type),
        is_active=connection.is_active,
        cooldown_until=connection.cooldown_until,
        reading=reading,
        hysteresis=hysteresis_of(connection),
        evidence=evidence_of(connection.overage_evidence),
        scoped=scoped_of(connection.scoped_state, reading.checked_at if reading else None),
        exit_cutoff_percent=connection.exit_cutoff_percent,
        reentry_min_remaining_percent=connection.reentry_min_remaining_percent,
    )


def connections_with_readings() -> Any:
    """Connections with their current reading joined in (one query when evaluated)."""
    return Connection.objects.select_related("current_reading")


def spend_in_window(config: LadderConfig, now: datetime) -> dict[Rung, RungSpend]:
    """Spend of each paid rung in the current calendar budget window: one query over the
    running totals per UTC day (ladder.services.spend_totals), never the ledger."""
    first, end_day = window_days(config, now)
    _, end = core.budget_window_bounds(config.budget_window, now)
    totals = window_totals([rung.label for rung in PAID_RUNGS], first, end_day)
    return spend_by_rung(totals, end)


@dataclass(frozen=True, slots=True)
class DecisionInputs:
    """Everything a decision needs besides the candidates, loaded up front."""

    config: LadderConfig
    catalog: Catalog
    prices: PriceBook
    spend: dict[Rung, RungSpend]


def load_decision_inputs(now: datetime) -> DecisionInputs:
    """Settings, catalog, prices and window spend: four queries whatever the pool size."""
    config = load_config()
    return DecisionInputs(
        config=config,
        catalog=billing_services.load_catalog(),
        prices=billing_services.load_price_book(),
        spend=spend_in_window(config, now),
    )


def candidate_in(candidate: Candidate) -> CandidateIn:
    """The core's view of a registered candidate."""
    allowed = candidate.allowed_connection_ids
    return CandidateIn(
        id=candidate.pk,
        provider=candidate.provider,
        model=candidate.model,
        categories=tuple(candidate.categories or ()),
        connection_id=candidate.connection_id,
        allowed_connection_ids=tuple(allowed) if allowed else None,
        ref=candidate.ref,
    )


VIEW_FIELDS = (
    "connection_id",
    "provider",
    "auth_type",
    "is_active",
    "cooldown_until",
    "hysteresis_state",
    "hysteresis_since",
    "hysteresis_reason",
    "current_reading__status",
    "current_reading__remaining_percent",
    "current_reading__reset_at",
    "current_reading__checked_at",
    "overage_evidence",
    "scoped_state",
    "exit_cutoff_percent",
    "reentry_min_remaining_percent",
)


def load_views(referenced: dict[str, str], catalog: Catalog) -> dict[str, ConnectionView]:
    """Views of the referenced connections (one query, plain tuples, no model objects);
    ids never registered become uncurated views."""
    rows = Connection.objects.filter(connection_id__in=list(referenced)).values_list(*VIEW_FIELDS)
    views = views_of_rows(rows, catalog)
    for connection_id, provider in referenced.items():
        if connection_id not in views:
            views[connection_id] = core.unregistered_view(connection_id, provider)
    return views


def views_of_rows(rows: Iterable[Sequence[Any]], catalog: Catalog) -> dict[str, ConnectionView]:
    """Views of connection rows holding `VIEW_FIELDS` in order, by connection id."""
    views: dict[str, ConnectionView] = {}
    verdicts: dict[tuple[str, str], Any] = {}
    for (
        connection_id,
        provider,
        auth_type,
        is_active,
        cooldown_until,
        state,
        since,
        reason,
        status,
        remaining,
        reset_at,
        checked_at,
        evidence,
        scoped,
        exit_cutoff,
        reentry_floor,
    ) in rows:
        verdict = verdicts.get((provider, auth_type))
        if verdict is None:
            verdict = verdicts[(provider, auth_type)] = catalog.classify(provider, auth_type)
        views[connection_id] = ConnectionView(
            connection_id=connection_id,
            provider=provider,
            auth_type=auth_type,
            billing=verdict,
            is_active=is_active,
            cooldown_until=cooldown_until,
            reading=Reading(QuotaStatus(status), remaining, reset_at, checked_at)
            if checked_at is not None
            else None,
            hysteresis=Hysteresis(HysteresisState(state), since, reason),
            evidence=evidence_of(evidence) if evidence else None,
            scoped=scoped_of(scoped, checked_at) if scoped else (),
            exit_cutoff_percent=exit_cutoff,
            reentry_min_remaining_percent=reentry_floor,
        )
    return views


def tiers_of(
    candidates: Sequence[CandidateIn], prices: PriceBook, config: LadderConfig
) -> dict[tuple[str, str], Tier]:
    """The economic tier of every (provider, model) the candidates name, once each."""
    tiers: dict[tuple[str, str], Tier] = {}
    for candidate in candidates:
        pair = (candidate.provider, candidate.model)
        if pair not in tiers:
            tiers[pair] = prices.tier_of(
                candidate.provider, candidate.model, config.cheap_max_input_usd_per_mtok
            )
    return tiers


def referenced_connections(candidates: Sequence[CandidateIn]) -> dict[str, str]:
    referenced: dict[str, str] = {}
    for candidate in candidates:
        for connection_id in candidate.connection_ids:
            referenced.setdefault(connection_id, candidate.provider)
    return referenced


def registered_candidates() -> list[CandidateIn]:
    """Every registered candidate, by priority then id (one query)."""
    return [candidate_in(candidate) for candidate in Candidate.objects.order_by("priority", "id")]
