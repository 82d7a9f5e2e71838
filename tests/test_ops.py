"""Operations endpoints: liveness, readiness, Prometheus metrics and the /v1/models alias."""

from __future__ import annotations

from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ladder import beat
from ladder.metrics import DatabaseCollector
from ladder.models import ApiToken
from ladder.tokens import revoke_token
from omniroute_admin.celery import app as celery_app
from tests.ladder.factories import NOW, api, make_connection, make_reading, make_token

MODELS = {
    "object": "list",
    "data": [
        {"id": "auto/subscription", "object": "model", "created": 0, "owned_by": "omniroute"},
        {"id": "auto/thrifty", "object": "model", "created": 0, "owned_by": "omniroute"},
    ],
}


# --- /healthz -----------------------------------------------------------------------------


def test_healthz_answers_ok_without_auth_or_database() -> None:
    # No django_db mark: any database access would raise.
    response = Client().get("/healthz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_healthz_only_answers_get() -> None:
    response = Client().post("/healthz")

    assert response.status_code == 405


# --- /readyz ------------------------------------------------------------------------------


class FakeBroker:
    """The broker boundary: a connection that answers, or refuses like a dead broker."""

    def __init__(self, error: Exception | None = None) -> None:
        self.error = error
        self.ensured = 0

    @contextmanager
    def connection_for_write(self) -> Any:
        yield self

    def ensure_connection(self, **options: Any) -> None:
        self.ensured += 1
        if self.error is not None:
            raise self.error


@pytest.mark.django_db
def test_readyz_is_200_when_the_database_and_the_broker_answer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    broker = FakeBroker()
    monkeypatch.setattr(celery_app, "connection_for_write", broker.connection_for_write)
    beat.record_heartbeat(timezone.now())  # and the beat runs (tests/test_beat_heartbeat.py)

    response = Client().get("/readyz")

    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert broker.ensured == 1


@pytest.mark.django_db
def test_readyz_is_503_naming_the_broker_when_it_refuses(monkeypatch: pytest.MonkeyPatch) -> None:
    broker = FakeBroker(error=ConnectionRefusedError("connection refused"))
    monkeypatch.setattr(celery_app, "connection_for_write", broker.connection_for_write)
    beat.record_heartbeat(timezone.now())

    response = Client().get("/readyz")

    assert response.status_code == 503
    assert response.json() == {
        "status": "unavailable",
        "down": {"broker": "ConnectionRefusedError"},
    }


def test_readyz_is_503_naming_the_database_when_it_cannot_be_reached(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No django_db mark: pytest-django refuses every connection, as a dead database would.
    monkeypatch.setattr(celery_app, "connection_for_write", FakeBroker().connection_for_write)

    response = Client().get("/readyz")

    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "down": {"database": "RuntimeError"}}


# --- /metrics -----------------------------------------------------------------------------


def scrape() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = Client().get("/metrics")
    assert response.status_code == 200
    assert response["Content-Type"] == CONTENT_TYPE_LATEST
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }


@pytest.mark.django_db
def test_metrics_count_pool_decisions_by_auto_id_and_outcome() -> None:
    token = make_token()
    key = ("omniroute_decisions_total", (("auto_id", "auto/thrifty"), ("outcome", "empty")))
    before = scrape().get(key, 0.0)

    api("get", "/api/v1/pools/auto/thrifty", token)
    api("get", "/api/v1/pools/auto/thrifty", token)

    assert scrape()[key] == before + 2


@pytest.mark.django_db
def test_metrics_count_gateway_events_by_kind() -> None:
    token = make_token()
    make_connection("claude-max-1")
    key = ("omniroute_gateway_events_total", (("kind", "rate_limited"),))
    before = scrape().get(key, 0.0)

    api("post", "/api/v1/connections/claude-max-1/events", token, {"kind": "rate_limited"})

    assert scrape()[key] == before + 1


