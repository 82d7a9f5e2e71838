"""The concurrency property of "a write is judged under the config it commits with", on
the real database (PostgreSQL: each thread its own session) with real concurrent writers:
threads store readings, apply events (single and batched), record spend (single and
batched) and change the config (the exit cutoff, the cheap budget) in any interleaving,
while another thread keeps this process's decision cache warm. Once they are done, the
warm process never serves a (candidate, connection) pair that a freshly started process
(no cache) would exclude, in auto/subscription or auto/thrifty."""

from __future__ import annotations

import contextlib
import itertools
import sys
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any
from unittest import mock

import pytest
from django.db import connection, connections
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from billing.models import ModelPrice
from ladder import services
from ladder.api import event_batch
from ladder.core import SUBSCRIPTION_AUTO_ID, THRIFTY_AUTO_ID, AutoId
from ladder.models import (
    BudgetCrossing,
    Candidate,
    Connection,
    QuotaReading,
    SpendDayTotal,
    SpendEntry,
)
from ladder.services import events, readings, spend, spend_batch
from tests.ladder.factories import make_candidate, make_connection

pytestmark = pytest.mark.django_db(transaction=True)

PLANS = ("plan-a", "plan-b")
KEY = "openai-key"


@pytest.fixture
def on_postgresql() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("real concurrent writers need PostgreSQL (SQLite serialises them)")


@pytest.fixture
def seeded(on_postgresql: None) -> None:
    """What the migrations seed (the curated catalog, the change counters): a
    transactional test empties every table after it."""
    import importlib

    from django.apps import apps

    def migration(name: str) -> Any:
        return importlib.import_module(f"billing.migrations.{name}")

    migration("0002_seed_curated_catalog").seed(apps, None)
    migration("0004_seed_change_counters").create_counters(apps, None)
    migration("0009_seed_tokens_counter").create_counter(apps, None)


def _settings(**changes: Any) -> None:
    row = services.get_settings_row()
    values = {name: getattr(row, name) for name in services.SETTINGS_FIELDS}
    services.update_settings({**values, **changes}, actor="operator")


def _world() -> None:
    """Two Claude plans and an OpenAI key on the cheap rung, each with one candidate;
    plans at 50 %, a 2 % cutoff, a $100 cheap budget with $5 spent."""
    services.clear_caches()
    Connection.objects.update(current_reading=None)
    for model in (QuotaReading, SpendEntry, SpendDayTotal, BudgetCrossing):
        model.objects.all().delete()
    Candidate.objects.all().delete()
    Connection.objects.all().delete()
    ModelPrice.objects.get_or_create(
        provider="openai",
        model="gpt-4o-mini",
        defaults={"input_usd_per_mtok": Decimal("0.15"), "output_usd_per_mtok": Decimal("0.6")},
    )
    for plan in PLANS:
        make_connection(plan, provider="claude", auth_type="oauth")
        make_candidate(model=f"sonnet-{plan}", connection_id=plan)
    make_connection(KEY, provider="openai", auth_type="apikey")
    make_candidate("openai", "gpt-4o-mini", connection_id=KEY)
    _settings(exit_cutoff_percent=2.0, reentry_min_remaining_percent=5.0, cheap_budget_usd=100)


# --- the operations ------------------------------------------------------------------------

Op = tuple[Any, ...]

reading_op = st.tuples(
    st.just("reading"), st.sampled_from(PLANS), st.sampled_from([50.0, 30.0, 1.0])
)
event_op = st.tuples(
    st.just("event"),
    st.sampled_from(PLANS),
    st.sampled_from(["success-70", "success-30", "rate_limited", "success"]),
)
event_batch_op = st.tuples(
    st.just("event_batch"),
    st.lists(
        st.tuples(st.sampled_from(PLANS), st.sampled_from(["success-30", "success-70"])),
        min_size=1,
        max_size=4,
    ),
)
spend_op = st.tuples(st.just("spend"), st.sampled_from(["1", "20", "60"]))
spend_batch_op = st.tuples(
    st.just("spend_batch"), st.lists(st.sampled_from(["1", "20"]), min_size=1, max_size=4)
)
config_op = st.tuples(
    st.just("config"),
    st.sampled_from([2.0, 40.0]),
    st.sampled_from([None, "10", "100"]),
)
any_op = st.one_of(reading_op, event_op, event_batch_op, spend_op, spend_batch_op, config_op)


def _headers(name: str) -> dict[str, str] | None:
    used = {"success-70": "0.3", "success-30": "0.7"}.get(name)
    if used is None:
        return None
    return {
        "anthropic-ratelimit-unified-status": "allowed",
        "anthropic-ratelimit-unified-5h-utilization": used,
    }


