"""One spend report written in one statement on PostgreSQL: the ledger row (nothing when
its request id was recorded before) and its day total's upsert, in a data-modifying CTE.
Outside a transaction that statement is its own transaction. The day total it adds to is
its database session's shard of the day (`SHARDS`; SpendDayTotal), so concurrent
gateways reporting on one rung do not queue on one row's lock, each behind the commit
(and the disk flush) of the one before: their commits share the flushes instead. Built
once as plain SQL from the models' columns and prepared once per connection (no ORM
compilation and no planning on the request path)."""

from __future__ import annotations

from datetime import date
from decimal import Decimal
from typing import Any

from django.db import connection
from django.db.models import Field

from billing.models import ChangeCounter
from ladder import core
from ladder.models import SpendDayTotal, SpendEntry
from ladder.prepared import prepared_cursor

# The ledger's columns this statement writes, in the order of its parameters.
ENTRY_FIELDS = (
    "request_id",
    "connection_id",
    "provider",
    "model",
    "cost_usd",
    "is_cost_computed",
    "billed_usd",
    "list_price_usd",
    "input_tokens",
    "output_tokens",
    "rung",
    "occurred_at",
    "recorded_at",
    "token_id",
)

# The shards of a (day, rung) total that single reports spread over, by database
# session. Sixteen keeps two sessions on one shard rare for the writers a deployment has
# (a few connections per server process); a window's sum reads 16 rows a day at most.
SHARDS = 16

_sql: str | None = None


def _column(model: Any, name: str) -> str:
    field = model._meta.get_field(name)
    assert isinstance(field, Field)
    return connection.ops.quote_name(str(field.column))


def _write_ctes(source: str) -> str:
    """The `inserted` CTE (the ledger row from `source`, nothing on a known request id)
    and the `totalled` one (its upsert into its session's shard of the day total)."""
    quote = connection.ops.quote_name
    ledger = quote(SpendEntry._meta.db_table)
    totals = quote(SpendDayTotal._meta.db_table)
    columns = ", ".join(_column(SpendEntry, name) for name in ENTRY_FIELDS)
    day, rung = _column(SpendDayTotal, "day"), _column(SpendDayTotal, "rung")
    shard = _column(SpendDayTotal, "shard")
    spent = _column(SpendDayTotal, "spent_usd")
    listed = _column(SpendDayTotal, "list_price_usd")
    return (
        f"inserted AS (INSERT INTO {ledger} ({columns}) {source} "
        f"ON CONFLICT ({_column(SpendEntry, 'request_id')}) DO NOTHING "
        f"RETURNING {_column(SpendEntry, 'id')}), "
        f"totalled AS (INSERT INTO {totals} ({day}, {rung}, {shard}, {spent}, {listed}) "
        f"SELECT %s, %s, pg_backend_pid() %% {SHARDS}, %s, %s FROM inserted "
        f"ON CONFLICT ({day}, {rung}, {shard}) DO UPDATE SET "
        f"{spent} = {totals}.{spent} + EXCLUDED.{spent}, "
        f"{listed} = {totals}.{listed} + EXCLUDED.{listed})"
    )


_VALUES = ", ".join(["%s"] * len(ENTRY_FIELDS))


def _statement() -> str:
    global _sql
    if _sql is None:
        _sql = f"WITH {_write_ctes(f'VALUES ({_VALUES})')} SELECT id FROM inserted"
    return _sql


def _row_params(entry: SpendEntry) -> list[Any]:
    """The parameters of `_write_ctes`: the ledger row's columns, then its day total's."""
    params = [getattr(entry, name) for name in ENTRY_FIELDS]
    params += [core.utc_day(entry.occurred_at), entry.rung, entry.cost_usd, entry.list_price_usd]
    return params


def insert_entry(entry: SpendEntry) -> bool:
    """Insert an unsaved ledger row and add it to its day total, in one statement;
    False (and nothing written) when its request id is in the ledger already. Sets the
    entry's primary key. PostgreSQL only (SQLite has no data-modifying CTE)."""
    assert connection.vendor == "postgresql"
    with prepared_cursor(connection) as cursor:
        cursor.execute(_statement(), _row_params(entry))
        row = cursor.fetchone()
    if row is None:
        return False
    entry.pk = row[0]
    entry._state.adding = False
    entry._state.db = connection.alias
    return True


_window_sql: str | None = None


def window_sum_statement() -> str:
    """The statement of `window_sum`: a rung's window spend and the `config` counter, in
    one row (parameters: the counter's name, rung, first day, end day)."""
    global _window_sql
    if _window_sql is None:
        quote = connection.ops.quote_name
        totals = quote(SpendDayTotal._meta.db_table)
        counters = quote(ChangeCounter._meta.db_table)
        day, spent = _column(SpendDayTotal, "day"), _column(SpendDayTotal, "spent_usd")
        _window_sql = (
            f"SELECT COALESCE(SUM({spent}), 0), "
            f"(SELECT {quote('value')} FROM {counters} WHERE {quote('name')} = %s) "
            f"FROM {totals} "
            f"WHERE {_column(SpendDayTotal, 'rung')} = %s AND {day} >= %s AND {day} < %s"
        )
    return _window_sql


def window_sum_params(rung: str, first: date, end: date) -> list[Any]:
    """The parameters of `window_sum_statement`."""
    return [ChangeCounter.CONFIG, rung, first, end]


def window_sum(rung: str, first: date, end: date) -> tuple[Decimal, int]:
    """A rung's spend over the days [first, end), from the day totals, and the `config`
    counter read by the same statement (one prepared statement; PostgreSQL only: its
    sum of numerics is exact). Read after the spend committed, the counter says whether
    the budget it was judged under is still the current one (spend_totals)."""
    assert connection.vendor == "postgresql"
    with prepared_cursor(connection) as cursor:
        cursor.execute(window_sum_statement(), window_sum_params(rung, first, end))
        total, config = cursor.fetchone()
    return Decimal(total), config or 0
