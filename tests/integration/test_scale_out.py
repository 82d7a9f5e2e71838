"""Scaling out: two web processes (gunicorn, one worker process each, so two sets of
per-process caches) and two Celery workers (exactly one with the beat) on one database
and one broker. A write through either web process is seen by the other's next
decision; the workers share the refresh load and never poll one connection twice at
once; a reading either worker writes is seen by both web processes."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from django.db import connections, transaction

from billing import services as billing_services
from billing.models import BillingCatalogEntry
from ladder import services
from ladder.models import ApiToken, Candidate, Connection
from ladder.services.polling import Lease
from ladder.tokens import create_token
from tests.integration.harness import (
    CeleryWorker,
    GatedUpstream,
    WebServer,
    happens_within,
    stop_together,
    wait_until,
)

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

AUTO_IDS = ("auto/subscription", "auto/thrifty")
# Enough worker slots that a duplicate refresh finds one free while polls wait on the
# gate, and few enough per worker that four polls in flight always span both workers.
CONCURRENCY = 3
# Long enough that a bounded retry (1 s countdown) of a deferred refresh would show.
SECOND_POLL_WINDOW = 5.0
DUE_SCAN_TASK = "ladder.tasks.enqueue_due_refreshes_task"


# --- the cluster --------------------------------------------------------------------------


@dataclass(frozen=True)
class Cluster:
    web_a: WebServer
    web_b: WebServer
    worker_a: CeleryWorker  # runs the beat
    worker_b: CeleryWorker

    @property
    def workers(self) -> tuple[CeleryWorker, CeleryWorker]:
        return self.worker_a, self.worker_b

    def due_scans(self) -> int:
        """How many due scans (the beat's periodic task) the workers have completed."""
        return sum(w.tasks_succeeded(DUE_SCAN_TASK) for w in self.workers)


@dataclass(frozen=True)
class Tokens:
    gateway: str
    operator: str


@pytest.fixture
def usage() -> Iterator[GatedUpstream]:
    """The fake Claude usage endpoint every worker polls (gate open)."""
    server = GatedUpstream(lambda credential: (404, {"error": "unscripted"}))
    yield server
    server.stop()


@pytest.fixture
def poll_cap() -> int:
    """QUOTA_MAX_CONCURRENT_POLLS for the cluster (parametrize to change it)."""
    return 8


@pytest.fixture
def cluster(
    worker_env: dict[str, str], usage: GatedUpstream, poll_cap: int, tmp_path: Path
) -> Iterator[Cluster]:
    """Two web processes and two workers (the first with the beat), started together
    and always stopped together, on this test's database and broker."""
    env = dict(worker_env)
    env.update(
        {
            "QUOTA_URL_CLAUDE": usage.url("/api/oauth/usage"),
            # A poll may wait on the gate for seconds: it must not time out meanwhile.
            "QUOTA_HTTP_TIMEOUT_SECONDS": "15",
            "QUOTA_MAX_CONCURRENT_POLLS": str(poll_cap),
            # A slow answer on a loaded machine (SQLite shared by six processes) must not
            # pass for an inconsistency; the deadline has tests of its own.
            "API_REQUEST_DEADLINE_SECONDS": "10",
            "DJANGO_ALLOWED_HOSTS": "127.0.0.1,localhost",
        }
    )
    # The test's own connection must not hold a transaction the others would wait on.
    connections.close_all()
    processes: list[WebServer | CeleryWorker] = []
    try:
        # Each process starts as it is created; then all are awaited together.
        web_a = WebServer(env, "web-a")
        processes.append(web_a)
        web_b = WebServer(env, "web-b")
        processes.append(web_b)
        worker_a = CeleryWorker(env, tmp_path, "worker-a", beat=True, concurrency=CONCURRENCY)
        processes.append(worker_a)
        worker_b = CeleryWorker(env, tmp_path, "worker-b", beat=False, concurrency=CONCURRENCY)
        processes.append(worker_b)
        for process in processes:
            process.wait_ready()
        yield Cluster(web_a, web_b, worker_a, worker_b)
    finally:
        usage.open_gate()  # a poll held on the gate must not delay the workers' shutdown
        stop_together(*processes)
        for process in processes:  # shown by pytest when the test failed
            print(process.tail(60))


@pytest.fixture
def tokens() -> Tokens:
    """A gateway token (pools, readings, events, refreshes) and an operator token."""
    _, gateway = create_token("gateway", ApiToken.Scope.GATEWAY)
    _, operator = create_token("operator", ApiToken.Scope.OPERATOR)
    return Tokens(gateway=gateway, operator=operator)


# --- helpers --------------------------------------------------------------------------------


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _claude_plan_entry() -> BillingCatalogEntry:
    """The curated claude/oauth entry (subscription, hard-stop). Seeded by a migration,
    but an earlier transactional test's flush may have removed it."""
    entry = BillingCatalogEntry.objects.filter(provider="claude", auth_type="oauth").first()
    if entry is not None:
        return entry
    return billing_services.create_catalog_entry(
        billing_services.CatalogInput(
            "claude", "oauth", "subscription", "hard-stop", "Plan windows refuse past the limit"
        ),
        actor="test",
    )


def _pinned_candidate(provider: str, model: str, connection_id: str) -> int:
    candidate = services.save_candidate(
        services.CandidateInput(provider, model, connection_id=connection_id)
    )
    return candidate.pk


def _pool(web: WebServer, auto_id: str, tokens: Tokens) -> dict[str, Any]:
    response = web.request("GET", f"/api/v1/pools/{auto_id}", tokens.gateway)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def _warm(web: WebServer, tokens: Tokens) -> dict[str, dict[str, Any]]:
    """Ask the process for both pools twice: the second answer is its cached decision
    (the same bytes, so the same `computed_at`), proving its caches are warm."""
    answers = {}
    for auto_id in AUTO_IDS:
        first = web.request("GET", f"/api/v1/pools/{auto_id}", tokens.gateway)
        second = web.request("GET", f"/api/v1/pools/{auto_id}", tokens.gateway)
        assert first.status_code == second.status_code == 200
        assert second.content == first.content, f"{web.name} did not cache {auto_id}"
        answers[auto_id] = first.json()
    return answers


Shape = tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str, str], ...]]


