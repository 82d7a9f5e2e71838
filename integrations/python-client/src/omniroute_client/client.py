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
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from datetime import UTC, datetime
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
    freshness,
    is_thrifty,
    parse_time,
    pool_key,
)
from .events import event_for_exception, event_for_response, says_can_meter
from .flight import Breaker, SingleFlight
from .refresh import Refresh
from .reporter import Reporter
from .sticky import StickyConnections

log = logging.getLogger("omniroute_client")
# A kept-alive connection the control plane closed while idle (gunicorn closes one idle
# for its keep-alive seconds, 2 by default) fails the request sent on it as it closes:
# a pool request (a read) is sent once more, on a new connection, before the control
# plane counts as unreachable (which opens the breaker: auto/subscription fails closed).
CLOSED_UNDER_US = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)

FEED_WAIT_SECONDS = 25
# A long poll is answered by the end of its `wait` (a heartbeat: the same version when
# nothing moved); no answer by `wait` + this margin means the feed is blind.
FEED_MARGIN_SECONDS = 5.0
FEED_RETRY_SECONDS = 30.0
# When the feed moves: how many of the most recently used decisions the client holds
# are fetched again, and for how long at most (past it, the rest are retired and
# revalidate on their next request).
REFRESH_KEYS = 16
REFRESH_BUDGET_SECONDS = 0.25
# And the refresh starts after a random delay of up to this many seconds, so that the
# gateways one write reaches at once spread their refetches rather than ask together.
# The delay is propagation given away on purpose: 0.05 s keeps it a fifth of the 250 ms
# target (README.md, "How a decision is kept", for the fleet size it spreads).
REFRESH_JITTER_SECONDS = 0.05


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

    def _sync_client(self, timeout: float) -> httpx.Client:
        return httpx.Client(base_url=self.base_url, headers=self.headers, timeout=timeout)

    # -- the cache ----------------------------------------------------------------------

    def invalidate(self) -> None:
        """Every kept decision must be revalidated before it is served again."""
        with self.lock:
            self.generation += 1

    def blind(self, now: float) -> bool:
        """The feed is followed but has not proven itself alive within `wait` + margin
        (a frozen connection, a balancer that dropped it silently): what it would have
        said is unknown."""
        proven = self.feed_proven_at
        bound = self.feed_wait_seconds + self.feed_margin_seconds
        return self.feed_live and (proven is None or now - proven > bound)

    def _kept(self, key: str, now: float) -> Decision | Future[Decision] | None:
        """What the request path has for `key` without a round trip of its own: a kept
        decision it may serve, the refresh's refetch of it in flight (to await and share),
        or None (ask)."""
        with self.lock:
            refresh = self._refresh
            if refresh is not None and refresh.generation != self.generation:
                refresh = None  # the gateway's own event retired it
            entry = self.entries.get(key)
            current = entry is not None and entry.generation == self.generation
            if not current and refresh is not None and key in refresh.flights:
                self.stats["refresh_awaited"] += 1
                return refresh.flights[key]
            if entry is None or entry.fresh_until <= now:
                return None
            if not current and not (refresh and refresh.serves(key, entry.generation)):
                return None
            if self.blind(now):
                # No decision is used more than wait + margin after the last proof that
                # the feed was live: revalidate it first (a 304 is cheap).
                self.stats["blind_revalidations"] += 1
                return None
            self.stats["hits"] += 1
            return entry.decision

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
        sent_at: float,
    ) -> Decision:
        now = self.clock()
        status = response.status_code
        if status == 304 and previous is not None:
            decision = previous.decision
            self.stats["not_modified"] += 1
        elif status == 200:
            body = response.json()
            self._restore_refs(body, candidates)
            # A decision the server kept may predate the request: debits count from the
            # earlier of the two instants (spec: "Budgets under bursts").
            computed_at = parse_time(body.get("computed_at"))
            if computed_at is not None:
                sent_at = min(sent_at, computed_at)
            decision = Decision(body=body, etag=response.headers.get("etag"), sent_at=sent_at)
            self.stats["fetches"] += 1
        elif status == 404:
            raise NotFound(response.text[:500])
        elif status in (401, 403):
            self.stats["token_rejected"] += 1
            raise TokenRejected(f"the control plane rejected the gateway token ({status})")
        elif 400 <= status < 500:
            raise OmniRouteError(f"control plane answered {status}: {response.text[:500]}")
        else:
            raise httpx.HTTPStatusError(f"{status}", request=response.request, response=response)
        until = freshness(
            now=now,
            status=status,
            cache_control=response.headers.get("cache-control"),
            body_valid_until=decision.valid_until,
            feed_live=self.feed_live and not self.blind(now),
            revalidate_seconds=self.revalidate_seconds,
        )
        with self.lock:
            self.entries[key] = Entry(decision, until, now, generation)
        if status == 200:
            self.budget.new_decision(key, decision)
        return decision

    def _fallback(self, key: str, auto_id: str, error: Exception | None) -> Decision:
        """The control plane did not answer (or the breaker is open): thrifty serves its
        last decision while it is within its validity bound (its `valid_until`, and at
        most `stale_grace_seconds` after it was last confirmed), then the operator's
        static fallback; subscription fails closed (`ControlPlaneUnavailable`)."""
        with self.lock:
            entry = self.entries.get(key)
        now = self.clock()
        why = f"control plane unreachable ({error})" if error else "circuit breaker open"
        if is_thrifty(auto_id):
            if entry is not None and entry.decision.body.get("fail_mode", "open") == "open":
                valid_until = entry.decision.valid_until
                if now - entry.fetched_at <= self.stale_grace_seconds and (
                    valid_until is None or now < valid_until
                ):
                    self.stats["stale_served"] += 1
                    return Decision(
                        entry.decision.body,
                        entry.decision.etag,
                        stale=True,
                        sent_at=entry.decision.sent_at,
                    )
            static = self.static_fallback.get(auto_id)
            if static:
                self.stats["static_served"] += 1
                return static_decision(auto_id, static)
        self.stats["unavailable"] += 1
        raise ControlPlaneUnavailable(f"{auto_id}: {why}") from error

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
        # Read with a timeout just above the long poll's `wait`: the server answers by
        # then (a heartbeat when nothing moved), so a longer silence is a dead connection.
        bound = self.feed_wait_seconds + self.feed_margin_seconds
        feed = httpx.Client(
            base_url=self.base_url,
            headers=self.headers,
            timeout=httpx.Timeout(bound, connect=self.timeout),
        )
        version: str | None = None
        try:
            while not self._closed.is_set():
                try:
                    params: dict[str, Any] = {"wait": 0}
                    if version is not None:
                        params = {"after": version, "wait": int(self.feed_wait_seconds)}
                    response = feed.get("/changes", params=params)
                except httpx.HTTPError as error:
                    log.warning("omniroute: the change feed is down (%s): blind", error)
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
                self.feed_proven_at = self.clock()  # a heartbeat or a move: alive
                if version is not None and new != version:
                    self._moved()
                version = self.feed_version = new
                if not self.feed_live:
                    self.feed_live = True
                    self.invalidate()  # from now on a kept decision may live until the feed moves
        finally:
            feed.close()

    def _moved(self) -> None:
        """The feed moved: after a random delay of up to `refresh_jitter_seconds` (the
        decisions kept are served meanwhile, as if the move had come that moment later),
        retire every kept decision but the recently used ones this client holds, and
        fetch those again one by one, the most recent first (a `304` for those the write
        did not change). Each is served as it was until its own refetch starts, then
        never again: a request meanwhile awaits that refetch, and its decision is served
        the moment it lands (refresh.py). The first request after the write then makes
        no round trip. The refresh stops at REFRESH_BUDGET_SECONDS (what it did not
        reach is retired) or at the gateway's own event (which retires everything)."""
        if not self.refresh_on_change:
            self.invalidate()
            return
        if self._closed.wait(self.jitter(0.0, self.refresh_jitter_seconds)):
            return
        with self.lock:
            held = [(key, pool) for key, pool in self._recent.items() if key in self.entries]
            held.reverse()  # the most recent first
            refresh = self._refresh = Refresh([key for key, _ in held], self.generation)
            self.generation = refresh.generation
        deadline = time.monotonic() + REFRESH_BUDGET_SECONDS
        try:
            for key, (auto_id, candidates) in held:
                with self.lock:
                    if time.monotonic() > deadline or self.generation != refresh.generation:
                        break
                    flight = refresh.start(key)
                try:
                    decision = self._fetch_sync(auto_id, candidates, generation=refresh.generation)
                except BaseException as error:  # shared with its waiters, as a fetch's is
                    log.debug("refreshing %s after a change failed: %s", auto_id, error)
                    self._finish(refresh, key)
                    flight.set_exception(error)
                    if not isinstance(error, Exception):
                        raise
                else:
                    self._finish(refresh, key)
                    flight.set_result(decision)
        finally:
            with self.lock:
                if self._refresh is refresh:
                    self._refresh = None
                self.stats["refreshes"] += 1

    def _finish(self, refresh: Refresh, key: str) -> None:
        # Before its waiters learn the outcome: a request from then on finds the refetched
        # decision kept, or (it failed) asks on its own and meets the breaker.
        with self.lock:
            refresh.finish(key)

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
        if not self.breaker.allow(self.clock()):
            self.stats["short_circuited"] += 1
            return self._fallback(key, auto_id, None)
        path = f"/pools/{auto_id}"
        sent_at = time.time()
        for attempt in range(2):
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
                break
            except CLOSED_UNDER_US as error:
                if attempt:
                    return self._unreachable(key, auto_id, error)
            except httpx.TransportError as error:
                return self._unreachable(key, auto_id, error)
        kept_as = current if generation is None else generation
        return self._answered(key, auto_id, response, previous, kept_as, candidates, sent_at)

    def _unreachable(self, key: str, auto_id: str, error: Exception) -> Decision:
        self.breaker.failure(self.clock())
        return self._fallback(key, auto_id, error)

    def _answered(
        self,
        key: str,
        auto_id: str,
        response: httpx.Response,
        previous: Entry | None,
        generation: int,
        candidates: list[dict[str, Any]] | None,
        sent_at: float,
    ) -> Decision:
        if response.status_code >= 500:
            error = httpx.HTTPStatusError(
                f"{response.status_code}", request=response.request, response=response
            )
            return self._unreachable(key, auto_id, error)
        self.breaker.success()
        return self._absorb(key, response, previous, generation, candidates, sent_at)

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

    def _acked(self, kind: str, bodies: list[dict[str, Any]]) -> None:
        if kind == "spend":
            self.budget.landed([str(body.get("request_id")) for body in bodies])

    # -- budgets under bursts -------------------------------------------------------------

    def reserve(self, decision: Decision, rung: str | None) -> str | None:
        """Before sending a request to a candidate of `decision` on `rung`: a ticket (its
        estimated cost debited locally), or None when the rung is spent locally, by this
        client's debits since the decision (do not use it; the server's next decision
        says more). Pass the ticket to `report_spend`, or to `release` when the request
        billed nothing."""
        return self.budget.reserve(decision, rung)

    def release(self, ticket: str | None) -> None:
        self.budget.release(ticket)

    def report_event(self, connection_id: str, event: dict[str, Any]) -> bool:
        """Queue an event (never blocks). A failure, or the success that ends one,
        invalidates the kept decisions now and again once it has landed. A routine
        `success` (quota headers on a connection that has not failed: Anthropic sends them
        on every answer) does not, unless `invalidate_on_readings`: invalidating on it would
        cost a round trip per request. The reading it stores is seen through the change
        feed (the server moves the version only when it changes a pool) or, without one,
        within `revalidate_seconds`."""
        # A success saying the plan bills past its limit is not routine: the plan must
        # leave auto/subscription on the next decision (events.says_can_meter).
        routine = (
            event["kind"] == "success"
            and connection_id not in self.failing
            and not says_can_meter(event.get("headers"))
        )
        if event["kind"] == "success":
            self.failing.discard(connection_id)
        else:
            self.failing.add(connection_id)
        invalidates = not routine or self.invalidate_on_readings
        if invalidates:
            self.invalidate()
        # When the gateway saw the answer: the server applies events in that order.
        item = {"connection_id": connection_id, "observed_at": iso(self.clock()), **event}
        # A routine success only carries a reading: the newest one waiting is enough.
        coalesce = f"success:{connection_id}" if routine else None
        return self.reporter.put(
            "event", item, urgent=invalidates, invalidates=invalidates, coalesce_key=coalesce
        )

    def report_response(
        self,
        connection_id: str,
        status_code: int,
        headers: Any = None,
        body: Any = None,
        *,
        model: str | None = None,
    ) -> dict[str, Any] | None:
        """Report what an upstream answered (see `events.event_for_response`); `model`:
        the model the request asked for (what the headers say about one model, an Opus
        weekly cap, binds only that model)."""
        event = event_for_response(
            status_code,
            dict(headers or {}),
            body,
            after_failure=connection_id in self.failing,
            model=model,
        )
        if event is not None:
            self.report_event(connection_id, event)
        return event

    def report_exception(
        self, connection_id: str, exc: BaseException, *, model: str | None = None
    ) -> dict[str, Any] | None:
        event = event_for_exception(exc, model=model)
        if event is not None:
            self.report_event(connection_id, event)
        return event

    def report_spend(
        self, entry: dict[str, Any], *, may_cross_budget: bool = True, ticket: str | None = None
    ) -> bool:
        """Queue one spend entry (SpendEntry of the API; `request_id` is its idempotency key).

        Without a live change feed, the landing of spend that may cross a paid rung's budget
        invalidates the kept decisions; pass `may_cross_budget=False` for spend on a
        plan-included or free rung (it never counts against a budget) to spare the
        revalidation."""
        cost = entry.get("cost_usd")
        self.budget.settle(
            ticket, str(entry.get("request_id")), float(cost) if cost is not None else None
        )
        return self.reporter.put("spend", entry, invalidates=may_cross_budget)

    def flush(self, timeout: float = 10.0) -> bool:
        return self.reporter.flush(timeout)

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

    # -- registration (start-up; blocking) --------------------------------------------------

    def call(self, method: str, path: str, body: Any = None) -> httpx.Response:
        response = self.http.request(method, path, json=body)
        if response.status_code in (401, 403):
            self.stats["token_rejected"] += 1
            raise TokenRejected(f"{method} {path}: the control plane rejected the gateway token")
        return response

    def provider_aliases(self) -> dict[str, str] | None:
        """alias -> provider, or None when the server has no alias endpoint (404)."""
        response = self.call("GET", "/provider-aliases")
        if response.status_code == 404:
            return None
        return {row["alias"]: row["provider"] for row in response.json()}

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


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).isoformat()


