"""The proof that readings and events move the `state` counter whenever they can change
a pool (ladder/core/changes.py), over the real database: random small worlds and random
write sequences; after each step, a decision still cached under unmoved counters equals a
decision recomputed from the database on every field that must not lag. And every
`auto/subscription` decision fails closed: it never holds a (candidate, connection) pair
whose effective overage is not hard-stop (billing evidence from the wire counted), or
whose binding window for that candidate's model is exhausted (windows scoped to a model
counted, with the connection's own reserve)."""

from __future__ import annotations

import importlib
import itertools
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from unittest import mock

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from billing import services as billing_services
from billing.classify import Billing, Overage
from ladder import core, services
from ladder.core import SUBSCRIPTION_AUTO_ID, THRIFTY_AUTO_ID, AutoId, Decision, WindowReading
from ladder.core.scopes import scope_applies
from ladder.models import Connection
from ladder.services import readings

pytestmark = pytest.mark.django_db

# 23:00 UTC on the last day of a month: day, week and month budget windows can end
# within a sequence.
BASE = datetime(2026, 11, 30, 23, 0, tzinfo=UTC)

# id -> (provider, auth type): a hard-stop plan, a plan that may meter past it, an
# uncurated (metered) key and the keyless path.
CONNECTIONS = {
    "plan-a": ("claude", "oauth"),
    "plan-b": ("codex", "oauth"),
    "cursor": ("cursor", "oauth"),
    "key": ("openrouter", "apikey"),
    "local": ("local", "none"),
}

# (provider, model) of the candidates; openrouter's are free (a zero by hand), cheap and
# premium (unpriced).
MODELS = (
    ("claude", "sonnet"),
    ("codex", "gpt-5"),
    ("openrouter", "llama-free"),
    ("openrouter", "mini"),
    ("openrouter", "opus"),
    ("claude", "claude-opus-4-1"),
)

AUTO_IDS = (SUBSCRIPTION_AUTO_ID, THRIFTY_AUTO_ID)


def _headers(name: str, now: datetime) -> dict[str, str] | None:
    """Upstream headers as a gateway forwards them, `now` being the response's time."""
    epoch = int(now.timestamp())
    return {
        "none": None,
        "codex-60-left": {
            "x-codex-primary-used-percent": "40",
            "x-codex-primary-reset-after-seconds": "300",
        },
        "codex-3-left": {
            "x-codex-primary-used-percent": "97",
            "x-codex-primary-reset-at": str(epoch + 900),
        },
        "codex-used-up": {
            "x-codex-primary-used-percent": "100",
            "x-codex-primary-reset-after-seconds": "600",
        },
        "anthropic-rejected": {
            "anthropic-ratelimit-unified-status": "rejected",
            "anthropic-ratelimit-unified-reset": str(epoch + 1200),
        },
        "anthropic-allowed-80": {
            "anthropic-ratelimit-unified-status": "allowed",
            "anthropic-ratelimit-unified-5h-utilization": "0.2",
            "anthropic-ratelimit-unified-5h-reset": str(epoch + 3600),
        },
        "openai-requests-out": {
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-limit-requests": "100",
            "x-ratelimit-reset-requests": "20s",
        },
        "retry-after": {"retry-after": "7"},
        "anthropic-overage-in-use": {"anthropic-ratelimit-unified-overage-in-use": "true"},
        "anthropic-overage-rejected": {
            "anthropic-ratelimit-unified-overage-status": "rejected",
            "anthropic-ratelimit-unified-5h-utilization": "0.5",
            "anthropic-ratelimit-unified-5h-reset": str(epoch + 3600),
        },
        "codex-credits": {"x-codex-credits-has-credits": "true"},
        "anthropic-7d_oi-rejected": {
            "anthropic-ratelimit-unified-status": "rejected",
            "anthropic-ratelimit-unified-7d_oi-status": "rejected",
            "anthropic-ratelimit-unified-7d_oi-reset": str(epoch + 1800),
        },
    }[name]


# The model an event names (its request's): the per-model limit's scope.
EVENT_MODEL = "claude-opus-4-1"


HEADER_NAMES = (
    "none",
    "none",
    "codex-60-left",
    "codex-3-left",
    "codex-used-up",
    "anthropic-rejected",
    "anthropic-allowed-80",
    "openai-requests-out",
    "retry-after",
    "anthropic-overage-in-use",
    "anthropic-overage-rejected",
    "codex-credits",
    "anthropic-7d_oi-rejected",
)


@dataclass(frozen=True)
class World:
    connections: tuple[tuple[str, bool], ...]  # (id, active)
    candidates: tuple[tuple[int, tuple[str, ...], bool], ...]  # (model, ids, pinned)
    settings: dict[str, Any]


