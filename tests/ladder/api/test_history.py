"""`GET /api/v1/pools/{auto_id}/history` (ladder/api/history.py): newest first, keyset
pages, since/until, 404s and the gateway scope."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from ladder.models import ApiToken, PoolMembership, PoolTransition
from tests.ladder.factories import NOW, api, iso, make_candidate, make_connection, make_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def gateway() -> str:
    return make_token("gw", ApiToken.Scope.GATEWAY)


def _transitions(auto_id: str, count: int) -> None:
    PoolMembership.objects.create(auto_id=auto_id, members=[], computed_at=NOW)
    PoolTransition.objects.bulk_create(
        PoolTransition(
            at=NOW + timedelta(seconds=index // 2),  # two per instant: the id breaks ties
            auto_id=auto_id,
            version=index + 1,
            change="entered" if index % 2 == 0 else "left",
            provider="claude",
            model="sonnet",
            connection_id=f"c-{index}",
            rung="subscription",
            reason=None if index % 2 == 0 else "quota_exhausted",
            detail=f"detail {index}",
        )
        for index in range(count)
    )


def _pages(url: str, token: str) -> list[list[str]]:
    pages = []
    while url:
        response = api("get", url, token)
        assert response.status_code == 200, response.content
        pages.append([row["connection_id"] for row in response.json()])
        link = response.headers.get("Link")
        url = link[1 : link.index(">")] if link else ""
        assert (link is None) == (response.headers.get("X-Next-Cursor") is None)
    return pages


def test_history_is_newest_first_in_keyset_pages(gateway: str) -> None:
    _transitions("auto/subscription", 5)
    _transitions("auto/thrifty", 1)

    pages = _pages("/api/v1/pools/auto/subscription/history?limit=2", gateway)

    assert pages == [["c-4", "c-3"], ["c-2", "c-1"], ["c-0"]]


def test_history_rows_have_the_transition_shape(gateway: str) -> None:
    _transitions("auto/subscription", 2)

    response = api("get", "/api/v1/pools/auto/subscription/history", gateway)

    assert response.json() == [
        {
            "at": iso(NOW),
            "auto_id": "auto/subscription",
            "change": "left",
            "provider": "claude",
            "model": "sonnet",
            "connection_id": "c-1",
            "rung": "subscription",
            "reason": "quota_exhausted",
            "detail": "detail 1",
        },
        {
            "at": iso(NOW),
            "auto_id": "auto/subscription",
            "change": "entered",
            "provider": "claude",
            "model": "sonnet",
            "connection_id": "c-0",
            "rung": "subscription",
            "reason": None,
            "detail": "detail 0",
        },
    ]


def test_since_is_inclusive_and_until_exclusive(gateway: str) -> None:
    _transitions("auto/thrifty", 8)  # instants NOW+0 .. NOW+3, two each
    since = (NOW + timedelta(seconds=1)).isoformat().replace("+00:00", "Z")
    until = (NOW + timedelta(seconds=3)).isoformat().replace("+00:00", "Z")

    pages = _pages(
        f"/api/v1/pools/auto/thrifty/history?since={since}&until={until}&limit=3", gateway
    )

    assert pages == [["c-5", "c-4", "c-3"], ["c-2"]]


def test_a_category_composite_has_history_when_published_or_recorded(gateway: str) -> None:
    make_connection("plan")
    make_candidate(connection_id="plan", categories=("code",))
    _transitions("auto/old:thrifty", 1)

    published = api("get", "/api/v1/pools/auto/code:subscription/history", gateway)
    recorded = api("get", "/api/v1/pools/auto/old:thrifty/history", gateway)
    unknown = api("get", "/api/v1/pools/auto/none:thrifty/history", gateway)

    assert (published.status_code, published.json()) == (200, [])
    assert (recorded.status_code, len(recorded.json())) == (200, 1)
    assert unknown.status_code == 404
    assert unknown.json() == {"detail": "No published pool auto/none:thrifty and no history of it."}


@pytest.mark.parametrize(
    ("path", "detail"),
    [
        ("auto/premium", "unknown tier 'premium'"),
        ("gpt-4o", "'gpt-4o' is not an auto id"),
    ],
)
def test_a_bad_auto_id_is_a_404(gateway: str, path: str, detail: str) -> None:
    response = api("get", f"/api/v1/pools/{path}/history", gateway)

    assert response.status_code == 404
    assert detail in response.json()["detail"]


@pytest.mark.parametrize(
    ("query", "field"),
    [("cursor=garbage!", "cursor"), ("limit=0", "limit"), ("since=yesterday", "since")],
)
def test_bad_query_parameters_are_a_422(gateway: str, query: str, field: str) -> None:
    response = api("get", f"/api/v1/pools/auto/thrifty/history?{query}", gateway)

    assert response.status_code == 422
    assert [error["loc"][-1] for error in response.json()["detail"]] == [field]


@pytest.mark.parametrize(("token", "status"), [(None, 401), ("bogus", 401)])
def test_the_history_needs_a_gateway_token(token: Any, status: int) -> None:
    assert api("get", "/api/v1/pools/auto/thrifty/history", token).status_code == status


def test_the_pool_endpoint_is_still_the_pools(gateway: str) -> None:
    response = api("get", "/api/v1/pools/auto/thrifty", gateway)

    assert response.status_code == 200
    assert response.json()["auto_id"] == "auto/thrifty"


def test_an_offset_postgresql_refuses_is_taken_as_its_utc_instant(gateway: str) -> None:
    _transitions("auto/thrifty", 2)
    query = "since=2308-04-30T01%3A28%3A48%2B22%3A57"  # PostgreSQL allows 15:59 at most

    response = api("get", f"/api/v1/pools/auto/thrifty/history?{query}", gateway)

    assert (response.status_code, response.json()) == (200, [])


@pytest.mark.parametrize(
    "query",
    [
        "since=0001-01-01T00%3A00%3A00%2B05%3A00",  # before year 1 once in UTC
        "since=2026-11-29T12%3A00%3A00",  # no offset
        "until=1796114593",  # a Unix time is not a time here
    ],
)
def test_a_time_the_database_cannot_take_is_a_422_not_a_500(gateway: str, query: str) -> None:
    _transitions("auto/thrifty", 2)

    response = api("get", f"/api/v1/pools/auto/thrifty/history?{query}", gateway)

    assert response.status_code == 422, response.content


def test_a_time_with_any_offset_is_compared_in_utc(gateway: str) -> None:
    _transitions("auto/thrifty", 4)  # at NOW, NOW, NOW + 1 s, NOW + 1 s
    at = (NOW + timedelta(seconds=1)).astimezone().isoformat()  # the same instant, local

    response = api(
        "get", "/api/v1/pools/auto/thrifty/history?since=" + at.replace("+", "%2B"), gateway
    )

    assert [row["connection_id"] for row in response.json()] == ["c-3", "c-2"]