def _shape(body: dict[str, Any], names: dict[str, str]) -> Shape:
    """(served (connection, rung) pairs, excluded (connection, rung, reason) triples) with
    connection ids replaced by the test's names for them."""
    served = tuple((names[c["connection_id"]], c["rung"]) for c in body["candidates"])
    excluded = tuple((names[e["connection_id"]], e["rung"], e["reason"]) for e in body["excluded"])
    return served, excluded


def _current_source(connection_id: str) -> str | None:
    reading = (
        Connection.objects.select_related("current_reading")
        .get(connection_id=connection_id)
        .current_reading
    )
    return reading.source if reading is not None else None


def _usage(utilization: float) -> dict[str, Any]:
    """A Claude usage payload with one five-hour window and no reset instant (so no
    refresh is scheduled for a reset that would outlive the test)."""
    return {"five_hour": {"utilization": utilization, "resets_at": None}}


# --- a write through one web process, the other's next decision ----------------------------


@dataclass(frozen=True)
class World:
    plan: str  # a plan login of a provider curated subscription, hard-stop; 60 % left
    key: str  # an uncurated API key: metered, its unpriced model premium
    plan_entry_id: int  # the catalog entry that curates the plan's provider

    @property
    def names(self) -> dict[str, str]:
        return {self.plan: "plan", self.key: "key"}


