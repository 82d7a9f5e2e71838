"""Cursors whose queries PostgreSQL prepares once per connection: for the few plain-SQL
statements on the gateway's request path (the token, a spend report, a window's sum),
where planning a statement costs PostgreSQL more than running it."""

from __future__ import annotations

from typing import Any

import psycopg
from django.db.backends.base.base import BaseDatabaseWrapper


class _PreparedCursor(psycopg.Cursor[Any]):
    """A server-binding cursor whose queries are prepared statements (when the
    connection's prepare_threshold allows it: DATABASE_PREPARED_STATEMENTS)."""

    def execute(self, query: Any, params: Any = None, **options: Any) -> Any:
        options.setdefault("prepare", True)
        return super().execute(query, params, **options)


def prepared_cursor(db: BaseDatabaseWrapper) -> Any:
    """A cursor of `db` that prepares its statements on PostgreSQL (a plain cursor
    elsewhere). Wrapped as Django wraps its own cursors (error translation, query
    logging, execute wrappers), so query counts and fault handling stay the same."""
    if db.vendor != "postgresql":
        return db.cursor()
    db.ensure_connection()
    return db._prepare_cursor(_PreparedCursor(db.connection))  # type: ignore[attr-defined]