class Runner:
    """Applies operations through the services, each at its own instant."""

    def __init__(self, base: datetime) -> None:
        self.base = base
        self.ticks = itertools.count(1)
        self.ids = itertools.count(1)

    def now(self) -> datetime:
        return self.base + timedelta(milliseconds=next(self.ticks))

    def apply(self, op: Op) -> None:
        kind = op[0]
        now = self.now()
        if kind == "reading":
            services.store_reading(
                op[1], services.ReadingInput(remaining_percent=op[2], checked_at=now), now=now
            )
        elif kind == "event":
            name = op[2]
            services.apply_event(
                op[1],
                kind="rate_limited" if name == "rate_limited" else "success",
                headers=_headers(name),
                now=now,
            )
        elif kind == "event_batch":
            entries = [
                {"connection_id": plan, "kind": "success", "headers": _headers(name)}
                for plan, name in op[1]
            ]
            results = event_batch.apply_batch(entries)
            assert all("error" not in r for r in results if isinstance(r, dict)), results
        elif kind == "spend":
            services.record_spend(self._spend(op[1], now), now=now)
        elif kind == "spend_batch":
            services.record_spend_batch([self._spend(cost, now) for cost in op[1]], now=now)
        else:
            cutoff, budget = op[1], op[2]
            _settings(
                exit_cutoff_percent=cutoff,
                reentry_min_remaining_percent=cutoff + 5,
                cheap_budget_usd=None if budget is None else Decimal(budget),
            )

    def _spend(self, cost: str, now: datetime) -> services.SpendInput:
        request_id = f"r{next(self.ids)}-{threading.get_ident()}"
        return services.SpendInput(
            request_id, KEY, "openai", "gpt-4o-mini", Decimal(cost), occurred_at=now
        )


def _in_thread(work: Callable[[], None], failures: list[BaseException]) -> threading.Thread:
    def run() -> None:
        try:
            work()
        except BaseException as error:  # reported by the test
            failures.append(error)
        finally:
            connections.close_all()

    return threading.Thread(target=run)


def _pairs(auto_id: AutoId, asked: datetime) -> set[tuple[str, str | None, int]]:
    decision = services.decide_registered(auto_id, now=asked)
    return {(c.model, c.connection_id, c.rung.value) for c in decision.candidates}


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    writers=st.lists(st.lists(any_op, min_size=1, max_size=4), min_size=2, max_size=3),
    between=st.lists(config_op, max_size=3),
)
def test_a_warm_process_never_serves_what_a_fresh_one_excludes_under_concurrent_writes(
    seeded: None, writers: list[list[Op]], between: list[Op]
) -> None:
    _world()
    runner = Runner(timezone.now())
    asked = runner.base + timedelta(seconds=30)
    for plan in PLANS:
        runner.apply(("reading", plan, 50.0))
    services.record_spend(runner._spend("5", runner.now()), now=runner.now())
    failures: list[BaseException] = []
    done = threading.Event()

    def warm() -> None:
        while not done.is_set():
            for auto_id in (SUBSCRIPTION_AUTO_ID, THRIFTY_AUTO_ID):
                services.decide_registered(auto_id, now=asked)

    def write(ops: list[Op]) -> Callable[[], None]:
        def run() -> None:
            for op in ops:
                runner.apply(op)

        return run

    # Besides the config changes the threads make at their own pace, `between` are made
    # exactly in the window a race needs: by the next writers, each right after it took
    # its snapshot and before it commits, followed by a decision under the new config.
    pending = list(between)
    lock = threading.Lock()

    def racing(real: Callable[..., Any]) -> Callable[..., Any]:
        def loader(*args: Any, **kwargs: Any) -> Any:
            snapshot = real(*args, **kwargs)
            with lock:
                op = pending.pop(0) if pending else None
            if op is not None:
                runner.apply(op)
                for auto_id in (SUBSCRIPTION_AUTO_ID, THRIFTY_AUTO_ID):
                    services.decide_registered(auto_id, now=asked)
            return snapshot

        return loader

    loaders = [
        mock.patch.object(module, name, racing(getattr(module, name)))
        for module, name in (
            (readings, "write_snapshot"),
            (events, "write_snapshot"),
            (event_batch.services, "write_snapshot"),
            (spend, "current_spend_snapshot"),
            (spend_batch, "current_spend_snapshot"),
        )
    ]
    warmer = _in_thread(warm, failures)
    # Threads switch as often as the interpreter allows: more interleavings per example.
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    threads = [_in_thread(write(ops), failures) for ops in writers]
    with contextlib.ExitStack() as patches:
        for loader in loaders:
            patches.enter_context(loader)
        warmer.start()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        done.set()
        warmer.join()
    sys.setswitchinterval(switch)
    assert failures == []

    warm_answers = {a: _pairs(a, asked) for a in (SUBSCRIPTION_AUTO_ID, THRIFTY_AUTO_ID)}
    services.clear_caches()
    fresh_answers = {a: _pairs(a, asked) for a in (SUBSCRIPTION_AUTO_ID, THRIFTY_AUTO_ID)}

    assert warm_answers[SUBSCRIPTION_AUTO_ID] <= fresh_answers[SUBSCRIPTION_AUTO_ID]
    assert warm_answers == fresh_answers
