"""Sync and async clients of the OmniRoute control plane, on httpx with keep-alive.

`pool()` serves a kept decision while it is fresh (no round trip), revalidates it with
`If-None-Match` once it is not, and makes one fetch per key at a time whose outcome, a
decision or a failure, every concurrent caller shares (`flight.SingleFlight`); a short
circuit breaker (`flight.Breaker`) answers from the fail modes at once while the control
plane is unreachable. A background thread follows the change feed (`GET /changes`) and,
when it moves, fetches the recently used decisions again, each served the moment its own
refetch lands (`refresh.Refresh`); a feed with no answer for `feed_wait_seconds +
feed_margin_seconds` is blind, and no kept decision is served again before it is
revalidated. Without the feed (404 or down) decisions are revalidated at least every
`revalidate_seconds`. Spend and events go to a background reporter through a durable
spool. The gateway's own events invalidate its decisions at once.

One concern a module: the cache and its fail modes (cache.py), the pool request and the
breaker (transport.py), the change feed and its refresh (feed.py), spend and events
(reports.py); this module builds them into the two public clients.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import Any

import httpx

from .budget import BudgetTracker
from .decisions import (
    ControlPlaneUnavailable,
    Decision,
    Entry,
    NotFound,
    OmniRouteError,
    TokenRejected,
    is_thrifty,
    pool_key,
)
from .feed import FEED_MARGIN_SECONDS, FEED_WAIT_SECONDS, ChangeFeed
from .flight import Breaker, SingleFlight
from .refresh import REFRESH_JITTER_SECONDS, Refresh
from .reporter import Reporter
from .reports import Reports
from .spool import default_spool_path
from .sticky import StickyConnections
from .transport import CLOSED_UNDER_US

# The clients, and the errors they raise (importable from here as before the split).
__all__ = [
    "AsyncOmniRouteClient",
    "ControlPlaneUnavailable",
    "NotFound",
    "OmniRouteClient",
    "OmniRouteError",
    "TokenRejected",
]


class _Base(Reports, ChangeFeed):
    def __init__(
        self,
        control_plane_url: str,
        token: str,
        *,
        clock: Callable[[], float] = time.time,
        timeout: float = 2.0,
        revalidate_seconds: float = 1.0,
        stale_grace_seconds: float = 300.0,
        follow_changes: bool = True,
        max_queue: int = 10_000,
        flush_interval: float = 0.2,
        invalidate_on_readings: bool = False,
        refresh_on_change: bool = True,
        refresh_jitter_seconds: float = REFRESH_JITTER_SECONDS,
        jitter: Callable[[float, float], float] = random.uniform,
        sticky_conversations: int = 10_000,
        sticky_ttl_seconds: float = 3600.0,
        feed_wait_seconds: float = FEED_WAIT_SECONDS,
        feed_margin_seconds: float = FEED_MARGIN_SECONDS,
        breaker_seconds: float = 2.0,
        breaker_threshold: int = 1,
        static_fallback: Mapping[str, list[dict[str, Any]]] | None = None,
        spool_path: str | None = None,
        request_estimate_usd: Mapping[str, float] | None = None,
    ) -> None:
        if not 0 < feed_wait_seconds <= 30 or feed_margin_seconds <= 0:
            raise ValueError("feed_wait_seconds must be in (0, 30] and feed_margin_seconds > 0")
        if refresh_jitter_seconds < 0:
            raise ValueError("refresh_jitter_seconds must be 0 or more")
        for auto_id in static_fallback or {}:
            if not is_thrifty(auto_id):
                raise ValueError(f"static_fallback: {auto_id} fails closed; only thrifty ids")
        self.static_fallback = {k: list(v) for k, v in (static_fallback or {}).items()}
        self.feed_wait_seconds = feed_wait_seconds
        self.feed_margin_seconds = feed_margin_seconds
        self.feed_proven_at: float | None = None  # the client clock at the feed's last answer
        self.flights = SingleFlight()
        self.breaker = Breaker(threshold=breaker_threshold, open_seconds=breaker_seconds)
        self.budget = BudgetTracker(request_estimate_usd)
        self.invalidate_on_readings = invalidate_on_readings
        # Soft stickiness by conversation key (sticky.py): in memory, never a round trip.
        self.sticky = StickyConnections(
            max_conversations=sticky_conversations, ttl_seconds=sticky_ttl_seconds
        )
        self.refresh_on_change = refresh_on_change
        self.refresh_jitter_seconds = refresh_jitter_seconds
        self.jitter = jitter  # (low, high) -> a delay in seconds
        # The most recently fetched pools, for refreshing them when the feed moves, and
        # the refresh under way (refresh.py).
        self._recent: dict[str, tuple[str, list[dict[str, Any]] | None]] = {}
        self._refresh: Refresh | None = None
        self.base_url = control_plane_url.rstrip("/") + "/api/v1"
        self.headers = {"Authorization": f"Bearer {token}"}
        self.clock = clock
        self.timeout = timeout
        self.revalidate_seconds = revalidate_seconds
        self.stale_grace_seconds = stale_grace_seconds
        self.http = self._sync_client(timeout)
        self.entries: dict[str, Entry] = {}
        self.lock = threading.Lock()
        self.generation = 0
        self.feed_live = False
        self.feed_version: str | None = None
        self.ref_supported = True
        self.failing: set[str] = set()  # connections whose last reported event was a failure
        self.stats = {
            "hits": 0,
            "refresh_awaited": 0,
            "refreshes": 0,
            "fetches": 0,
            "not_modified": 0,
            "stale_served": 0,
            "static_served": 0,
            "blind_revalidations": 0,
            "unavailable": 0,
            "short_circuited": 0,
            "token_rejected": 0,
        }
        self._closed = threading.Event()
        self.reporter = Reporter(
            self._sync_client(10.0),
            max_queue=max_queue,
            flush_interval=flush_interval,
            on_landed=self._landed,
            on_acked=self._acked,
            spool_path=spool_path or default_spool_path(self.base_url, token),
        )
        self._feed_thread: threading.Thread | None = None
        if follow_changes:
            self._feed_thread = threading.Thread(
                target=self._follow_changes, name="omniroute-changes", daemon=True
            )
            self._feed_thread.start()

    def metrics(self) -> dict[str, Any]:
        """What the client did, for the gateway's own metrics: the cache's counters, the
        reports' (queued, sent, retried, dropped, rejected, coalesced, token_rejected,
        pending), the breaker's and the feed's state."""
        now = self.clock()
        return {
            **self.stats,
            **{f"reports_{name}": value for name, value in self.reporter.metrics.items()},
            "reports_pending": self.reporter.pending(),
            "breaker_open": self.breaker.is_open(now),
            "breaker_opened": self.breaker.opened,
            "feed_live": self.feed_live,
            "feed_blind": self.blind(now),
        }

    def _close_base(self, timeout: float = 10.0) -> bool:
        drained = self.reporter.close(timeout)
        self._closed.set()
        self.http.close()
        return drained


class OmniRouteClient(_Base):
    """The synchronous client. Thread-safe; one per process is enough."""

    def pool(self, auto_id: str, candidates: list[dict[str, Any]] | None = None) -> Decision:
        key = pool_key(auto_id, candidates)
        kept = self._kept(key, self.clock())
        if isinstance(kept, Future):  # the refresh's refetch of it, in flight
            return kept.result()
        if kept is not None:
            return kept
        # Concurrent identical requests: one asks, the others share its outcome (a
        # decision, or the failure: a failed fetch is paid once, not once per waiter).
        call, leader = self.flights.join(key)
        if not leader:
            call.done.wait()
            return call.outcome()
        try:
            decision = self._fetch(auto_id, candidates)
        except BaseException as error:
            self.flights.finish(key, call, error=error)
            raise
        self.flights.finish(key, call, result=decision)
        return decision

    def _fetch(self, auto_id: str, candidates: list[dict[str, Any]] | None) -> Decision:
        return self._fetch_sync(auto_id, candidates)

    def close(self, timeout: float = 10.0) -> bool:
        """Send what is queued (at most `timeout` seconds; what is left stays in the
        spool file) and stop the background threads. True when everything was sent."""
        return self._close_base(timeout)

    def __enter__(self) -> OmniRouteClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncOmniRouteClient(_Base):
    """The asyncio client: `await client.pool(...)`. Reports and the change feed run in
    background threads, so `report_*` never awaits and never blocks."""

    def __init__(self, control_plane_url: str, token: str, **options: Any) -> None:
        super().__init__(control_plane_url, token, **options)
        # One async HTTP client per event loop (its connections belong to the loop): a
        # gateway may ask from its own loop and from a private one (a sync front end).
        self._ahttp: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}
        self._inflight: dict[tuple[int, str], asyncio.Future[Decision]] = {}

    @property
    def ahttp(self) -> httpx.AsyncClient:
        loop = asyncio.get_running_loop()
        http = self._ahttp.get(loop)
        if http is None:
            for gone in [other for other in self._ahttp if other.is_closed()]:
                del self._ahttp[gone]
            http = self._ahttp[loop] = httpx.AsyncClient(
                base_url=self.base_url, headers=self.headers, timeout=self.timeout
            )
        return http

    async def pool(self, auto_id: str, candidates: list[dict[str, Any]] | None = None) -> Decision:
        key = pool_key(auto_id, candidates)
        kept = self._kept(key, self.clock())
        if isinstance(kept, Future):  # the refresh's refetch of it, in flight
            return await asyncio.wrap_future(kept)
        if kept is not None:
            return kept
        loop = asyncio.get_running_loop()
        flight = (id(loop), key)  # a future belongs to its loop
        pending = self._inflight.get(flight)
        if pending is not None:  # an identical request is asking: share its outcome
            return await asyncio.shield(pending)
        future: asyncio.Future[Decision] = loop.create_future()
        self._inflight[flight] = future
        try:
            decision = await self._fetch(auto_id, candidates)
            future.set_result(decision)
            return decision
        except BaseException as error:
            future.set_exception(error)
            future.exception()  # retrieved: no "never retrieved" warning when nobody waits
            raise
        finally:
            del self._inflight[flight]

    async def _fetch(self, auto_id: str, candidates: list[dict[str, Any]] | None) -> Decision:
        key, previous, generation, headers = self._prepare(auto_id, candidates)
        if not self.breaker.allow(self.clock()):
            self.stats["short_circuited"] += 1
            return self._fallback(key, auto_id, None)
        path = f"/pools/{auto_id}"
        sent_at = time.time()
        for attempt in range(2):
            try:
                if candidates is None:
                    response = await self.ahttp.get(path, headers=headers)
                else:
                    response = await self.ahttp.post(
                        path, json=self._request_body(candidates), headers=headers
                    )
                    if self._is_ref_refusal(response):
                        self.ref_supported = False
                        response = await self.ahttp.post(path, json=self._request_body(candidates))
                break
            except CLOSED_UNDER_US as error:
                if attempt:
                    return self._unreachable(key, auto_id, error)
            except httpx.TransportError as error:
                return self._unreachable(key, auto_id, error)
        return self._answered(key, auto_id, response, previous, generation, candidates, sent_at)

    async def aclose(self, timeout: float = 10.0) -> bool:
        for http in list(self._ahttp.values()):
            with contextlib.suppress(RuntimeError):  # another loop's, already closed
                await http.aclose()
        self._ahttp.clear()
        return await asyncio.to_thread(self._close_base, timeout)

    def close(self, timeout: float = 10.0) -> bool:
        """Send what is queued and stop the threads (the async HTTP client is closed by
        `aclose`)."""
        return self._close_base(timeout)