def _world() -> World:
    """A world of its own: a plan login whose provider only it uses (read 120 s ago,
    60 % left) and an API key, one pinned candidate each; earlier candidates removed."""
    for candidate in Candidate.objects.all():
        services.delete_candidate(candidate.pk)
    now = datetime.now(UTC)
    provider = _unique("plan-provider")
    entry = billing_services.create_catalog_entry(
        billing_services.CatalogInput(
            provider, "oauth", "subscription", "hard-stop", "Refuses past the plan"
        ),
        actor="test",
    )
    plan, key = _unique("plan"), _unique("key")
    services.upsert_connection(plan, services.ConnectionInput(provider, "oauth"))
    services.upsert_connection(key, services.ConnectionInput("openai", "apikey"))
    services.store_reading(
        plan,
        services.ReadingInput(
            remaining_percent=60.0,
            checked_at=now - timedelta(seconds=120),
            reset_at=now + timedelta(hours=5),
        ),
        now=now,
    )
    _pinned_candidate(provider, "plan-model", plan)
    _pinned_candidate("openai", "gpt-unpriced", key)
    return World(plan=plan, key=key, plan_entry_id=entry.pk)


BEFORE: dict[str, Shape] = {
    "auto/subscription": ((("plan", "subscription"),), (("key", "premium", "uncurated"),)),
    "auto/thrifty": ((("plan", "subscription"), ("key", "premium")), ()),
}


def _exhausting_reading(web: WebServer, world: World, tokens: Tokens) -> None:
    reset_at = datetime.now(UTC) + timedelta(hours=5)
    response = web.request(
        "POST",
        f"/api/v1/connections/{world.plan}/readings",
        tokens.gateway,
        {"remaining_percent": 0.0, "reset_at": reset_at.isoformat()},
    )
    assert response.status_code == 201, response.text


def _cooldown_event(web: WebServer, world: World, tokens: Tokens) -> None:
    response = web.request(
        "POST",
        f"/api/v1/connections/{world.plan}/events",
        tokens.gateway,
        {"kind": "rate_limited", "retry_after_seconds": 600},
    )
    assert response.status_code == 200, response.text


def _uncurating_catalog_edit(web: WebServer, world: World, tokens: Tokens) -> None:
    response = web.request("DELETE", f"/api/v1/catalog/{world.plan_entry_id}", tokens.operator)
    assert response.status_code == 204, response.text


def _settings_change(web: WebServer, world: World, tokens: Tokens) -> None:
    current = web.request("GET", "/api/v1/settings/ladder", tokens.operator).json()
    # Budget 0 disables the premium rung; a 60 s maximum age makes the plan's 120 s old
    # reading stale.
    current["rung_budget_usd"]["premium"] = 0
    current["max_state_age_seconds"] = 60
    response = web.request("PUT", "/api/v1/settings/ladder", tokens.operator, current)
    assert response.status_code == 200, response.text


Write = Callable[[WebServer, World, Tokens], None]

# Each write with both pools after it. The settings change comes last: it is global.
WRITES: list[tuple[Write, dict[str, Shape]]] = [
    (
        _exhausting_reading,
        {
            "auto/subscription": (
                (),
                (("plan", "subscription", "quota_exhausted"), ("key", "premium", "uncurated")),
            ),
            "auto/thrifty": ((("key", "premium"),), (("plan", "subscription", "quota_exhausted"),)),
        },
    ),
    (
        _cooldown_event,
        {
            "auto/subscription": (
                (),
                (("plan", "subscription", "cooling_down"), ("key", "premium", "uncurated")),
            ),
            "auto/thrifty": ((("key", "premium"),), (("plan", "subscription", "cooling_down"),)),
        },
    ),
    (
        _uncurating_catalog_edit,
        {
            "auto/subscription": (
                (),
                (("plan", "premium", "uncurated"), ("key", "premium", "uncurated")),
            ),
            "auto/thrifty": ((("plan", "premium"), ("key", "premium")), ()),
        },
    ),
    (
        _settings_change,
        {
            "auto/subscription": (
                (),
                (("plan", "subscription", "quota_stale"), ("key", "premium", "uncurated")),
            ),
            "auto/thrifty": ((("plan", "subscription"),), (("key", "premium", "rung_disabled"),)),
        },
    ),
]


