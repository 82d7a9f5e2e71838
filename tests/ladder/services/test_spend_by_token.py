"""The spend ledger records the API token that reported each entry (POST /spend and
/spend/batch; migration 0017), and the spend page's breakdown groups a period by it:
entries from before tokens were recorded are one "no token recorded" row, a deleted
token's entries keep its id."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.utils import timezone

from ladder import services
from ladder.models import ApiToken, SpendEntry
from ladder.services.spend_history import NO_TOKEN, token_key
from ladder.tokens import create_token
from tests.ladder.factories import api, make_connection

pytestmark = pytest.mark.django_db


def _body(request_id: str, cost: float) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "connection_id": "openai-key",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "cost_usd": cost,
    }


@pytest.fixture
def tokens() -> tuple[tuple[ApiToken, str], tuple[ApiToken, str]]:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    return create_token("gw-a", ApiToken.Scope.GATEWAY), create_token(
        "gw-b", ApiToken.Scope.GATEWAY
    )


def test_a_report_records_the_token_that_sent_it(tokens: Any) -> None:
    (a, secret_a), (b, secret_b) = tokens

    assert api("post", "/api/v1/spend", secret_a, _body("r1", 1.0)).status_code == 201
    batch = {"entries": [_body("r2", 2.0), _body("r3", 3.0)]}
    assert api("post", "/api/v1/spend/batch", secret_b, batch).status_code == 200

    assert list(
        SpendEntry.objects.order_by("request_id").values_list("request_id", "token_id")
    ) == [
        ("r1", a.pk),
        ("r2", b.pk),
        ("r3", b.pk),
    ]


def test_a_report_seen_before_keeps_its_first_token(tokens: Any) -> None:
    (a, secret_a), (_, secret_b) = tokens
    api("post", "/api/v1/spend", secret_a, _body("r1", 1.0))

    assert api("post", "/api/v1/spend", secret_b, _body("r1", 1.0)).status_code == 200

    assert list(SpendEntry.objects.values_list("token_id", flat=True)) == [a.pk]


def test_the_breakdown_groups_a_period_by_token(tokens: Any) -> None:
    (a, secret_a), (b, secret_b) = tokens
    api("post", "/api/v1/spend", secret_a, _body("a1", 1.25))
    api("post", "/api/v1/spend", secret_a, _body("a2", 0.5))
    api("post", "/api/v1/spend", secret_b, _body("b1", 4.0))
    # Reported through the service with no token (as before migration 0017).
    services.record_spend(
        services.SpendInput("old", "openai-key", "openai", "gpt-4o-mini", Decimal("0.1"))
    )
    now = timezone.now()
    today = now.replace(hour=0, minute=0, second=0, microsecond=0)

    breakdown = services.spend_report(now=now, period=(today, today + timedelta(days=1))).breakdown

    assert [(r.key, r.requests, r.billed_usd) for r in breakdown.by_token] == [
        (f"gw-b ({b.prefix}…)", 1, Decimal("4.00000000")),
        (f"gw-a ({a.prefix}…)", 2, Decimal("1.75000000")),
        (NO_TOKEN, 1, Decimal("0.10000000")),
    ]
    assert breakdown.are_tokens_cut is False


def test_a_deleted_tokens_entries_keep_its_id(tokens: Any) -> None:
    (a, secret_a), _ = tokens
    api("post", "/api/v1/spend", secret_a, _body("a1", 1.0))
    token_id = a.pk
    ApiToken.objects.filter(pk=token_id).delete()
    now = timezone.now()
    start = datetime(now.year, now.month, now.day, tzinfo=UTC)

    breakdown = services.spend_report(now=now, period=(start, start + timedelta(days=1))).breakdown

    assert [(r.key, r.requests) for r in breakdown.by_token] == [
        (f"a deleted token (id {token_id})", 1)
    ]


@pytest.mark.parametrize(
    ("token_id", "name", "prefix", "key"),
    [
        (None, None, None, "no token recorded"),
        (7, None, None, "a deleted token (id 7)"),
        (7, "gw", "omr_ab12", "gw (omr_ab12…)"),
    ],
    ids=["none", "deleted", "named"],
)
def test_how_a_token_is_named(
    token_id: int | None, name: str | None, prefix: str | None, key: str
) -> None:
    assert token_key(token_id, name, prefix) == key
