"""Billing evidence and windows scoped to a model, end to end: a real Celery worker and
beat poll a local fake Claude usage endpoint that answers in the `limits` shape only."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from billing import services as billing_services
from billing.models import BillingCatalogEntry
from ladder import services
from ladder.core import SUBSCRIPTION_AUTO_ID
from ladder.models import Connection
from tests.integration.harness import ScriptedUpstream, Worker, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

OPUS = "claude-opus-4-1"
SONNET = "claude-sonnet-4-5"


def _limits_only(opus_used: float, *, spend: bool | None = None) -> dict[str, Any]:
    soon = datetime.now(UTC) + timedelta(hours=3)
    later = datetime.now(UTC) + timedelta(days=4)
    payload: dict[str, Any] = {
        "limits": [
            {"kind": "session", "percent": 30.0, "resets_at": soon.isoformat(), "scope": None},
            {"kind": "weekly_all", "percent": 40.0, "resets_at": later.isoformat(), "scope": None},
            {
                "kind": "weekly_scoped",
                "percent": opus_used,
                "resets_at": later.isoformat(),
                "scope": {"model": {"id": "opus", "display_name": "Opus"}},
            },
        ]
    }
    if spend is not None:
        payload["spend"] = {"enabled": spend}
    return payload


def _plan_with_candidates() -> str:
    # A transactional test empties the tables, the seeded catalog included: curate the
    # plan again when an earlier test took it away (else it reads uncurated, premium).
    if not BillingCatalogEntry.objects.filter(provider="claude", auth_type="oauth").exists():
        billing_services.create_catalog_entry(
            billing_services.CatalogInput(
                "claude", "oauth", "subscription", "hard-stop", "plan windows stop at the limit"
            ),
            actor="tests",
        )
    for model in (OPUS, SONNET):
        billing_services.upsert_price(
            billing_services.PriceInput("claude", model, Decimal(3), Decimal(15), None),
            actor="test",
        )
    connection_id = f"claude-{uuid.uuid4().hex[:8]}"
    services.upsert_connection(
        connection_id,
        services.ConnectionInput(
            "claude", "oauth", quota_source="claude", credential="sk-ant-oat01-test-token"
        ),
    )
    for model in (OPUS, SONNET):
        services.save_candidate(
            services.CandidateInput("claude", model, connection_id=connection_id)
        )
    return connection_id


def _subscription() -> Any:
    services.clear_caches()
    return services.decide_registered(SUBSCRIPTION_AUTO_ID, now=datetime.now(UTC))


def _checked_at(connection_id: str) -> datetime | None:
    row = Connection.objects.select_related("current_reading").get(connection_id=connection_id)
    return None if row.current_reading is None else row.current_reading.checked_at


def test_a_limits_only_payload_keeps_the_plan_and_spend_enabled_takes_it_out_in_one_refresh(
    upstream: ScriptedUpstream, worker: Worker
) -> None:
    upstream.script = lambda path: (200, _limits_only(10.0))
    connection_id = _plan_with_candidates()

    served = wait_until(lambda: (d := _subscription()).candidates and d, timeout=20)
    assert sorted(c.model for c in served.candidates) == [OPUS, SONNET]

    first = _checked_at(connection_id)
    upstream.script = lambda path: (200, _limits_only(10.0, spend=True))
    services.request_refresh(connection_id)
    wait_until(lambda: (at := _checked_at(connection_id)) is not None and at != first, timeout=20)

    decision = _subscription()
    assert decision.candidates == ()
    assert {(e.model, e.reason.value) for e in decision.excluded} == {
        (OPUS, "overage_not_hard_stop"),
        (SONNET, "overage_not_hard_stop"),
    }
    assert "the usage says spend.enabled: true" in decision.excluded[0].detail


def test_an_opus_scoped_cap_at_100_takes_opus_out_and_leaves_sonnet(
    upstream: ScriptedUpstream, worker: Worker
) -> None:
    upstream.script = lambda path: (200, _limits_only(100.0))
    connection_id = _plan_with_candidates()

    decision = wait_until(lambda: (d := _subscription()).candidates and d, timeout=20)

    assert [(c.model, c.connection_id) for c in decision.candidates] == [(SONNET, connection_id)]
    assert [(e.model, e.connection_id, e.reason.value) for e in decision.excluded] == [
        (OPUS, connection_id, "quota_exhausted")
    ]
    assert decision.excluded[0].detail.startswith(
        "Model scope opus: Upstream reports EXHAUSTED with 0.0 % left"
    )
