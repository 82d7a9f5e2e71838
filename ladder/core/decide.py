"""The decision: the verified pool of an auto id now, ordered by rung, with every
exclusion and why, and the instant until which its inputs stay valid.

The ladder keeps no state of its own, deliberately: rung eligibility is recomputed from
current readings at every pool build, so no "currently on rung 3" record can outlive a
reset.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Final

from billing.classify import UNCURATED_VERDICT, Billing, BillingVerdict, Overage
from billing.tiers import Tier
from ladder.core.auto_ids import AutoId
from ladder.core.budgets import budget_cause
from ladder.core.preference import PlanOrder, PreferenceKey
from ladder.core.prose import catalog_entry_text, duration_text, instant_text
from ladder.core.quota import quota_cause_within, refresh_expected_at
from ladder.core.scopes import (
    connection_config,
    effective_overage,
    evidence_text,
    model_scope_cause,
    plan_can_meter,
    with_reserve_named,
)
from ladder.core.types import (
    NEVER_READ,
    UNVERIFIED_QUOTA_REASONS,
    CandidateIn,
    Cause,
    ConnectionView,
    DecidedCandidate,
    Exclusion,
    Grouping,
    LadderConfig,
    Reason,
    Rung,
    RungSpend,
)

_RUNG_BY_TIER: Final[dict[str, Rung]] = {
    Tier.FREE: Rung.FREE,
    Tier.CHEAP: Rung.CHEAP,
    Tier.PREMIUM: Rung.PREMIUM,
}

# --------------------------------------------------------------------------- rungs

# Enum members that the per-connection code below compares against, bound once. On
# Python 3.11 reading a member through its class (`Billing.SUBSCRIPTION`) costs about
# 0.3 µs, and a decision over 2,000 candidates does tens of thousands of such reads.
_PLAN: Final = Billing.SUBSCRIPTION
_KEYLESS: Final = Billing.KEYLESS
_RUNG_PLAN: Final = Rung.SUBSCRIPTION
_RUNG_KEYLESS: Final = Rung.KEYLESS
_RUNG_FREE: Final = Rung.FREE
_SUBSCRIPTION: Final = Grouping.SUBSCRIPTION
_THRIFTY: Final = Grouping.THRIFTY
_PREMIUM_TIER: Final = Tier.PREMIUM


def connection_rung(billing: BillingVerdict) -> Rung | None:
    """The rung fixed by the connection alone; None when it depends on the model (metered)."""
    kind = billing.billing
    if kind == _PLAN:
        return _RUNG_PLAN
    if kind == _KEYLESS:
        return _RUNG_KEYLESS
    return None


def rung_for(billing: BillingVerdict, tier: Tier) -> Rung:
    """Rung of a (candidate, connection) pair: subscription, keyless, else the model's tier."""
    # Uncurated is not free: unknown billing falls through with metered, onto the tier.
    fixed = connection_rung(billing)
    return fixed if fixed is not None else _RUNG_BY_TIER[tier]


# --------------------------------------------------------------------------- decisions


# Weak-referenceable: ladder.api.pool_answers keeps rendered bodies by decision without keeping the
# decision itself alive.
@dataclass(frozen=True, slots=True, weakref_slot=True)
class Decision:
    """The pool of one auto id at `computed_at`: ordered entries, exclusions, next change,
    and `valid_until`, the earliest instant at which it can change on its own (no write:
    a reading turning stale, a reset, a cooldown ending, a budget window ending; None
    when none; see `inputs_valid_until`). A gateway may keep it until then."""

    auto_id: AutoId
    computed_at: datetime
    candidates: tuple[DecidedCandidate, ...]
    excluded: tuple[Exclusion, ...]
    next_change_at: datetime | None
    valid_until: datetime | None = None
    # The preference key of each plan connection the order of preference compared (in an
    # entry of two or more): what the pages' "why this seat first" sentence reads.
    preference: Mapping[str, PreferenceKey | None] = field(default_factory=dict)
    # The keys for a model of the connections a window scoped to that model binds, by
    # (connection, model): they, not `preference`, ordered that model's entries.
    model_preference: Mapping[tuple[str, str], PreferenceKey | None] = field(default_factory=dict)
    # What each paid rung's budget still allowed at `computed_at` (cheap, premium): None
    # when the rung has no budget (spec/api.md, "Budgets under bursts").
    budget_left_usd: tuple[Decimal | None, Decimal | None] = (None, None)


