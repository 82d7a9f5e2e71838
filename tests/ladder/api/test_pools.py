"""The pools API, the hot path: shapes, ordering, splitting by rung, categories, refusals,
and a query count that does not grow with the pool."""

from __future__ import annotations

from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection as db_connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from billing import services as billing_services
from ladder.models import ApiToken, Candidate, QuotaReading
from ladder.services import clear_caches
from tests.ladder.factories import (
    api,
    make_candidate,
    make_connection,
    make_reading,
    make_token,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def gateway() -> str:
    return make_token("gw", ApiToken.Scope.GATEWAY)


def fresh(connection_id: str, remaining: float) -> None:
    """A current reading, checked now."""
    now = timezone.now()
    make_reading(connection_id, now=now, checked_at=now, remaining_percent=remaining)


def stale_at(connection_id: str) -> str:
    """When the latest reading of a connection turns stale (the default 180 s maximum
    age, plus the microsecond at which "not older than" stops holding), as the contract
    writes it (milliseconds)."""
    checked_at = QuotaReading.objects.filter(connection__connection_id=connection_id)[0].checked_at
    instant = checked_at + timedelta(seconds=180, microseconds=1)
    return instant.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def decision(response: Any, before: datetime, after: datetime) -> dict[str, Any]:
    """The body, with `computed_at` checked to be the instant of the request and dropped."""
    body = dict(response.json())
    computed_at = datetime.fromisoformat(body.pop("computed_at"))
    # The encoder writes milliseconds: allow the truncation below `before`.
    assert before.replace(microsecond=before.microsecond // 1000 * 1000) <= computed_at <= after
    # No budget is set in these tests: what a budget leaves is pinned in its own test.
    assert body.pop("budget_left_usd") == {"cheap": None, "premium": None}
    return body


def get_pool(auto_id: str, token: str) -> tuple[int, dict[str, Any]]:
    before = timezone.now()
    response = api("get", f"/api/v1/pools/{auto_id}", token)
    after = timezone.now()
    if response.status_code != 200:
        return response.status_code, response.json()
    return 200, decision(response, before, after)


def post_pool(auto_id: str, token: str, candidates: list[dict[str, Any]]) -> tuple[int, Any]:
    before = timezone.now()
    response = api("post", f"/api/v1/pools/{auto_id}", token, {"candidates": candidates})
    after = timezone.now()
    if response.status_code != 200:
        return response.status_code, response.json()
    return 200, decision(response, before, after)


def plan_and_key() -> None:
    """A Claude plan login with quota left and a metered Claude API key."""
    make_connection("claude-max-1")
    fresh("claude-max-1", 50.0)
    make_connection("claude-api", provider="claude", auth_type="apikey")


# --- GET over registered candidates ----------------------------------------------------------


def test_subscription_pool_serves_the_plan_and_excludes_the_metered_key(gateway: str) -> None:
    plan_and_key()
    plan = make_candidate(connection_id="claude-max-1")
    key = make_candidate(connection_id="claude-api", priority=1)

    status, body = get_pool("auto/subscription", gateway)

    assert status == 200
    assert body == {
        "auto_id": "auto/subscription",
        "grouping": "subscription",
        "category": None,
        "fail_mode": "closed",
        "candidates": [
            {
                "id": plan.pk,
                "provider": "claude",
                "model": "claude-sonnet-4-5",
                "ref": None,
                "rung": "subscription",
                "connection_id": "claude-max-1",
                "allowed_connection_ids": None,
            }
        ],
        "excluded": [
            {
                "provider": "claude",
                "model": "claude-sonnet-4-5",
                "connection_id": "claude-api",
                "rung": "premium",
                "reason": "uncurated",
                "detail": "No catalog entry covers claude with auth apikey: uncurated is "
                "treated as metered",
            }
        ],
        "next_change_at": None,
        "valid_until": stale_at("claude-max-1"),
    }
    assert key.pk not in [c["id"] for c in body["candidates"]]


def test_an_empty_subscription_pool_is_a_200(gateway: str) -> None:
    make_connection("claude-api", provider="claude", auth_type="apikey")
    make_candidate(connection_id="claude-api")

    status, body = get_pool("auto/subscription", gateway)

    assert status == 200
    assert body["candidates"] == []
    assert [e["reason"] for e in body["excluded"]] == ["uncurated"]


def test_a_pool_with_no_registered_candidates_is_an_empty_200(gateway: str) -> None:
    status, body = get_pool("auto/thrifty", gateway)

    assert status == 200
    assert body == {
        "auto_id": "auto/thrifty",
        "grouping": "thrifty",
        "category": None,
        "fail_mode": "open",
        "candidates": [],
        "excluded": [],
        "next_change_at": None,
        "valid_until": None,
    }


def test_thrifty_splits_an_allowlist_over_a_plan_and_a_metered_key_into_two_entries(
    gateway: str,
) -> None:
    plan_and_key()
    candidate = make_candidate(allowed_connection_ids=("claude-api", "claude-max-1"))

    status, body = get_pool("auto/thrifty", gateway)

    assert status == 200
    assert body["candidates"] == [
        {
            "id": candidate.pk,
            "provider": "claude",
            "model": "claude-sonnet-4-5",
            "ref": None,
            "rung": "subscription",
            "connection_id": None,
            "allowed_connection_ids": ["claude-max-1"],
        },
        {
            "id": candidate.pk,
            "provider": "claude",
            "model": "claude-sonnet-4-5",
            "ref": None,
            "rung": "premium",
            "connection_id": None,
            "allowed_connection_ids": ["claude-api"],
        },
    ]
    assert body["excluded"] == []


def test_thrifty_orders_by_rung_and_keeps_the_priority_order_within_a_rung(gateway: str) -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    make_connection("claude-max-1")
    fresh("claude-max-1", 80.0)
    for model, price in (("gpt-a", "0.5"), ("gpt-b", "0.2"), ("gpt-c", "0.9")):
        billing_services.upsert_price(
            billing_services.PriceInput("openai", model, Decimal(price), Decimal("1"), None),
            actor="t",
        )
    first = make_candidate("openai", "gpt-a", connection_id="openai-key", priority=1)
    second = make_candidate("openai", "gpt-b", connection_id="openai-key", priority=2)
    third = make_candidate("openai", "gpt-c", connection_id="openai-key", priority=3)
    plan = make_candidate(connection_id="claude-max-1", priority=9)

    status, body = get_pool("auto/thrifty", gateway)

    assert status == 200
    assert [(c["id"], c["rung"]) for c in body["candidates"]] == [
        (plan.pk, "subscription"),
        (first.pk, "cheap"),
        (second.pk, "cheap"),
        (third.pk, "cheap"),
    ]


def test_an_allowlist_is_rewritten_to_the_passing_subset_in_its_order(gateway: str) -> None:
    for connection_id, remaining in (("max-a", 60.0), ("max-b", 1.0), ("max-c", 30.0)):
        make_connection(connection_id)
        fresh(connection_id, remaining)
    candidate = make_candidate(allowed_connection_ids=("max-c", "max-b", "max-a"))

    status, body = get_pool("auto/subscription", gateway)

    assert status == 200
    assert body["candidates"] == [
        {
            "id": candidate.pk,
            "provider": "claude",
            "model": "claude-sonnet-4-5",
            "ref": None,
            "rung": "subscription",
            "connection_id": None,
            "allowed_connection_ids": ["max-c", "max-a"],
        }
    ]
    assert [(e["connection_id"], e["reason"]) for e in body["excluded"]] == [
        ("max-b", "quota_exhausted")
    ]


def test_a_pinned_candidate_keeps_its_connection_and_a_null_allowlist(gateway: str) -> None:
    make_connection("claude-max-1")
    fresh("claude-max-1", 70.0)
    candidate = make_candidate(connection_id="claude-max-1")

    status, body = get_pool("auto/subscription", gateway)

    assert status == 200
    assert body["candidates"] == [
        {
            "id": candidate.pk,
            "provider": "claude",
            "model": "claude-sonnet-4-5",
            "ref": None,
            "rung": "subscription",
            "connection_id": "claude-max-1",
            "allowed_connection_ids": None,
        }
    ]


def test_a_candidate_with_no_passing_connection_is_dropped_not_kept_empty(gateway: str) -> None:
    for connection_id in ("max-a", "max-b"):
        make_connection(connection_id)
        fresh(connection_id, 0.5)
    make_candidate(allowed_connection_ids=("max-a", "max-b"))

    status, body = get_pool("auto/subscription", gateway)

    assert status == 200
    assert body["candidates"] == []
    assert [(e["connection_id"], e["reason"]) for e in body["excluded"]] == [
        ("max-a", "quota_exhausted"),
        ("max-b", "quota_exhausted"),
    ]


def test_get_category_pool_keeps_only_the_candidates_of_that_category(gateway: str) -> None:
    make_connection("claude-max-1")
    fresh("claude-max-1", 70.0)
    coding = make_candidate(connection_id="claude-max-1", categories=("coding",))
    make_candidate("claude", "claude-haiku", connection_id="claude-max-1", categories=("chat",))

    status, body = get_pool("auto/coding:subscription", gateway)

    assert status == 200
    assert (body["auto_id"], body["grouping"], body["category"], body["fail_mode"]) == (
        "auto/coding:subscription",
        "subscription",
        "coding",
        "closed",
    )
    assert [c["id"] for c in body["candidates"]] == [coding.pk]


def test_get_unknown_category_is_404_naming_the_known_categories(gateway: str) -> None:
    make_connection("claude-max-1")
    make_candidate(connection_id="claude-max-1", categories=("coding", "chat"))
    make_candidate(connection_id="claude-max-1", categories=("reasoning",))

    status, body = get_pool("auto/vision:thrifty", gateway)

    assert status == 404
    assert body == {
        "detail": "No registered candidate has the category 'vision'; known: chat, coding, "
        "reasoning."
    }


@pytest.mark.parametrize(
    ("auto_id", "detail"),
    [
        pytest.param(
            "auto/coding:cheap",
            "unknown tier 'cheap': known tiers are subscription, thrifty.",
            id="composite",
        ),
        pytest.param(
            "auto/premium",
            "unknown tier 'premium': known tiers are subscription, thrifty.",
            id="flat",
        ),
    ],
)
def test_an_unknown_tier_is_404_naming_the_known_tiers(
    gateway: str, auto_id: str, detail: str
) -> None:
    status, body = get_pool(auto_id, gateway)

    assert status == 404
    assert body == {"detail": detail}


def test_an_id_that_is_not_an_auto_id_is_404(gateway: str) -> None:
    status, body = get_pool("gpt-4o", gateway)

    assert status == 404
    assert body == {
        "detail": "'gpt-4o' is not an auto id (it does not start with 'auto/'); expected "
        "auto/subscription, auto/thrifty or auto/<category>:<tier>."
    }


def test_a_pool_needs_a_token(gateway: str) -> None:
    response = api("get", "/api/v1/pools/auto/thrifty")

    assert response.status_code == 401
    assert response.json() == {"detail": "Unauthorized"}


# --- POST over the gateway's own pool -----------------------------------------------------------


def test_post_echoes_ids_and_keeps_the_incoming_order_ignoring_priority(gateway: str) -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    pool = [
        {
            "id": 30,
            "provider": "openai",
            "model": "gpt-x",
            "priority": 9,
            "connection_id": "openai-key",
        },
        {"provider": "openai", "model": "gpt-y", "priority": 1, "connection_id": "openai-key"},
        {"id": 10, "provider": "openai", "model": "gpt-z", "connection_id": "openai-key"},
    ]

    status, body = post_pool("auto/thrifty", gateway, pool)

    assert status == 200
    assert body == {
        "auto_id": "auto/thrifty",
        "grouping": "thrifty",
        "category": None,
        "fail_mode": "open",
        "candidates": [
            {
                "id": 30,
                "provider": "openai",
                "model": "gpt-x",
                "ref": None,
                "rung": "premium",
                "connection_id": "openai-key",
                "allowed_connection_ids": None,
            },
            {
                "id": None,
                "provider": "openai",
                "model": "gpt-y",
                "ref": None,
                "rung": "premium",
                "connection_id": "openai-key",
                "allowed_connection_ids": None,
            },
            {
                "id": 10,
                "provider": "openai",
                "model": "gpt-z",
                "ref": None,
                "rung": "premium",
                "connection_id": "openai-key",
                "allowed_connection_ids": None,
            },
        ],
        "excluded": [],
        "next_change_at": None,
        "valid_until": None,
    }


def test_post_splits_a_plan_and_a_metered_key_by_rung(gateway: str) -> None:
    plan_and_key()

    status, body = post_pool(
        "auto/thrifty",
        gateway,
        [
            {
                "id": 7,
                "provider": "claude",
                "model": "claude-sonnet-4-5",
                "allowed_connection_ids": ["claude-api", "claude-max-1"],
            }
        ],
    )

    assert status == 200
    assert [(c["id"], c["rung"], c["allowed_connection_ids"]) for c in body["candidates"]] == [
        (7, "subscription", ["claude-max-1"]),
        (7, "premium", ["claude-api"]),
    ]


def test_post_category_pool_keeps_only_candidates_listing_the_category(gateway: str) -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")

    status, body = post_pool(
        "auto/coding:thrifty",
        gateway,
        [
            {
                "id": 1,
                "provider": "openai",
                "model": "a",
                "categories": ["chat"],
                "connection_id": "openai-key",
            },
            {
                "id": 2,
                "provider": "openai",
                "model": "b",
                "categories": ["coding"],
                "connection_id": "openai-key",
            },
            {"id": 3, "provider": "openai", "model": "c", "connection_id": "openai-key"},
        ],
    )

    assert status == 200
    assert body["category"] == "coding"
    assert [c["id"] for c in body["candidates"]] == [2]
    assert body["excluded"] == []


def test_post_with_a_category_nobody_lists_is_an_empty_200(gateway: str) -> None:
    status, body = post_pool(
        "auto/vision:thrifty",
        gateway,
        [{"provider": "openai", "model": "a", "connection_id": "openai-key"}],
    )

    assert status == 200
    assert body["candidates"] == []


def test_post_classifies_an_unregistered_connection_as_uncurated(gateway: str) -> None:
    status, body = post_pool(
        "auto/subscription",
        gateway,
        [{"provider": "mystery", "model": "m1", "connection_id": "never-registered"}],
    )

    assert status == 200
    assert body["candidates"] == []
    assert body["excluded"] == [
        {
            "provider": "mystery",
            "model": "m1",
            "connection_id": "never-registered",
            "rung": "premium",
            "reason": "uncurated",
            "detail": "No catalog entry covers mystery with no auth type: uncurated is treated "
            "as metered",
        }
    ]


def test_post_with_an_empty_pool_is_an_empty_200(gateway: str) -> None:
    status, body = post_pool("auto/subscription", gateway, [])

    assert status == 200
    assert (body["candidates"], body["excluded"], body["next_change_at"]) == ([], [], None)


@pytest.mark.parametrize(
    ("item", "loc", "error_type"),
    [
        pytest.param(
            {
                "provider": "a",
                "model": "m",
                "connection_id": "c1",
                "allowed_connection_ids": ["c2"],
            },
            ["body", "payload", "candidates", 0],
            "value_error",
            id="both",
        ),
        pytest.param(
            {"provider": "a", "model": "m"},
            ["body", "payload", "candidates", 0],
            "value_error",
            id="neither",
        ),
        pytest.param(
            {"provider": "a", "model": "m", "allowed_connection_ids": []},
            ["body", "payload", "candidates", 0],
            "value_error",
            id="empty-allowlist",
        ),
        pytest.param(
            {"provider": "a", "model": "m", "connection_id": "c1", "weight": 3},
            ["body", "payload", "candidates", 0, "weight"],
            "extra_forbidden",
            id="unknown-field",
        ),
        pytest.param(
            {"id": "7", "provider": "a", "model": "m", "connection_id": "c1"},
            ["body", "payload", "candidates", 0, "id"],
            "int_type",
            id="string-id",
        ),
        pytest.param(
            {"provider": "a", "model": "m", "connection_id": "a b"},
            ["body", "payload", "candidates", 0, "connection_id"],
            "string_pattern_mismatch",
            id="hostile-connection-id",
        ),
        pytest.param(
            {"provider": "a", "model": "m", "allowed_connection_ids": ["ok", "x" * 129]},
            ["body", "payload", "candidates", 0, "allowed_connection_ids", 1],
            "string_pattern_mismatch",
            id="long-allowlisted-id",
        ),
    ],
)
def test_post_refuses_an_invalid_candidate(
    gateway: str, item: dict[str, Any], loc: list[Any], error_type: str
) -> None:
    status, body = post_pool("auto/thrifty", gateway, [item])

    assert status == 422
    assert [(e["loc"], e["type"]) for e in body["detail"]] == [(loc, error_type)]


def test_post_refuses_exactly_one_of_with_the_contracts_message(gateway: str) -> None:
    status, body = post_pool("auto/thrifty", gateway, [{"provider": "a", "model": "m"}])

    assert status == 422
    assert body == {
        "detail": [
            {
                "loc": ["body", "payload", "candidates", 0],
                "msg": "Give exactly one of connection_id and a non-empty allowed_connection_ids.",
                "type": "value_error",
            }
        ]
    }


def test_post_with_malformed_json_is_400_json(gateway: str) -> None:
    response = api("post", "/api/v1/pools/auto/thrifty", gateway, raw='{"candidates": [')

    assert response.status_code == 400
    assert response.json() == {"detail": "Cannot parse request body"}


def test_post_with_an_unknown_tier_is_404(gateway: str) -> None:
    status, body = post_pool("auto/coding:fancy", gateway, [])

    assert status == 404
    assert body == {"detail": "unknown tier 'fancy': known tiers are subscription, thrifty."}


# --- the number of queries does not grow with the pool ------------------------------------------

CONNECTIONS = 10


def world(candidates: int, operator: str) -> list[dict[str, Any]]:
    """`candidates` registered candidates over 10 connections with readings, with a paid
    budget set (so the window's spend is loaded too); returns the same pool as a POST body."""
    response = api(
        "put",
        "/api/v1/settings/ladder",
        operator,
        {
            "exit_cutoff_percent": 2,
            "reentry_min_remaining_percent": 5,
            "rung_budget_usd": {"cheap": 50, "premium": 100},
            "budget_window": "month",
            "max_state_age_seconds": 180,
            "base_cooldown_seconds": 5,
            "max_cooldown_seconds": 120,
            "cheap_max_input_usd_per_mtok": 1.0,
        },
    )
    assert response.status_code == 200
    for index in range(CONNECTIONS):
        provider, auth = ("claude", "oauth") if index % 2 == 0 else ("openai", "apikey")
        make_connection(f"conn-{index}", provider=provider, auth_type=auth)
        fresh(f"conn-{index}", 10.0 + index)
    rows = [
        Candidate(
            provider="claude",
            model=f"model-{n % 7}",
            categories=["coding"],
            priority=n,
            connection_id=None if n % 2 else f"conn-{n % CONNECTIONS}",
            allowed_connection_ids=[f"conn-{n % CONNECTIONS}", f"conn-{(n + 1) % CONNECTIONS}"]
            if n % 2
            else None,
        )
        for n in range(candidates)
    ]
    Candidate.objects.bulk_create(rows)
    # Registered behind the API's back: announce it as the services do.
    make_candidate(connection_id="conn-0", priority=candidates)
    # The token's last use is fresh: no request below writes it.
    ApiToken.objects.update(last_used_at=timezone.now())
    # As a process that has not decided yet: the readings above warmed its snapshot.
    clear_caches()
    return [
        {
            "id": c.pk,
            "provider": c.provider,
            "model": c.model,
            "categories": c.categories,
            **(
                {"connection_id": c.connection_id}
                if c.connection_id
                else {"allowed_connection_ids": c.allowed_connection_ids}
            ),
        }
        for c in Candidate.objects.order_by("priority", "id")
    ]


def queries_of(method: str, token: str, body: Any = None) -> list[str]:
    with CaptureQueriesContext(db_connection) as captured:
        response = api(method, "/api/v1/pools/auto/thrifty", token, body)
    assert response.status_code == 200
    assert len(response.json()["candidates"]) > 0
    return [query["sql"] for query in captured.captured_queries]


@pytest.fixture
def operator() -> str:
    return make_token("ops", ApiToken.Scope.OPERATOR)


# A decision computed afresh: the token (with the change counters in the same query),
# registered candidates, settings, catalog, prices, the window's spend, the referenced
# connections with their readings.
# Plus, the first time any process computes a registered pool, the pool timeline's first
# record of it (ladder.services.timeline): the stored membership, a savepoint, its row, one
# insert of every transition, the release. A recomputation with the membership unchanged
# adds nothing in the same process (tests/ladder/services/test_timeline.py).
TIMELINE_FIRST_RECORD_QUERIES = 5
GET_POOL_QUERIES = 7 + TIMELINE_FIRST_RECORD_QUERIES
# The same without the candidates: the gateway sends its own.
POST_POOL_QUERIES = 6
# The same decision again with nothing written since: the token query alone.
CACHED_POOL_QUERIES = 1


@pytest.mark.parametrize("size", [10, 500])
def test_get_pool_runs_a_fixed_number_of_queries_whatever_the_pool_size(
    gateway: str, operator: str, size: int
) -> None:
    world(size, operator)

    sql = queries_of("get", gateway)

    assert len(sql) == GET_POOL_QUERIES, sql
    assert Candidate.objects.count() == size + 1


@pytest.mark.parametrize("size", [10, 500])
def test_post_pool_runs_a_fixed_number_of_queries_whatever_the_pool_size(
    gateway: str, operator: str, size: int
) -> None:
    body = {"candidates": world(size, operator)}

    sql = queries_of("post", gateway, body)

    assert len(sql) == POST_POOL_QUERIES, sql


@pytest.mark.parametrize("method", ["get", "post"])
@pytest.mark.parametrize("size", [10, 500])
def test_a_repeated_pool_request_runs_a_fixed_number_of_queries(
    gateway: str, operator: str, size: int, method: str
) -> None:
    pool = world(size, operator)
    body = {"candidates": pool} if method == "post" else None
    first = api(method, "/api/v1/pools/auto/thrifty", gateway, body)

    sql = queries_of(method, gateway, body)

    assert first.status_code == 200
    assert len(sql) == CACHED_POOL_QUERIES, sql
