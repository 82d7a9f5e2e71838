"""Decisions and all of their caches: the per-process snapshot of catalog, prices and
settings, the registered candidates, and recent decisions with their validity."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.utils import timezone

from billing import services as billing_services
from billing.classify import Catalog
from billing.tiers import PriceBook
from ladder import core
from ladder.core import AutoId, CandidateIn, Decision, LadderConfig
from ladder.lru import ByteBoundedLRU
from ladder.services import timeline
from ladder.services.config import load_config
from ladder.services.dashboard import published_auto_ids
from ladder.services.loading import (
    load_views,
    referenced_connections,
    registered_candidates,
    spend_in_window,
    tiers_of,
)


class UnknownCategory(Exception):
    """No registered candidate lists the category of a composite auto id."""

    def __init__(self, category: str, known: Sequence[str]) -> None:
        self.category = category
        self.known = tuple(known)
        names = ", ".join(self.known) or "none"
        super().__init__(f"No registered candidate has the category {category!r}; known: {names}.")


# The hot path. Each web process keeps a snapshot of catalog, prices and settings keyed
# by the `config` change counter, and recent decisions keyed by both counters and valid
# until the earliest instant an input changes on its own. One query (the counters) per
# cached decision; a miss adds a constant handful, whatever the pool size.
DECISION_CACHE_SIZE = 512


# Cached decisions are bounded by bytes too (DECISION_CACHE_MAX_BYTES, of which they get
# this share; the rendered bodies in ladder.api.pool_answers the rest): a pool POST may carry 5,000
# candidates, and 80 such decisions once took 2 GB. A decision's size is estimated in
# O(1) from lengths at hand, with constants measured with tracemalloc and rounded up:
# - per pool entry or exclusion: its tuple, id and rung, and an exclusion's detail text
#   (measured 160 to 290 bytes);
# - per byte of the request body the candidates came from (registered ones: about what
#   their body would be, `as_input_bytes`): their strings (providers, models,
#   connection ids), which the decision keeps; a short JSON string of 6 bytes
#   (`"abc",`) is a 52-byte str and an 8-byte pointer (measured up to 9.1 per byte);
# - a fixed part: the entry, its key, the Decision and its tuples.
DECISION_CACHE_SHARE = 3 / 4


DECISION_BASE_BYTES = 4096


DECISION_ITEM_BYTES = 400


DECISION_BYTES_PER_INPUT_BYTE = 10


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Catalog, prices and tuning as of one `config` counter value."""

    config_version: int
    config: LadderConfig
    catalog: Catalog
    prices: PriceBook


@dataclass(frozen=True, slots=True)
class _CachedDecision:
    decision: Decision
    valid_until: datetime | None


_cache_lock = threading.Lock()


# One entry each, replaced (never added to) when their counter moves: their size is what
# the database holds, not what requests send.
_snapshot: Snapshot | None = None


_registered: tuple[int, tuple[CandidateIn, ...], tuple[str, ...], int] | None = None


_decisions: ByteBoundedLRU[tuple[Any, ...], _CachedDecision] = ByteBoundedLRU(DECISION_CACHE_SIZE)


# Decisions being computed, by cache key: the threads that ask for one meanwhile wait.
_computing: dict[tuple[Any, ...], threading.Event] = {}


# How long such a thread waits before computing the decision itself.
FOLLOW_SECONDS = 5.0


def clear_caches() -> None:
    """Forget this process's snapshot and cached decisions (tests; a restored database)."""
    global _snapshot, _registered
    with _cache_lock:
        _snapshot = None
        _registered = None
        _decisions.clear()
    timeline.clear_known()


def cached_snapshot(config_version: int) -> Snapshot | None:
    """The snapshot for this config counter if this process holds it; no query."""
    snapshot = _snapshot
    if snapshot is not None and snapshot.config_version == config_version:
        return snapshot
    return None


def current_snapshot(config_version: int) -> Snapshot:
    """The snapshot for this config counter, reloaded (three queries) when it moved."""
    global _snapshot
    snapshot = _snapshot
    if snapshot is not None and snapshot.config_version == config_version:
        return snapshot
    snapshot = Snapshot(
        config_version=config_version,
        config=load_config(),
        catalog=billing_services.load_catalog(),
        prices=billing_services.load_price_book(),
    )
    with _cache_lock:
        _snapshot = snapshot
    return snapshot