def budget_left(
    spend: Mapping[Rung, RungSpend], config: LadderConfig
) -> tuple[Decimal | None, Decimal | None]:
    """What the cheap and premium budgets still allow in their window (never below 0)."""
    left: list[Decimal | None] = []
    for rung in (Rung.CHEAP, Rung.PREMIUM):
        budget = config.budget_for(rung)
        if budget is None:
            left.append(None)
            continue
        rung_spend = spend.get(rung)
        spent = Decimal(0) if rung_spend is None else rung_spend.spent_usd
        left.append(max(Decimal(0), budget - spent))
    return left[0], left[1]


def connection_cause(view: ConnectionView, grouping: Grouping, now: datetime) -> Cause | None:
    """The connection-wide reasons, in precedence order: inactive, billing, cooling down."""
    if not view.is_active:
        return Cause(Reason.INACTIVE, f"Connection {view.connection_id} is marked inactive", None)
    if grouping == _SUBSCRIPTION:
        # Only auto/subscription excludes on billing; thrifty orders every billing class.
        billing_cause = subscription_billing_cause(view)
        if billing_cause is not None:
            return billing_cause
    cooldown_until = view.cooldown_until
    if cooldown_until is not None and cooldown_until > now:
        return Cause(
            Reason.COOLING_DOWN,
            f"Cooling down until {instant_text(cooldown_until)} "
            f"({duration_text((cooldown_until - now).total_seconds())} s from now)",
            cooldown_until,
        )
    return None


def subscription_billing_cause(view: ConnectionView) -> Cause | None:
    """Why a connection's billing keeps it out of auto/subscription; None when it qualifies."""
    verdict = view.billing
    billing = verdict.billing
    if billing == Billing.SUBSCRIPTION:
        overage = effective_overage(verdict, view.evidence)
        if overage == Overage.HARD_STOP:
            return None
        evidence = view.evidence
        if overage != verdict.overage and evidence is not None:
            # Live evidence overrides a hard-stop catalog entry (one-sided: never safer).
            return Cause(
                Reason.OVERAGE_NOT_HARD_STOP,
                f"Live evidence says it can bill past the plan: {evidence_text(evidence)}; "
                f"the catalog says {verdict.overage} ({catalog_entry_text(verdict)})",
                None,
            )
        # Unknown overage counts as meters-to-paid: past the plan it could bill.
        return Cause(
            Reason.OVERAGE_NOT_HARD_STOP,
            f"Overage is {verdict.overage}, not hard-stop: past the plan it could bill "
            f"({catalog_entry_text(verdict)})",
            None,
        )
    if billing == Billing.KEYLESS:
        # Deliberately: this grouping means "the plan I pay for"; keyless is thrifty's.
        return Cause(
            Reason.KEYLESS_NOT_SUBSCRIPTION,
            "The no-auth path is keyless, not a subscription: "
            "use auto/thrifty for keyless capacity",
            None,
        )
    if billing == Billing.METERED:
        return Cause(
            Reason.METERED,
            f"Billing is metered, outside the plan ({catalog_entry_text(verdict)})",
            None,
        )
    auth = "no auth type" if view.auth_type is None else f"auth {view.auth_type}"
    return Cause(
        Reason.UNCURATED,
        f"No catalog entry covers {view.provider} with {auth}: uncurated is treated as metered",
        None,
    )


# Per connection and decision: the rung fixed by its billing (None: the model's tier
# decides) and the cause that keeps it out on each rung (None: usable there). Computed
# once per connection per decision, because many candidates share connections.
_Verdict = tuple[Rung | None, tuple[Cause | None, ...]]
_RUNGS: Final = len(Rung)
_RUNG_OF: Final[tuple[Rung, ...]] = tuple(Rung)  # by rung number


def _connection_verdict(
    view: ConnectionView,
    grouping: Grouping,
    budget_causes: tuple[Cause | None, Cause | None],
    config: LadderConfig,
    now: datetime,
    max_age: timedelta,
) -> _Verdict:
    fixed_rung = connection_rung(view.billing)
    gate = connection_cause(view, grouping, now)
    if gate is not None:
        return fixed_rung, (gate,) * _RUNGS
    quota = grouping_quota_cause(view, grouping, config, now, max_age)
    # Rungs 0-2 run out on quota; paid rungs 3-4 never consult readings, only budgets.
    return fixed_rung, (quota, quota, quota, *budget_causes)


