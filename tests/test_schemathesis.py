"""Property-based contract test: schemathesis generates requests (valid and invalid) from
the app's own OpenAPI document and sends them in-process with an operator token, on a
database seeded with a small world. No response may be a server error, and every
documented response must match its schema.

All three generation phases run (examples from the document, coverage of its edge
cases, and fuzzing with 100 examples per operation), one test per operation, each in its own
rolled-back transaction (pytest-django's `db`).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.test import Client
from django.utils import timezone
from hypothesis import HealthCheck, settings

from billing import services as billing_services
from ladder.models import ApiToken
from ladder.services import enqueue
from omniroute_admin.wsgi import application
from tests.ladder.factories import make_candidate, make_connection, make_reading, make_token

schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", application)

CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.response_schema_conformance,
]


@pytest.fixture
def operator_token(db: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A seeded world and an operator token. Requests go through the WSGI handler, which
    closes "old" database connections at each request start and end; that would close
    the test's transaction under PostgreSQL, so (like Django's test client) the signal
    is detached for the test. Publishing refresh tasks is replaced at the broker boundary."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    monkeypatch.setattr(enqueue, "send_refresh", lambda *a, **k: None)
    try:
        yield seed_world()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


def seed_world() -> str:
    now = timezone.now()
    make_connection("claude-max-1", quota_source="claude", credential="sk-ant-oat01-secret")
    make_reading("claude-max-1", now=now, checked_at=now, remaining_percent=40.0)
    make_connection("claude-api", provider="claude", auth_type="apikey")
    make_connection("openai-key", provider="openai", auth_type="apikey")
    make_connection("free-1", provider="pollinations", auth_type="none")
    make_reading(
        "free-1",
        now=now,
        status="EXHAUSTED",
        remaining_percent=0.0,
        reset_at=now + timedelta(hours=1),
        checked_at=now,
    )
    billing_services.upsert_price(
        billing_services.PriceInput("openai", "gpt-4o-mini", Decimal("0.15"), Decimal("0.6"), None),
        actor="seed",
    )
    make_candidate(connection_id="claude-max-1", categories=("coding",))
    make_candidate(allowed_connection_ids=("claude-max-1", "claude-api"), categories=("coding",))
    make_candidate("openai", "gpt-4o-mini", connection_id="openai-key", categories=("chat",))
    make_candidate("pollinations", "openai", connection_id="free-1", priority=5)
    return make_token("fuzzer", ApiToken.Scope.OPERATOR)


@schema.parametrize()
@settings(
    max_examples=100,
    deadline=None,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.filter_too_much,
        HealthCheck.data_too_large,
    ],
)
def test_api_honours_its_openapi_document(case: Any, operator_token: str) -> None:
    case.call_and_validate(headers={"Authorization": f"Bearer {operator_token}"}, checks=CHECKS)


# --- the document itself ------------------------------------------------------------------

OPERATOR_OPERATIONS = {
    ("post", "/api/v1/catalog"),
    ("put", "/api/v1/catalog/{entry_id}"),
    ("delete", "/api/v1/catalog/{entry_id}"),
    ("post", "/api/v1/prices"),
    ("delete", "/api/v1/prices/{price_id}"),
    ("put", "/api/v1/settings/ladder"),
    ("put", "/api/v1/provider-aliases/{alias}"),
    ("delete", "/api/v1/provider-aliases/{alias}"),
    ("post", "/api/v1/what-if/ledger-replays"),
}


def operations() -> list[tuple[str, str, dict[str, Any]]]:
    document = Client().get("/api/v1/openapi.json").json()
    return [
        (method, path, operation)
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    ]


def test_every_operation_documents_the_auth_and_database_failures() -> None:
    undocumented = [
        (method, path)
        for method, path, operation in operations()
        if not {"401", "503"} <= set(operation["responses"])
    ]

    assert undocumented == []


def test_exactly_the_operator_operations_document_a_403() -> None:
    with_403 = {
        (method, path)
        for method, path, operation in operations()
        if "403" in operation["responses"]
    }

    assert with_403 == OPERATOR_OPERATIONS


def test_every_operation_with_a_body_documents_400_and_422() -> None:
    undocumented = [
        (method, path)
        for method, path, operation in operations()
        if "requestBody" in operation and not {"400", "422"} <= set(operation["responses"])
    ]

    assert undocumented == []


def test_the_examples_coverage_and_fuzzing_phases_all_run() -> None:
    phases = schema.config.phases

    assert (phases.examples.enabled, phases.coverage.enabled, phases.fuzzing.enabled) == (
        True,
        True,
        True,
    )


def test_every_operation_shows_an_example_of_its_body_or_its_answer() -> None:
    document = Client().get("/api/v1/openapi.json").json()
    components = document["components"]["schemas"]

    def has_example(node: Any) -> bool:
        if isinstance(node, dict):
            if "example" in node or "examples" in node:
                return True
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/components/schemas/"):
                target = components[ref.rsplit("/", 1)[1]]
                if "example" in target or "examples" in target:
                    return True
            return any(has_example(value) for value in node.values())
        if isinstance(node, list):
            return any(has_example(value) for value in node)
        return False

    without = [
        (method, path) for method, path, operation in operations() if not has_example(operation)
    ]

    assert without == []