budgets = st.sampled_from((None, None, Decimal(0), Decimal(1), Decimal(4)))


@st.composite
def worlds(draw: st.DrawFn) -> World:
    ids = draw(st.lists(st.sampled_from(tuple(CONNECTIONS)), min_size=2, max_size=4, unique=True))
    connections = tuple((i, draw(st.sampled_from((True, True, True, False)))) for i in ids)
    candidates = []
    for _ in range(draw(st.integers(1, 4))):
        model = draw(st.integers(0, len(MODELS) - 1))
        chosen = draw(st.lists(st.sampled_from(ids), min_size=1, max_size=3, unique=True))
        candidates.append((model, tuple(chosen), len(chosen) == 1 and draw(st.booleans())))
    exit_cutoff = draw(st.sampled_from((0.0, 2.0, 10.0)))
    values = {
        "exit_cutoff_percent": exit_cutoff,
        "reentry_min_remaining_percent": exit_cutoff + draw(st.sampled_from((0.0, 3.0, 15.0))),
        "cheap_budget_usd": draw(budgets),
        "premium_budget_usd": draw(budgets),
        "budget_window": draw(st.sampled_from(("day", "week", "month"))),
        "max_state_age_seconds": draw(st.sampled_from((30, 180))),
        "base_cooldown_seconds": draw(st.sampled_from((1.0, 5.0))),
        "max_cooldown_seconds": draw(st.sampled_from((10.0, 120.0))),
        "cheap_max_input_usd_per_mtok": Decimal("1.0"),
    }
    return World(connections, tuple(candidates), values)


connection_ids = st.sampled_from(tuple(CONNECTIONS))
offsets = st.sampled_from((None, -10, 1, 30, 200, 900, 7200))
percents = st.sampled_from((None, 0.0, 1.0, 2.0, 3.0, 4.5, 5.0, 6.0, 12.0, 17.0, 50.0, 99.0))

reading_steps = st.tuples(
    st.just("reading"),
    connection_ids,
    percents,
    st.sampled_from((None, None, "SAFE", "EXHAUSTED", "UNKNOWN")),
    offsets,  # reset_at
    st.sampled_from((0, 0, 5, 40, 200)),  # checked this many seconds ago
    st.booleans(),  # sent as windows
)
event_steps = st.tuples(
    st.just("event"),
    connection_ids,
    st.sampled_from(("rate_limited", "quota_exhausted", "success", "success", "error")),
    st.sampled_from((None, None, 0.0, 3.0, 30.0, 600.0)),  # retry_after_seconds
    offsets,  # reset_at
    st.sampled_from(HEADER_NAMES),
)
spend_steps = st.tuples(
    st.just("spend"),
    connection_ids,
    st.integers(0, len(MODELS) - 1),
    st.sampled_from((Decimal(0), Decimal("0.4"), Decimal(1), Decimal(3))),
)
# A Claude-shaped reading with windows scoped to a model (opus's and a scope that names
# no known model) and billing evidence.
scoped_steps = st.tuples(
    st.just("scoped"),
    connection_ids,
    percents,  # the opus weekly cap's remaining
    st.sampled_from((None, None, 0.0, 50.0)),  # the unknown scope's remaining (None: absent)
    st.sampled_from((None, None, "can_meter", "hard_stop")),
    st.sampled_from((0, 0, 5, 200)),  # checked this many seconds ago
)
reserve_steps = st.tuples(
    st.just("reserve"),
    connection_ids,
    st.sampled_from(((None, None), (30.0, 40.0), (10.0, None), (None, 60.0))),
)
advance_steps = st.tuples(
    st.just("advance"), st.sampled_from((1, 4, 10, 29, 31, 61, 179, 181, 600, 3600))
)
steps = st.lists(
    # Spend moves the counter today: drawn less often, so decisions survive long runs.
    st.one_of(
        reading_steps,
        reading_steps,
        scoped_steps,
        reserve_steps,
        event_steps,
        event_steps,
        advance_steps,
        advance_steps,
        spend_steps,
    ),
    min_size=1,
    max_size=25,
)


def _at(now: datetime, offset: int | None) -> datetime | None:
    return None if offset is None else now + timedelta(seconds=offset)


