"""Spend and events, reported in the background in batches.

A bounded queue (a full queue drops the report and counts it: a request is never
blocked), one daemon thread that sends `POST /spend/batch` and `POST /events/batch`
(falling back for good to the single endpoints when a batch endpoint answers 404),
flushed on `close()`. A report whose send failed on the transport is retried a few
times, then dropped and counted. So is spend answered 429 or 5xx (a database that did
not answer in time is a 503 with `Retry-After: 1`): its `request_id` makes a second
landing harmless, and a report counted as sent when it was refused is spend a budget
never sees. An event answered so is not sent again (it has no idempotency key, and the
next answer of the upstream reports the connection's state anew)."""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

import httpx

log = logging.getLogger("omniroute_client")

MAX_BATCH = 500
SEND_ATTEMPTS = 3
# Spend answered with one of these is sent again, after the answer's Retry-After (at
# most MAX_RETRY_WAIT seconds) or RETRY_WAIT doubled at each attempt.
RETRIED_STATUS = frozenset({429, 500, 502, 503, 504})
RETRY_WAIT = 0.2
MAX_RETRY_WAIT = 5.0


class Refused(Exception):
    """Spend the control plane answered with a RETRIED_STATUS: worth sending again."""

    def __init__(self, path: str, response: httpx.Response) -> None:
        super().__init__(f"{path} answered {response.status_code}")
        self.wait = _retry_after(response)


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return min(max(float(response.headers["retry-after"]), 0.0), MAX_RETRY_WAIT)
    except (KeyError, ValueError):
        return None


class Reporter:
    def __init__(
        self,
        http: httpx.Client,
        *,
        max_queue: int = 10_000,
        flush_interval: float = 0.2,
        on_landed: Callable[[str, bool], None] | None = None,
    ) -> None:
        self.http = http
        self.flush_interval = flush_interval
        self.on_landed = on_landed or (lambda kind, invalidates: None)
        self.queue: queue.Queue[tuple[str, dict[str, Any], bool]] = queue.Queue(maxsize=max_queue)
        self.dropped = 0
        self.sent = {"spend": 0, "event": 0}
        self.batch_endpoints = {"spend": True, "event": True}
        self.results: list[dict[str, Any]] = []  # the last batch's event results
        self._pending = 0
        self._cond = threading.Condition()
        self._wake = threading.Event()
        self._closing = threading.Event()  # set by close(): a retry's wait ends
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="omniroute-reporter", daemon=True)
        self._thread.start()

    def put(
        self, kind: str, item: dict[str, Any], *, urgent: bool = False, invalidates: bool = True
    ) -> bool:
        """Queue one report ("spend" or "event"); False (and counted) if the queue is full.
        `invalidates`: whether its landing may change a pool (passed to `on_landed`)."""
        with self._cond:
            if self._closed:
                return False
            try:
                self.queue.put_nowait((kind, item, invalidates))
            except queue.Full:
                self.dropped += 1
                return False
            self._pending += 1
        if urgent:
            self._wake.set()
        return True

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every queued report was sent (or given up on); True if drained."""
        self._wake.set()
        with self._cond:
            return self._cond.wait_for(lambda: self._pending == 0, timeout)

    def close(self, timeout: float = 10.0) -> None:
        self.flush(timeout)
        with self._cond:
            self._closed = True
        self._closing.set()
        self._wake.set()
        self._thread.join(timeout)

    # -- the thread ---------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            self._wake.wait(self.flush_interval)
            self._wake.clear()
            items: list[tuple[str, dict[str, Any], bool]] = []
            while len(items) < MAX_BATCH:
                try:
                    items.append(self.queue.get_nowait())
                except queue.Empty:
                    break
            if items:
                self._send_all(items)
                with self._cond:
                    self._pending -= len(items)
                    self._cond.notify_all()
                if not self.queue.empty():
                    self._wake.set()
            elif self._closed:
                return

    def _send_all(self, items: list[tuple[str, dict[str, Any], bool]]) -> None:
        # Keep the order of events (a success after a failure must land after it).
        for kind in ("event", "spend"):
            batch = [item for k, item, _ in items if k == kind]
            if not batch:
                continue
            for attempt in range(SEND_ATTEMPTS):
                try:
                    self._send(kind, batch)
                    break
                except (httpx.TransportError, Refused) as error:
                    log.warning(
                        "omniroute: sending %d %s reports failed: %s", len(batch), kind, error
                    )
                    if attempt + 1 < SEND_ATTEMPTS and isinstance(error, Refused):
                        self._sleep(
                            error.wait if error.wait is not None else RETRY_WAIT * 2**attempt
                        )
            else:
                self.dropped += len(batch)
                log.warning("omniroute: %d %s reports dropped", len(batch), kind)
                continue
            self.sent[kind] += len(batch)
            self.on_landed(kind, any(flag for k, _, flag in items if k == kind))

    def _send(self, kind: str, batch: list[dict[str, Any]]) -> None:
        path, key = ("/spend/batch", "entries") if kind == "spend" else ("/events/batch", "events")
        if self.batch_endpoints[kind]:
            response = self.http.post(path, json={key: batch})
            if response.status_code == 404:
                self.batch_endpoints[kind] = False
            else:
                if kind == "spend" and response.status_code in RETRIED_STATUS:
                    raise Refused(path, response)
                if response.status_code >= 400:
                    log.warning("omniroute: %s answered %d", path, response.status_code)
                elif kind == "event":
                    self.results = list(response.json().get("results", []))
                return
        for item in batch:  # sent again whole when one is refused: each lands once
            if kind == "spend":
                response = self.http.post("/spend", json=item)
                if response.status_code in RETRIED_STATUS:
                    raise Refused("/spend", response)
            else:
                body = {k: v for k, v in item.items() if k != "connection_id"}
                response = self.http.post(f"/connections/{item['connection_id']}/events", json=body)
            if response.status_code >= 400:
                log.warning("omniroute: a %s report answered %d", kind, response.status_code)

    def _sleep(self, seconds: float) -> None:
        """Wait before sending refused spend again (cut short by `close`)."""
        self._closing.wait(seconds)
