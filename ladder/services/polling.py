"""Polling: poll one connection's usage endpoint through its adapter and store what it
says as a reading; which connections are due; a refresh asked for now. IO lives here;
parsing is pure in `ladder/quota/`, the polling rules in `ladder/core/polling.py`.

Exactly one refresh of a connection runs at a time: a short lease on the connection row
is taken with a conditional UPDATE (works on PostgreSQL and SQLite, holds no transaction
open across the HTTP call). A failed poll stores an UNKNOWN reading with its cause, so
an older SAFE reading never stands as current after a failure.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import StrEnum

import httpx
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ladder import core
from ladder.crypto import CredentialDecryptError, CredentialKeyMissing, decrypt_credential
from ladder.models import Connection, LadderSettings
from ladder.quota.base import ErrorKind, ParsedQuota, QuotaError
from ladder.quota.http import make_client
from ladder.quota.registry import UnknownAdapter, get_adapter
from ladder.services import enqueue
from ladder.services.common import NotFound, known_id, logger
from ladder.services.readings import ReadingInput, received_at, store_reading

# A usage endpoint that said 429 without Retry-After is left alone this long.
DEFAULT_POLL_BACKOFF = timedelta(minutes=5)


@dataclass(frozen=True, slots=True)
class RefreshOutcome:
    connection_id: str
    polled: bool
    why: str
    is_at_capacity: bool = False


def adapter_url(name: str) -> str:
    """The adapter's endpoint: `QUOTA_URL_<NAME>` when set, else the adapter's default.
    URLs come only from code or these settings, never from request data."""
    override: str = settings.QUOTA_URL_OVERRIDES.get(name, "")
    return override or get_adapter(name).default_url


class Lease(StrEnum):
    TAKEN = "taken"
    HELD_ELSEWHERE = "another refresh of this connection is running"
    AT_CAPACITY = "the cap on concurrent upstream calls is reached"


def _take_lease(connection_id: str, now: datetime) -> Lease:
    """Lease one connection for a poll, within the global cap on concurrent polls."""
    with transaction.atomic():
        # The settings row doubles as the mutex of the cap: count and take in one step.
        LadderSettings.objects.select_for_update().filter(pk=1).first()
        # The connection's own lease first: a duplicate of a poll in flight is dropped,
        # never retried (a retry would poll again once the first one finished).
        if Connection.objects.filter(
            connection_id=connection_id, refresh_lease_until__gt=now
        ).exists():
            return Lease.HELD_ELSEWHERE
        busy = Connection.objects.filter(refresh_lease_until__gt=now).count()
        if busy >= settings.QUOTA_MAX_CONCURRENT_POLLS:
            return Lease.AT_CAPACITY
        taken = Connection.objects.filter(
            Q(refresh_lease_until__isnull=True) | Q(refresh_lease_until__lte=now),
            connection_id=connection_id,
        ).update(refresh_lease_until=now + _lease())
    return Lease.TAKEN if taken == 1 else Lease.HELD_ELSEWHERE


def _lease() -> timedelta:
    """How long a refresh holds its connection (QUOTA_REFRESH_LEASE_SECONDS, default 45 s:
    longer than any poll can take; the task's hard time limit is 30 s)."""
    return timedelta(seconds=settings.QUOTA_REFRESH_LEASE_SECONDS)


def _release_lease(connection_id: str) -> None:
    Connection.objects.filter(connection_id=connection_id).update(refresh_lease_until=None)


def _reading_from(parsed: ParsedQuota, source: str, now: datetime) -> ReadingInput:
    return ReadingInput(
        status=parsed.status.value if parsed.status is not None else None,
        remaining_percent=parsed.remaining_percent,
        reset_at=parsed.reset_at,
        checked_at=now,
        windows=parsed.windows,
        source=source,
        detail=parsed.detail,
        evidence=None
        if parsed.evidence is None
        else replace(parsed.evidence, source="usage", seen_at=now),
    )


def _unknown(detail: str, source: str, now: datetime) -> ReadingInput:
    return ReadingInput(status="UNKNOWN", checked_at=now, source=source, detail=detail[:500])


def refresh_quota(
    connection_id: str, *, requested_at: datetime | None = None, now: datetime | None = None
) -> RefreshOutcome:
    """Poll one connection's quota source and store the reading (idempotent: a reading
    newer than `requested_at` already answers the request)."""
    now = now or timezone.now()
    connection = (
        Connection.objects.select_related("current_reading")
        .filter(connection_id=connection_id)
        .first()
    )
    if connection is None:
        return RefreshOutcome(connection_id, False, "the connection no longer exists")
    source = connection.quota_source
    if not core.is_polled(source):
        return RefreshOutcome(connection_id, False, "the connection has no quota source")
    current = connection.current_reading
    # Only a reading checked after the request and not dated ahead of the clock answers
    # it: one stored in the future (before checked_at was capped at the receive time)
    # proves nothing about now, and skipping the poll for it once kept an exhausted plan
    # in `auto/subscription` for minutes.
    if (
        requested_at is not None
        and current is not None
        and core.answers_refresh(current.checked_at, requested_at, received_at(now))
    ):
        return RefreshOutcome(connection_id, False, "a newer reading already exists")
    if connection.poll_not_before is not None and connection.poll_not_before > now:
        return RefreshOutcome(connection_id, False, "the usage endpoint asked us to back off")
    lease = _take_lease(connection_id, now)
    if lease is not Lease.TAKEN:
        return RefreshOutcome(
            connection_id, False, lease.value, is_at_capacity=lease is Lease.AT_CAPACITY
        )
    try:
        reading, quota_error, poll_not_before = _poll(connection, source, now)
        store_reading(connection_id, reading, now=now)
        Connection.objects.filter(connection_id=connection_id).update(
            quota_error=quota_error, poll_not_before=poll_not_before
        )
    except NotFound:
        return RefreshOutcome(connection_id, False, "the connection was deleted meanwhile")
    finally:
        _release_lease(connection_id)
    return RefreshOutcome(connection_id, True, reading.detail or "polled")


def _poll(
    connection: Connection, source: str, now: datetime
) -> tuple[ReadingInput, str, datetime | None]:
    """Fetch and parse; every failure becomes an UNKNOWN reading with its cause."""
    try:
        adapter = get_adapter(source)
    except UnknownAdapter as error:
        return _unknown(str(error), source, now), "", None
    try:
        credential = (
            decrypt_credential(connection.credential_ciphertext)
            if connection.credential_ciphertext
            else ""
        )
    except (CredentialKeyMissing, CredentialDecryptError) as error:
        message = f"The stored credential cannot be read: {error}"
        return _unknown(message, source, now), message[:300], None
    try:
        # poll(), not fetch() and parse(): it scrubs the credential out of everything it
        # returns or raises, before anything here stores, shows or logs it.
        with _client() as client:
            parsed = adapter.poll(
                url=adapter_url(source), credential=credential, client=client, now=now
            )
    except QuotaError as error:
        detail = f"{error.kind}: {error.message}"
        if error.kind == ErrorKind.CREDENTIAL_REJECTED:
            return (
                _unknown(detail, source, now),
                "The usage endpoint rejected the credential.",
                None,
            )
        if error.kind == ErrorKind.CREDENTIAL_INVALID:
            return _unknown(detail, source, now), detail[:300], None
        if error.kind == ErrorKind.RATE_LIMITED:
            wait = (
                timedelta(seconds=error.retry_after_seconds)
                if error.retry_after_seconds
                else DEFAULT_POLL_BACKOFF
            )
            return _unknown(detail, source, now), "", now + wait
        return _unknown(detail, source, now), "", None
    return _reading_from(parsed, source, now), "", None


def _client() -> httpx.Client:
    return make_client(timeout_seconds=settings.QUOTA_HTTP_TIMEOUT_SECONDS)


def due_connection_ids(
    now: datetime, *, interval: timedelta, max_state_age: timedelta
) -> list[str]:
    """Connections whose reading is due: never read, older than the refresh interval,
    about to go stale, dated ahead of the clock, or whose reset instant has passed (one
    query)."""
    cutoff = now - core.due_age(interval, max_state_age)
    return list(
        Connection.objects.exclude(quota_source__in=core.UNPOLLED_QUOTA_SOURCES)
        .filter(is_active=True)
        # A poll in flight answers for its connection already.
        .filter(Q(refresh_lease_until__isnull=True) | Q(refresh_lease_until__lte=now))
        .filter(Q(poll_not_before__isnull=True) | Q(poll_not_before__lte=now))
        .filter(
            Q(current_reading__isnull=True)
            | Q(current_reading__checked_at__lte=cutoff)
            | Q(current_reading__reset_at__lte=now)
            # Dated ahead of the clock (stored before checked_at was capped): its age
            # is unknown, so it is due at once rather than up to a minute late.
            | Q(current_reading__checked_at__gt=now)
        )
        .values_list("connection_id", flat=True)
    )


# --- a refresh asked for now ----------------------------------------------------------


class NoQuotaSource(Exception):
    """The connection has no quota source to poll."""


class BrokerUnavailable(Exception):
    """The task broker refused or timed out; nothing was queued."""


def request_refresh(connection_id: str) -> None:
    """Enqueue an immediate background poll; NotFound, NoQuotaSource or BrokerUnavailable."""
    connection = Connection.objects.filter(connection_id=known_id(connection_id)).first()
    if connection is None:
        raise NotFound(f"No connection {connection_id!r}.")
    if not core.is_polled(connection.quota_source):
        raise NoQuotaSource(
            f"Connection {connection_id!r} has no quota source: set quota_source to poll it, "
            "or push readings to /readings."
        )
    try:
        enqueue.send_refresh(
            kwargs={"connection_id": connection_id, "requested_at": timezone.now().isoformat()}
        )
    except Exception as error:  # kombu raises several types; all mean "not queued"
        logger.warning("could not enqueue a refresh of %s: %s", connection_id, type(error).__name__)
        raise BrokerUnavailable("The task broker is unavailable; nothing was queued.") from error
