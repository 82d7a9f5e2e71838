"""One answer, one builder: the same requests through Django alone and through the pool
fast lane in front of it get byte-identical status, headers and body (a good pool read,
its 304, an unknown and a revoked token, the database down, under a path prefix)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.db import OperationalError
from django.db import connection as db_connection
from django.utils import timezone

from ladder.models import ApiToken
from ladder.tokens import revoke_token
from omniroute_admin.fast_lane import PoolFastLane
from tests.ladder.factories import make_candidate, make_connection, make_reading, make_token
from tests.test_fast_lane import Answer, CountingDjango, call, without_connection_closing

pytestmark = pytest.mark.django_db

POOL = "/api/v1/pools/auto/subscription"


@pytest.fixture
def django_app() -> Iterator[CountingDjango]:
    yield from without_connection_closing()


@pytest.fixture
def lane(django_app: CountingDjango) -> PoolFastLane:
    return PoolFastLane(django_app)


@pytest.fixture
def gateway() -> str:
    make_connection("claude-max-1")
    now = timezone.now()
    make_reading("claude-max-1", now=now, checked_at=now, remaining_percent=60.0)
    make_candidate(connection_id="claude-max-1")
    return make_token("gw", ApiToken.Scope.GATEWAY)


def both(
    lane: PoolFastLane, django_app: CountingDjango, token: str | None, **extra: Any
) -> tuple[Answer, Answer, bool]:
    """The same request through the lane (its shape learned first) and through Django
    alone; whether the lane answered it itself."""
    call(lane, POOL, token, **{k: v for k, v in extra.items() if k != "HTTP_IF_NONE_MATCH"})
    before = django_app.calls
    through_lane = call(lane, POOL, token, **extra)
    lane_answered = django_app.calls == before
    return through_lane, call(django_app, POOL, token, **extra), lane_answered


def assert_identical(first: Answer, second: Answer) -> None:
    assert first.status == second.status
    assert sorted(first.headers) == sorted(second.headers)
    assert first.body == second.body


def test_a_cached_pool_read_is_the_same_bytes_on_both_roads(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str
) -> None:
    through_lane, through_django, lane_answered = both(lane, django_app, gateway)

    assert (through_lane.code, lane_answered) == (200, True)
    assert_identical(through_lane, through_django)


def test_a_304_is_the_same_on_both_roads(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str
) -> None:
    tag = call(django_app, POOL, gateway).header("ETag")

    through_lane, through_django, lane_answered = both(
        lane, django_app, gateway, HTTP_IF_NONE_MATCH=tag
    )

    assert (through_lane.code, lane_answered) == (304, True)
    assert_identical(through_lane, through_django)


def test_an_unknown_and_a_revoked_token_get_the_same_401(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str
) -> None:
    old = make_token("old", ApiToken.Scope.GATEWAY)
    revoke_token(ApiToken.objects.get(name="old").pk)
    call(lane, POOL, gateway)  # the shape is learned

    for token in ("omr_not-a-token", old):
        through_lane = call(lane, POOL, token)
        through_django = call(django_app, POOL, token)

        assert through_lane.code == 401
        assert_identical(through_lane, through_django)


def test_the_database_down_is_the_same_json_503_on_both_roads(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str
) -> None:
    call(lane, POOL, gateway)  # the shape is learned

    def fail(*args: Any) -> None:
        raise OperationalError("server closed the connection unexpectedly")

    with db_connection.execute_wrapper(fail):
        before = django_app.calls
        through_lane = call(lane, POOL, gateway)
        lane_answered = django_app.calls == before
        through_django = call(django_app, POOL, gateway)

    assert (through_lane.code, lane_answered) == (503, True)
    assert through_lane.header("Content-Type") == "application/json; charset=utf-8"
    assert through_lane.header("X-Frame-Options") == "DENY"
    assert_identical(through_lane, through_django)


@pytest.mark.usefixtures("restored_script_prefix")
def test_under_a_path_prefix_both_roads_answer_alike(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str
) -> None:
    through_lane, through_django, _ = both(lane, django_app, gateway, SCRIPT_NAME="/omr")

    assert through_lane.code == 200
    assert_identical(through_lane, through_django)
