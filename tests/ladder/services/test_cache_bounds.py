"""Per-process caches are bounded by bytes, not only by count: a stream of distinct large
pool POSTs from one gateway token (issue 12: 80 of 2.5 MB grew a web process by 2 GB)
leaves the decision cache and the rendered bodies within DECISION_CACHE_MAX_BYTES."""

from __future__ import annotations

import gc
import json
import threading
import tracemalloc
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from billing import services as billing_services
from billing.models import ChangeCounter
from ladder import services
from ladder.api import pool_answers
from ladder.core import parse_auto_id
from ladder.lru import ENTRY_SHARE, ByteBoundedLRU
from ladder.models import ApiToken
from ladder.services import decisions
from tests.ladder.factories import make_candidate, make_connection, make_reading, make_token

pytestmark = pytest.mark.django_db

MIB = 1024 * 1024


@pytest.fixture(autouse=True)
def _empty_rendered_bodies() -> None:
    pool_answers._RENDERED.clear()


@pytest.fixture
def gateway() -> str:
    return make_token("gw", ApiToken.Scope.GATEWAY)


def pool_body(index: int, candidates: int) -> dict[str, Any]:
    """A legal pool POST, distinct per `index`: every candidate pinned to a connection
    never registered (so `auto/subscription` excludes each one, with a detail text)."""
    return {
        "candidates": [
            {
                "id": number,
                "provider": "claude",
                "model": f"claude-sonnet-4-5-{index}",
                "connection_id": f"gateway-{index}-connection-{number}",
            }
            for number in range(candidates)
        ]
    }


# One client for every request (a new one loads the middleware again, 60 ms).
CLIENT = Client()


def post(token: str, body: dict[str, Any], auto_id: str = "auto/subscription") -> Any:
    response = CLIENT.post(
        f"/api/v1/pools/{auto_id}",
        json.dumps(body),
        content_type="application/json",
        headers={"Authorization": f"Bearer {token}"},
    )
    assert response.status_code == 200, response.content[:200]
    return response


def get(token: str, auto_id: str) -> Any:
    return CLIENT.get(f"/api/v1/pools/{auto_id}", headers={"Authorization": f"Bearer {token}"})


def post_key(body: dict[str, Any]) -> tuple[str, bytes]:
    """The decision cache key the endpoint uses for this body (as the test client sends it)."""
    return pool_answers.body_key("application/json", json.dumps(body).encode())


def is_cached(body: dict[str, Any]) -> bool:
    return any(key[1] == post_key(body) for key in decisions._decisions.kept_keys())


# --- the LRU itself ----------------------------------------------------------------------


def test_the_lru_evicts_least_recently_used_entries_until_the_bytes_fit() -> None:
    cache: ByteBoundedLRU[str, str] = ByteBoundedLRU(max_entries=100)
    for name in "abcdefgh":
        assert cache.put(name, name.upper(), size=100, max_bytes=800)
    assert cache.get("a") == "A"  # "a" is now the most recently used

    assert cache.put("i", "I", size=100, max_bytes=800)

    assert sorted(cache.kept_keys()) == [*"acdefghi"]  # "b", the least recently used, went
    assert cache.accounted_bytes == 800
    assert cache.get("b") is None