def default_spool_path(base_url: str, token: str) -> str:
    """The reports' spool file of this control plane and token (the same file after a
    restart, so what a stopped process left is sent by the next):
    `$OMNIROUTE_SPOOL_DIR` (default `~/.local/state/omniroute`)/spool-<hash>.sqlite3."""
    folder = os.environ.get("OMNIROUTE_SPOOL_DIR") or os.path.join(
        os.path.expanduser("~"), ".local", "state", "omniroute"
    )
    digest = hashlib.sha256(f"{base_url}\n{token}".encode()).hexdigest()[:16]
    return os.path.join(folder, f"spool-{digest}.sqlite3")


def static_decision(auto_id: str, candidates: list[dict[str, Any]]) -> Decision:
    """The operator's static fallback of a thrifty id, as a decision (`stale`)."""
    body = {
        "auto_id": auto_id,
        "grouping": "thrifty",
        "category": None,
        "fail_mode": "open",
        "computed_at": None,
        "candidates": [
            {
                "id": None,
                "ref": None,
                "rung": None,
                "connection_id": None,
                "allowed_connection_ids": None,
                **candidate,
            }
            for candidate in candidates
        ],
        "excluded": [],
        "next_change_at": None,
        "budget_left_usd": {"cheap": None, "premium": None},
        "valid_until": None,
        "static_fallback": True,
    }
    return Decision(body=body, etag=None, stale=True)