def test_a_write_through_one_web_process_is_seen_by_the_others_next_decision(
    cluster: Cluster, tokens: Tokens
) -> None:
    """Each kind of write in turn, on a world of its own, against one cluster (starting
    one per write would cost seconds each)."""
    for write, after in WRITES:
        # Given both web processes answering both pools from their caches ...
        world = _world()
        warm = {web.name: _warm(web, tokens) for web in (cluster.web_a, cluster.web_b)}
        for answers in warm.values():
            assert {a: _shape(body, world.names) for a, body in answers.items()} == BEFORE

        # ... when the write goes through web process A ...
        write(cluster.web_a, world, tokens)

        # Then B's next decision of each pool reflects it, and so does A's.
        for web in (cluster.web_b, cluster.web_a):
            for auto_id in AUTO_IDS:
                answer = _pool(web, auto_id, tokens)
                where = (write.__name__, web.name, auto_id)
                assert _shape(answer, world.names) == after[auto_id], where
                assert answer["computed_at"] != warm[web.name][auto_id]["computed_at"], where


# --- two workers, one beat ------------------------------------------------------------------


def _polled_connections(
    usage: GatedUpstream,
    count: int,
    utilization: Callable[[int], float],
    *,
    is_fresh: bool = False,
) -> list[tuple[str, str]]:
    """`count` Claude plan logins polled through the usage endpoint, each with its own
    credential: [(connection id, credential)]. The endpoint answers by credential.
    `is_fresh`: each is created with a reading taken now, in the same transaction, so
    the beat never sees it due."""
    _claude_plan_entry()
    plans = [(_unique(f"plan{i}"), _unique(f"cred{i}")) for i in range(count)]
    answers = {credential: _usage(utilization(i)) for i, (_, credential) in enumerate(plans)}
    usage.script = lambda credential: (200, answers[credential])
    for connection_id, credential in plans:
        with transaction.atomic():
            services.upsert_connection(
                connection_id,
                services.ConnectionInput(
                    "claude", "oauth", quota_source="claude", credential=credential
                ),
            )
            if is_fresh:
                services.store_reading(connection_id, services.ReadingInput(remaining_percent=50.0))
    return plans


def _polled_by(cluster: Cluster, connection_ids: list[str]) -> dict[str, list[str]]:
    """For each worker, the connections it logged a completed poll of."""
    return {
        worker.name: [c for c in connection_ids if worker.refreshes(c, "polled")]
        for worker in cluster.workers
    }


def test_refreshes_asked_of_both_web_processes_poll_each_connection_once_on_both_workers(
    cluster: Cluster, usage: GatedUpstream, tokens: Tokens
) -> None:
    # Given four plan logins with fresh readings (so the beat leaves them alone) ...
    plans = _polled_connections(usage, 4, lambda i: 30.0 + i, is_fresh=True)
    ids = [connection_id for connection_id, _ in plans]
    usage.close_gate()

    # ... when a refresh of each is asked of both web processes ...
    for connection_id in ids:
        for web in (cluster.web_a, cluster.web_b):
            response = web.request(
                "POST", f"/api/v1/connections/{connection_id}/refresh", tokens.gateway
            )
            assert response.status_code == 202, response.text

    # ... one poll of each is held in flight, and the other request finds its lease held.
    all_credentials = {credential for _, credential in plans}
    wait_until(lambda: usage.credentials_in_flight() == all_credentials, timeout=20)
    wait_until(
        lambda: all(
            sum(w.refreshes(c, Lease.HELD_ELSEWHERE.value) for w in cluster.workers) == 1
            for c in ids
        ),
        timeout=20,
    )
    usage.open_gate()
    wait_until(lambda: all(_current_source(c) == "claude" for c in ids), timeout=20)

    # Then each connection was polled exactly once, by one worker, and both took a share.
    assert [usage.calls_of(credential) for _, credential in plans] == [1, 1, 1, 1]
    # A worker logs a poll once its task returns, just after the reading commits.
    wait_until(
        lambda: sum(len(c) for c in _polled_by(cluster, ids).values()) >= len(ids), timeout=20
    )
    polled_by = _polled_by(cluster, ids)
    assert sorted(polled_by["worker-a"] + polled_by["worker-b"]) == sorted(ids)
    assert polled_by["worker-a"], "the beat's worker polled nothing"
    assert polled_by["worker-b"], "the second worker polled nothing"


