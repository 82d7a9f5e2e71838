"""Spend fields (billed_usd, list_price_usd, saved_usd) and GET /api/v1/spend: exact
values from a hand-checked ledger, pages newest first with a keyset cursor, filters,
and the CSV export's exact bytes."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest

from billing import services as billing_services
from ladder import services
from ladder.models import ApiToken, SpendDayTotal, SpendEntry
from tests.ladder.factories import NOW, api, make_connection, make_token

pytestmark = pytest.mark.django_db


def _price(provider: str, model: str, inp: str, out: str) -> None:
    billing_services.upsert_price(
        billing_services.PriceInput(provider, model, Decimal(inp), Decimal(out), None), actor="t"
    )


def _spend(
    request_id: str,
    connection_id: str,
    provider: str,
    model: str,
    minutes: int,
    cost: str | None,
    tin: int | None,
    tout: int | None,
) -> SpendEntry:
    entry, created = services.record_spend(
        services.SpendInput(
            request_id=request_id,
            connection_id=connection_id,
            provider=provider,
            model=model,
            cost_usd=Decimal(cost) if cost is not None else None,
            input_tokens=tin,
            output_tokens=tout,
            occurred_at=NOW - timedelta(minutes=minutes),
        ),
        now=NOW,
    )
    assert created
    return entry


@pytest.fixture
def ledger() -> list[SpendEntry]:
    """Five entries (hand-checked): the plan at 3/15 USD per Mtok, a metered key and the
    keyless path at 0.15/0.6 (cheap)."""
    make_connection("plan", provider="claude", auth_type="oauth")
    make_connection("key", provider="openai", auth_type="apikey")
    make_connection("free-path", provider="openai", auth_type="none")
    _price("claude", "claude-sonnet-4-5", "3", "15")
    _price("openai", "gpt-4o-mini", "0.15", "0.6")
    return [
        # plan, null: 1 Mtok in at 3 + 0.1 Mtok out at 15 = 4.5 listed, nothing billed
        _spend("r1", "plan", "Anthropic", "claude-sonnet-4-5", 50, None, 1_000_000, 100_000),
        # plan, 0 sent: cost 0, listed 0.2 Mtok at 3 = 0.6, nothing billed
        _spend("r2", "plan", "claude", "claude-sonnet-4-5", 40, "0", 200_000, 0),
        # metered key: billed and listed as sent
        _spend("r3", "key", "openai", "gpt-4o-mini", 30, "0.25", 10, 20),
        # metered key, null: 1 Mtok each way = 0.15 + 0.6
        _spend("r4", "key", "openai", "gpt-4o-mini", 20, None, 1_000_000, 1_000_000),
        # keyless, null: 2 Mtok in = 0.3 listed, nothing billed
        _spend("=r5", "free-path", "openai", "gpt-4o-mini", 10, None, 2_000_000, 0),
    ]


def test_each_entry_stores_what_it_billed_and_its_list_price(ledger: list[SpendEntry]) -> None:
    rows = list(
        SpendEntry.objects.order_by("request_id").values_list(
            "request_id", "rung", "cost_usd", "billed_usd", "list_price_usd"
        )
    )
    assert rows == [
        ("=r5", "keyless", Decimal("0.3"), Decimal("0"), Decimal("0.3")),
        ("r1", "subscription", Decimal("4.5"), Decimal("0"), Decimal("4.5")),
        ("r2", "subscription", Decimal("0"), Decimal("0"), Decimal("0.6")),
        ("r3", "cheap", Decimal("0.25"), Decimal("0.25"), Decimal("0.25")),
        ("r4", "cheap", Decimal("0.75"), Decimal("0.75"), Decimal("0.75")),
    ]


def test_saved_usd_is_the_list_price_the_plan_included_rungs_served(
    ledger: list[SpendEntry], django_assert_num_queries: Any
) -> None:
    assert services.spend_summary(now=NOW).saved_usd == Decimal("5.4")
    totals = {(t.rung, t.list_price_usd, t.spent_usd) for t in SpendDayTotal.objects.all()}
    assert totals == {
        ("subscription", Decimal("5.1"), Decimal("4.5")),
        ("keyless", Decimal("0.3"), Decimal("0.3")),
        ("cheap", Decimal("1.0"), Decimal("1.0")),
    }
    # From the day totals: the settings, then the window's spend and saved in one query.
    with django_assert_num_queries(2):
        services.spend_summary(now=NOW)
    assert services.rebuild_spend_totals() == 3
    assert services.spend_summary(now=NOW).saved_usd == Decimal("5.4")


def test_the_summary_endpoint_carries_saved_usd(ledger: list[SpendEntry]) -> None:
    gateway = make_token("gw", ApiToken.Scope.GATEWAY)
    body = api("get", "/api/v1/spend/summary", gateway).json()
    # The ledger is dated 2026-11-29: the current month may be another.
    assert set(body) == {"budget_window", "window_start", "window_end", "rungs", "saved_usd"}
    assert isinstance(body["saved_usd"], float)


def test_the_ledger_pages_newest_first_with_a_cursor(ledger: list[SpendEntry]) -> None:
    gateway = make_token("gw", ApiToken.Scope.GATEWAY)
    first = api("get", "/api/v1/spend?limit=2", gateway)
    assert first.status_code == 200
    assert [e["request_id"] for e in first.json()] == ["=r5", "r4"]
    assert first.json()[0] == {
        "request_id": "=r5",
        "connection_id": "free-path",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "cost_usd": 0.3,
        "input_tokens": 2_000_000,
        "output_tokens": 0,
        "occurred_at": "2026-11-29T11:50:00Z",
        "rung": "keyless",
        "billed_usd": 0.0,
        "list_price_usd": 0.3,
    }
    cursor = first["X-Next-Cursor"]
    assert first["Link"] == f'</api/v1/spend?limit=2&cursor={cursor}>; rel="next"'
    second = api("get", f"/api/v1/spend?limit=2&cursor={cursor}", gateway)
    assert [e["request_id"] for e in second.json()] == ["r3", "r2"]
    third = api("get", f"/api/v1/spend?limit=2&cursor={second['X-Next-Cursor']}", gateway)
    assert [e["request_id"] for e in third.json()] == ["r1"]
    assert "X-Next-Cursor" not in third


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("rung=subscription", ["r2", "r1"]),
        ("connection_id=key", ["r4", "r3"]),
        ("model=claude-sonnet-4-5", ["r2", "r1"]),
        ("provider=ANTHROPIC", ["r2", "r1"]),
        ("since=2026-11-29T11:30:00Z&until=2026-11-29T11:50:00Z", ["r4", "r3"]),
    ],
)
def test_the_ledger_filters(ledger: list[SpendEntry], query: str, expected: list[str]) -> None:
    gateway = make_token("gw", ApiToken.Scope.GATEWAY)
    answer = api("get", f"/api/v1/spend?{query}", gateway)
    assert [e["request_id"] for e in answer.json()] == expected


@pytest.mark.parametrize(
    "query",
    ["cursor=nope", "limit=0", "limit=501", "since=1700000000", "rung=gold", "format=xml"],
)
def test_bad_ledger_queries_are_422(query: str) -> None:
    gateway = make_token("gw", ApiToken.Scope.GATEWAY)
    assert api("get", f"/api/v1/spend?{query}", gateway).status_code == 422


def test_the_csv_export_is_exact(ledger: list[SpendEntry]) -> None:
    gateway = make_token("gw", ApiToken.Scope.GATEWAY)
    answer = api("get", "/api/v1/spend?format=csv&limit=1", gateway)
    assert answer.status_code == 200
    assert answer["Content-Type"] == "text/csv; charset=utf-8"
    disposition = answer["Content-Disposition"]
    assert disposition.startswith('attachment; filename="spend-')
    assert disposition.endswith('Z.csv"')
    body = b"".join(answer.streaming_content)  # type: ignore[attr-defined]
    assert body == (
        b"occurred_at,request_id,connection_id,provider,model,rung,input_tokens,"
        b"output_tokens,cost_usd,cost_computed,billed_usd,list_price_usd\r\n"
        b"2026-11-29T11:50:00Z,'=r5,free-path,openai,gpt-4o-mini,keyless,2000000,0,"
        b"0.30000000,true,0.00000000,0.30000000\r\n"
        b"2026-11-29T11:40:00Z,r4,key,openai,gpt-4o-mini,cheap,1000000,1000000,"
        b"0.75000000,true,0.75000000,0.75000000\r\n"
        b"2026-11-29T11:30:00Z,r3,key,openai,gpt-4o-mini,cheap,10,20,"
        b"0.25000000,false,0.25000000,0.25000000\r\n"
        b"2026-11-29T11:20:00Z,r2,plan,claude,claude-sonnet-4-5,subscription,200000,0,"
        b"0.00000000,false,0.00000000,0.60000000\r\n"
        b"2026-11-29T11:10:00Z,r1,plan,claude,claude-sonnet-4-5,subscription,1000000,100000,"
        b"4.50000000,true,0.00000000,4.50000000\r\n"
    )


def test_the_ledger_needs_a_gateway_token() -> None:
    assert api("get", "/api/v1/spend").status_code == 401


def test_the_migration_backfills_billed_and_list_prices(ledger: list[SpendEntry]) -> None:
    import importlib

    from django.apps import apps

    migration = importlib.import_module("ladder.migrations.0010_candidate_ref_spend_prices")
    # The ledger as it stood before 0010: both new columns 0.
    SpendEntry.objects.update(billed_usd=Decimal(0), list_price_usd=Decimal(0))
    SpendDayTotal.objects.update(list_price_usd=Decimal(0))

    migration.backfill(apps, None)

    assert list(
        SpendEntry.objects.order_by("request_id").values_list(
            "request_id", "billed_usd", "list_price_usd"
        )
    ) == [
        ("=r5", Decimal("0"), Decimal("0.3")),  # computed on a plan rung: its cost
        ("r1", Decimal("0"), Decimal("4.5")),
        ("r2", Decimal("0"), Decimal("0.6")),  # 0 sent: the tokens at today's prices
        ("r3", Decimal("0.25"), Decimal("0.25")),
        ("r4", Decimal("0.75"), Decimal("0.75")),
    ]
    assert services.spend_summary(now=NOW).saved_usd == Decimal("5.4")


@pytest.mark.parametrize(
    "value",
    [
        "=1+1",
        "+1",
        "-1",
        "@SUM(A1)",
        "|calc",
        "\t=1",
        "\r=1",
        " =1",
        "\n=1",
        "\u00a0=1",
        "\ufeff=1",
        "\u200b=1",
        "\uff1d1+1",
        "\uff0b1",
        "\uff20SUM(A1)",
    ],
)
def test_a_csv_cell_a_spreadsheet_could_run_as_a_formula_gets_an_apostrophe(value: str) -> None:
    from ladder.services.spend_ledger import _text

    assert _text(value) == "'" + value


@pytest.mark.parametrize("value", ["r1", "openai", "gpt-4o-mini", "a=b", "x-1", ""])
def test_a_plain_csv_cell_is_written_as_it_is(value: str) -> None:
    from ladder.services.spend_ledger import _text

    assert _text(value) == value


def test_the_csv_export_reads_the_ledger_in_keyset_chunks_and_writes_it_whole(
    ledger: list[SpendEntry], monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from ladder.services import spend_ledger

    whole = list(spend_ledger.spend_csv_rows(spend_ledger.SpendFilters()))
    monkeypatch.setattr(spend_ledger, "CSV_CHUNK", 2)

    with CaptureQueriesContext(connection) as queries:
        chunked = list(spend_ledger.spend_csv_rows(spend_ledger.SpendFilters()))

    assert chunked == whole
    assert [row[1] for row in chunked[1:]] == ["'=r5", "r4", "r3", "r2", "r1"]
    assert len(queries) == 3  # 2 + 2 + 1 entries, one query each
    assert all("LIMIT 3" in q["sql"] for q in queries)  # a page, never the whole ledger
