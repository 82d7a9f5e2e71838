"""The change counters that announce a billing write."""

from __future__ import annotations

from django.db.models import F

from billing.models import (
    ChangeCounter,
)


def bump(counter: str) -> None:
    """Bump a change counter; call it inside the transaction of the write it announces."""
    updated = ChangeCounter.objects.filter(name=counter).update(value=F("value") + 1)
    if not updated:  # a database that lost its seeded row
        ChangeCounter.objects.get_or_create(name=counter, defaults={"value": 1})


def change_counters() -> tuple[int, int]:
    """(config, state) change counters, in one query."""
    values = dict(ChangeCounter.objects.values_list("name", "value"))
    return values.get(ChangeCounter.CONFIG, 0), values.get(ChangeCounter.STATE, 0)