def _build(world: World) -> None:
    billing_services.upsert_price(
        billing_services.PriceInput("openrouter", "llama-free", Decimal(0), Decimal(0), None),
        actor="test",
    )
    billing_services.upsert_price(
        billing_services.PriceInput("openrouter", "mini", Decimal("0.5"), Decimal(2), None),
        actor="test",
    )
    # Named by a price row: a scope "opus" or "sonnet" names a model the product knows.
    for priced in ("sonnet", "claude-opus-4-1"):
        billing_services.upsert_price(
            billing_services.PriceInput("claude", priced, Decimal(3), Decimal(15), None),
            actor="test",
        )
    services.update_settings(world.settings, actor="test")
    for connection_id, active in world.connections:
        provider, auth_type = CONNECTIONS[connection_id]
        services.upsert_connection(
            connection_id, services.ConnectionInput(provider, auth_type, active=active)
        )
    for model, ids, pinned in world.candidates:
        provider, name = MODELS[model]
        services.save_candidate(
            services.CandidateInput(
                provider,
                name,
                connection_id=ids[0] if pinned else None,
                allowed_connection_ids=None if pinned else ids,
            )
        )


_request_ids = itertools.count()


def _write(step: tuple[Any, ...], now: datetime) -> None:
    """One write at `now`; a write to a connection the world lacks is a NotFound."""
    kind = step[0]
    try:
        if kind == "reading":
            _, connection_id, remaining, status, reset, ago, as_windows = step
            reset_at = _at(now, reset)
            windows = None
            if as_windows:
                windows = (
                    WindowReading("five_hour", remaining, reset_at),
                    WindowReading("seven_day", 80.0, None),
                )
                remaining, reset_at = None, None
            services.store_reading(
                connection_id,
                services.ReadingInput(
                    status=status,
                    remaining_percent=remaining,
                    reset_at=reset_at,
                    checked_at=now - timedelta(seconds=ago),
                    windows=windows,
                ),
                now=now,
            )
        elif kind == "event":
            _, connection_id, event, retry_after, reset, header_name = step
            services.apply_event(
                connection_id,
                kind=event,
                retry_after_seconds=retry_after,
                reset_at=_at(now, reset),
                headers=_headers(header_name, now),
                now=now,
                model=EVENT_MODEL if header_name.startswith("anthropic-7d_oi") else None,
            )
        elif kind == "scoped":
            _, connection_id, opus_left, unknown_left, says, ago = step
            scoped_windows = [
                WindowReading("five_hour", 50.0, now + timedelta(hours=2)),
                WindowReading("seven_day_opus", opus_left, now + timedelta(days=2), "opus"),
                WindowReading("seven_day_sonnet", 60.0, now + timedelta(days=2), "sonnet"),
            ]
            if unknown_left is not None:
                scoped_windows.append(
                    WindowReading(
                        "seven_day_iguana", unknown_left, now + timedelta(days=1), "iguana"
                    )
                )
            services.store_reading(
                connection_id,
                services.ReadingInput(
                    checked_at=now - timedelta(seconds=ago),
                    windows=tuple(scoped_windows),
                    evidence=services.pushed_evidence(says),
                ),
                now=now,
            )
        elif kind == "reserve":
            _, connection_id, (cutoff, floor) = step
            row = Connection.objects.filter(connection_id=connection_id).first()
            if row is None:
                return
            services.upsert_connection(
                connection_id,
                services.ConnectionInput(
                    row.provider,
                    row.auth_type,
                    active=row.is_active,
                    exit_cutoff_percent=cutoff,
                    reentry_min_remaining_percent=floor,
                ),
            )
        elif kind == "spend":
            _, connection_id, model, cost = step
            provider, name = MODELS[model]
            services.record_spend(
                services.SpendInput(
                    f"r{next(_request_ids)}", connection_id, provider, name, cost_usd=cost
                ),
                now=now,
            )
    except services.NotFound:
        pass


def recomputed(auto_id: AutoId, now: datetime) -> Decision:
    """The decision as the database says it now, through no cache at all."""
    inputs = services.load_decision_inputs(now)
    candidates = services.registered_candidates()
    views = services.load_views(services.referenced_connections(candidates), inputs.catalog)
    tiers = services.tiers_of(candidates, inputs.prices, inputs.config)
    return core.decide(
        auto_id,
        candidates,
        views,
        tiers,
        inputs.spend,
        inputs.config,
        now,
        known_models=inputs.prices.model_names,
    )