def decision_cache_max_bytes() -> int:
    """The byte bound of this process's cached decisions."""
    return int(settings.DECISION_CACHE_MAX_BYTES * DECISION_CACHE_SHARE)


def decision_bytes(decision: Decision, input_bytes: int) -> int:
    """What a cached decision is accounted as (O(1)): `input_bytes` is the length of the
    request its candidates were parsed from (for registered ones, `as_input_bytes`,
    computed once per load)."""
    items = len(decision.candidates) + len(decision.excluded)
    return (
        DECISION_BASE_BYTES
        + DECISION_ITEM_BYTES * items
        + DECISION_BYTES_PER_INPUT_BYTE * input_bytes
    )


def cached_decisions_bytes() -> int:
    """The accounted size of this process's cached decisions."""
    return _decisions.accounted_bytes


def _cached(key: tuple[Any, ...], now: datetime) -> Decision | None:
    """The cached decision under `key` if it still holds at `now`."""
    cached = _decisions.get(key)
    if (
        cached is not None
        and cached.decision.computed_at <= now
        and (cached.valid_until is None or now < cached.valid_until)
    ):
        return cached.decision
    return None


def decide_for(
    auto_id: AutoId,
    candidates: Sequence[CandidateIn],
    *,
    now: datetime,
    cache_key: Any = None,
    counters: tuple[int, int] | None = None,
    input_bytes: int = 0,
) -> Decision:
    """The decision for these candidates, from this process's cache when no write has
    landed and no input has changed on its own since it was computed (`input_bytes`:
    the length of the request body they came from, for the cache's accounting)."""
    config_version, state_version = counters or billing_services.change_counters()
    if cache_key is None:
        # The key holds the candidates themselves: account for them as for a body.
        input_bytes += DECISION_ITEM_BYTES * len(candidates)
    key = (
        auto_id,
        cache_key if cache_key is not None else tuple(candidates),
        config_version,
        state_version,
    )
    cached = _cached(key, now)
    if cached is not None:
        return cached
    with _cache_lock:
        running = _computing.get(key)
        if running is None:
            _computing[key] = threading.Event()
    if running is not None:
        # Another thread of this process is computing this very decision (a burst of
        # requests right after a write): wait for its answer rather than compute it again.
        running.wait(FOLLOW_SECONDS)
        cached = _cached(key, now)
        if cached is not None:
            return cached
        return _compute(auto_id, candidates, key, now, input_bytes)
    try:
        return _compute(auto_id, candidates, key, now, input_bytes)
    finally:
        with _cache_lock:
            _computing.pop(key).set()


def _compute(
    auto_id: AutoId,
    candidates: Sequence[CandidateIn],
    key: tuple[Any, ...],
    now: datetime,
    input_bytes: int = 0,
) -> Decision:
    """Load, decide and cache (`key` ends with the two change counters); a decision
    above the cache's entry size is answered, not kept."""
    config_version = key[-2]
    snapshot = current_snapshot(config_version)
    config = snapshot.config
    candidates = normalised_candidates(candidates, snapshot.catalog)
    views = load_views(referenced_connections(candidates), snapshot.catalog)
    has_budget = config.cheap_budget_usd is not None or config.premium_budget_usd is not None
    # Without a budget no paid rung is gated: the spend query is skipped.
    spend = spend_in_window(config, now) if has_budget else {}
    tiers = tiers_of(candidates, snapshot.prices, config)
    decision = core.decide(
        auto_id,
        candidates,
        views,
        tiers,
        spend,
        config,
        now,
        known_models=snapshot.prices.model_names,
    )
    if key[1] == "registered" and settings.POOL_TIMELINE_RECORDING:
        # The pool timeline: no query unless the membership differs from the one this
        # process last saw recorded (ladder.services.timeline).
        timeline.note_decision(decision)
    _decisions.put(
        key,
        _CachedDecision(decision, decision.valid_until),
        decision_bytes(decision, input_bytes),
        decision_cache_max_bytes(),
    )
    return decision


