"""POST /api/v1/spend/batch: each entry validated on its own, results in order,
idempotent per request_id (within the batch too), at most 1,000 entries, in a constant
number of queries per batch."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from django.db import connection
from django.db.models import Sum
from django.utils import timezone

from billing import services as billing_services
from billing.models import ChangeCounter
from ladder import services
from ladder.models import ApiToken, LadderSettings, SpendDayTotal, SpendEntry
from tests.ladder.factories import api, make_connection, make_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def gateway() -> str:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    billing_services.upsert_price(
        billing_services.PriceInput("openai", "gpt-4o-mini", Decimal("0.15"), Decimal("0.6"), None),
        actor="t",
    )
    return make_token("gw", ApiToken.Scope.GATEWAY)


def entry(request_id: str, cost: float | None = 0.25, **fields: Any) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "connection_id": "openai-key",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "cost_usd": cost,
        **fields,
    }


def batch(token: str | None, entries: Any) -> Any:
    return api("post", "/api/v1/spend/batch", token, {"entries": entries})


def stored_ids() -> list[str]:
    return list(SpendEntry.objects.order_by("request_id").values_list("request_id", flat=True))


def state_version() -> int:
    return billing_services.change_counters()[1]


def test_a_batch_records_each_entry_and_answers_them_in_order(gateway: str) -> None:
    response = batch(
        gateway, [entry("b", 1.0), entry("a", None, input_tokens=1_000_000, output_tokens=0)]
    )

    assert response.status_code == 200
    body = response.json()
    assert (body["created"], body["duplicates"]) == (2, 0)
    assert [(r["request_id"], r["cost_usd"], r["rung"]) for r in body["results"]] == [
        ("b", 1.0, "cheap"),
        ("a", 0.15, "cheap"),
    ]
    assert stored_ids() == ["a", "b"]
    assert list(SpendDayTotal.objects.values_list("rung", "spent_usd")) == [
        ("cheap", Decimal("1.15000000"))
    ]


def test_a_batch_answers_each_entry_as_the_single_endpoint_would(gateway: str) -> None:
    body = entry("one", 0.5, occurred_at=timezone.now().replace(microsecond=0).isoformat())

    single = api("post", "/api/v1/spend", gateway, body).json()
    again = batch(gateway, [body]).json()

    assert again == {"created": 0, "duplicates": 1, "results": [single]}


def test_a_seen_request_id_is_a_duplicate_and_counts_once_within_a_batch_too(
    gateway: str,
) -> None:
    batch(gateway, [entry("seen", 1.0)])

    response = batch(
        gateway, [entry("seen", 9.0), entry("new", 2.0), entry("new", 7.0), entry("other", 3.0)]
    )

    body = response.json()
    assert (body["created"], body["duplicates"]) == (2, 2)
    assert [(r["request_id"], r["cost_usd"]) for r in body["results"]] == [
        ("seen", 1.0),
        ("new", 2.0),
        ("new", 2.0),
        ("other", 3.0),
    ]
    assert SpendEntry.objects.count() == 3
    assert SpendDayTotal.objects.aggregate(total=Sum("spent_usd"))["total"] == Decimal("6.00000000")


def test_a_bad_entry_gets_the_single_endpoints_errors_in_its_slot_and_stops_no_other(
    gateway: str,
) -> None:
    future = (timezone.now() + timedelta(minutes=5)).isoformat()
    bad_schema = entry("bad-1", -1.0, colour="red")
    bad_date = entry("bad-2", 1.0, occurred_at=future)
    single = [
        api("post", "/api/v1/spend", gateway, b).json()["detail"] for b in (bad_schema, bad_date)
    ]

    response = batch(gateway, [bad_schema, entry("good", 1.0), bad_date, "not an object"])

    body = response.json()
    assert response.status_code == 200
    assert (body["created"], body["duplicates"]) == (1, 0)
    results = body["results"]
    assert results[1]["request_id"] == "good"
    for index, detail in ((0, single[0]), (2, single[1])):
        assert results[index] == {
            "error": [
                {
                    "loc": ["body", "payload", "entries", index, *e["loc"][2:]],
                    "msg": e["msg"],
                    "type": e["type"],
                }
                for e in detail
            ]
        }
    assert [(e["loc"], e["type"]) for e in results[0]["error"]] == [
        (["body", "payload", "entries", 0, "cost_usd"], "greater_than_equal"),
        (["body", "payload", "entries", 0, "colour"], "extra_forbidden"),
    ]
    assert results[2]["error"][0]["msg"] == "More than 60 s in the future."
    assert results[3] == {
        "error": [
            {
                "loc": ["body", "payload", "entries", 3],
                "msg": "Input should be a valid dictionary or instance of SpendIn",
                "type": "model_type",
            }
        ]
    }
    assert stored_ids() == ["good"]


def test_a_computed_cost_too_large_to_store_is_refused_in_its_slot(gateway: str) -> None:
    billing_services.upsert_price(
        billing_services.PriceInput("openai", "absurd", Decimal("99999999"), Decimal(0), None),
        actor="t",
    )
    huge = entry("huge", None, model="absurd", input_tokens=10**12, output_tokens=0)

    results = batch(gateway, [huge, entry("fine")]).json()["results"]

    assert results[0]["error"][0]["loc"] == ["body", "payload", "entries", 0, "cost_usd"]
    assert results[0]["error"][0]["msg"].startswith("A request's cost must be between 0 and")
    assert stored_ids() == ["fine"]


def test_more_than_a_thousand_entries_is_a_422_and_records_nothing(gateway: str) -> None:
    version = state_version()

    response = batch(gateway, [entry(f"r{n}") for n in range(1001)])

    assert response.status_code == 422
    assert response.json()["detail"] == [
        {
            "type": "value_error",
            "loc": ["body", "payload", "entries"],
            "msg": "Value error, a batch holds at most 1,000 entries; this one has 1,001. "
            "Nothing was recorded: send them in smaller batches",
            "ctx": {
                "error": "a batch holds at most 1,000 entries; this one has 1,001. "
                "Nothing was recorded: send them in smaller batches"
            },
        }
    ]
    assert (stored_ids(), state_version()) == ([], version)


@pytest.mark.parametrize(
    "body",
    [{}, {"entries": {"a": 1}}, {"entries": [], "extra": 1}, []],
    ids=["no-entries", "entries-not-a-list", "unknown-field", "not-an-object"],
)
def test_a_malformed_batch_body_is_a_422(gateway: str, body: Any) -> None:
    response = api("post", "/api/v1/spend/batch", gateway, body)

    assert response.status_code == 422
    assert stored_ids() == []


def test_an_empty_batch_records_nothing(gateway: str) -> None:
    assert batch(gateway, []).json() == {"created": 0, "duplicates": 0, "results": []}


@pytest.mark.parametrize("token", [None, "not-a-token"], ids=["missing", "invalid"])
def test_the_token_is_checked_before_the_body(gateway: str, token: str | None) -> None:
    response = api("post", "/api/v1/spend/batch", token, {"entries": "not a list"})

    assert response.status_code == 401
    assert stored_ids() == []


def test_an_operator_token_may_report_spend_too(gateway: str) -> None:
    operator = make_token("ops", ApiToken.Scope.OPERATOR)

    assert batch(operator, [entry("r1")]).status_code == 200


def _budget(cheap: str) -> None:
    LadderSettings.objects.filter(pk=1).update(
        cheap_budget_usd=Decimal(cheap), budget_window="month"
    )
    billing_services.bump(ChangeCounter.CONFIG)


def test_a_batch_moves_the_version_once_when_it_crosses_a_budget_and_never_under_it(
    gateway: str,
) -> None:
    _budget("1")
    start = state_version()

    batch(gateway, [entry("a", 0.25), entry("b", 0.25)])  # 0.50
    under = state_version()
    batch(gateway, [entry("c", 0.25), entry("d", 0.25), entry("e", 0.25)])  # 1.25
    crossed = state_version()
    batch(gateway, [entry("f", 0.25)])  # already spent
    over = state_version()

    assert (under, crossed, over) == (start, start + 1, start + 1)


@pytest.mark.parametrize("size", [10, 1000])
def test_a_batch_costs_the_same_few_queries_whatever_its_size(
    gateway: str, size: int, django_assert_num_queries: Any
) -> None:
    _budget("1000000")
    batch(gateway, [entry("warm")])  # the snapshot and the day's total exist
    body = {"entries": [entry(f"r{n}", 0.001) for n in range(size - 1)]}
    body["entries"].append(entry("r0"))  # a repeat within the batch

    # token, request ids seen, counters, connections, savepoint, savepoint, insert,
    # release, lock the totals, add, window sum (on PostgreSQL with the config counter),
    # release (SQLite: the config counter)
    with django_assert_num_queries(12 if connection.vendor == "postgresql" else 13):
        response = api("post", "/api/v1/spend/batch", gateway, body)

    assert (response.json()["created"], response.json()["duplicates"]) == (size - 1, 1)


def test_the_summary_reads_what_a_batch_recorded(gateway: str) -> None:
    _budget("5")
    batch(gateway, [entry(f"r{n}", 1.0) for n in range(3)])

    cheap = services.spend_summary().rungs["cheap"]

    assert (cheap.spent_usd, cheap.budget_usd, cheap.is_exhausted) == (
        Decimal("3.00000000"),
        Decimal("5.00000000"),
        False,
    )


def test_a_batch_stores_each_value_exactly(gateway: str) -> None:
    occurred_at = timezone.now().replace(microsecond=123456) - timedelta(minutes=1)

    batch(
        gateway,
        [
            entry("exact", 0.00000004, input_tokens=7, occurred_at=occurred_at.isoformat()),
            entry("computed", None, input_tokens=1_000_000, output_tokens=1_000_000),
        ],
    )

    stored = {
        e.request_id: e
        for e in SpendEntry.objects.all()  # values as the ORM reads them back
    }
    exact, computed = stored["exact"], stored["computed"]
    assert (
        exact.cost_usd,
        exact.is_cost_computed,
        exact.input_tokens,
        exact.output_tokens,
        exact.occurred_at,
        exact.rung,
    ) == (Decimal("4E-8"), False, 7, None, occurred_at, "cheap")
    assert (computed.cost_usd, computed.is_cost_computed) == (Decimal("0.75000000"), True)
    assert computed.recorded_at == exact.recorded_at


def test_a_request_id_stored_meanwhile_by_another_writer_is_a_duplicate(
    gateway: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ladder.services import spend_batch

    real = spend_batch.current_spend_snapshot

    def another_writer_first() -> Any:
        # Between the batch's lookup of the seen ids and its insert.
        services.record_spend(
            services.SpendInput("raced", "openai-key", "openai", "gpt-4o-mini", Decimal(5))
        )
        return real()

    monkeypatch.setattr(spend_batch, "current_spend_snapshot", another_writer_first)

    body = batch(gateway, [entry("raced", 1.0), entry("mine", 1.0)]).json()

    assert (body["created"], body["duplicates"]) == (1, 1)
    assert [(r["request_id"], r["cost_usd"]) for r in body["results"]] == [
        ("raced", 5.0),
        ("mine", 1.0),
    ]
    assert SpendDayTotal.objects.aggregate(total=Sum("spent_usd"))["total"] == Decimal("6.00000000")


@pytest.mark.parametrize("budgeted", [True, False], ids=["budgeted-rung", "no-budget"])
def test_a_single_spend_report_costs_the_token_and_its_writes_only(
    gateway: str, budgeted: bool, django_assert_num_queries: Any
) -> None:
    if budgeted:
        _budget("1000000")
    api("post", "/api/v1/spend", gateway, entry("warm"))  # snapshot, connection, day total

    # PostgreSQL: the token (with the counters), the one statement (ledger row and day
    # total), then on a budgeted rung the window's sum with the config counter, on any
    # other the config counter. SQLite: the token, savepoint, insert, lock the total,
    # add, release, then the config counter, and on a budgeted rung the window's sum.
    on_postgresql = connection.vendor == "postgresql"
    expected = 3 if on_postgresql else (8 if budgeted else 7)
    with django_assert_num_queries(expected):
        response = api("post", "/api/v1/spend", gateway, entry("hot", None, input_tokens=10))

    assert (response.status_code, response.json()["rung"]) == (201, "cheap")


@pytest.mark.django_db(transaction=True)
def test_a_batch_insert_cut_by_the_statement_timeout_is_djangos_error_and_stores_nothing(
    gateway: str,
) -> None:
    if connection.vendor != "postgresql":
        pytest.skip("COPY and lock modes are PostgreSQL's")
    import psycopg
    from django.db import OperationalError

    from tests.integration.harness import database_url

    inputs = [
        services.SpendInput(f"cut-{n}", "openai-key", "openai", "gpt-4o-mini", Decimal(1))
        for n in range(3)
    ]
    # Another session holds a lock that lets the batch read the ledger but not write it.
    with psycopg.connect(database_url(), autocommit=False) as other:
        other.execute("LOCK TABLE ladder_spendentry IN SHARE MODE")
        with connection.cursor() as cursor:
            cursor.execute("SET statement_timeout = 300")
        try:
            with pytest.raises(OperationalError):  # Django's: the API answers it 503
                services.record_spend_batch(inputs)
        finally:
            with connection.cursor() as cursor:
                cursor.execute("RESET statement_timeout")
        other.rollback()

    assert (stored_ids(), SpendDayTotal.objects.count()) == ([], 0)
