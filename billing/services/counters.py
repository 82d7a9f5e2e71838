"""The change counters that announce a billing write."""

from __future__ import annotations

from django.db import connection
from django.db.models import F

from billing.models import (
    ChangeCounter,
)

# The PostgreSQL channel every bump notifies (omniroute_admin.change_feed listens on it).
CHANGE_CHANNEL = "omniroute_changes"
# Its payload when a token was revoked (the version does not move).
TOKENS_PAYLOAD = "tokens"
_notifying_bump_sql: str | None = None


def bump(counter: str) -> None:
    """Bump a change counter; call it inside the transaction of the write it announces.

    On PostgreSQL the same statement sends `NOTIFY omniroute_changes`, which PostgreSQL
    delivers when the transaction commits, the moment the write becomes visible, and
    folds into one when a transaction bumps more than once: the change feed's listeners
    wake on it (omniroute_admin.change_feed). Still one statement per bump."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_notifying_bump(), [counter, CHANGE_CHANNEL])
            updated = cursor.rowcount
    else:
        updated = ChangeCounter.objects.filter(name=counter).update(value=F("value") + 1)
    if not updated:  # a database that lost its seeded row
        ChangeCounter.objects.get_or_create(name=counter, defaults={"value": 1})
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_notify(%s, '')", [CHANGE_CHANNEL])


def _notifying_bump() -> str:
    global _notifying_bump_sql
    if _notifying_bump_sql is None:
        quote = connection.ops.quote_name
        value = quote("value")
        _notifying_bump_sql = (
            f"UPDATE {quote(ChangeCounter._meta.db_table)} SET {value} = {value} + 1 "
            f"WHERE {quote('name')} = %s RETURNING pg_notify(%s, '')"
        )
    return _notifying_bump_sql


def notify_token_revoked() -> None:
    """Tell the change feed's listeners, at commit, that a token was revoked: they
    forget the long polls they would repeat without asking Django (PostgreSQL only;
    elsewhere they keep none)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_notify(%s, %s)", [CHANGE_CHANNEL, TOKENS_PAYLOAD])


def change_counters() -> tuple[int, int]:
    """(config, state) change counters, in one query."""
    values = dict(ChangeCounter.objects.values_list("name", "value"))
    return values.get(ChangeCounter.CONFIG, 0), values.get(ChangeCounter.STATE, 0)


def config_counter() -> int:
    """The `config` change counter alone (one query): read by a write after it committed,
    to learn whether the config it was judged under is still the current one."""
    value = (
        ChangeCounter.objects.filter(name=ChangeCounter.CONFIG).values_list("value", flat=True)
    ).first()
    return value or 0