def normalised_candidates(
    candidates: Sequence[CandidateIn], catalog: Catalog
) -> Sequence[CandidateIn]:
    """The candidates with their provider ids normalised (trimmed, lower-cased, aliases
    mapped) by the snapshot's alias map: no query, each distinct spelling normalised
    once, and no copy when all are canonical (only on a cache miss)."""
    memo: dict[str, str] = {}
    for c in candidates:
        if c.provider not in memo:
            memo[c.provider] = catalog.provider_id(c.provider)
    if all(spelling == canonical for spelling, canonical in memo.items()):
        return candidates
    return [
        c
        if memo[c.provider] == c.provider
        else CandidateIn(
            c.id,
            memo[c.provider],
            c.model,
            c.categories,
            c.connection_id,
            c.allowed_connection_ids,
            c.ref,
        )
        for c in candidates
    ]


def as_input_bytes(candidates: Sequence[CandidateIn]) -> int:
    """About the length of the JSON body these candidates would come in: what their
    strings cost a cached decision (see DECISION_BYTES_PER_INPUT_BYTE)."""
    total = 0
    for c in candidates:
        total += len(c.provider) + len(c.model) + len(c.connection_id or "") + 20
        total += len(c.ref or "")
        total += sum(len(x) + 3 for x in c.allowed_connection_ids or ())
    return total


def _registered_for(state_version: int) -> tuple[tuple[CandidateIn, ...], tuple[str, ...], int]:
    """Registered candidates, their categories and `as_input_bytes`, cached per `state`
    counter (each load is a new set of objects, which the decisions made from it keep)."""
    global _registered
    cached = _registered
    if cached is not None and cached[0] == state_version:
        return cached[1], cached[2], cached[3]
    candidates = tuple(registered_candidates())
    known = tuple(sorted({category for c in candidates for category in c.categories}))
    input_bytes = as_input_bytes(candidates)
    with _cache_lock:
        _registered = (state_version, candidates, known, input_bytes)
    return candidates, known, input_bytes


def registered_categories() -> tuple[str, ...]:
    """The categories of the registered candidates as this process last loaded them
    (no query: empty until a registered pool has been decided)."""
    cached = _registered
    return cached[2] if cached is not None else ()


def decide_registered(
    auto_id: AutoId, *, now: datetime | None = None, counters: tuple[int, int] | None = None
) -> Decision:
    """The decision for an auto id over the registered candidates (`counters`: the
    change counters if the caller has just read them)."""
    now = now or timezone.now()
    counters = counters or billing_services.change_counters()
    candidates, known, input_bytes = _registered_for(counters[1])
    if auto_id.category is not None and auto_id.category not in known:
        raise UnknownCategory(auto_id.category, known)
    return decide_for(
        auto_id,
        candidates,
        now=now,
        cache_key="registered",
        counters=counters,
        input_bytes=input_bytes,
    )


def cached_decision(
    auto_id: AutoId, cache_key: Any, *, now: datetime, counters: tuple[int, int]
) -> Decision | None:
    """The decision `decide_for` (or `decide_registered`: key "registered") would return
    under `cache_key`, if this process has it cached for these change counters and it
    still holds at `now`; None otherwise. No query."""
    return _cached((auto_id, cache_key, *counters), now)


def record_published(*, now: datetime) -> int:
    """Decide every published auto id over the registered candidates (through this
    process's decision cache: a miss records its transitions) so that changes time alone
    makes (a reset passing, a reading going stale) are recorded even when no gateway
    asks, and check each against the stored membership (one query per auto id): a
    change some process saw and no process recorded the end of is recorded within one
    beat period. The number of auto ids decided."""
    if not settings.POOL_TIMELINE_RECORDING:
        return 0
    counters = billing_services.change_counters()
    candidates, _, _ = _registered_for(counters[1])
    auto_ids = published_auto_ids(candidates)
    for auto_id in auto_ids:
        timeline.note_decision(decide_registered(auto_id, now=now, counters=counters), verify=True)
    return len(auto_ids)
