"""omniroute_client against a small local control plane that HAS the change feed
(`GET /api/v1/changes`, being built on another branch) and no batch endpoints: the
client keeps a decision until the feed moves, and falls back to the single endpoints."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from omniroute_client import OmniRouteClient

from tests.integrations.conftest import Clock

DECISION = {
    "auto_id": "auto/thrifty",
    "grouping": "thrifty",
    "category": None,
    "fail_mode": "open",
    "computed_at": "2026-12-01T12:00:00Z",
    "candidates": [
        {
            "id": None,
            "ref": "d1",
            "provider": "openai",
            "model": "m",
            "rung": "cheap",
            "connection_id": "key-1",
            "allowed_connection_ids": None,
        }
    ],
    "excluded": [],
    "next_change_at": None,
    "valid_until": None,
}


class FeedPlane:
    """Answers pools with one decision (ETag per `tag`), the change feed's version
    (a long poll that waits for `bump()`), 404 on the batch endpoints, and records the
    single writes. Each pool request and feed poll notifies `arrived` (`wait_for`); a pool
    path may be held (`hold`, `release`) or given its own status (`statuses`)."""

    def __init__(self) -> None:
        self.version = 1
        self.tag = 'W/"a"'
        self.changed = threading.Condition()
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.writes: list[tuple[str, Any]] = []
        self.decision: dict[str, Any] = dict(DECISION)
        self.pool_status = 200  # e.g. 401: a revoked token
        self.statuses: dict[str, int] = {}  # one pool path's own status (e.g. 503)
        self.arrived = threading.Condition()
        self.polls: list[str] = []  # each feed poll's `after` ("": none)
        self.gates: dict[str, threading.Event] = {}  # a pool path held until its gate opens
        # Cleared: pool requests are held (a control plane slower than the timeout).
        self.pools_flow = threading.Event()
        self.pools_flow.set()
        self.feed_frozen = threading.Event()  # set: the feed never answers...
        self.feed_thaw = threading.Event()  # ...until this is set (teardown)
        # The next this many pool requests are read and their connections closed
        # unanswered (a kept-alive connection the server closed as the client sent on it).
        self.drop_pools = 0
        self.dropped = 0
        plane = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _send(
                self, status: int, body: Any = None, headers: dict[str, str] | None = None
            ) -> None:
                data = b"" if body is None else json.dumps(body).encode()
                self.send_response(status)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                url = urlparse(self.path)
                if url.path == "/api/v1/changes":
                    if plane.feed_frozen.is_set():  # a silently dead connection
                        plane.feed_thaw.wait(60)
                        return
                    query = parse_qs(url.query)
                    after = query.get("after", [""])[0]
                    with plane.arrived:
                        plane.polls.append(after)
                        plane.arrived.notify_all()
                    with plane.changed:
                        if after == str(plane.version):
                            plane.changed.wait(float(query.get("wait", ["0"])[0]))
                        version = plane.version
                    return self._send(200, {"version": str(version)})
                if plane.drop_pools:
                    plane.drop_pools -= 1
                    plane.dropped += 1
                    self.close_connection = True
                    return
                with plane.arrived:
                    plane.requests.append(("GET", url.path, dict(self.headers)))
                    plane.arrived.notify_all()
                plane.pools_flow.wait(30)
                if url.path in plane.gates:
                    plane.gates[url.path].wait(30)
                status = plane.statuses.get(url.path, plane.pool_status)
                if status != 200:
                    return self._send(status, {"detail": "Invalid or revoked token"})
                if self.headers.get("If-None-Match") == plane.tag:
                    return self._send(
                        304, None, {"ETag": plane.tag, "Cache-Control": "private, max-age=0"}
                    )
                return self._send(
                    200, plane.decision, {"ETag": plane.tag, "Cache-Control": "private, max-age=0"}
                )

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                if self.path.endswith("/batch"):
                    return self._send(404, {"detail": "Not Found"})
                plane.writes.append((self.path, body))
                self._send(200, {"ok": True})

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def bump(self) -> None:
        with self.changed:
            self.version += 1
            self.changed.notify_all()

    def pool_requests(self) -> int:
        return len(self.requests)

    def paths(self) -> list[str]:
        """The path of each pool request, in the order they arrived."""
        with self.arrived:
            return [path for _, path, _ in self.requests]

    def wait_for(self, predicate: Any) -> None:
        """Until `predicate()` holds, checked at each request's arrival (the 10 s are a
        safety net for a broken client, not a bound the test asserts)."""
        with self.arrived:
            assert self.arrived.wait_for(predicate, timeout=10), "the plane never saw it"

    def followed(self) -> None:
        """Until a client follows the feed: its long poll names the version it was told
        (the client is live from the answer before)."""
        self.wait_for(lambda: any(self.polls))

    def hold(self, path: str) -> None:
        """Requests for `path` are held until `release(path)` (they arrive, then wait)."""
        self.gates[path] = threading.Event()

    def release(self, path: str) -> None:
        self.gates[path].set()


def _until(predicate: Any, timeout: float = 5.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not met"
        time.sleep(0.01)


@pytest.fixture
def plane() -> Iterator[FeedPlane]:
    made = FeedPlane()
    yield made
    made.feed_thaw.set()
    made.pools_flow.set()
    for gate in made.gates.values():
        gate.set()
    made.server.shutdown()
    made.server.server_close()


def test_with_a_live_feed_a_decision_is_kept_until_the_version_moves(
    plane: FeedPlane, clock: Clock
) -> None:
    client = OmniRouteClient(plane.url, "t", clock=clock, revalidate_seconds=1.0)
    try:
        _until(lambda: client.feed_live)
        decision = client.pool("auto/thrifty")
        # No valid_until and a live feed: time alone does not expire it, within the
        # feed's proof of life (wait + margin after its last answer).
        clock.now += client.feed_wait_seconds + client.feed_margin_seconds - 1
        assert client.pool("auto/thrifty") is decision
        assert plane.pool_requests() == 1
        plane.bump()  # a write elsewhere
        _until(lambda: client.stats["refreshes"] == 1)
        # Refreshed by the feed's thread (a 304): the first request after the write
        # makes no round trip.
        assert plane.pool_requests() == 2
        assert plane.requests[-1][2]["If-None-Match"] == 'W/"a"'
        assert client.pool("auto/thrifty") is decision
        assert plane.pool_requests() == 2
        assert (client.stats["not_modified"], client.stats["hits"]) == (1, 2)
    finally:
        client.close()


def test_a_decision_the_write_changed_is_refetched_before_the_next_request(
    plane: FeedPlane, clock: Clock
) -> None:
    client = OmniRouteClient(plane.url, "t", clock=clock)
    try:
        _until(lambda: client.feed_live)
        first = client.pool("auto/thrifty")
        plane.tag = 'W/"b"'  # the write changed this pool: a new tag, a 200
        plane.bump()
        _until(lambda: client.stats["refreshes"] == 1)

        second = client.pool("auto/thrifty")

        assert second is not first
        assert second.etag == 'W/"b"'
        assert (plane.pool_requests(), client.stats["fetches"]) == (2, 2)
    finally:
        client.close()


def _held_then_moved(client: OmniRouteClient, plane: FeedPlane) -> Any:
    """The decision the client holds once a write elsewhere moved the feed (with
    `refresh_on_change=False`, its next ask revalidates it on the pool connection)."""
    _until(lambda: client.feed_live)
    decision = client.pool("auto/thrifty")
    generation = client.generation
    plane.bump()
    _until(lambda: client.generation != generation)
    return decision


def test_a_pool_request_whose_connection_closes_under_it_is_sent_again_once(
    plane: FeedPlane, clock: Clock
) -> None:
    # bench/fleet.py: gunicorn closed kept-alive connections idle for 2 s; a request sent
    # as one closed counted as the control plane down, and subscription failed closed.
    client = OmniRouteClient(plane.url, "t", clock=clock, refresh_on_change=False)
    try:
        decision = _held_then_moved(client, plane)
        plane.drop_pools = 1

        again = client.pool("auto/thrifty")  # a revalidation, on the kept-alive connection

        assert again is decision  # its 304, on a new connection
        assert (plane.dropped, plane.pool_requests()) == (1, 2)
        assert (client.breaker.opened, client.stats["unavailable"]) == (0, 0)
    finally:
        client.close()


def test_a_pool_request_closed_under_it_twice_is_the_control_plane_unreachable(
    plane: FeedPlane, clock: Clock
) -> None:
    client = OmniRouteClient(plane.url, "t", clock=clock, refresh_on_change=False)
    try:
        _held_then_moved(client, plane)
        plane.drop_pools = 2  # the retry's connection is closed under it too

        client.pool("auto/thrifty")  # thrifty: its last decision, within its grace

        assert (plane.dropped, plane.pool_requests()) == (2, 1)
        assert (client.breaker.opened, client.stats["stale_served"]) == (1, 1)
    finally:
        client.close()


def test_without_refreshing_the_next_request_after_a_move_revalidates(
    plane: FeedPlane, clock: Clock
) -> None:
    client = OmniRouteClient(plane.url, "t", clock=clock, refresh_on_change=False)
    try:
        decision = _held_then_moved(client, plane)
        assert plane.pool_requests() == 1

        assert client.pool("auto/thrifty") is decision  # revalidated: a 304
        assert plane.pool_requests() == 2
        assert client.stats["not_modified"] == 1
    finally:
        client.close()


def test_the_refresh_after_a_move_starts_after_a_jittered_delay(
    plane: FeedPlane, clock: Clock
) -> None:
    asked: list[tuple[float, float]] = []
    delay_over = threading.Event()

    def jitter(low: float, high: float) -> float:
        asked.append((low, high))
        delay_over.wait(10)  # the delay lasts until the test ends it
        return 0.0

    client = OmniRouteClient(plane.url, "t", clock=clock, jitter=jitter)
    try:
        _until(lambda: client.feed_live)
        decision = client.pool("auto/thrifty")
        plane.bump()
        _until(lambda: asked)

        assert asked == [(0.0, 0.05)]  # the default: a fifth of the 250 ms propagation target
        assert plane.pool_requests() == 1  # no refresh during the delay...
        assert client.pool("auto/thrifty") is decision  # ...and the old decision served
        delay_over.set()
        _until(lambda: client.stats["refreshes"] == 1)
        assert plane.pool_requests() == 2  # then the refresh
    finally:
        delay_over.set()
        client.close()


def test_the_refresh_after_a_move_fetches_only_decisions_the_client_holds(
    plane: FeedPlane, clock: Clock
) -> None:
    from omniroute_client import NotFound

    client = OmniRouteClient(plane.url, "t", clock=clock, refresh_jitter_seconds=0)
    try:
        _until(lambda: client.feed_live)
        client.pool("auto/thrifty")
        plane.pool_status = 404
        with pytest.raises(NotFound):
            client.pool("auto/subscription")  # asked, but no decision held
        plane.pool_status = 200
        plane.bump()
        _until(lambda: client.stats["refreshes"] == 1)

        refreshed = [path for _, path, _ in plane.requests[2:]]
        assert refreshed == ["/api/v1/pools/auto/thrifty"]
    finally:
        client.close()


def test_without_batch_endpoints_reports_go_one_by_one(plane: FeedPlane, clock: Clock) -> None:
    client = OmniRouteClient(plane.url, "t", clock=clock, follow_changes=False)
    try:
        client.report_event("key-1", {"kind": "rate_limited", "retry_after_seconds": 3.0})
        client.report_spend(
            {
                "request_id": "r1",
                "connection_id": "key-1",
                "provider": "openai",
                "model": "m",
                "cost_usd": 0.5,
            }
        )
        assert client.flush()
    finally:
        client.close()
    observed = datetime.fromtimestamp(clock.now, UTC).isoformat()
    assert plane.writes == [
        (
            "/api/v1/connections/key-1/events",
            {"observed_at": observed, "kind": "rate_limited", "retry_after_seconds": 3.0},
        ),
        (
            "/api/v1/spend",
            {
                "request_id": "r1",
                "connection_id": "key-1",
                "provider": "openai",
                "model": "m",
                "cost_usd": 0.5,
            },
        ),
    ]
    assert client.reporter.batch_endpoints == {"spend": False, "event": False}
