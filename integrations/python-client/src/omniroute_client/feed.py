"""The change feed (`GET /changes`), followed by a background thread, and the refresh
when it moves (README.md, "How a decision is kept" and "After a write elsewhere").

A long poll answered by the end of its `wait` proves the feed alive; no answer by
`feed_wait_seconds + feed_margin_seconds` leaves it blind (cache.py serves nothing kept
then). A feed that is down or absent (404) invalidates what was kept "until the feed
moves". A move refetches the recently used decisions one by one (refresh.py)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from .refresh import REFRESH_BUDGET_SECONDS, Refresh
from .transport import PoolRequests

log = logging.getLogger("omniroute_client")

FEED_WAIT_SECONDS = 25
# A long poll is answered by the end of its `wait` (a heartbeat: the same version when
# nothing moved); no answer by `wait` + this margin means the feed is blind.
FEED_MARGIN_SECONDS = 5.0
FEED_RETRY_SECONDS = 30.0


class ChangeFeed(PoolRequests):
    # Set by the client's constructor (client._Base).
    timeout: float
    feed_version: str | None
    refresh_on_change: bool
    refresh_jitter_seconds: float
    jitter: Callable[[float, float], float]
    _closed: threading.Event

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

    def _feed_lost(self) -> None:
        if self.feed_live:
            self.feed_live = False
            self.invalidate()  # decisions kept "until the feed moves" must be revalidated
