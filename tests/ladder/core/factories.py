"""Builders for the pure core's tests: a curated catalog, views, candidates, a decide
runner. No database and no clock: every test injects `NOW` and a frozen `LadderConfig`."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from billing.classify import (
    Billing,
    BillingVerdict,
    Catalog,
    CatalogRow,
    Overage,
)
from billing.tiers import Tier
from ladder.core import (
    NEVER_READ,
    AutoId,
    CandidateIn,
    ConnectionView,
    Decision,
    Grouping,
    Hysteresis,
    HysteresisState,
    LadderConfig,
    QuotaStatus,
    Reading,
    Reason,
    Rung,
    RungSpend,
    decide,
)

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


CONFIG = LadderConfig()


SUBSCRIPTION = AutoId(Grouping.SUBSCRIPTION)


THRIFTY = AutoId(Grouping.THRIFTY)


# The spec's curated table, as the data migration seeds it.
CURATED = Catalog(
    [
        CatalogRow(1, "claude", "oauth", Billing.SUBSCRIPTION, Overage.HARD_STOP, "Pro/Max plan"),
        CatalogRow(2, "codex", "oauth", Billing.SUBSCRIPTION, Overage.HARD_STOP, "ChatGPT plan"),
        CatalogRow(3, "antigravity", "oauth", Billing.SUBSCRIPTION, Overage.HARD_STOP, "plan"),
        CatalogRow(4, "cursor", "oauth", Billing.SUBSCRIPTION, Overage.UNKNOWN, "usage pricing"),
        CatalogRow(5, "copilot", "apikey", Billing.SUBSCRIPTION, Overage.UNKNOWN, "per seat"),
        CatalogRow(
            6, "devin-desktop", "oauth", Billing.SUBSCRIPTION, Overage.METERS_TO_PAID, "units"
        ),
        CatalogRow(7, "openrouter", None, Billing.METERED, Overage.METERS_TO_PAID, "per token"),
    ]
)


PLAN = CURATED.classify("claude", "oauth")


METERED = CURATED.classify("openrouter", "apikey")


FRESH = Reading(QuotaStatus.SAFE, 50.0, None, NOW)


DROPPED = Hysteresis(HysteresisState.DROPPED_OUT, NOW - timedelta(hours=1), "1.0 % left")


def reading(
    remaining: float | None = 50.0,
    *,
    status: QuotaStatus = QuotaStatus.SAFE,
    age_seconds: float = 0,
    reset_at: datetime | None = None,
) -> Reading:
    return Reading(status, remaining, reset_at, NOW - timedelta(seconds=age_seconds))


def view(
    connection_id: str,
    *,
    provider: str = "claude",
    auth_type: str | None = "oauth",
    billing: BillingVerdict | None = None,
    is_active: bool = True,
    cooldown_until: datetime | None = None,
    quota: Reading | None = FRESH,
    hysteresis: Hysteresis = NEVER_READ,
) -> ConnectionView:
    """A connection classified against the curated table unless `billing` is given."""
    return ConnectionView(
        connection_id=connection_id,
        provider=provider,
        auth_type=auth_type,
        billing=billing if billing is not None else CURATED.classify(provider, auth_type),
        is_active=is_active,
        cooldown_until=cooldown_until,
        reading=quota,
        hysteresis=hysteresis,
    )


def pinned(
    connection_id: str,
    *,
    id: int = 1,
    provider: str = "claude",
    model: str = "sonnet",
    categories: tuple[str, ...] = (),
) -> CandidateIn:
    return CandidateIn(id, provider, model, categories, connection_id, None)


def allowlisted(
    *connection_ids: str,
    id: int = 1,
    provider: str = "claude",
    model: str = "sonnet",
    categories: tuple[str, ...] = (),
) -> CandidateIn:
    return CandidateIn(id, provider, model, categories, None, connection_ids)


def run(
    auto_id: AutoId,
    candidates: Sequence[CandidateIn],
    views: Sequence[ConnectionView],
    *,
    tiers: dict[tuple[str, str], Tier] | None = None,
    spend: dict[Rung, RungSpend] | None = None,
    config: LadderConfig = CONFIG,
) -> Decision:
    connections = {connection.connection_id: connection for connection in views}
    return decide(auto_id, candidates, connections, tiers or {}, spend or {}, config, NOW)


def pool(decision: Decision) -> list[tuple[int | None, str, str | tuple[str, ...] | None]]:
    """Each entry as (candidate id, rung label, pinned id or allowlist)."""
    return [
        (entry.id, entry.rung.label, entry.connection_id or entry.allowed_connection_ids)
        for entry in decision.candidates
    ]


def reasons(decision: Decision) -> list[tuple[str, Reason]]:
    return [(row.connection_id, row.reason) for row in decision.excluded]


LADDER_VIEWS = (
    view("plan"),
    view("local", provider="local", auth_type="none", quota=None),
    view("or", provider="openrouter", auth_type="apikey", quota=None),
)


LADDER_TIERS = {
    ("openrouter", "llama-free"): Tier.FREE,
    ("openrouter", "mini"): Tier.CHEAP,
    ("openrouter", "opus"): Tier.PREMIUM,
}