@pytest.mark.django_db
def test_metrics_report_the_age_of_each_current_reading() -> None:
    make_connection("claude-max-1")
    make_reading(
        "claude-max-1", now=NOW, checked_at=NOW - timedelta(seconds=90), remaining_percent=50
    )
    make_connection("never-read", provider="openai", auth_type="apikey")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(DatabaseCollector(now=NOW + timedelta(seconds=30)))

    ages = {
        sample.labels["connection_id"]: sample.value
        for family in text_string_to_metric_families(generate_latest(registry).decode())
        for sample in family.samples
        if sample.name == "omniroute_reading_age_seconds"
    }

    assert ages == {"claude-max-1": 120.0}


@pytest.mark.django_db
def test_metrics_report_paid_rung_spend_and_only_the_budgets_that_are_set() -> None:
    gateway = make_token("gw", ApiToken.Scope.GATEWAY)
    operator = make_token("ops", ApiToken.Scope.OPERATOR)
    api(
        "put",
        "/api/v1/settings/ladder",
        operator,
        {
            "exit_cutoff_percent": 2,
            "reentry_min_remaining_percent": 5,
            "rung_budget_usd": {"cheap": None, "premium": 25},
            "budget_window": "month",
            "max_state_age_seconds": 180,
            "base_cooldown_seconds": 5,
            "max_cooldown_seconds": 120,
            "cheap_max_input_usd_per_mtok": 1.0,
        },
    )
    api(
        "post",
        "/api/v1/spend",
        gateway,
        {
            "request_id": "r1",
            "connection_id": "openai-key",
            "provider": "openai",
            "model": "gpt-5",
            "cost_usd": 2.5,
        },
    )

    samples = scrape()

    assert samples[("omniroute_rung_spend_usd", (("rung", "premium"),))] == 2.5
    assert samples[("omniroute_rung_spend_usd", (("rung", "cheap"),))] == 0.0
    assert samples[("omniroute_rung_budget_usd", (("rung", "premium"),))] == 25.0
    assert ("omniroute_rung_budget_usd", (("rung", "cheap"),)) not in samples


def test_metrics_is_a_503_not_a_500_when_the_database_is_down() -> None:
    # No django_db mark: the database-backed gauges cannot be computed.
    response = Client().get("/metrics")

    assert response.status_code == 503
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response.content == b"# metrics unavailable: RuntimeError\n"


# --- /v1/models -----------------------------------------------------------------------------


@pytest.mark.django_db
def test_v1_models_lists_the_flat_auto_ids_for_a_gateway_token() -> None:
    response = api("get", "/v1/models", make_token())

    assert response.status_code == 200
    assert response.json() == MODELS


@pytest.mark.django_db
def test_v1_models_is_the_same_list_as_the_api() -> None:
    token = make_token()

    assert api("get", "/v1/models", token).json() == api("get", "/api/v1/models", token).json()


@pytest.mark.django_db
def test_v1_models_accepts_an_operator_token() -> None:
    response = api("get", "/v1/models", make_token("ops", ApiToken.Scope.OPERATOR))

    assert response.status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize(
    "header",
    [
        pytest.param(None, id="missing"),
        pytest.param("Bearer omr_unknown", id="unknown"),
        pytest.param("Basic dXNlcjpwYXNz", id="other-scheme"),
        pytest.param("Bearer", id="empty"),
    ],
)
def test_v1_models_without_a_valid_token_is_401(header: str | None) -> None:
    headers = {} if header is None else {"Authorization": header}

    response = Client().get("/v1/models", headers=headers)

    assert response.status_code == 401
    assert response.json() == {"detail": "Unauthorized"}


@pytest.mark.django_db
def test_v1_models_with_a_revoked_token_is_401() -> None:
    secret = make_token()
    revoke_token(ApiToken.objects.get().pk)

    response = api("get", "/v1/models", secret)

    assert response.status_code == 401
    assert response.json() == {"detail": "Unauthorized"}


def test_v1_models_only_answers_get() -> None:
    response = Client().post("/v1/models")

    assert response.status_code == 405


@pytest.mark.parametrize(
    "path",
    ["/api/v1/catalog/abc", "/api/v1/no-such-thing", "/v1/nothing"],
)
def test_unmatched_api_urls_are_a_json_404(client: Client, path: str) -> None:
    response = client.get(path)

    assert response.status_code == 404
    assert response.json() == {"detail": "Not Found"}
