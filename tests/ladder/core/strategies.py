"""Hypothesis strategies and helpers for the core's property tests: drawn worlds,
readings and configs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TypeVar

from hypothesis import settings
from hypothesis import strategies as st

from billing.classify import Billing, BillingVerdict, Overage
from billing.tiers import Tier
from ladder.core import (
    AutoId,
    BudgetWindow,
    CandidateIn,
    ConnectionView,
    Decision,
    Grouping,
    Hysteresis,
    HysteresisState,
    LadderConfig,
    QuotaStatus,
    Reading,
    Rung,
    RungSpend,
    decide,
)
from ladder.core.scopes import scope_matches
from ladder.core.types import OverageEvidence, OverageSays, ScopedQuota

BASE = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


CONNECTION_IDS = ("c0", "c1", "c2", "c3", "c4", "c5")


PROVIDERS = ("claude", "openrouter")


CATEGORIES = ("coding", "chat")


# Model scopes: a candidate's model (`m<index>`), and one that names no model (it binds
# every model of its connection: fail closed).
SCOPES = ("m0", "m1", "m2", "nomodel")


PROPERTY_SETTINGS = settings(max_examples=200, deadline=None)


T = TypeVar("T")


@dataclass(frozen=True)
class World:
    """One arbitrary input of `decide`: every argument, generated together."""

    auto_id: AutoId
    candidates: tuple[CandidateIn, ...]
    connections: dict[str, ConnectionView]
    tiers: dict[tuple[str, str], Tier]
    spend: dict[Rung, RungSpend]
    config: LadderConfig
    now: datetime


seconds = st.integers(min_value=-7200, max_value=7200)


offsets = seconds.map(lambda s: timedelta(seconds=s))


percents = st.floats(min_value=0, max_value=100, allow_nan=False)


money = st.decimals(min_value=0, max_value=20, places=2, allow_nan=False, allow_infinity=False)


# Unbiased draws almost never yield a usable plan connection, which would leave the
# subscription property vacuous: the common case is drawn about three times in four.
is_common = st.sampled_from((True, True, True, False))


maybe_seconds = st.one_of(st.none(), seconds)


future_or_absent = st.one_of(st.none(), st.integers(1, 7200))


recent_age = st.integers(-60, 120)  # the API accepts a minute of clock skew


any_age = st.integers(-60, 1800)


statuses = st.sampled_from(QuotaStatus)


billings = st.sampled_from(Billing)


overages = st.sampled_from(Overage)


auth_types = st.sampled_from(("oauth", "apikey", "none", None))


providers = st.sampled_from(PROVIDERS)


connection_ids = st.sampled_from(CONNECTION_IDS)


allowlists = st.lists(connection_ids, min_size=1, max_size=6).map(tuple)


category_sets = st.lists(st.sampled_from(CATEGORIES), unique=True).map(tuple)


low_cutoffs = st.floats(0, 10)


low_floors = st.floats(0, 15)


configs = st.builds(
    LadderConfig,
    exit_cutoff_percent=st.one_of(low_cutoffs, percents),
    reentry_min_remaining_percent=st.one_of(low_floors, percents),
    cheap_budget_usd=st.one_of(st.none(), money),
    premium_budget_usd=st.one_of(st.none(), money),
    budget_window=st.sampled_from(BudgetWindow),
    max_state_age_seconds=st.integers(1, 900),
    base_cooldown_seconds=st.floats(0.5, 60),
    max_cooldown_seconds=st.floats(0.5, 600),
)


def mostly(draw: st.DrawFn, common: st.SearchStrategy[T], rare: st.SearchStrategy[T]) -> T:
    """Draw from `common` about three times in four, else from `rare`."""
    return draw(common if draw(is_common) else rare)


def at(now: datetime, offset_seconds: int | None) -> datetime | None:
    return None if offset_seconds is None else now + timedelta(seconds=offset_seconds)


def draw_reading(draw: st.DrawFn, now: datetime) -> Reading:
    status = QuotaStatus.SAFE if draw(is_common) else draw(statuses)
    remaining = draw(percents) if draw(is_common) else None
    reset_offset = mostly(draw, future_or_absent, maybe_seconds)
    age = mostly(draw, recent_age, any_age)
    return Reading(status, remaining, at(now, reset_offset), now - timedelta(seconds=age))


def draw_scoped(draw: st.DrawFn, now: datetime) -> tuple[ScopedQuota, ...]:
    """A connection's model scopes: none mostly, else one or two, each with a reading
    (or none: a cooldown alone), its own hysteresis and maybe a cooldown."""
    if draw(is_common):
        return ()
    scopes = draw(st.lists(st.sampled_from(SCOPES), min_size=1, max_size=2, unique=True))
    return tuple(
        ScopedQuota(
            scope,
            draw_reading(draw, now) if draw(is_common) else None,
            Hysteresis(
                draw(st.sampled_from(HysteresisState)), at(now, draw(maybe_seconds)), "generated"
            ),
            None if draw(is_common) else at(now, draw(seconds)),
        )
        for scope in sorted(scopes)
    )


def draw_view(draw: st.DrawFn, connection_id: str, now: datetime) -> ConnectionView:
    billing = BillingVerdict(
        Billing.SUBSCRIPTION if draw(is_common) else draw(billings),
        Overage.HARD_STOP if draw(is_common) else draw(overages),
        "curated",
        None,
    )
    return ConnectionView(
        connection_id=connection_id,
        provider=draw(providers),
        auth_type=draw(auth_types),
        billing=billing,
        is_active=draw(is_common),
        cooldown_until=None if draw(is_common) else at(now, draw(seconds)),
        reading=draw_reading(draw, now) if draw(is_common) else None,
        hysteresis=Hysteresis(
            draw(st.sampled_from(HysteresisState)), at(now, draw(maybe_seconds)), "generated"
        ),
        evidence=(
            None
            if draw(is_common)
            else OverageEvidence(draw(st.sampled_from(OverageSays)), "generated", "headers")
        ),
        scoped=draw_scoped(draw, now),
        exit_cutoff_percent=None if draw(is_common) else draw(st.one_of(low_cutoffs, percents)),
        reentry_min_remaining_percent=(
            None if draw(is_common) else draw(st.one_of(low_floors, percents))
        ),
    )


@st.composite
def readings(draw: st.DrawFn, now: datetime) -> Reading:
    return draw_reading(draw, now)


@st.composite
def worlds(draw: st.DrawFn) -> World:
    now = BASE + timedelta(seconds=draw(st.integers(0, 400 * 86400)))
    # Some referenced ids are deliberately missing: they must never count as safe.
    connections = {
        connection_id: draw_view(draw, connection_id, now)
        for connection_id in CONNECTION_IDS
        if draw(is_common)
    }
    candidates = []
    for index in range(draw(st.integers(0, 8))):
        # Each candidate has its own id and model: its incoming position, so output
        # entries and exclusion rows map back to it.
        provider = draw(providers)
        categories = draw(category_sets)
        if draw(st.booleans()):
            pinned = draw(connection_ids)
            candidates.append(CandidateIn(index, provider, f"m{index}", categories, pinned, None))
        else:
            allowed = draw(allowlists)
            candidates.append(CandidateIn(index, provider, f"m{index}", categories, None, allowed))
    tiers = {
        (candidate.provider, candidate.model): draw(st.sampled_from(Tier))
        for candidate in candidates
        if draw(st.booleans())  # the others are unpriced
    }
    spend = {
        rung: RungSpend(draw(money), now + draw(offsets))
        for rung in (Rung.CHEAP, Rung.PREMIUM)
        if draw(st.booleans())
    }
    auto_id = AutoId(
        draw(st.sampled_from(Grouping)), draw(st.one_of(st.none(), st.sampled_from(CATEGORIES)))
    )
    return World(auto_id, tuple(candidates), connections, tiers, spend, draw(configs), now)


def run(world: World) -> Decision:
    return decide(
        world.auto_id,
        world.candidates,
        world.connections,
        world.tiers,
        world.spend,
        world.config,
        world.now,
        known_models=known_models(world),
    )


def known_models(world: World) -> frozenset[str]:
    """The models the world can name: its candidates'."""
    return frozenset(candidate.model for candidate in world.candidates)


