"""The decision cache: what a client keeps, what it may serve without a round trip, and
its fail modes (README.md, "How a decision is kept" and "Failure").

A kept decision is served while it is fresh and current (its generation is the client's:
`invalidate` moves the generation, so every kept decision is revalidated before it is
served again), or during the refresh after a feed move until its own refetch starts
(refresh.py); a blind feed serves nothing kept. When the control plane does not answer,
thrifty ids serve their last decision within its validity bound, then the operator's
static fallback; subscription fails closed.

The state is the client's (`client._Base` sets it up); the request path is transport.py."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from .decisions import ControlPlaneUnavailable, Decision, Entry, is_thrifty, pool_key
from .refresh import REFRESH_KEYS, Refresh


class DecisionCache:
    # Set by the client's constructor (client._Base).
    lock: threading.Lock
    clock: Callable[[], float]
    entries: dict[str, Entry]
    generation: int
    stats: dict[str, int]
    feed_live: bool
    feed_proven_at: float | None
    feed_wait_seconds: float
    feed_margin_seconds: float
    stale_grace_seconds: float
    static_fallback: dict[str, list[dict[str, Any]]]
    _recent: dict[str, tuple[str, list[dict[str, Any]] | None]]
    _refresh: Refresh | None

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
