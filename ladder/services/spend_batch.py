"""Spend reported in batches (POST /api/v1/spend/batch): each entry checked on its own,
idempotent per request_id (within the batch too), in a constant number of queries per
batch: the request ids already stored, the counters, the connections, one bulk insert,
the running totals (lock, update) and, once committed, the window's sum when a budgeted
rung was hit, and at most one bump of the version (spend_totals.note_crossings)."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

from billing import services as billing_services
from billing.models import ChangeCounter
from ladder.core import Rung
from ladder.models import Connection, SpendEntry, is_connection_id
from ladder.services.spend import SpendInput, current_spend_snapshot, new_entry, rung_of
from ladder.services.spend_totals import add_to_totals, must_move_after_spend
from ladder.services.spend_write import ENTRY_FIELDS

# The most entries one batch may hold (spec/api.md "Spend ledger").
MAX_SPEND_BATCH = 1000


@dataclass(frozen=True, slots=True)
class SpendBatch:
    """What a batch did: per entry, in order, the stored entry or the ValidationError
    that refused it; how many entries it created and how many it had seen before."""

    results: list[SpendEntry | ValidationError]
    created: int
    duplicates: int


def too_many_message(count: int) -> str:
    return (
        f"A batch holds at most {MAX_SPEND_BATCH:,} entries; this one has {count:,}. "
        "Nothing was recorded: send them in smaller batches."
    )


# The ledger columns one batch insert writes, in order: the single report's.
_COLUMNS = ENTRY_FIELDS


# A row's values in `_COLUMNS`' order (the columns are the fields' own names); psycopg
# adapts each by its type (exact decimals, instants with their offset).
_row = attrgetter(*_COLUMNS)


def _copy_in(sql: str, rows: list[tuple[Any, ...]]) -> None:
    """`COPY ... FROM STDIN` of these rows, as one statement of the connection's: its
    errors are Django's (a unique violation an IntegrityError, a lost server an
    OperationalError the API answers 503), and it is logged as any query is (the tests'
    query counts see it)."""
    with connection.cursor() as cursor:
        connection.validate_no_broken_transaction()  # as the cursor's own execute does
        start = time.monotonic()
        with connection.wrap_database_errors, cursor.cursor.copy(sql) as copy:
            for row in rows:
                copy.write_row(row)
        if connection.queries_logged:
            elapsed = time.monotonic() - start
            connection.queries_log.append(
                {"sql": f"{sql} -- {len(rows)} rows", "time": f"{elapsed:.3f}"}
            )


def _bulk_insert(entries: list[SpendEntry], now: datetime) -> None:
    """One statement of all the entries. bulk_create spends most of a 1,000-entry batch
    preparing each field of each row, and a statement of 13,000 placeholders most of
    the rest being parsed, so PostgreSQL gets the rows by COPY (half the time of the
    rows as one JSON document read by `jsonb_to_recordset`, its former way), other
    backends a multi-row VALUES adapted by the backend."""
    ops = connection.ops
    for entry in entries:
        entry.recorded_at = now
    table = ops.quote_name(SpendEntry._meta.db_table)
    columns = ", ".join(ops.quote_name(column) for column in _COLUMNS)
    if connection.vendor == "postgresql":
        _copy_in(f"COPY {table} ({columns}) FROM STDIN", [_row(entry) for entry in entries])
        return
    adapt_time = ops.adapt_datetimefield_value
    adapt_cost = ops.adapt_decimalfield_value
    params: list[Any] = []
    for entry in entries:
        params += (
            entry.request_id,
            entry.connection_id,
            entry.provider,
            entry.model,
            adapt_cost(entry.cost_usd, 16, 8),
            entry.is_cost_computed,
            adapt_cost(entry.billed_usd, 16, 8),
            adapt_cost(entry.list_price_usd, 16, 8),
            entry.input_tokens,
            entry.output_tokens,
            entry.rung,
            adapt_time(entry.occurred_at),
            adapt_time(now),
            entry.token_id,
        )
    row = "(" + ", ".join(["%s"] * len(_COLUMNS)) + ")"
    sql = f"INSERT INTO {table} ({columns}) VALUES {', '.join([row] * len(entries))}"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _stored(request_ids: list[str]) -> list[SpendEntry]:
    """The stored entries of these request ids (one query; on PostgreSQL the ids are one
    JSON parameter, not a thousand placeholders)."""
    if connection.vendor == "postgresql":
        return list(
            SpendEntry.objects.extra(
                where=["request_id IN (SELECT jsonb_array_elements_text(%s::jsonb))"],
                params=[json.dumps(request_ids)],
            )
        )
    return list(SpendEntry.objects.filter(request_id__in=request_ids))


def _insert(fresh: dict[str, SpendEntry], now: datetime) -> dict[str, SpendEntry]:
    """Insert the new entries in one statement; a request id a concurrent writer stored
    meanwhile is taken as seen before and the rest inserted again. Returns, by request
    id, the entries stored by others (the caller's transaction holds the rest)."""
    pending = dict(fresh)
    taken: dict[str, SpendEntry] = {}
    while pending:
        try:
            with transaction.atomic():
                _bulk_insert(list(pending.values()), now)
            return taken
        except IntegrityError:
            stored = _stored(list(pending))
            if not stored:
                raise
            for entry in stored:
                taken[entry.request_id] = entry
                del pending[entry.request_id]
    return taken


def record_spend_batch(inputs: Sequence[SpendInput], *, now: datetime | None = None) -> SpendBatch:
    """Record up to MAX_SPEND_BATCH reports at once, each as `record_spend` would: one
    bad entry is refused in its slot and stops none of the others."""
    if len(inputs) > MAX_SPEND_BATCH:
        raise ValidationError({"entries": [too_many_message(len(inputs))]})
    now = now or timezone.now()
    if not inputs:
        return SpendBatch([], 0, 0)
    request_ids = list({data.request_id for data in inputs})
    seen = {entry.request_id: entry for entry in _stored(request_ids)}
    snapshot = current_spend_snapshot()
    connection_ids = {d.connection_id for d in inputs if is_connection_id(d.connection_id)}
    billing = {
        connection_id: (provider, auth_type)
        for connection_id, provider, auth_type in Connection.objects.filter(
            connection_id__in=list(connection_ids)
        ).values_list("connection_id", "provider", "auth_type")
    }
    rungs: dict[tuple[str, str, str], Rung] = {}
    fresh: dict[str, SpendEntry] = {}
    slots: list[str | ValidationError] = []
    for data in inputs:
        if data.request_id in seen or data.request_id in fresh:
            slots.append(data.request_id)
            continue
        key = (data.connection_id, data.provider, data.model)
        rung = rungs.get(key)
        if rung is None:
            billing_row = billing.get(data.connection_id)
            rung = rungs[key] = rung_of(billing_row, data.provider, data.model, snapshot)
        try:
            fresh[data.request_id] = new_entry(data, rung, snapshot, now)
        except ValidationError as error:
            slots.append(error)
            continue
        slots.append(data.request_id)
    created: set[str] = set()
    if fresh:
        with transaction.atomic():
            taken = _insert(fresh, now)
            seen.update(taken)
            inserted = [entry for rid, entry in fresh.items() if rid not in taken]
            created = {entry.request_id for entry in inserted}
            add_to_totals(inserted)
        # Committed: whether they took a rung's window to its budget, or the config they
        # were judged under has moved since (a budget lowered during the batch).
        if must_move_after_spend(inserted, snapshot.config, snapshot.config_version, now):
            billing_services.bump(ChangeCounter.STATE)
    results: list[SpendEntry | ValidationError] = []
    duplicates = 0
    counted: set[str] = set()
    for slot in slots:
        if isinstance(slot, ValidationError):
            results.append(slot)
            continue
        if slot in created and slot not in counted:
            counted.add(slot)
            results.append(fresh[slot])
        else:
            duplicates += 1
            results.append(seen.get(slot) or fresh[slot])
    return SpendBatch(results, len(created), duplicates)
