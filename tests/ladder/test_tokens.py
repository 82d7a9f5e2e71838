"""API tokens on the hot path: one query that reads the token and the change counters,
prepared on PostgreSQL, and its own connection health check."""

from __future__ import annotations

from datetime import timedelta

import psycopg
import pytest
from django.db import connection as db_connection
from django.db import connections
from django.test.utils import CaptureQueriesContext

from billing import services as billing_services
from billing.models import ChangeCounter
from ladder import tokens
from ladder.models import ApiToken
from tests.ladder.factories import NOW

pytestmark = pytest.mark.django_db

postgresql_only = pytest.mark.skipif(
    db_connection.vendor != "postgresql", reason="needs PostgreSQL"
)


def test_a_live_token_comes_with_the_change_counters_of_the_same_query() -> None:
    token, secret = tokens.create_token("gw", ApiToken.Scope.GATEWAY)
    config, state = billing_services.change_counters()
    billing_services.bump(ChangeCounter.STATE)
    billing_services.bump(ChangeCounter.STATE)

    with CaptureQueriesContext(db_connection) as captured:
        found = tokens.authenticate(secret, now=token.created_at)

    assert found is not None
    assert (found.pk, found.name, found.scope) == (token.pk, "gw", "gateway")
    assert found.counters == (config, state + 2)  # type: ignore[attr-defined]
    assert len(captured.captured_queries) == 2  # the read, and the first last-used write


def test_last_used_is_written_at_most_once_a_minute() -> None:
    token, secret = tokens.create_token("gw", ApiToken.Scope.GATEWAY)

    tokens.authenticate(secret, now=NOW)
    with CaptureQueriesContext(db_connection) as within:
        tokens.authenticate(secret, now=NOW + timedelta(seconds=59))
    with CaptureQueriesContext(db_connection) as after:
        tokens.authenticate(secret, now=NOW + timedelta(seconds=61))

    assert (len(within.captured_queries), len(after.captured_queries)) == (1, 2)
    token.refresh_from_db()
    assert token.last_used_at == NOW + timedelta(seconds=61)


@pytest.mark.parametrize("secret", ["omr_unknown", "no-prefix", "omr_" + "x" * 300])
def test_unknown_and_malformed_secrets_authenticate_nothing(secret: str) -> None:
    tokens.create_token("gw", ApiToken.Scope.GATEWAY)

    assert tokens.authenticate(secret, now=NOW) is None


def test_a_revoked_token_authenticates_nothing() -> None:
    token, secret = tokens.create_token("gw", ApiToken.Scope.GATEWAY)

    assert tokens.revoke_token(token.pk, now=NOW) is True
    assert tokens.authenticate(secret, now=NOW) is None
    assert tokens.revoke_token(token.pk, now=NOW) is False


@postgresql_only
def test_the_token_query_is_a_prepared_statement() -> None:
    _, secret = tokens.create_token("gw", ApiToken.Scope.GATEWAY)

    tokens.authenticate(secret, now=NOW)
    with db_connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        statements = [row[0] for row in cursor.fetchall()]

    assert len(statements) == 1
    assert '"secret_hash" = $3' in statements[0]


@postgresql_only
@pytest.mark.django_db(transaction=True)
def test_a_connection_that_broke_while_idle_is_replaced_without_an_error() -> None:
    _, secret = tokens.create_token("gw", ApiToken.Scope.GATEWAY)
    db = connections["default"]
    tokens.authenticate(secret, now=NOW)
    before = db.connection
    backend = before.info.backend_pid
    with psycopg.connect(**db.get_connection_params(), autocommit=True) as other:
        other.execute("SELECT pg_terminate_backend(%s)", [backend])
    db.health_check_done = False  # type: ignore[attr-defined]  # as a new request starts

    found = tokens.authenticate(secret, now=NOW)

    assert found is not None
    assert db.connection is not before
    assert db.connection.info.backend_pid != backend