def test_an_entry_above_an_eighth_of_the_bound_is_not_kept() -> None:
    cache: ByteBoundedLRU[str, str] = ByteBoundedLRU(max_entries=100)
    cache.put("small", "s", size=10, max_bytes=8000)
    cache.put("big", "old", size=10, max_bytes=8000)

    kept = cache.put("big", "new", size=8000 // ENTRY_SHARE + 1, max_bytes=8000)

    assert kept is False
    assert cache.kept_keys() == ["small"]  # nothing flushed for it, and its old value dropped
    assert cache.accounted_bytes == 10


def test_replacing_an_entry_accounts_only_its_new_size() -> None:
    cache: ByteBoundedLRU[str, str] = ByteBoundedLRU(max_entries=100)
    cache.put("a", "first", size=500, max_bytes=8000)

    cache.put("a", "second", size=20, max_bytes=8000)

    assert cache.get("a") == "second"
    assert cache.accounted_bytes == 20


def test_the_lru_still_bounds_the_number_of_entries() -> None:
    cache: ByteBoundedLRU[int, int] = ByteBoundedLRU(max_entries=3)
    for number in range(5):
        cache.put(number, number, size=1, max_bytes=1000)

    assert cache.kept_keys() == [2, 3, 4]
    assert cache.accounted_bytes == 3


def test_a_zero_bound_keeps_nothing() -> None:
    cache: ByteBoundedLRU[str, str] = ByteBoundedLRU(max_entries=3)

    assert cache.put("a", "A", size=0, max_bytes=0) is True
    assert cache.put("b", "B", size=1, max_bytes=0) is False
    assert cache.kept_keys() == ["a"]  # a zero-size entry costs nothing


def test_concurrent_inserts_and_reads_keep_the_accounting_exact() -> None:
    cache: ByteBoundedLRU[int, int] = ByteBoundedLRU(max_entries=64)

    def work(offset: int) -> None:
        for number in range(2000):
            cache.put(offset + number % 97, number, size=1 + number % 13, max_bytes=400)
            cache.get(offset + (number * 7) % 97)

    threads = [threading.Thread(target=work, args=(n * 1000,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    kept = cache.kept_keys()
    assert cache.accounted_bytes == sum(1 + (cache.get(key) or 0) % 13 for key in kept)
    assert cache.accounted_bytes <= 400
    assert len(kept) <= 64


# --- the decision cache and the rendered bodies -------------------------------------------


def test_distinct_pool_posts_keep_both_caches_within_the_byte_bound(
    gateway: str, settings: Any
) -> None:
    settings.DECISION_CACHE_MAX_BYTES = 1 * MIB
    bodies = [pool_body(index, 60) for index in range(80)]

    for body in bodies:
        post(gateway, body)

    assert 0 < services.cached_decisions_bytes() <= services.decision_cache_max_bytes()
    assert 0 < pool_answers.rendered_bytes() <= pool_answers.rendered_cache_max_bytes()
    assert services.decision_cache_max_bytes() + pool_answers.rendered_cache_max_bytes() == MIB
    # Least recently used out first: the newest bodies are kept, the oldest are gone.
    assert is_cached(bodies[-1])
    assert not is_cached(bodies[0])
    assert len(decisions._decisions) < 80


def test_a_decision_in_use_survives_a_flood_of_distinct_posts(gateway: str, settings: Any) -> None:
    settings.DECISION_CACHE_MAX_BYTES = 1 * MIB
    make_connection("claude-max-1")
    now = timezone.now()
    make_reading("claude-max-1", now=now, checked_at=now, remaining_percent=60.0)
    make_candidate(connection_id="claude-max-1")
    subscription = parse_auto_id("auto/subscription")

    for index in range(80):
        assert get(gateway, "auto/subscription").status_code == 200
        post(gateway, pool_body(index, 60))

    # Evicted by use, not by age: the pool asked for between the POSTs is still cached.
    assert any(key[:2] == (subscription, "registered") for key in decisions._decisions.kept_keys())
    assert not is_cached(pool_body(0, 60))
    assert services.cached_decisions_bytes() <= services.decision_cache_max_bytes()


def test_a_pool_answer_above_the_entry_size_is_served_but_not_cached(
    gateway: str, settings: Any
) -> None:
    settings.DECISION_CACHE_MAX_BYTES = 1 * MIB
    body = pool_body(0, 400)  # about 40 KB, accounted at over 500 KB: above 1/8 of the bound

    first = post(gateway, body)
    second = post(gateway, body)

    assert len(first.json()["excluded"]) == 400
    assert first.json()["excluded"] == second.json()["excluded"]
    assert not is_cached(body)
    assert services.cached_decisions_bytes() == 0
    assert pool_answers.rendered_bytes() == 0


def test_distinct_large_pool_posts_grow_the_process_by_less_than_the_cache_bound(
    gateway: str, settings: Any
) -> None:
    # The attack of issue 12 scaled down: 80 distinct legal POSTs from one token, some
    # small enough to be cached and the rest not, against a 512 KiB bound (unbounded, they
    # keep about 2 MiB).
    settings.DECISION_CACHE_MAX_BYTES = MIB // 2
    bodies = [pool_body(index, 10 + (index % 8) * 12) for index in range(80)]
    post(gateway, pool_body(1000, 10))  # first-request allocations outside the measurement
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for body in bodies:
            post(gateway, body)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()

    print(f"grew {grown} bytes")
    # The caches stay within their bound; the database driver keeps a few small caches of
    # its own (prepared statements, type adapters) that no setting bounds: an eighth of the
    # bound is their allowance, far below the ~2 MiB the unbounded caches kept.
    assert grown < MIB // 2 + MIB // 8, f"grew {grown} bytes"
    assert len(decisions._decisions) > 0  # the bound held because entries were evicted


def test_a_registered_decision_is_accounted_at_least_what_it_keeps(gateway: str) -> None:
    # Each load of the registered candidates (one per `state` counter) is a new set of
    # objects, which the decisions made from it keep after the next load replaced it.
    for number in range(100):
        make_candidate(
            model=f"model-{number}",
            allowed_connection_ids=tuple(f"{number}-{'x' * 60}-{k}" for k in range(10)),
        )
    assert get(gateway, "auto/thrifty").status_code == 200  # snapshot, queries, metrics
    billing_services.bump(ChangeCounter.STATE)  # the next request loads them again
    accounted_before = services.cached_decisions_bytes()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        assert get(gateway, "auto/thrifty").status_code == 200
        pool_answers._RENDERED.clear()
        decisions._registered = None  # as after the next load: only the decision keeps it
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()

    accounted = services.cached_decisions_bytes() - accounted_before
    assert len(decisions._decisions) == 2
    assert accounted >= kept, (accounted, kept)