def test_readings_polled_by_either_worker_are_seen_by_both_web_processes_next_decisions(
    cluster: Cluster, usage: GatedUpstream, tokens: Tokens
) -> None:
    # Given four never-read plan logins, the first of which will read used up, with the
    # usage endpoint holding every call, and both web processes' caches warm ...
    usage.close_gate()
    plans = _polled_connections(usage, 4, lambda i: 100.0 if i == 0 else 40.0)
    ids = [connection_id for connection_id, _ in plans]
    names = {connection_id: f"plan{i}" for i, connection_id in enumerate(ids)}
    for connection_id in ids:
        _pinned_candidate("claude", "claude-sonnet-4-5", connection_id)
    never_read = tuple((name, "subscription", "quota_unknown") for name in names.values())
    all_served = tuple((name, "subscription") for name in names.values())
    for web in (cluster.web_a, cluster.web_b):
        answers = _warm(web, tokens)
        assert _shape(answers["auto/subscription"], names) == ((), never_read)
        assert _shape(answers["auto/thrifty"], names) == (all_served, ())

    # ... when the beat has every connection polled (four polls held in flight at once
    # cannot all fit on one worker) ...
    all_credentials = {credential for _, credential in plans}
    wait_until(lambda: usage.credentials_in_flight() == all_credentials, timeout=20)
    usage.open_gate()
    wait_until(lambda: all(_current_source(c) == "claude" for c in ids), timeout=20)

    # Then both workers wrote readings, no connection was polled twice at once, and each
    # web process's next decision reflects every reading, whichever worker wrote it.
    polled_by = _polled_by(cluster, ids)
    assert polled_by["worker-a"], polled_by
    assert polled_by["worker-b"], polled_by
    assert usage.overlapping_calls() == []
    exhausted = ("plan0", "subscription", "quota_exhausted")
    after = {
        "auto/subscription": (all_served[1:], (exhausted,)),
        "auto/thrifty": (all_served[1:], (exhausted,)),
    }
    for web in (cluster.web_b, cluster.web_a):
        for auto_id in AUTO_IDS:
            assert _shape(_pool(web, auto_id, tokens), names) == after[auto_id], web.name


def test_the_beat_never_has_a_connection_polled_twice_while_polls_are_at_the_cap(
    cluster: Cluster, usage: GatedUpstream, poll_cap: int
) -> None:
    # Given two never-read plan logins whose polls are in flight (the cap is 2) ...
    usage.close_gate()
    plans = _polled_connections(usage, 2, lambda i: 40.0)
    ids = [connection_id for connection_id, _ in plans]
    all_credentials = {credential for _, credential in plans}
    wait_until(lambda: usage.credentials_in_flight() == all_credentials, timeout=20)

    # ... when a due scan of the beat has run while they are (the second scan to finish
    # from now started after both polls, whatever the first did) ...
    scans = cluster.due_scans()
    wait_until(lambda: cluster.due_scans() >= scans + 2, timeout=20)
    usage.open_gate()
    wait_until(lambda: all(_current_source(c) == "claude" for c in ids), timeout=20)

    # Then neither connection is polled a second time.
    assert not happens_within(
        lambda: any(usage.calls_of(c) > 1 for c in all_credentials), SECOND_POLL_WINDOW
    )
    assert [usage.calls_of(credential) for _, credential in plans] == [1, 1]
