"""`GET /api/v1/prices` scales: keyset pages (`limit`, `cursor`), filters, and a constant
number of queries whatever the table's size."""

from __future__ import annotations

import base64
from decimal import Decimal
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from billing import services
from billing.models import ModelPrice
from billing.price_import import ParsedPriceFile
from billing.tiers import PriceRow
from ladder.models import ApiToken, LadderSettings
from tests.billing.factories import import_rows, make_price
from tests.ladder.factories import api, make_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def gateway() -> str:
    return make_token("gw", ApiToken.Scope.GATEWAY)


def _many(count: int, provider: str = "bulk", *, zero: bool = False) -> None:
    """`count` imported rows, model-0000 ... (through the import service)."""
    cost = "0" if zero else "2"
    import_rows(*((provider, f"model-{n:04d}", cost) for n in range(count)), actor="setup")


def _price(provider: str, model: str, input_usd: str, tier_override: str | None = None) -> None:
    make_price(
        provider, model, input_usd=input_usd, output_usd=input_usd, tier_override=tier_override
    )


def _cursor(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).rstrip(b"=").decode()


def _models(response: Any) -> list[str]:
    return [row["model"] for row in response.json()]


def test_prices_answer_one_page_of_100_by_default_with_the_next_cursor(gateway: str) -> None:
    _many(250)

    response = api("get", "/api/v1/prices", gateway)

    assert response.status_code == 200
    assert _models(response) == [f"model-{n:04d}" for n in range(100)]
    cursor = response["X-Next-Cursor"]
    assert response["Link"] == f'</api/v1/prices?cursor={cursor}>; rel="next"'


def test_following_the_next_links_lists_every_price_once_in_order(gateway: str) -> None:
    _many(250)
    _many(3, "other")
    seen: list[str] = []
    url: str | None = "/api/v1/prices?limit=40&provider=bulk"
    pages = 0

    while url is not None:
        response = api("get", url, gateway)
        assert response.status_code == 200
        seen += _models(response)
        pages += 1
        link = response.get("Link")
        url = link[1 : link.index(">")] if link else None
        if url is not None:
            # The next link keeps the filters and the page size.
            query = parse_qs(urlsplit(url).query)
            assert (query["limit"], query["provider"]) == (["40"], ["bulk"])

    assert seen == [f"model-{n:04d}" for n in range(250)]
    assert pages == 7


def test_the_last_page_carries_no_next_cursor(gateway: str) -> None:
    _many(5)

    response = api("get", "/api/v1/prices?limit=5", gateway)

    assert len(response.json()) == 5
    assert ("X-Next-Cursor" in response, "Link" in response) == (False, False)


def test_a_cursor_is_a_position_rows_added_before_it_shift_nothing(gateway: str) -> None:
    _many(10)
    first = api("get", "/api/v1/prices?limit=5", gateway)
    _price("aaa", "new-first", "1")  # sorts before every row already listed

    second = api("get", f"/api/v1/prices?limit=5&cursor={first['X-Next-Cursor']}", gateway)

    assert _models(second) == [f"model-{n:04d}" for n in range(5, 10)]


@pytest.mark.parametrize(
    ("limit", "status", "rows"),
    [("1", 200, 1), ("500", 200, 500), ("501", 422, None), ("0", 422, None), ("x", 422, None)],
)
def test_limit_is_between_1_and_500(
    gateway: str, limit: str, status: int, rows: int | None
) -> None:
    _many(501)

    response = api("get", f"/api/v1/prices?limit={limit}", gateway)

    assert response.status_code == status
    if rows is not None:
        assert len(response.json()) == rows
    else:
        assert [e["loc"] for e in response.json()["detail"]] == [["query", "limit"]]


@pytest.mark.parametrize(
    "cursor",
    [
        pytest.param("not a cursor!", id="not-base64"),
        pytest.param(_cursor("[1, 2]"), id="not-two-strings"),
        pytest.param(_cursor('["openai"]'), id="one-string"),
        pytest.param(_cursor('{"a": 1}'), id="an-object"),
        pytest.param(_cursor('["open\\u0000ai", "m"]'), id="nul-in-provider"),
        pytest.param(_cursor('["openai", "' + "m" * 201 + '"]'), id="model-too-long"),
        pytest.param(_cursor("[" * 700 + "]" * 700), id="nested"),
        pytest.param(base64.urlsafe_b64encode(b"\xff\xfe").decode(), id="not-text"),
        pytest.param("A" * 1025, id="too-long"),
    ],
)
def test_a_cursor_this_api_did_not_give_out_is_a_422(gateway: str, cursor: str) -> None:
    _many(3)

    response = api("get", f"/api/v1/prices?cursor={cursor}", gateway)

    assert response.status_code == 422
    assert [e["loc"] for e in response.json()["detail"]] == [["query", "cursor"]]


