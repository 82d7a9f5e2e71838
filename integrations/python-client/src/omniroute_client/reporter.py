"""Spend and events, reported in the background in batches.

A bounded queue (a full queue drops the report and counts it: a request is never
blocked), one daemon thread that sends `POST /spend/batch` and `POST /events/batch`
(falling back for good to the single endpoints when a batch endpoint answers 404),
flushed on `close()`. A report whose send failed on the transport is retried a few
times, then dropped and counted."""

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
            for _attempt in range(SEND_ATTEMPTS):
                try:
                    self._send(kind, batch)
                    break
                except httpx.TransportError as error:
                    log.warning(
                        "omniroute: sending %d %s reports failed: %s", len(batch), kind, error
                    )
            else:
                self.dropped += len(batch)
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
                if response.status_code >= 400:
                    log.warning("omniroute: %s answered %d", path, response.status_code)
                elif kind == "event":
                    self.results = list(response.json().get("results", []))
                return
        for item in batch:
            if kind == "spend":
                response = self.http.post("/spend", json=item)
            else:
                body = {k: v for k, v in item.items() if k != "connection_id"}
                response = self.http.post(f"/connections/{item['connection_id']}/events", json=body)
            if response.status_code >= 400:
                log.warning("omniroute: a %s report answered %d", kind, response.status_code)