def grouping_quota_cause(
    view: ConnectionView,
    grouping: Grouping,
    config: LadderConfig,
    now: datetime,
    max_age: timedelta,
) -> Cause | None:
    """What keeps the connection off the quota-gated rungs (0-2) in this grouping;
    None when its quota passes there."""
    quota = quota_cause_within(
        view.reading, view.hysteresis, connection_config(view, config), now, max_age
    )
    if (
        quota is not None
        and grouping == _THRIFTY
        and quota.reason in UNVERIFIED_QUOTA_REASONS
        and not plan_can_meter(view)
    ):
        # Thrifty fails open where subscription fails closed: trying a plan connection
        # with no usable reading costs nothing; refusing it would send the request to a
        # paid rung on missing telemetry. Not so for a plan that can meter: past its
        # limit it bills at the provider's price, outside every budget.
        return None
    return with_reserve_named(quota, view)


def unregistered_view(connection_id: str, provider: str) -> ConnectionView:
    """An id the gateway named but never registered: uncurated (metered), never read;
    never "safe" by omission."""
    return ConnectionView(
        connection_id=connection_id,
        provider=provider,
        auth_type=None,
        billing=UNCURATED_VERDICT,
        is_active=True,
        cooldown_until=None,
        reading=None,
        hysteresis=NEVER_READ,
    )


def decide(
    auto_id: AutoId,
    candidates: Sequence[CandidateIn],
    connections: Mapping[str, ConnectionView],
    tiers: Mapping[tuple[str, str], Tier],
    spend: Mapping[Rung, RungSpend],
    config: LadderConfig,
    now: datetime,
    *,
    known_models: frozenset[str] = frozenset(),
) -> Decision:
    """The verified pool of an auto id now, ordered by rung, with every exclusion and why.
    `known_models`: the models the product can name (a window scoped to none of them
    binds every model of its connection; none given: every scope binds every model)."""
    grouping = auto_id.grouping
    category = auto_id.category
    max_age = timedelta(seconds=config.max_state_age_seconds)
    budget_causes = (
        budget_cause(Rung.CHEAP, spend.get(Rung.CHEAP), config, now),
        budget_cause(Rung.PREMIUM, spend.get(Rung.PREMIUM), config, now),
    )
    verdicts: dict[str, _Verdict] = {}
    # The connections with windows scoped to a model: judged per (candidate, connection).
    scoped_views: dict[str, ConnectionView] = {}
    buckets: tuple[list[DecidedCandidate], ...] = tuple([] for _ in Rung)
    excluded: list[Exclusion] = []
    next_change_at: datetime | None = None
    plan_order = PlanOrder(connections, config, now, known_models)

    for candidate in candidates:
        if category is not None and category not in candidate.categories:
            continue
        provider = candidate.provider
        model = candidate.model
        pinned = candidate.connection_id
        connection_ids = candidate.connection_ids
        tier_rung: Rung | None = None
        # The connections passing on each rung, by rung number (a list: enum keys hash
        # through Python code).
        passing: list[list[str] | None] = [None] * _RUNGS
        for connection_id in connection_ids:
            verdict = verdicts.get(connection_id)
            if verdict is None:
                view = connections.get(connection_id) or unregistered_view(connection_id, provider)
                verdict = _connection_verdict(view, grouping, budget_causes, config, now, max_age)
                verdicts[connection_id] = verdict
                if view.scoped:
                    scoped_views[connection_id] = view
            rung, causes = verdict
            if rung is None:
                if tier_rung is None:
                    # An unpriced model is premium: it must never land on free.
                    tier_rung = _RUNG_BY_TIER[tiers.get((provider, model), _PREMIUM_TIER)]
                rung = tier_rung
            cause = causes[rung]
            if cause is None and scoped_views and rung <= _RUNG_FREE:
                scoped_view = scoped_views.get(connection_id)
                if scoped_view is not None:
                    cause = model_scope_cause(
                        scoped_view, model, grouping, config, now, max_age, known_models
                    )
            if cause is None:
                passed = passing[rung]
                if passed is None:
                    passing[rung] = [connection_id]
                else:
                    passed.append(connection_id)
                continue
            excluded.append(
                Exclusion(provider, model, connection_id, rung, cause.reason, cause.detail)
            )
            may_return_at = cause.may_return_at
            if may_return_at is not None and (
                next_change_at is None or may_return_at < next_change_at
            ):
                next_change_at = may_return_at
        # The plan connections in order of preference: the capacity that expires soonest
        # first (ladder/core/preference.py); only this rung holds plan connections.
        plan_passed = passing[_RUNG_PLAN]
        if plan_passed is not None:
            passing[_RUNG_PLAN] = plan_order.ordered(plan_passed, model)
        # Split by rung, deliberately: a plan connection and a metered key for the same
        # model become separate entries so dispatch can never pick the paid key while the
        # plan connection is still usable. Allowlists keep exactly the passing subset
        # (plan connections in order of preference, the others in their original order):
        # never the full original list, never one arbitrary member.
        # (Each rung gets at most one entry per candidate, in its own bucket, so the
        # order in which the rungs are visited here does not matter.)
        for number, connections_passed in enumerate(passing):
            if connections_passed is None:
                continue
            rung = _RUNG_OF[number]
            if pinned is not None:
                entry = DecidedCandidate(
                    candidate.id, provider, model, rung, pinned, None, candidate.ref
                )
            else:
                entry = DecidedCandidate(
                    candidate.id,
                    provider,
                    model,
                    rung,
                    None,
                    tuple(connections_passed),
                    candidate.ref,
                )
            buckets[number].append(entry)

    # Ordered by rung; within a rung the incoming order of candidates stands: the
    # gateway's scorer ranks them, this layer never reshuffles them. Subscription only
    # ever fills rung 0.
    return Decision(
        auto_id=auto_id,
        computed_at=now,
        candidates=tuple(entry for bucket in buckets for entry in bucket),
        excluded=tuple(excluded),
        next_change_at=next_change_at,
        valid_until=inputs_valid_until(
            connections.values(), spend, config, now, refresh_ticks=grouping == _SUBSCRIPTION
        ),
        preference=plan_order.keys,
        model_preference=plan_order.model_keys,
        budget_left_usd=budget_left(spend, config),
    )