@pytest.mark.parametrize("name", ["q", "provider"])
def test_a_control_character_in_a_filter_is_a_422_not_a_database_error(
    gateway: str, name: str
) -> None:
    response = api("get", f"/api/v1/prices?{name}=open%00ai", gateway)

    assert response.status_code == 422
    assert [e["loc"] for e in response.json()["detail"]] == [["query", name]]


def test_filters_by_provider_search_and_review(gateway: str) -> None:
    _many(3, "zeros", zero=True)
    _price("openai", "gpt-4o", "2.5")
    _price("openai", "gpt-4o-mini", "0.15")

    def models(query: str) -> list[str]:
        rows = api("get", f"/api/v1/prices?{query}", gateway).json()
        return [f"{row['provider']}/{row['model']}" for row in rows]

    assert models("provider=openai") == ["openai/gpt-4o", "openai/gpt-4o-mini"]
    assert models("q=MINI") == ["openai/gpt-4o-mini"]
    assert models("q=zer&limit=2") == ["zeros/model-0000", "zeros/model-0001"]
    assert models("needs_review=true") == [f"zeros/model-{n:04d}" for n in range(3)]
    assert models("needs_review=false") == ["openai/gpt-4o", "openai/gpt-4o-mini"]
    assert models("tier=cheap") == ["openai/gpt-4o-mini"]


def test_the_tier_filter_agrees_with_every_rows_computed_tier(gateway: str) -> None:
    LadderSettings.objects.filter(pk=1).update(cheap_max_input_usd_per_mtok="1.5")
    _price("local", "*", "9", "free")
    _price("local", "mine", "9", "premium")
    _price("local", "priced", "0.5")
    _price("groq", "*", "0.05")
    _price("groq", "llama", "3")
    _price("openai", "edge", "1.5")
    _price("openai", "over", "1.500001")
    _price("openai", "zero", "0")
    _price("openai", "forced", "9", "cheap")
    _many(2, "review", zero=True)
    services.import_prices(
        ParsedPriceFile(rows=(PriceRow("local", "cloud", Decimal(0), Decimal(0)),), skipped=0),
        actor="setup",
    )
    everything = api("get", "/api/v1/prices?limit=500", gateway).json()
    assert len(everything) == 12

    for tier in ("free", "cheap", "premium"):
        filtered = api("get", f"/api/v1/prices?tier={tier}&limit=500", gateway).json()
        assert filtered == [row for row in everything if row["tier"] == tier], tier
    assert {row["model"]: row["tier"] for row in everything if row["provider"] == "local"} == {
        "*": "free",
        "mine": "premium",
        "priced": "free",
        "cloud": "free",  # awaiting review, but its provider's override is explicit
    }


def _queries(url: str, token: str) -> int:
    api("get", url, token)  # warm: the token's first use, the settings row
    with CaptureQueriesContext(connection) as queries:
        response = api("get", url, token)
    assert response.status_code == 200
    return len(queries)


@pytest.mark.parametrize(
    "url",
    [
        "/api/v1/prices",
        "/api/v1/prices?limit=500&tier=premium",
        "/api/v1/prices?q=model&needs_review=false&provider=bulk",
    ],
)
def test_listing_prices_takes_the_same_queries_at_1_and_2000_rows(gateway: str, url: str) -> None:
    _many(1)
    at_one = _queries(url, gateway)
    ModelPrice.objects.all().delete()
    _many(2000)
    _price("bulk", "*", "1")

    at_two_thousand = _queries(url, gateway)

    assert at_one == at_two_thousand == 4


def test_the_openapi_document_says_how_a_client_gets_the_next_page(gateway: str) -> None:
    document = api("get", "/api/v1/openapi.json").json()
    operation = document["paths"]["/api/v1/prices"]["get"]

    assert set(operation["responses"]["200"]["headers"]) == {"X-Next-Cursor", "Link"}
    assert "X-Next-Cursor" in operation["description"]
    assert [p["name"] for p in operation["parameters"]] == [
        "limit",
        "cursor",
        "provider",
        "q",
        "tier",
        "needs_review",
    ]
