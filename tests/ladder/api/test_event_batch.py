"""POST /api/v1/events/batch: up to 100 events, applied in order, each answered in its
slot; a bad entry never stops the others."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import OperationalError
from django.db import connection as db_connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from billing import services as billing_services
from ladder import services
from ladder.models import ApiToken, Connection, QuotaReading
from tests.ladder.factories import api, iso, make_connection, make_token

pytestmark = pytest.mark.django_db

PATH = "/api/v1/events/batch"


@pytest.fixture
def gateway() -> str:
    return make_token("gw", ApiToken.Scope.GATEWAY)


def _failures() -> list[tuple[str, int, bool]]:
    rows = Connection.objects.order_by("connection_id").values_list(
        "connection_id", "consecutive_failures", "cooldown_until"
    )
    return [(cid, failures, until is None) for cid, failures, until in rows]


def test_entries_are_applied_in_order_and_answered_in_their_slots(gateway: str) -> None:
    make_connection("a")
    make_connection("b")
    events = [
        {"connection_id": "a", "kind": "rate_limited", "retry_after_seconds": 30},
        {"connection_id": "ghost", "kind": "rate_limited"},
        {"connection_id": "b", "kind": "sideways", "retry_after_seconds": "soon"},
        {"connection_id": "a", "kind": "error", "retry_after_seconds": 60},
        {"connection_id": "b", "kind": "success"},
        "not an object",
    ]

    response = api("post", PATH, gateway, {"events": events})

    assert response.status_code == 200
    results = response.json()["results"]
    assert [sorted(r) for r in results] == [
        ["clamped_to_reset", "connection_id", "consecutive_failures", "cooldown_seconds",
         "cooldown_until"],
        ["error"],
        ["error"],
        ["clamped_to_reset", "connection_id", "consecutive_failures", "cooldown_seconds",
         "cooldown_until"],
        ["clamped_to_reset", "connection_id", "consecutive_failures", "cooldown_seconds",
         "cooldown_until"],
        ["error"],
    ]  # fmt: skip
    applied = [results[0], results[3], results[4]]
    assert [
        (r["connection_id"], r["consecutive_failures"], r["cooldown_seconds"]) for r in applied
    ] == [
        ("a", 1, 30.0),
        ("a", 2, 60.0),
        ("b", 0, 0.0),
    ]
    assert results[1] == {"error": "No connection 'ghost'."}
    assert results[2]["error"].startswith("Invalid event: kind: ")
    assert "retry_after_seconds: " in results[2]["error"]
    assert results[5]["error"].startswith("Invalid event: entry: ")
    assert _failures() == [("a", 2, False), ("b", 0, True)]


def test_an_unknown_field_in_an_entry_is_named_in_its_slot(gateway: str) -> None:
    make_connection("a")

    response = api(
        "post", PATH, gateway, {"events": [{"connection_id": "a", "kind": "error", "color": 1}]}
    )

    assert response.json() == {
        "results": [{"error": "Invalid event: color: Extra inputs are not permitted"}]
    }
    assert _failures() == [("a", 0, True)]


def test_more_than_100_entries_is_422_and_stores_nothing(gateway: str) -> None:
    make_connection("a")
    counters = billing_services.change_counters()
    events = [{"connection_id": "a", "kind": "error"}] * 101

    response = api("post", PATH, gateway, {"events": events})

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", "events"], "too_long")
    ]
    assert (_failures(), billing_services.change_counters()) == ([("a", 0, True)], counters)


def test_exactly_100_entries_are_accepted(gateway: str) -> None:
    make_connection("a")
    events = [{"connection_id": "a", "kind": "success"}] * 100

    response = api("post", PATH, gateway, {"events": events})

    assert (response.status_code, len(response.json()["results"])) == (200, 100)


@pytest.mark.parametrize("body", [{"events": "x"}, {"events": []}, {}, {"events": [], "x": 1}])
def test_the_scope_is_checked_before_the_body(body: dict[str, Any]) -> None:
    assert api("post", PATH, None, body).status_code == 401
    assert api("post", PATH, "not-a-token", body).status_code == 401


@pytest.mark.parametrize("body", [{"events": "x"}, {}, {"events": [], "x": 1}])
def test_a_malformed_batch_is_422(gateway: str, body: dict[str, Any]) -> None:
    assert api("post", PATH, gateway, body).status_code == 422


def test_an_empty_batch_answers_no_results(gateway: str) -> None:
    assert api("post", PATH, gateway, {"events": []}).json() == {"results": []}


def _queries(gateway: str, events: list[dict[str, Any]]) -> int:
    with CaptureQueriesContext(db_connection) as captured:
        response = api("post", PATH, gateway, {"events": events})
    assert response.status_code == 200
    return len(captured)


@pytest.mark.parametrize(
    "event",
    [
        pytest.param({"kind": "success"}, id="success-nothing-to-clear"),
        pytest.param({"kind": "error", "retry_after_seconds": 30}, id="error-same-end"),
        pytest.param({"kind": "quota_exhausted"}, id="quota-exhausted"),
        pytest.param(
            {"kind": "success", "headers": {"x-codex-primary-used-percent": "40"}},
            id="success-with-headers",
        ),
    ],
)
def test_the_query_count_per_entry_is_constant(gateway: str, event: dict[str, Any]) -> None:
    make_connection("a", provider="codex")
    one = [{"connection_id": "a", **event}]
    # The first requests load the snapshot and the token.
    _queries(gateway, one)
    _queries(gateway, one)

    counts = [_queries(gateway, one * n) for n in (1, 2, 3)]

    assert counts[2] - counts[1] == counts[1] - counts[0]


def test_a_quota_exhausted_entry_stores_its_reading(gateway: str) -> None:
    make_connection("a")

    api("post", PATH, gateway, {"events": [{"connection_id": "a", "kind": "quota_exhausted"}]})

    assert list(QuotaReading.objects.values_list("status", "source")) == [("EXHAUSTED", "event")]


def _batch_with_ids() -> list[dict[str, Any]]:
    return [
        {
            "connection_id": cid,
            "kind": "rate_limited",
            "retry_after_seconds": 600,
            "event_id": f"e{n}",
        }
        for n, cid in enumerate(("a", "b", "c", "d"))
    ]


def test_a_retried_batch_is_answered_as_then_and_doubles_nothing(gateway: str) -> None:
    for cid in "abcd":
        make_connection(cid)
    first = api("post", PATH, gateway, {"events": _batch_with_ids()}).json()
    counters = billing_services.change_counters()
    readings = QuotaReading.objects.count()

    again = api("post", PATH, gateway, {"events": _batch_with_ids()}).json()

    assert again == first
    assert [failures for _, failures, _ in _failures()] == [1, 1, 1, 1]
    assert (billing_services.change_counters(), QuotaReading.objects.count()) == (
        counters,
        readings,
    )


def test_a_batch_cut_by_a_fault_applies_nothing_and_its_retry_everything_once(
    gateway: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for cid in "abcd":
        make_connection(cid)
    real = services.apply_event
    calls = []

    def cut_at_the_third(*args: Any, **kwargs: Any) -> Any:
        calls.append(args[0])
        if len(calls) == 3:
            raise OperationalError("the database went away")
        return real(*args, **kwargs)

    monkeypatch.setattr(services, "apply_event", cut_at_the_third)
    cut = api("post", PATH, gateway, {"events": _batch_with_ids()})
    monkeypatch.setattr(services, "apply_event", real)
    applied_by_the_cut = [failures for _, failures, _ in _failures()]

    retried = api("post", PATH, gateway, {"events": _batch_with_ids()})

    assert (cut.status_code, applied_by_the_cut) == (503, [0, 0, 0, 0])
    assert retried.status_code == 200
    assert [r["consecutive_failures"] for r in retried.json()["results"]] == [1, 1, 1, 1]
    assert [failures for _, failures, _ in _failures()] == [1, 1, 1, 1]


def test_an_event_id_over_128_characters_is_refused_in_its_slot(gateway: str) -> None:
    make_connection("a")
    events = [{"connection_id": "a", "kind": "error", "event_id": "x" * 129}]

    results = api("post", PATH, gateway, {"events": events}).json()["results"]

    assert results == [
        {"error": "Invalid event: event_id: String should have at most 128 characters"}
    ]
    assert _failures() == [("a", 0, True)]


def test_entries_apply_in_the_order_observed_a_late_success_clears_nothing(gateway: str) -> None:
    make_connection("a", provider="codex")
    exhausted_at = timezone.now() - timedelta(seconds=90)
    events = [
        {"connection_id": "a", "kind": "quota_exhausted", "observed_at": iso(exhausted_at)},
        {
            "connection_id": "a",
            "kind": "success",
            "observed_at": iso(exhausted_at - timedelta(seconds=30)),
            "headers": {"x-codex-primary-used-percent": "40"},
        },
    ]

    results = api("post", PATH, gateway, {"events": events}).json()["results"]

    assert [r["consecutive_failures"] for r in results] == [1, 1]
    # The success's headers are kept as history; the exhaustion stays current.
    assert list(QuotaReading.objects.order_by("pk").values_list("status", flat=True)) == [
        "EXHAUSTED",
        "SAFE",
    ]
    connection = Connection.objects.get()
    assert connection.current_reading is not None
    assert connection.current_reading.status == "EXHAUSTED"