def _after(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


def assert_subscription_fails_closed(decision: Decision, now: datetime) -> None:
    """Every (candidate, connection) pair `auto/subscription` holds is, by the database
    read directly: a plan whose effective overage is hard-stop (no "can meter" evidence),
    not cooling down, with a current reading above its exit cutoff (above its re-entry
    floor once dropped out), and so for every model scope that binds the candidate."""
    if decision.auto_id != SUBSCRIPTION_AUTO_ID:
        return
    catalog = billing_services.load_catalog()
    known = billing_services.load_price_book().model_names
    settings_row = services.load_config()
    for entry in decision.candidates:
        for connection_id in entry.connection_ids:
            row = Connection.objects.select_related("current_reading").get(
                connection_id=connection_id
            )
            where = f"{entry.model} on {connection_id} at {now.isoformat()}"
            verdict = catalog.classify(row.provider, row.auth_type)
            assert verdict.billing == Billing.SUBSCRIPTION, where
            assert verdict.overage == Overage.HARD_STOP, where
            evidence = row.overage_evidence
            assert evidence is None or evidence["says"] != "can_meter", where
            assert row.is_active, where
            assert row.cooldown_until is None or row.cooldown_until <= now, where
            cutoff = (
                settings_row.exit_cutoff_percent
                if row.exit_cutoff_percent is None
                else row.exit_cutoff_percent
            )
            floor = max(
                cutoff,
                settings_row.reentry_min_remaining_percent
                if row.reentry_min_remaining_percent is None
                else row.reentry_min_remaining_percent,
            )
            reading = row.current_reading
            assert reading is not None, where
            assert reading.status == "SAFE", where
            assert reading.remaining_percent is not None, where
            assert reading.remaining_percent > cutoff, where
            if row.hysteresis_state == "dropped_out":
                assert reading.remaining_percent > floor, where
            for scope, state in (row.scoped_state or {}).items():
                if not scope_applies(scope, entry.model, known):
                    continue
                cooled = _after(state["cooldown_until"])
                assert cooled is None or cooled <= now, (where, scope)
                if state["has_window"]:
                    left = state["remaining"]
                    assert left is not None, (where, scope)
                    assert left > cutoff, (where, scope)
                    if state["state"] == "dropped_out":
                        assert left > floor, (where, scope)


def must_not_lag(decision: Decision) -> tuple[Any, ...]:
    """Every field of a decision that a write which did not move the counters must not
    leave stale: the entries, the exclusions without their sentence, next_change_at."""
    return (
        decision.candidates,
        tuple((e.provider, e.model, e.connection_id, e.rung, e.reason) for e in decision.excluded),
        decision.next_change_at,
    )


@dataclass
class Tracked:
    decision: Decision
    counters: tuple[int, int]
    writes: int = 0  # writes survived without the counters moving


def run(world: World, sequence: list[tuple[Any, ...]], stats: dict[str, int]) -> None:
    """Build the world, then after each step check every decision still cached."""
    services.clear_caches()
    now = BASE
    # The server's clock is the sequence's: readings are received at `now`.
    with mock.patch.object(readings, "server_clock", side_effect=lambda: now):
        _build(world)
        tracked: dict[AutoId, Tracked] = {}
        for step in [("advance", 0), *sequence]:
            if step[0] == "advance":
                now += timedelta(seconds=step[1])
            else:
                _write(step, now)
                for survivor in tracked.values():
                    survivor.writes += 1
            counters = billing_services.change_counters()
            for auto_id in AUTO_IDS:
                held = tracked.get(auto_id)
                if (
                    held is not None
                    and held.counters == counters
                    and services.cached_decision(auto_id, "registered", now=now, counters=counters)
                    is held.decision
                ):
                    assert must_not_lag(held.decision) == must_not_lag(recomputed(auto_id, now)), (
                        f"{auto_id} at {now.isoformat()} after {held.writes} writes"
                    )
                    assert_subscription_fails_closed(held.decision, now)
                    stats["checks"] += 1
                    stats["after_writes"] += held.writes > 0
                    continue
                decision = services.decide_registered(auto_id, now=now, counters=counters)
                assert_subscription_fails_closed(decision, now)
                tracked[auto_id] = Tracked(decision, counters)


def _in_rollback(world: World, sequence: list[tuple[Any, ...]], stats: dict[str, int]) -> None:
    with transaction.atomic():
        run(world, sequence, stats)
        transaction.set_rollback(True)


STATS = {"checks": 0, "after_writes": 0}


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(world=worlds(), sequence=steps)
def test_a_decision_cached_under_unmoved_counters_equals_the_database(
    world: World, sequence: list[tuple[Any, ...]]
) -> None:
    _in_rollback(world, sequence, STATS)


# A fixed world and sequence that the property catches when readings never move the
# counter: the plan connection's first reading admits it to auto/subscription.
TEETH_WORLD = World(
    connections=(("plan-a", True), ("key", True)),
    candidates=((0, ("plan-a",), True), (3, ("key",), True)),
    settings={
        "exit_cutoff_percent": 2.0,
        "reentry_min_remaining_percent": 5.0,
        "cheap_budget_usd": None,
        "premium_budget_usd": None,
        "budget_window": "month",
        "max_state_age_seconds": 180,
        "base_cooldown_seconds": 5.0,
        "max_cooldown_seconds": 120.0,
        "cheap_max_input_usd_per_mtok": Decimal("1.0"),
    },
)


def test_the_property_catches_readings_that_never_move_the_counter() -> None:
    sequence: list[tuple[Any, ...]] = [("reading", "plan-a", 50.0, None, None, 0, False)]
    stats = {"checks": 0, "after_writes": 0}
    _in_rollback(TEETH_WORLD, sequence, stats)  # the real rule holds

    with (
        mock.patch.object(readings, "bump_if_it_can_change_a_pool", return_value=False),
        pytest.raises(AssertionError, match="after 1 writes"),
    ):
        _in_rollback(TEETH_WORLD, sequence, stats)


def test_the_property_catches_a_rule_blind_to_an_earlier_validity() -> None:
    # The second reading changes no standing now, but its reset comes before the first
    # reading would turn stale: 31 s later the plan is out (reset_passed).
    from ladder.core import changes

    sequence: list[tuple[Any, ...]] = [
        ("reading", "plan-a", 50.0, None, None, 0, False),
        ("advance", 10),
        ("reading", "plan-a", 50.0, None, 30, 0, False),
        ("advance", 31),
    ]
    stats = {"checks": 0, "after_writes": 0}
    _in_rollback(TEETH_WORLD, sequence, stats)

    with (
        mock.patch.object(changes, "_is_earlier", return_value=False),
        # The second reading also brings a known reset, which places plan-a in the order
        # of preference: blind that rule too, to leave only the validity's.
        mock.patch.object(changes, "moves_preference", return_value=False),
        pytest.raises(AssertionError, match="after 1 writes"),
    ):
        _in_rollback(TEETH_WORLD, sequence, stats)


def test_the_property_catches_a_rule_blind_to_the_order_of_preference() -> None:
    # Two plan seats in one allowlist: plan-b resets first, so it comes first; then its
    # window rolls over (a later reset, the same percent): no standing moves and the
    # validity is later, but plan-a now comes first.
    from ladder.core import changes

    world = World(
        connections=(("plan-a", True), ("plan-b", True)),
        candidates=((0, ("plan-a", "plan-b"), False),),
        settings=TEETH_WORLD.settings,
    )
    sequence: list[tuple[Any, ...]] = [
        ("reading", "plan-a", 50.0, None, 7200, 0, False),
        ("reading", "plan-b", 50.0, None, 900, 0, False),
        ("advance", 10),
        ("reading", "plan-b", 50.0, None, 9000, 0, False),
        ("advance", 10),
    ]
    stats = {"checks": 0, "after_writes": 0}
    _in_rollback(world, sequence, stats)

    with (
        mock.patch.object(changes, "moves_preference", return_value=False),
        pytest.raises(AssertionError, match="after 1 writes"),
    ):
        _in_rollback(world, sequence, stats)


def test_the_property_catches_a_rule_blind_to_billing_evidence() -> None:
    # A hard-stop plan whose usage says it can meter: the blind rule keeps serving it.
    decide_module = importlib.import_module("ladder.core.decide")

    sequence: list[tuple[Any, ...]] = [("scoped", "plan-a", 50.0, None, "can_meter", 0)]
    stats = {"checks": 0, "after_writes": 0}
    _in_rollback(TEETH_WORLD, sequence, stats)

    with (
        mock.patch.object(decide_module, "effective_overage", lambda verdict, _: verdict.overage),
        pytest.raises(AssertionError, match="sonnet on plan-a"),
    ):
        _in_rollback(TEETH_WORLD, sequence, stats)


def test_the_property_catches_a_rule_blind_to_windows_scoped_to_a_model() -> None:
    # The opus cap used up: the blind rule keeps opus on the plan.
    decide_module = importlib.import_module("ladder.core.decide")

    world = World(
        connections=(("plan-a", True),),
        candidates=((len(MODELS) - 1, ("plan-a",), True), (0, ("plan-a",), True)),
        settings=TEETH_WORLD.settings,
    )
    sequence: list[tuple[Any, ...]] = [("scoped", "plan-a", 0.0, None, None, 0)]
    stats = {"checks": 0, "after_writes": 0}
    _in_rollback(world, sequence, stats)

    with (
        mock.patch.object(decide_module, "model_scope_cause", return_value=None),
        pytest.raises(AssertionError, match="claude-opus-4-1 on plan-a"),
    ):
        _in_rollback(world, sequence, stats)
