"""The reports' spool: a local SQLite file the client owns (stdlib `sqlite3`).

Reports (spend entries and events) are written in batches, one transaction each (WAL,
`synchronous=FULL`: one fsync per batch, not per report), and deleted only once the
control plane has acknowledged them. A report that could not be sent stays, with its
attempt count and the earliest time of its next try. The file is bounded (`max_rows`):
past it a new report is refused and counted as dropped. A process that stops (or
crashes) with reports in it sends them when a client on the same file starts again.

Every row keeps its idempotency key inside its body (spend: `request_id`; events:
`event_id`), so a report sent twice (a crash between sending and deleting, two
processes on one file) lands once."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from dataclasses import dataclass
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS reports (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    body TEXT NOT NULL,
    coalesce_key TEXT,
    invalidates INTEGER NOT NULL DEFAULT 1,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_at REAL NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS reports_due ON reports (kind, next_at, id);
CREATE INDEX IF NOT EXISTS reports_coalesce ON reports (coalesce_key);
"""


@dataclass
class Row:
    id: int
    kind: str
    body: dict[str, Any]
    invalidates: bool
    attempts: int


@dataclass
class Pending:
    """A report not yet in the spool. `coalesce_key`: a newer report with the same key
    replaces it (and any unsent row with that key in the spool)."""

    kind: str
    body: dict[str, Any]
    invalidates: bool
    coalesce_key: str | None = None


class Spool:
    def __init__(self, path: str, *, max_rows: int = 10_000) -> None:
        self.path = path
        self.max_rows = max_rows
        if path != ":memory:":
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, timeout=10.0, check_same_thread=False)
        if path != ":memory:":
            self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(_SCHEMA)
        self._db.commit()

    def add(self, pending: list[Pending]) -> tuple[int, int]:
        """Write `pending` in one transaction; (added, dropped because the spool is full)."""
        added = dropped = 0
        with self._lock, self._db:
            (count,) = self._db.execute("SELECT count(*) FROM reports").fetchone()
            for report in pending:
                if report.coalesce_key is not None:
                    gone = self._db.execute(
                        "DELETE FROM reports WHERE coalesce_key = ? AND attempts = 0",
                        (report.coalesce_key,),
                    ).rowcount
                    count -= gone
                if count >= self.max_rows:
                    dropped += 1
                    continue
                self._db.execute(
                    "INSERT INTO reports (kind, body, coalesce_key, invalidates) VALUES (?,?,?,?)",
                    (
                        report.kind,
                        json.dumps(report.body, separators=(",", ":")),
                        report.coalesce_key,
                        int(report.invalidates),
                    ),
                )
                count += 1
                added += 1
        return added, dropped

    def due(self, kind: str, now: float, limit: int) -> list[Row]:
        """The oldest rows of `kind` whose next try is due (in the order they were put)."""
        with self._lock:
            rows = self._db.execute(
                "SELECT id, kind, body, invalidates, attempts FROM reports"
                " WHERE kind = ? AND next_at <= ? ORDER BY id LIMIT ?",
                (kind, now, limit),
            ).fetchall()
        return [Row(r[0], r[1], json.loads(r[2]), bool(r[3]), r[4]) for r in rows]

    def next_due(self) -> float | None:
        with self._lock:
            (at,) = self._db.execute("SELECT min(next_at) FROM reports").fetchone()
        return None if at is None else float(at)

    def remove(self, ids: list[int]) -> None:
        """Acknowledged (or given up on): gone for good."""
        if not ids:
            return
        with self._lock, self._db:
            self._db.executemany("DELETE FROM reports WHERE id = ?", [(i,) for i in ids])

    def postpone(self, rows: list[Row], at: float) -> None:
        with self._lock, self._db:
            self._db.executemany(
                "UPDATE reports SET attempts = attempts + 1, next_at = ? WHERE id = ?",
                [(at, row.id) for row in rows],
            )

    def rewrite(self, row: Row) -> None:
        """Store `row.body` as it now is (fields an older server refused were removed)."""
        with self._lock, self._db:
            self._db.execute(
                "UPDATE reports SET body = ? WHERE id = ?",
                (json.dumps(row.body, separators=(",", ":")), row.id),
            )

    def count(self) -> int:
        with self._lock:
            (count,) = self._db.execute("SELECT count(*) FROM reports").fetchone()
        return int(count)

    def close(self) -> None:
        with self._lock:
            self._db.close()


def default_spool_path(base_url: str, token: str) -> str:
    """The reports' spool file of this control plane and token (the same file after a
    restart, so what a stopped process left is sent by the next):
    `$OMNIROUTE_SPOOL_DIR` (default `~/.local/state/omniroute`)/spool-<hash>.sqlite3."""
    folder = os.environ.get("OMNIROUTE_SPOOL_DIR") or os.path.join(
        os.path.expanduser("~"), ".local", "state", "omniroute"
    )
    digest = hashlib.sha256(f"{base_url}\n{token}".encode()).hexdigest()[:16]
    return os.path.join(folder, f"spool-{digest}.sqlite3")
