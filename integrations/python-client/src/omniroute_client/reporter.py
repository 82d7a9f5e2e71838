"""Spend and events, reported in the background in batches; none lost to an outage.

`put` never blocks and never does IO: it appends to a small buffer (a headers-only
`success` replaces the one of the same connection still waiting: the newest reading is
enough). One daemon thread writes the buffer to the spool (`spool.Spool`, a local SQLite
file: one transaction and one fsync per batch) and sends what is due with
`POST /spend/batch` and `POST /events/batch` (falling back for good to the single
endpoints when a batch endpoint answers 404). A report leaves the spool only when the
control plane has acknowledged it (2xx), or refused it for good (a 422 of its own):
- a transport failure, 408, 429 or a 5xx: sent again with exponential backoff (the
  answer's Retry-After when longer), with no limit on the attempts: each report
  carries its idempotency key (spend: `request_id`; events: `event_id`), so a second
  landing changes nothing;
- 401 or 403 (the gateway token revoked or lacking scope): never counted as sent; kept
  and tried again with backoff, counted in `token_rejected`;
- the spool full (`max_queue` reports): the new report is dropped and counted.

Reports are written to the spool every `flush_interval` seconds: a crash loses at most
the reports put in that interval; everything older survives in the file."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import httpx

from .spool import Pending, Row, Spool

log = logging.getLogger("omniroute_client")

# The most reports of a kind sent in one batch: the server's own maxima (events: 100, the
# size its batch answers well inside the request deadline; spend: 1,000).
MAX_BATCH = {"event": 100, "spend": 500}
# Transport failures and these answers are tried again, after the answer's Retry-After
# (at most MAX_RETRY_WAIT) or RETRY_WAIT doubled per attempt (at most MAX_RETRY_WAIT).
RETRIED_STATUS = frozenset({408, 429, 500, 502, 503, 504})
TOKEN_STATUS = frozenset({401, 403})
RETRY_WAIT = 0.2
MAX_RETRY_WAIT = 30.0
# Event fields an older server refuses with 422 (sent again without them).
NEWER_EVENT_FIELDS = ("observed_at", "event_id")


class Refused(Exception):
    """The control plane answered a status worth sending again."""

    def __init__(self, path: str, response: httpx.Response) -> None:
        super().__init__(f"{path} answered {response.status_code}")
        self.status = response.status_code
        self.wait = _retry_after(response)


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return min(max(float(response.headers["retry-after"]), 0.0), MAX_RETRY_WAIT)
    except (KeyError, ValueError):
        return None


def backoff(attempts: int, hint: float | None = None, base: float = RETRY_WAIT) -> float:
    """Seconds before the next try of a report that failed `attempts` times (>= 1)."""
    wait = min(base * 2 ** max(0, attempts - 1), MAX_RETRY_WAIT)
    return max(wait, hint or 0.0)


class Reporter:
    def __init__(
        self,
        http: httpx.Client,
        *,
        max_queue: int = 10_000,
        flush_interval: float = 0.2,
        on_landed: Callable[[str, bool], None] | None = None,
        on_acked: Callable[[str, list[dict[str, Any]]], None] | None = None,
        spool_path: str = ":memory:",
        retry_wait: float = RETRY_WAIT,
    ) -> None:
        self.http = http
        self.retry_wait = retry_wait
        self.flush_interval = flush_interval
        self.max_queue = max_queue
        self.on_landed = on_landed or (lambda kind, invalidates: None)
        self.on_acked = on_acked or (lambda kind, bodies: None)
        self.spool = Spool(spool_path, max_rows=max_queue)
        self.metrics = {
            "queued": 0,  # put and accepted
            "sent": 0,  # acknowledged by the control plane
            "retried": 0,  # sending failed; tried again later
            "dropped": 0,  # never sent: the spool was full, or closed
            "rejected": 0,  # refused for good by the control plane (422)
            "coalesced": 0,  # a headers-only success replaced by a newer one
            "token_rejected": 0,  # answered 401/403: kept, not counted as sent
        }
        self.sent = {"spend": 0, "event": 0}
        self.batch_endpoints = {"spend": True, "event": True}
        self.event_fields_supported = True
        self.results: list[dict[str, Any]] = []  # the last batch's event results
        self._buffer: list[Pending] = []
        self._coalesced: dict[str, int] = {}  # coalesce key -> index in the buffer
        self._cond = threading.Condition()
        self._wake = threading.Event()
        self._closing = False
        self._closed = False
        self._close_lock = threading.Lock()
        self._close_result: bool | None = None
        self._left_at_close = 0
        self._busy = False  # the thread holds reports taken from the buffer
        self._thread = threading.Thread(target=self._run, name="omniroute-reporter", daemon=True)
        self._thread.start()

    @property
    def dropped(self) -> int:
        return self.metrics["dropped"]

    def pending(self) -> int:
        """Reports not yet acknowledged: in the buffer or in the spool (once closed, what
        the close left in the spool file)."""
        if self._close_result is not None:
            return self._left_at_close
        with self._cond:
            buffered = len(self._buffer)
        return buffered + self.spool.count()

    def put(
        self,
        kind: str,
        item: dict[str, Any],
        *,
        urgent: bool = False,
        invalidates: bool = True,
        coalesce_key: str | None = None,
    ) -> bool:
        """Queue one report ("spend" or "event"); False (and counted) when the client is
        closed or the spool is full. `invalidates`: whether its landing may change a pool
        (passed to `on_landed`). `coalesce_key`: a later report with the same key replaces
        this one while it waits."""
        if kind == "event" and "event_id" not in item:
            item = {**item, "event_id": uuid.uuid4().hex}
        with self._cond:
            if self._closed:
                self.metrics["dropped"] += 1
                return False
            if len(self._buffer) >= self.max_queue:
                self.metrics["dropped"] += 1
                return False
            report = Pending(kind, item, invalidates, coalesce_key)
            index = self._coalesced.get(coalesce_key) if coalesce_key else None
            if index is not None:
                self._buffer[index] = report
                self.metrics["coalesced"] += 1
            else:
                if coalesce_key:
                    self._coalesced[coalesce_key] = len(self._buffer)
                self._buffer.append(report)
            self.metrics["queued"] += 1
        if urgent:
            self._wake.set()
        return True

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every report put so far was acknowledged (or given up on); True if
        drained within `timeout` (once closed: whether the close left nothing)."""
        if self._close_result is not None:
            return self._left_at_close == 0
        deadline = time.monotonic() + timeout
        self._wake.set()
        with self._cond:
            while self._buffer or self._busy or self.spool.count():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._wake.set()
                self._cond.wait(min(left, 0.05))
        return True

    def close(self, timeout: float = 10.0) -> bool:
        """Drain for at most `timeout` seconds, then stop. What is left stays in the spool
        file for the next client on it (an in-memory spool: counted as dropped). Closing
        again answers what the first close did and changes nothing."""
        with self._close_lock:
            if self._close_result is None:
                self._close_result = self._close(timeout)
            return self._close_result

    def _close(self, timeout: float) -> bool:
        drained = self.flush(timeout)
        with self._cond:
            self._closed = True
        self._closing = True
        self._wake.set()
        self._thread.join(timeout)
        if self.spool.path == ":memory:":
            self.metrics["dropped"] += self.spool.count()
        left = self._left_at_close = self.spool.count()
        if left:
            log.warning("omniroute: %d reports not acknowledged at close (kept in the spool)", left)
        self.spool.close()
        return drained

    # -- the thread ---------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            due = self.spool.next_due()
            wait = self.flush_interval
            if due is not None:
                wait = min(wait, max(0.0, due - time.time()))
            self._wake.wait(wait)
            self._wake.clear()
            with self._cond:
                taken, self._buffer, self._coalesced = self._buffer, [], {}
                self._busy = True
            try:
                if taken:
                    _, full = self.spool.add(taken)
                    if full:
                        self.metrics["dropped"] += full
                        log.warning("omniroute: spool full, %d reports dropped", full)
                self._send_due()
            except Exception:  # never let the thread die: the next round tries again
                log.exception("omniroute: reporting failed")
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()
            if self._closing:
                return

    def _send_due(self) -> None:
        # Events first (a success after a failure must land after it), then spend.
        for kind in ("event", "spend"):
            while True:
                rows = self.spool.due(kind, time.time(), MAX_BATCH[kind])
                if not rows:
                    break
                if not self._send_rows(kind, rows) or len(rows) < MAX_BATCH[kind]:
                    break

    def _send_rows(self, kind: str, rows: list[Row]) -> bool:
        """Send `rows`; True when the control plane answered for them."""
        try:
            done, refused = self._send(kind, rows)
        except (httpx.TransportError, Refused) as error:
            hint = error.wait if isinstance(error, Refused) else None
            if isinstance(error, Refused) and error.status in TOKEN_STATUS:
                self.metrics["token_rejected"] += len(rows)
                log.error(
                    "omniroute: the control plane rejected the gateway token (%s); %d %s"
                    " reports kept",
                    error,
                    len(rows),
                    kind,
                )
            else:
                log.warning(
                    "omniroute: sending %d %s reports failed (%s); retried", len(rows), kind, error
                )
            self.metrics["retried"] += len(rows)
            attempts = max(row.attempts for row in rows) + 1
            self.spool.postpone(rows, time.time() + backoff(attempts, hint, self.retry_wait))
            return False
        if refused:
            self.metrics["rejected"] += len(refused)
            log.warning("omniroute: %d %s reports refused for good", len(refused), kind)
        self.spool.remove([row.id for row in (*done, *refused)])
        if done:
            self.metrics["sent"] += len(done)
            self.sent[kind] += len(done)
            self.on_acked(kind, [row.body for row in done])
            self.on_landed(kind, any(row.invalidates for row in done))
        return True

    def _body(self, kind: str, row: Row) -> dict[str, Any]:
        if kind == "event" and not self.event_fields_supported:
            return {k: v for k, v in row.body.items() if k not in NEWER_EVENT_FIELDS}
        return row.body

    def _send(self, kind: str, rows: list[Row]) -> tuple[list[Row], list[Row]]:
        """(acknowledged, refused for good); raises to retry them all."""
        path, key = ("/spend/batch", "entries") if kind == "spend" else ("/events/batch", "events")
        if self.batch_endpoints[kind]:
            response = self.http.post(path, json={key: [self._body(kind, r) for r in rows]})
            if response.status_code == 404:
                self.batch_endpoints[kind] = False
            else:
                self._check(path, response)
                if response.status_code >= 400:
                    return [], rows
                results = list(response.json().get("results") or [])
                if kind == "event":
                    self.results = results
                return self._split(kind, rows, results)
        done: list[Row] = []
        refused: list[Row] = []
        for row in rows:  # on a refusal, the ones before are acknowledged
            if kind == "spend":
                single, body = "/spend", self._body(kind, row)
            else:
                single = f"/connections/{row.body['connection_id']}/events"
                body = {
                    k: v
                    for k, v in self._body(kind, row).items()
                    if k not in ("connection_id", "event_id")
                }
            try:
                response = self.http.post(single, json=body)
                self._check(single, response)
            except (httpx.TransportError, Refused):
                if not done and not refused:
                    raise
                break
            if response.status_code == 422 and self._older_server(kind, response.text):
                break  # sent again without the newer fields on the next round
            (refused if response.status_code >= 400 else done).append(row)
        return done, refused

    def _split(
        self, kind: str, rows: list[Row], results: list[dict[str, Any]]
    ) -> tuple[list[Row], list[Row]]:
        done: list[Row] = []
        refused: list[Row] = []
        for index, row in enumerate(rows):
            result = results[index] if index < len(results) else {}
            error = result.get("error") if isinstance(result, dict) else None
            if error is None:
                done.append(row)
            elif self._older_server(kind, str(error)):
                continue  # kept: sent again without the newer fields
            else:
                log.warning("omniroute: a %s report was refused: %s", kind, str(error)[:200])
                refused.append(row)
        return done, refused

    def _older_server(self, kind: str, error: str) -> bool:
        """A server that predates `observed_at` / `event_id` refused them: stop sending
        them (the report itself is kept and sent again)."""
        if (
            kind == "event"
            and self.event_fields_supported
            and any(name in error for name in NEWER_EVENT_FIELDS)
        ):
            self.event_fields_supported = False
            log.warning("omniroute: the control plane predates observed_at/event_id")
            return True
        return False

    def _check(self, path: str, response: httpx.Response) -> None:
        if response.status_code in RETRIED_STATUS or response.status_code in TOKEN_STATUS:
            raise Refused(path, response)
