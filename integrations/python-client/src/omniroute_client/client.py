"""Sync and async clients of the OmniRoute control plane, on httpx with keep-alive.

`pool()` serves a kept decision while it is fresh (no round trip), revalidates it with
`If-None-Match` once it is not, and coalesces concurrent identical requests into one.
A background thread follows the change feed (`GET /changes`) and, when it moves, fetches
the recently used decisions again before retiring the old ones; without it (404 or
down) decisions are revalidated at least every `revalidate_seconds`. Spend and events go to a
background reporter in batches. The gateway's own events invalidate its decisions at once.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from .decisions import (
    ControlPlaneUnavailable,
    Decision,
    Entry,
    NotFound,
    OmniRouteError,
    freshness,
    is_thrifty,
    pool_key,
)
from .events import event_for_exception, event_for_response
from .reporter import Reporter
from .sticky import StickyConnections

log = logging.getLogger("omniroute_client")

FEED_WAIT_SECONDS = 25
FEED_RETRY_SECONDS = 30.0
# When the feed moves: how many of the most recently fetched decisions are fetched again
# before the old ones are retired, and for how long at most (past it, the rest are
# simply invalidated and revalidate on their next request).
REFRESH_KEYS = 16
REFRESH_BUDGET_SECONDS = 0.25


class _Base:
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
        sticky_conversations: int = 10_000,
        sticky_ttl_seconds: float = 3600.0,
    ) -> None:
        self.invalidate_on_readings = invalidate_on_readings
        # Soft stickiness by conversation key (sticky.py): in memory, never a round trip.
        self.sticky = StickyConnections(
            max_conversations=sticky_conversations, ttl_seconds=sticky_ttl_seconds
        )
        self.refresh_on_change = refresh_on_change
        # The most recently fetched pools, for refreshing them when the feed moves.
        self._recent: dict[str, tuple[str, list[dict[str, Any]] | None]] = {}
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
        self.stats = {"hits": 0, "fetches": 0, "not_modified": 0, "stale_served": 0}
        self._closed = threading.Event()
        self.reporter = Reporter(
            self._sync_client(10.0),
            max_queue=max_queue,
            flush_interval=flush_interval,
            on_landed=self._landed,
        )
        self._feed_thread: threading.Thread | None = None
        if follow_changes:
            self._feed_thread = threading.Thread(
                target=self._follow_changes, name="omniroute-changes", daemon=True
            )
            self._feed_thread.start()

    def _sync_client(self, timeout: float) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, headers=self.headers, timeout=timeout)

    # -- the cache ----------------------------------------------------------------------

    def invalidate(self) -> None:
        """Every kept decision must be revalidated before it is served again."""
        with self.lock:
            self.generation += 1

    def _fresh(self, key: str, now: float) -> Decision | None:
        with self.lock:
            entry = self.entries.get(key)
            if entry and entry.generation == self.generation and entry.fresh_until > now:
                self.stats["hits"] += 1
                return entry.decision
        return None

    def _request_body(self, candidates: list[dict[str, Any]] | None) -> dict[str, Any] | None:
        if candidates is None:
            return None
        if self.ref_supported:
            return {"candidates": candidates}
        # A server without candidate `ref`: send positions as ids, map them back.
        sent = []
        for index, candidate in enumerate(candidates):
            sent.append({k: v for k, v in candidate.items() if k != "ref"} | {"id": index})
        return {"candidates": sent}

    def _restore_refs(self, body: dict[str, Any], candidates: list[dict[str, Any]] | None) -> None:
        if candidates is None or self.ref_supported:
            return
        for entry in body.get("candidates") or []:
            index = entry.get("id")
            if isinstance(index, int) and 0 <= index < len(candidates):
                entry["ref"] = candidates[index].get("ref")
                entry["id"] = candidates[index].get("id")

    def _is_ref_refusal(self, response: httpx.Response) -> bool:
        return response.status_code == 422 and "ref" in response.text and self.ref_supported

    def _absorb(
        self,
        key: str,
        response: httpx.Response,
        previous: Entry | None,
        generation: int,
        candidates: list[dict[str, Any]] | None,
    ) -> Decision:
        now = self.clock()
        status = response.status_code
        if status == 304 and previous is not None:
            decision = previous.decision
            self.stats["not_modified"] += 1
        elif status == 200:
            body = response.json()
            self._restore_refs(body, candidates)
            decision = Decision(body=body, etag=response.headers.get("etag"))
            self.stats["fetches"] += 1
        elif status == 404:
            raise NotFound(response.text[:500])
        elif status in (401, 403) or 400 <= status < 500:
            raise OmniRouteError(f"control plane answered {status}: {response.text[:500]}")
        else:
            raise httpx.HTTPStatusError(f"{status}", request=response.request, response=response)
        until = freshness(
            now=now,
            status=status,
            cache_control=response.headers.get("cache-control"),
            body_valid_until=decision.valid_until,
            feed_live=self.feed_live,
            revalidate_seconds=self.revalidate_seconds,
        )
        with self.lock:
            self.entries[key] = Entry(decision, until, now, generation)
        return decision

    def _fallback(self, key: str, auto_id: str, error: Exception) -> Decision:
        """The control plane did not answer: thrifty keeps its last good decision for
        `stale_grace_seconds`; subscription fails closed."""
        with self.lock:
            entry = self.entries.get(key)
        now = self.clock()
        if (
            entry is not None
            and is_thrifty(auto_id)
            and entry.decision.body.get("fail_mode", "open") == "open"
            and now - entry.fetched_at <= self.stale_grace_seconds
        ):
            self.stats["stale_served"] += 1
            return Decision(entry.decision.body, entry.decision.etag, stale=True)
        raise ControlPlaneUnavailable(f"{auto_id}: control plane unreachable ({error})") from error

    def _prepare(
        self, auto_id: str, candidates: list[dict[str, Any]] | None
    ) -> tuple[str, Entry | None, int, dict[str, str]]:
        key = pool_key(auto_id, candidates)
        with self.lock:
            previous = self.entries.get(key)
            generation = self.generation
            self._recent.pop(key, None)
            self._recent[key] = (auto_id, candidates)
            while len(self._recent) > REFRESH_KEYS:
                del self._recent[next(iter(self._recent))]
        headers = (
            {"If-None-Match": previous.decision.etag} if previous and previous.decision.etag else {}
        )
        return key, previous, generation, headers

    # -- the change feed ------------------------------------------------------------------

    def _follow_changes(self) -> None:
        feed = httpx.Client(
            base_url=self.base_url, headers=self.headers, timeout=FEED_WAIT_SECONDS + 10
        )
        version: str | None = None
        try:
            while not self._closed.is_set():
                try:
                    params: dict[str, Any] = {"wait": 0}
                    if version is not None:
                        params = {"after": version, "wait": FEED_WAIT_SECONDS}
                    response = feed.get("/changes", params=params)
                except httpx.HTTPError:
                    self._feed_lost()
                    version = None
                    self._closed.wait(1.0)
                    continue
                if response.status_code != 200:
                    # 404: a server without the feed. Honour valid_until and revalidate.
                    self._feed_lost()
                    version = None
                    self._closed.wait(FEED_RETRY_SECONDS if response.status_code == 404 else 1.0)
                    continue
                new = str(response.json().get("version"))
                if version is not None and new != version:
                    self._moved()
                version = self.feed_version = new
                if not self.feed_live:
                    self.feed_live = True
                    self.invalidate()  # from now on a kept decision may live until the feed moves
        finally:
            feed.close()

    def _moved(self) -> None:
        """The feed moved: fetch the recently used decisions again (a `304` for those
        the write did not change), then retire every kept decision but the ones just
        fetched. A request meanwhile (a few milliseconds, at most REFRESH_BUDGET_SECONDS)
        is served the decision that was current a moment before, as if it had come that
        moment earlier; the first request after the write then makes no round trip."""
        if not self.refresh_on_change:
            self.invalidate()
            return
        with self.lock:
            target = self.generation + 1
            recent = list(self._recent.values())
        deadline = time.monotonic() + REFRESH_BUDGET_SECONDS
        for auto_id, candidates in reversed(recent):  # the most recent first
            if time.monotonic() > deadline:
                break
            try:
                self._fetch_sync(auto_id, candidates, generation=target)
            except Exception as error:  # the request path will ask again, and handle it
                log.debug("refreshing %s after a change failed: %s", auto_id, error)
        with self.lock:
            # Another invalidation meanwhile (the gateway's own event): the refreshed
            # decisions may predate it, so they are retired too.
            self.generation = target if self.generation == target - 1 else self.generation + 1

    def _fetch_sync(
        self,
        auto_id: str,
        candidates: list[dict[str, Any]] | None,
        *,
        generation: int | None = None,
    ) -> Decision:
        """One pool request on the synchronous HTTP client; the decision is kept under
        `generation` (the current one unless given)."""
        key, previous, current, headers = self._prepare(auto_id, candidates)
        path = f"/pools/{auto_id}"
        try:
            if candidates is None:
                response = self.http.get(path, headers=headers)
            else:
                response = self.http.post(
                    path, json=self._request_body(candidates), headers=headers
                )
                if self._is_ref_refusal(response):
                    self.ref_supported = False
                    response = self.http.post(path, json=self._request_body(candidates))
            kept_as = current if generation is None else generation
            return self._absorb(key, response, previous, kept_as, candidates)
        except (httpx.TransportError, httpx.HTTPStatusError) as error:
            return self._fallback(key, auto_id, error)

    def _feed_lost(self) -> None:
        if self.feed_live:
            self.feed_live = False
            self.invalidate()  # decisions kept "until the feed moves" must be revalidated

    # -- writes ---------------------------------------------------------------------------

    def _landed(self, kind: str, invalidates: bool) -> None:
        # A failure (or the success that ends one) changes a pool: its landing
        # invalidates. Spend changes one only by crossing a budget, which moves the change
        # version: the feed covers it, unless the feed is not live.
        if (kind == "event" and invalidates) or (invalidates and not self.feed_live):
            self.invalidate()

    def report_event(self, connection_id: str, event: dict[str, Any]) -> bool:
        """Queue an event (never blocks). A failure, or the success that ends one,
        invalidates the kept decisions now and again once it has landed. A routine
        `success` (quota headers on a connection that has not failed: Anthropic sends them
        on every answer) does not, unless `invalidate_on_readings`: invalidating on it would
        cost a round trip per request. The reading it stores is seen through the change
        feed (the server moves the version only when it changes a pool) or, without one,
        within `revalidate_seconds`."""
        routine = event["kind"] == "success" and connection_id not in self.failing
        if event["kind"] == "success":
            self.failing.discard(connection_id)
        else:
            self.failing.add(connection_id)
        invalidates = not routine or self.invalidate_on_readings
        if invalidates:
            self.invalidate()
        item = {"connection_id": connection_id, **event}
        return self.reporter.put("event", item, urgent=invalidates, invalidates=invalidates)

    def report_response(
        self, connection_id: str, status_code: int, headers: Any = None, body: Any = None
    ) -> dict[str, Any] | None:
        """Report what an upstream answered (see `events.event_for_response`)."""
        event = event_for_response(
            status_code,
            dict(headers or {}),
            body,
            after_failure=connection_id in self.failing,
        )
        if event is not None:
            self.report_event(connection_id, event)
        return event

    def report_exception(self, connection_id: str, exc: BaseException) -> dict[str, Any] | None:
        event = event_for_exception(exc)
        if event is not None:
            self.report_event(connection_id, event)
        return event

    def report_spend(self, entry: dict[str, Any], *, may_cross_budget: bool = True) -> bool:
        """Queue one spend entry (SpendEntry of the API; `request_id` is its idempotency key).

        Without a live change feed, the landing of spend that may cross a paid rung's budget
        invalidates the kept decisions; pass `may_cross_budget=False` for spend on a
        plan-included or free rung (it never counts against a budget) to spare the
        revalidation."""
        return self.reporter.put("spend", entry, invalidates=may_cross_budget)

    def flush(self, timeout: float = 10.0) -> bool:
        return self.reporter.flush(timeout)

    # -- registration (start-up; blocking) --------------------------------------------------

    def call(self, method: str, path: str, body: Any = None) -> httpx.Response:
        response = self.http.request(method, path, json=body)
        if response.status_code in (401, 403):
            raise OmniRouteError(f"{method} {path}: {response.status_code}")
        return response

    def provider_aliases(self) -> dict[str, str] | None:
        """alias -> provider, or None when the server has no alias endpoint (404)."""
        response = self.call("GET", "/provider-aliases")
        if response.status_code == 404:
            return None
        return {row["alias"]: row["provider"] for row in response.json()}

    def _close_base(self) -> None:
        self.reporter.close()
        self._closed.set()
        self.http.close()


class OmniRouteClient(_Base):
    """The synchronous client. Thread-safe; one per process is enough."""

    def __init__(self, control_plane_url: str, token: str, **options: Any) -> None:
        super().__init__(control_plane_url, token, **options)
        self._key_locks: dict[str, threading.Lock] = {}

    def pool(self, auto_id: str, candidates: list[dict[str, Any]] | None = None) -> Decision:
        key = pool_key(auto_id, candidates)
        decision = self._fresh(key, self.clock())
        if decision is not None:
            return decision
        with self.lock:
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:  # concurrent identical requests: one asks, the others read its answer
            decision = self._fresh(key, self.clock())
            if decision is not None:
                return decision
            return self._fetch(auto_id, candidates)

    def _fetch(self, auto_id: str, candidates: list[dict[str, Any]] | None) -> Decision:
        return self._fetch_sync(auto_id, candidates)

    def close(self) -> None:
        """Flush the reports and stop the background threads."""
        self._close_base()

    def __enter__(self) -> OmniRouteClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncOmniRouteClient(_Base):
    """The asyncio client: `await client.pool(...)`. Reports and the change feed run in
    background threads, so `report_*` never awaits and never blocks."""

    def __init__(self, control_plane_url: str, token: str, **options: Any) -> None:
        super().__init__(control_plane_url, token, **options)
        self.ahttp = httpx.AsyncClient(
            base_url=self.base_url, headers=self.headers, timeout=self.timeout
        )
        self._inflight: dict[str, asyncio.Future[Decision]] = {}

    async def pool(self, auto_id: str, candidates: list[dict[str, Any]] | None = None) -> Decision:
        key = pool_key(auto_id, candidates)
        decision = self._fresh(key, self.clock())
        if decision is not None:
            return decision
        pending = self._inflight.get(key)
        if pending is not None:  # an identical request is asking: share its answer
            return await asyncio.shield(pending)
        future: asyncio.Future[Decision] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            decision = await self._fetch(auto_id, candidates)
            future.set_result(decision)
            return decision
        except BaseException as error:
            future.set_exception(error)
            future.exception()  # retrieved: no "never retrieved" warning when nobody waits
            raise
        finally:
            del self._inflight[key]

    async def _fetch(self, auto_id: str, candidates: list[dict[str, Any]] | None) -> Decision:
        key, previous, generation, headers = self._prepare(auto_id, candidates)
        path = f"/pools/{auto_id}"
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
            return self._absorb(key, response, previous, generation, candidates)
        except (httpx.TransportError, httpx.HTTPStatusError) as error:
            return self._fallback(key, auto_id, error)

    async def aclose(self) -> None:
        await self.ahttp.aclose()
        await asyncio.to_thread(self._close_base)

    def close(self) -> None:
        """Flush and stop the threads (the async HTTP client is closed by `aclose`)."""
        self._close_base()
