"""The fast lane's side of "Caching a decision in the gateway": the `ETag` and
`Cache-Control` of each answer are the decision's own (never replayed from the answer the
headers were learned from), and `If-None-Match` of the current tag gets the endpoint's
304 from the lane, for the lane's one query."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.db import connection as db_connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ladder.models import ApiToken
from omniroute_admin.fast_lane import PoolFastLane
from tests.ladder.factories import make_candidate, make_connection, make_reading, make_token
from tests.test_fast_lane import POOL, CountingDjango, call

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
THRIFTY = "/api/v1/pools/auto/thrifty"
OWN_POOL = json.dumps(
    {"candidates": [{"provider": "claude", "model": "m", "connection_id": "claude-max-1"}]}
).encode()


@pytest.fixture
def django_app() -> Iterator[CountingDjango]:
    # As in tests/test_fast_lane.py: keep the test's transaction across requests.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield CountingDjango()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def lane(django_app: CountingDjango) -> PoolFastLane:
    return PoolFastLane(django_app)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[datetime]:
    current = [NOW]
    monkeypatch.setattr(timezone, "now", lambda: current[0])
    return current


@pytest.fixture
def gateway(clock: list[datetime]) -> str:
    """A gateway token, and a plan login read at NOW with a reset 90.5 s later, pinned by
    one candidate: the decision is valid until the reset."""
    make_connection("claude-max-1")
    make_reading(
        "claude-max-1",
        now=NOW,
        checked_at=NOW,
        remaining_percent=60.0,
        reset_at=NOW + timedelta(seconds=90, milliseconds=500),
    )
    make_candidate(connection_id="claude-max-1")
    return make_token("gw", ApiToken.Scope.GATEWAY)


def post(app: Any, token: str, **extra: Any) -> Any:
    return call(
        app, THRIFTY, token, method="post", data=OWN_POOL, content_type="application/json", **extra
    )


def test_the_lane_sends_each_decisions_own_tag_and_max_age(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str, clock: list[datetime]
) -> None:
    learned = call(lane, token=gateway)
    clock[0] = NOW + timedelta(seconds=30)

    later = call(lane, token=gateway)
    make_reading("claude-max-1", now=clock[0], checked_at=clock[0], remaining_percent=1.0)
    changed = call(lane, token=gateway)
    clock[0] = NOW + timedelta(seconds=45)
    again = call(lane, token=gateway)

    assert django_app.calls == 2  # the first request, and the first after the write
    assert learned.header("Cache-Control") == "private, max-age=90"
    assert (later.header("ETag"), later.header("Cache-Control")) == (
        learned.header("ETag"),
        "private, max-age=60",
    )
    assert changed.header("ETag") != learned.header("ETag")
    assert (again.header("ETag"), again.header("Cache-Control")) == (
        changed.header("ETag"),
        "private, max-age=165",  # the new reading's staleness, 180 s after NOW + 30 s
    )
    assert [n.lower() for n, _ in again.headers].count("etag") == 1
    assert [n.lower() for n, _ in again.headers].count("cache-control") == 1
    learned_names = {n.lower() for headers in lane.headers.values() for n, _ in headers}
    assert learned_names.isdisjoint({"etag", "cache-control", "content-length"})


def test_a_current_tag_gets_djangos_304_from_the_lane_for_one_query(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str
) -> None:
    tag = call(lane, token=gateway).header("ETag")
    from_django = call(django_app, token=gateway, HTTP_IF_NONE_MATCH=tag)
    calls = django_app.calls

    # (Counted at once: Django resets the query log at each request it handles.)
    with CaptureQueriesContext(db_connection) as captured:
        ok = call(lane, token=gateway)
    ok_queries = len(captured.captured_queries)
    with CaptureQueriesContext(db_connection) as captured:
        answer = call(lane, token=gateway, HTTP_IF_NONE_MATCH=tag)
    queries = len(captured.captured_queries)

    assert django_app.calls == calls  # both answered by the lane
    assert ok.code == 200
    assert (from_django.code, from_django.body) == (304, b"")
    assert (answer.code, answer.body) == (304, b"")
    assert sorted(answer.headers) == sorted(from_django.headers)
    assert answer.header("ETag") == tag
    assert answer.header("Cache-Control") == "private, max-age=90"
    assert answer.header("Content-Type") is None
    assert answer.header("X-Content-Type-Options") == "nosniff"
    assert (queries, ok_queries) == (1, 1)


def test_a_list_or_star_gets_the_304_and_a_stale_tag_the_body(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str
) -> None:
    first = call(lane, token=gateway)
    tag = first.header("ETag")

    listed = call(lane, token=gateway, HTTP_IF_NONE_MATCH=f'W/"old", {tag}')
    star = call(lane, token=gateway, HTTP_IF_NONE_MATCH="*")
    stale = call(lane, token=gateway, HTTP_IF_NONE_MATCH='W/"old"')

    assert (listed.code, star.code, stale.code) == (304, 304, 200)
    assert stale.body == first.body
    assert stale.header("ETag") == tag
    assert django_app.calls == 1


def test_a_repeated_post_with_its_tag_gets_a_304_from_the_lane_for_one_query(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str
) -> None:
    first = post(lane, gateway)
    tag = first.header("ETag")

    with CaptureQueriesContext(db_connection) as captured:
        answer = post(lane, gateway, HTTP_IF_NONE_MATCH=tag)
    queries = len(captured.captured_queries)
    other_tag = post(lane, gateway, HTTP_IF_NONE_MATCH=call(lane, token=gateway).header("ETag"))

    assert first.code == 200
    assert (answer.code, answer.body, answer.header("ETag")) == (304, b"", tag)
    assert queries == 1
    assert (other_tag.code, other_tag.body) == (200, first.body)
    assert django_app.calls == 2  # the first POST and the first GET


def test_a_304_counts_in_the_decision_metrics_like_a_200(lane: PoolFastLane, gateway: str) -> None:
    from ladder import metrics

    def served() -> float:
        sample = metrics.REGISTRY.get_sample_value(
            "omniroute_decisions_total", {"auto_id": "auto/subscription", "outcome": "served"}
        )
        return sample or 0.0

    tag = call(lane, path=POOL, token=gateway).header("ETag")
    before = served()
    for _ in range(2):
        call(lane, token=gateway, HTTP_IF_NONE_MATCH=tag)

    assert served() - before == 2
