"""What the service modules share: the NotFound error, the connection id guard, the
paid rungs, the clock-skew bound and the logger (one name, "ladder.services", for all)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from datetime import timedelta

from django.core.exceptions import ValidationError

from ladder.core import Rung
from ladder.models import CONNECTION_ID_MESSAGE, is_connection_id

# One logger for the whole shell: operators filter on "ladder.services".
logger = logging.getLogger("ladder.services")


PAID_RUNGS = (Rung.CHEAP, Rung.PREMIUM)


# A reading's checked_at may be at most this far ahead of the server clock.
MAX_CLOCK_SKEW = timedelta(seconds=60)


class NotFound(Exception):
    """The named object does not exist."""


def known_id(connection_id: str) -> str:
    """The id itself, or NotFound before any lookup: an id outside the rule (`.`, `..`,
    a space...) names no connection and is never sent to the database."""
    if not is_connection_id(connection_id):
        raise NotFound(f"No connection {connection_id!r}.")
    return connection_id


def refuse_bad_ids(field: str, ids: Iterable[str | None]) -> None:
    """ValidationError naming `field` when any id breaks the connection id rule."""
    if any(i is not None and not is_connection_id(i) for i in ids):
        raise ValidationError({field: [CONNECTION_ID_MESSAGE]})


def refuse_bad_id(field: str, connection_id: str) -> None:
    """`refuse_bad_ids` of one id (a spend report's, checked per batch entry)."""
    if not is_connection_id(connection_id):
        raise ValidationError({field: [CONNECTION_ID_MESSAGE]})
