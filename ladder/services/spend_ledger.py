"""The spend ledger read back: one page at a time, newest first (keyset on
(occurred_at, id), so rows added meanwhile shift nothing), or all of it as CSV rows."""

from __future__ import annotations

import csv
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal

from django.db.models import Q, QuerySet

from billing.keyset import decode_position, encode_position
from billing.models import ProviderAlias
from ladder.models import SpendEntry

SPEND_DEFAULT_LIMIT = 100
SPEND_MAX_LIMIT = 500


@dataclass(frozen=True, slots=True)
class SpendFilters:
    since: datetime | None = None  # occurred_at >= since
    until: datetime | None = None  # occurred_at < until
    rung: str | None = None
    connection_id: str | None = None
    model: str | None = None
    provider: str | None = None


@dataclass(frozen=True, slots=True)
class SpendPage:
    rows: list[SpendEntry]
    next_cursor: str | None


def encode_spend_cursor(entry: SpendEntry) -> str:
    """An opaque cursor: the position (occurred_at, id) after which the next page starts."""
    return encode_position(entry.occurred_at, entry.pk)


def decode_spend_cursor(cursor: str | None) -> tuple[datetime, int] | None:
    """The position a cursor names, or ValueError when this API did not give it out."""
    if cursor is None:
        return None
    at, pk = decode_position(cursor, datetime, int)
    return at, pk


def _filtered(filters: SpendFilters) -> QuerySet[SpendEntry]:
    rows = SpendEntry.objects.all()
    if filters.since is not None:
        rows = rows.filter(occurred_at__gte=filters.since)
    if filters.until is not None:
        rows = rows.filter(occurred_at__lt=filters.until)
    if filters.rung is not None:
        rows = rows.filter(rung=filters.rung)
    if filters.connection_id is not None:
        rows = rows.filter(connection_id=filters.connection_id)
    if filters.model is not None:
        rows = rows.filter(model=filters.model)
    if filters.provider is not None:
        name = filters.provider.strip().lower()
        rows = rows.filter(
            Q(provider=name)
            | Q(provider__in=ProviderAlias.objects.filter(alias=name).values("provider"))
        )
    return rows.order_by("-occurred_at", "-id")


def spend_page(
    filters: SpendFilters, *, limit: int = SPEND_DEFAULT_LIMIT, after: tuple[datetime, int] | None
) -> SpendPage:
    """One page of the ledger, newest first, after a position (one query)."""
    rows = _filtered(filters)
    if after is not None:
        at, pk = after
        rows = rows.filter(occurred_at__lte=at).filter(
            Q(occurred_at__lt=at) | Q(occurred_at=at, id__lt=pk)
        )
    page = list(rows[: limit + 1])
    more = len(page) > limit
    page = page[:limit]
    return SpendPage(page, encode_spend_cursor(page[-1]) if more and page else None)


CSV_HEADER = (
    "occurred_at",
    "request_id",
    "connection_id",
    "provider",
    "model",
    "rung",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "cost_computed",
    "billed_usd",
    "list_price_usd",
)

# A cell a spreadsheet would run as a formula starts with one of these (OWASP, "CSV
# injection"; `|` for DDE, and their full-width forms, which some spreadsheets fold to
# ASCII); such a cell is written with a leading apostrophe. So is one that starts with
# any whitespace (a space, a newline, NBSP) or an invisible format character (a BOM, a
# zero-width space): spreadsheets trim them and run what follows. Ids from a gateway only.
_FORMULA_STARTS = frozenset("=+-@|\uff1d\uff0b\uff0d\uff20\uff5c")


def _text(value: str) -> str:
    first = value[:1]
    if first and (
        first in _FORMULA_STARTS or first.isspace() or unicodedata.category(first) == "Cf"
    ):
        return "'" + value
    return value


def _money(value: Decimal) -> str:
    return format(value, "f")  # exact: the stored decimal, 8 places, never a float


# The CSV export reads the ledger this many entries a query.
CSV_CHUNK = 2000


def _entries(filters: SpendFilters) -> Iterator[SpendEntry]:
    """Every matching entry newest first, read as keyset pages of CSV_CHUNK (one query
    each on the (occurred_at, id) index): the first comes at once and the whole ledger
    never sits in memory, here or in the database. (A named cursor, Django's
    `.iterator()` on PostgreSQL, is declared WITH HOLD outside a transaction, and
    PostgreSQL then materialises its whole result before the first row: 3 to 9 s at
    1,000,000 rows; bench/README.md.)"""
    after: tuple[datetime, int] | None = None
    while True:
        page = spend_page(filters, limit=CSV_CHUNK, after=after)
        yield from page.rows
        if page.next_cursor is None or not page.rows:
            return
        last = page.rows[-1]
        after = (last.occurred_at, last.pk)


def spend_csv_rows(filters: SpendFilters) -> Iterator[tuple[str, ...]]:
    """The header, then every matching entry newest first, as CSV cells (read in keyset
    chunks: the whole ledger never sits in memory)."""
    yield CSV_HEADER
    for e in _entries(filters):
        yield (
            e.occurred_at.isoformat().replace("+00:00", "Z"),
            _text(e.request_id),
            _text(e.connection_id),
            _text(e.provider),
            _text(e.model),
            e.rung,
            "" if e.input_tokens is None else str(e.input_tokens),
            "" if e.output_tokens is None else str(e.output_tokens),
            _money(e.cost_usd),
            "true" if e.is_cost_computed else "false",
            _money(e.billed_usd),
            _money(e.list_price_usd),
        )


class _Echo:
    """A file that hands back what is written: csv.writer then returns each line."""

    def write(self, value: str) -> str:
        return value


def spend_csv_lines(filters: SpendFilters) -> Iterator[str]:
    """The CSV export as text lines (CRLF), streamed: the one writer of the API's
    `?format=csv` and the dashboard's download."""
    writer = csv.writer(_Echo(), lineterminator="\r\n")
    for row in spend_csv_rows(filters):
        yield writer.writerow(row)


def spend_csv_filename(now: datetime) -> str:
    """The export's file name: `spend-<UTC time>.csv`."""
    return f"spend-{now.astimezone(UTC):%Y%m%dT%H%M%SZ}.csv"
