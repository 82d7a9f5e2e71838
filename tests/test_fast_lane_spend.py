"""POST /api/v1/spend in the fast lane (omniroute_admin/fast_lane.py): a good report is
recorded in front of Django with Django's own headers and bytes; everything else (a bad
token, a bad body, the first report of a request shape) gets Django's answer."""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from django.db import OperationalError
from django.db import connection as db_connection
from django.test.utils import CaptureQueriesContext

from billing import services as billing_services
from ladder.models import ApiToken, SpendEntry
from ladder.tokens import revoke_token
from omniroute_admin.deadline import UNAVAILABLE_DETAIL
from omniroute_admin.fast_lane import PoolFastLane
from tests.ladder.factories import make_connection, make_token
from tests.test_fast_lane import Answer, CountingDjango, served, without_connection_closing
from tests.test_fast_lane import call as call_app

pytestmark = pytest.mark.django_db

SPEND = "/api/v1/spend"


@pytest.fixture(autouse=True)
def key() -> None:
    make_connection("openai-key", provider="openai", auth_type="apikey")
    billing_services.upsert_price(
        billing_services.PriceInput("openai", "gpt-4o-mini", Decimal("0.15"), Decimal("0.6"), None),
        actor="t",
    )


@pytest.fixture
def gateway() -> str:
    return make_token("gw", ApiToken.Scope.GATEWAY)


@pytest.fixture
def django_app() -> Iterator[CountingDjango]:
    yield from without_connection_closing()


@pytest.fixture
def lane(django_app: CountingDjango) -> PoolFastLane:
    return PoolFastLane(django_app)


def revoked_token() -> str:
    secret = make_token("old", ApiToken.Scope.GATEWAY)
    revoke_token(ApiToken.objects.get(name="old").pk)
    return secret


def report(request_id: str, **fields: Any) -> dict[str, Any]:
    return {
        "request_id": request_id,
        "connection_id": "openai-key",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "cost_usd": None,
        "input_tokens": 1_000_000,
        "output_tokens": 0,
        **fields,
    }


def post(app: Any, token: str | None, body: Any, **extra: Any) -> Answer:
    data = body if isinstance(body, (bytes, str)) else json.dumps(body)
    extra.setdefault("content_type", "application/json")
    return call_app(app, SPEND, token, method="post", data=data, **extra)


def test_a_good_report_is_recorded_by_the_lane_with_djangos_headers_and_body_shape(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str
) -> None:
    at = "2026-12-01T10:00:00Z"
    first = post(lane, gateway, report("r1", occurred_at=at))  # Django: the shape is learned
    before = django_app.calls
    second = post(lane, gateway, report("r2", occurred_at=at))
    again = post(lane, gateway, report("r2", occurred_at=at))  # a repeat: 200 with the stored entry

    assert (first.code, second.code, again.code, served(django_app, before)) == (
        201,
        201,
        200,
        "lane",
    )
    assert sorted(n for n, _ in second.headers) == sorted(n for n, _ in first.headers)
    assert second.header("Content-Length") == str(len(second.body))
    assert second.header("X-Content-Type-Options") == "nosniff"
    assert json.loads(second.body) == {**json.loads(first.body), "request_id": "r2"}
    assert again.body == second.body
    assert list(
        SpendEntry.objects.order_by("request_id").values_list("request_id", "cost_usd")
    ) == [
        ("r1", Decimal("0.15000000")),
        ("r2", Decimal("0.15000000")),
    ]


def test_the_lanes_body_is_the_endpoints_byte_for_byte(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str
) -> None:
    post(lane, gateway, report("warm"))
    by_lane = post(lane, gateway, report("r1", occurred_at="2026-12-01T10:00:00.123456Z"))
    by_django = post(django_app, gateway, report("r1"))  # the same id: Django's 200

    assert (by_lane.code, by_django.code) == (201, 200)
    assert by_lane.body == by_django.body
    assert json.loads(by_lane.body)["occurred_at"] == "2026-12-01T10:00:00.123Z"