def usable_connections(decision: Decision) -> dict[Rung, int]:
    """How many distinct connections serve at least one entry of the decision on each
    rung (every rung present, 0 when none)."""
    usable: list[set[str]] = [set() for _ in Rung]
    for entry in decision.candidates:
        usable[entry.rung].update(entry.connection_ids)
    return {rung: len(usable[rung]) for rung in Rung}


# --------------------------------------------------------------------------- caching


def inputs_valid_until(
    connections: Iterable[ConnectionView],
    spend: Mapping[Rung, RungSpend],
    config: LadderConfig,
    now: datetime,
    *,
    refresh_ticks: bool = True,
) -> datetime | None:
    """The earliest future instant at which a decision over these inputs can change on
    its own (a reading going stale, a reset, a cooldown ending, a budget window ending);
    None when nothing in them is time-dependent. Writes invalidate separately.
    `refresh_ticks`: also the instant a reading that is not current moves its
    exclusion's `next_change_at` (`refresh_expected_at`); only `auto/subscription`
    excludes such readings, so a thrifty decision passes False."""
    max_age = timedelta(seconds=config.max_state_age_seconds)
    instants: list[datetime] = []
    for view in connections:
        if view.cooldown_until is not None:
            instants.append(view.cooldown_until)
        for scoped in view.scoped:
            # A model scope's cooldown ending or its window resetting changes its models.
            if scoped.cooldown_until is not None:
                instants.append(scoped.cooldown_until)
            if scoped.reading is not None and scoped.reading.reset_at is not None:
                instants.append(scoped.reading.reset_at)
        reading = view.reading
        if reading is not None:
            # A reading exactly max_age old is still current: it changes just after.
            instants.append(reading.checked_at + max_age + timedelta(microseconds=1))
            if reading.reset_at is not None:
                instants.append(reading.reset_at)
            # Not current: its exclusion's `next_change_at` moves at the next beat tick.
            # (Thrifty excludes them too on a plan that can meter: trying it is not free.)
            if refresh_ticks or plan_can_meter(view):
                expected = refresh_expected_at(reading, config, now, max_age)
                if expected is not None:
                    instants.append(expected)
    if config.cheap_budget_usd is not None or config.premium_budget_usd is not None:
        instants.extend(rung_spend.window_end for rung_spend in spend.values())
    future = [instant for instant in instants if instant > now]
    return min(future, default=None)