def in_pool(world: World) -> list[CandidateIn]:
    category = world.auto_id.category
    return [c for c in world.candidates if category is None or category in c.categories]


def connection_ids_of(
    entry_connection: str | None, allowed: tuple[str, ...] | None
) -> tuple[str, ...]:
    return (entry_connection,) if entry_connection is not None else allowed or ()


def is_verified_plan_connection(
    view: ConnectionView | None,
    config: LadderConfig,
    now: datetime,
    model: str | None = None,
    models: frozenset[str] = frozenset(),
) -> bool:
    """An independent oracle of what auto/subscription may serve (for a candidate of
    `model` when given, among the nameable `models`): a hard-stop plan whose evidence
    does not say it can meter, active and not cooling, with a verified reading above its
    threshold (its own reserve where set), and every model scope binding `model` the same
    (a scope naming none of `models` binds every model)."""
    if view is None:
        return False
    if view.billing.billing != Billing.SUBSCRIPTION or view.billing.overage != Overage.HARD_STOP:
        return False
    if view.evidence is not None and view.evidence.says == OverageSays.CAN_METER:
        return False
    if not view.is_active or (view.cooldown_until is not None and view.cooldown_until > now):
        return False
    cutoff = config.exit_cutoff_percent
    if view.exit_cutoff_percent is not None:
        cutoff = view.exit_cutoff_percent
    floor = config.reentry_min_remaining_percent
    if view.reentry_min_remaining_percent is not None:
        floor = view.reentry_min_remaining_percent
    if not _passes(view.reading, view.hysteresis, cutoff, floor, config, now):
        return False
    if model is None:
        return True
    for scoped in view.scoped:
        binds = scope_matches(scoped.model_scope, model) or not any(
            scope_matches(scoped.model_scope, known) for known in models
        )
        if not binds:
            continue
        if scoped.cooldown_until is not None and scoped.cooldown_until > now:
            return False
        if scoped.reading is not None and not _passes(
            scoped.reading, scoped.hysteresis, cutoff, floor, config, now
        ):
            return False
    return True


def _passes(
    reading: Reading | None,
    hysteresis: Hysteresis,
    cutoff: float,
    floor: float,
    config: LadderConfig,
    now: datetime,
) -> bool:
    if reading is None or reading.status != QuotaStatus.SAFE or reading.remaining_percent is None:
        return False
    reset_in_future = reading.reset_at is None or reading.reset_at > now
    young = now - reading.checked_at <= timedelta(seconds=config.max_state_age_seconds)
    if not (reset_in_future and young):
        return False
    threshold = cutoff if hysteresis.state == HysteresisState.IN_PLAY else max(cutoff, floor)
    return reading.remaining_percent > threshold


def is_subsequence(part: tuple[str, ...], whole: tuple[str, ...]) -> bool:
    remaining = iter(whole)
    return all(item in remaining for item in part)