def test_a_report_costs_the_lane_the_token_and_the_writes_only(
    lane: PoolFastLane, gateway: str
) -> None:
    post(lane, gateway, report("warm"))

    with CaptureQueriesContext(db_connection) as queries:
        answer = post(lane, gateway, report("hot"))

    # PostgreSQL: the token (with the counters) and the one statement; SQLite: the
    # token, savepoint, insert, lock the day's total, add, release.
    assert (answer.code, len(queries)) == (
        201,
        2 if db_connection.vendor == "postgresql" else 6,
    )


@pytest.mark.parametrize(
    ("token_scope", "body", "code"),
    [
        ("none", report("x"), 401),
        ("revoked", report("x"), 401),
        ("gateway", report("x", cost_usd=-1), 422),
        ("gateway", report("x", occurred_at="2020-01-01T00:00:00Z"), 422),
        ("gateway", {"request_id": "x"}, 422),
        ("gateway", b"{not json", 400),
    ],
)
def test_what_the_lane_cannot_record_gets_djangos_answer_and_writes_nothing(
    lane: PoolFastLane,
    django_app: CountingDjango,
    gateway: str,
    token_scope: str,
    body: Any,
    code: int,
) -> None:
    post(lane, gateway, report("warm"))
    tokens = {
        "none": "omr_unknown",
        "revoked": revoked_token(),
        "gateway": gateway,
    }
    before = django_app.calls
    direct = post(django_app, tokens[token_scope], body)
    calls = django_app.calls

    answer = post(lane, tokens[token_scope], body)

    assert (answer.code, direct.code, django_app.calls - calls) == (code, code, 1)
    assert answer.body == direct.body
    assert django_app.calls - before == 2
    assert list(SpendEntry.objects.values_list("request_id", flat=True)) == ["warm"]


def test_an_operator_token_records_spend_in_the_lane_too(
    lane: PoolFastLane, django_app: CountingDjango
) -> None:
    operator = make_token("op", ApiToken.Scope.OPERATOR)
    post(lane, operator, report("warm"))
    before = django_app.calls

    answer = post(lane, operator, report("r1"))

    assert (answer.code, served(django_app, before)) == (201, "lane")


def test_a_body_that_is_not_json_by_its_content_type_goes_to_django(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str
) -> None:
    post(lane, gateway, report("warm"))
    before = django_app.calls

    post(lane, gateway, report("r1"), content_type="text/plain")

    assert served(django_app, before) == "django"


def test_a_database_error_in_the_spend_lane_is_a_json_503_and_a_retry_records_once(
    lane: PoolFastLane, gateway: str
) -> None:
    post(lane, gateway, report("warm"))

    def fail(*args: Any) -> None:
        raise OperationalError("server closed the connection unexpectedly")

    with db_connection.execute_wrapper(fail):
        answer = post(lane, gateway, report("r1"))
    retried = post(lane, gateway, report("r1"))

    assert answer.code == 503
    assert answer.body == b'{"detail": "' + UNAVAILABLE_DETAIL.encode() + b'"}'
    assert answer.header("Retry-After") == "1"
    assert retried.code == 201
    assert SpendEntry.objects.filter(request_id="r1").count() == 1


# Far past the interpreter's recursion limit: json.loads raises RecursionError (not a
# ValueError) on either kind of nesting.
DEEP_BODIES = [
    pytest.param(b"[" * 5000 + b"]" * 5000, id="arrays"),
    pytest.param(b'{"a":' * 5000 + b"1" + b"}" * 5000, id="objects"),
]


@pytest.mark.parametrize("body", DEEP_BODIES)
def test_a_deeply_nested_spend_body_is_djangos_json_400_in_the_lane_and_writes_nothing(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str, body: bytes
) -> None:
    post(lane, gateway, report("warm"))  # the shape is learned: the lane reads the body
    before = django_app.calls

    answer = post(lane, gateway, body)

    assert (answer.code, django_app.calls - before) == (400, 1)
    assert answer.header("Content-Type") == "application/json; charset=utf-8"
    assert json.loads(answer.body) == {"detail": "Cannot parse request body"}
    assert list(SpendEntry.objects.values_list("request_id", flat=True)) == ["warm"]
