"""The pool fast lane (omniroute_admin/fast_lane.py): cached pool decisions answered in
front of Django, with Django's own bytes and headers, and everything else left to Django."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.core.signals import request_finished, request_started
from django.db import OperationalError, close_old_connections
from django.db import connection as db_connection
from django.test import RequestFactory
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from ladder import metrics, tokens
from ladder.models import ApiToken
from omniroute_admin import fast_lane
from omniroute_admin.errors import DATABASE_DOWN as UNAVAILABLE_DETAIL
from omniroute_admin.errors import DATABASE_SLOW as DETAIL
from omniroute_admin.fast_lane import MAX_SHAPES, PoolFastLane
from tests.ladder.factories import make_candidate, make_connection, make_reading, make_token

pytestmark = pytest.mark.django_db

POOL = "/api/v1/pools/auto/subscription"


class CountingDjango:
    """Django's handler, counting the requests that reach it (a new handler reads the
    settings of the moment: middleware read theirs when loaded)."""

    def __init__(self) -> None:
        self.calls = 0
        self.handler = WSGIHandler()

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        self.calls += 1
        return self.handler(environ, start_response)


class Answer:
    def __init__(self, status: str, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    @property
    def code(self) -> int:
        return int(self.status.split()[0])

    def header(self, name: str) -> str | None:
        return next((v for n, v in self.headers if n.lower() == name.lower()), None)


def call(app: Any, path: str = POOL, token: str | None = None, **extra: Any) -> Answer:
    """One request through a WSGI app, as a server would make it."""
    method = extra.pop("method", "get")
    if token is not None:
        extra["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    environ = getattr(RequestFactory(), method)(path, **extra).environ
    started: list[Any] = []
    result = app(environ, lambda status, headers, exc_info=None: started.append((status, headers)))
    try:
        body = b"".join(result)
    finally:
        getattr(result, "close", lambda: None)()
    status, headers = started[0]
    return Answer(status, list(headers), body)


def without_connection_closing() -> Iterator[CountingDjango]:
    """A counting Django handler for a test's duration. Django's handler closes the
    database connection at request start and end, which would close the test's own
    transaction; its test client disconnects these too."""
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    try:
        yield CountingDjango()
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


@pytest.fixture
def django_app() -> Iterator[CountingDjango]:
    yield from without_connection_closing()


@pytest.fixture
def lane(django_app: CountingDjango) -> PoolFastLane:
    return PoolFastLane(django_app)


@pytest.fixture
def gateway() -> str:
    return make_token("gw", ApiToken.Scope.GATEWAY)


@pytest.fixture
def plan() -> None:
    """One plan login with a fresh reading, pinned by one candidate: a non-empty pool."""
    make_connection("claude-max-1")
    now = timezone.now()
    make_reading("claude-max-1", now=now, checked_at=now, remaining_percent=60.0)
    make_candidate(connection_id="claude-max-1")


def served(django_app: CountingDjango, before: int) -> str:
    return "django" if django_app.calls > before else "lane"


@pytest.mark.usefixtures("plan")
def test_a_cached_pool_is_answered_by_the_lane_with_djangos_bytes_and_headers(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str
) -> None:
    first = call(lane, token=gateway)
    second = call(lane, token=gateway)
    third = call(lane, token=gateway)

    assert django_app.calls == 1
    assert (first.code, second.code, third.code) == (200, 200, 200)
    assert second.body == first.body
    assert sorted(second.headers) == sorted(first.headers)
    assert second.header("Content-Length") == str(len(first.body))
    assert second.header("X-Frame-Options") == "DENY"
    assert second.header("X-Content-Type-Options") == "nosniff"
    assert second.header("Content-Security-Policy") is not None
    assert [c["connection_id"] for c in json.loads(second.body)["candidates"]] == ["claude-max-1"]


@pytest.mark.usefixtures("plan")
@pytest.mark.parametrize("size", [1, 200])
def test_the_lane_runs_one_query_whatever_the_pool_size(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str, size: int
) -> None:
    for index in range(1, size):
        make_candidate(model=f"model-{index}", connection_id="claude-max-1")
    call(lane, token=gateway)

    with CaptureQueriesContext(db_connection) as captured:
        answer = call(lane, token=gateway)

    assert served(django_app, 1) == "lane"
    assert answer.code == 200
    assert len(captured.captured_queries) == 1, captured.captured_queries


@pytest.mark.usefixtures("plan")
def test_a_write_is_seen_by_the_next_request(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str
) -> None:
    before = call(lane, token=gateway)
    call(lane, token=gateway)
    now = timezone.now()
    make_reading("claude-max-1", now=now, checked_at=now, remaining_percent=1.0)

    after = call(lane, token=gateway)
    again = call(lane, token=gateway)

    assert json.loads(before.body)["candidates"] != []
    assert json.loads(after.body)["candidates"] == []
    assert django_app.calls == 2  # the write sent one request to Django, then the lane again
    assert again.body == after.body


@pytest.mark.usefixtures("plan")
def test_a_revoked_token_is_refused_by_django_every_time(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str
) -> None:
    call(lane, token=gateway)
    tokens.revoke_token(ApiToken.objects.get(name="gw").pk)

    answers = [call(lane, token=gateway) for _ in range(2)]

    assert [a.code for a in answers] == [401, 401]
    assert django_app.calls == 3


@pytest.mark.usefixtures("plan")
@pytest.mark.parametrize(
    ("path", "token", "code"),
    [
        (POOL, "omr_unknown", 401),
        ("/api/v1/pools/auto/nothing", None, 404),
        ("/api/v1/pools/auto/unknowncategory:thrifty", None, 404),
    ],
)
def test_what_the_lane_cannot_answer_gets_djangos_answer(
    lane: PoolFastLane,
    django_app: CountingDjango,
    gateway: str,
    path: str,
    token: str | None,
    code: int,
) -> None:
    call(lane, token=gateway)

    answers = [call(lane, path, token or gateway) for _ in range(2)]

    assert [a.code for a in answers] == [code, code]
    assert django_app.calls == 3


@pytest.mark.usefixtures("plan")
def test_an_operator_token_is_served_too(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str
) -> None:
    operator = make_token("ops", ApiToken.Scope.OPERATOR)
    first = call(lane, token=gateway)

    answer = call(lane, token=operator)

    assert (answer.code, answer.body) == (200, first.body)
    assert django_app.calls == 1


@pytest.mark.usefixtures("plan")
@pytest.mark.parametrize(
    "extra",
    [
        {"method": "post", "data": b"{}", "content_type": "application/json"},
        {"method": "head"},
        {"HTTP_AUTHORIZATION": "bearer lowercase"},
    ],
)
def test_other_methods_and_headers_go_to_django(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str, extra: dict[str, Any]
) -> None:
    call(lane, token=gateway)

    call(lane, **extra)

    assert django_app.calls == 2


@pytest.mark.usefixtures("plan")
def test_a_refused_host_is_never_learned(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str
) -> None:
    answers = [call(lane, token=gateway, HTTP_HOST="evil.example") for _ in range(2)]

    assert [a.code for a in answers] == [400, 400]
    assert django_app.calls == 2


@pytest.mark.usefixtures("plan")
def test_the_ssl_redirect_is_never_skipped_and_hsts_is_replayed(
    gateway: str, settings: Any, request: pytest.FixtureRequest
) -> None:
    settings.SECURE_SSL_REDIRECT = True
    settings.SECURE_HSTS_SECONDS = 3600
    django_app = request.getfixturevalue("django_app")
    lane = PoolFastLane(django_app)

    plain = [call(lane, token=gateway) for _ in range(2)]
    secure = [call(lane, token=gateway, secure=True) for _ in range(2)]

    assert [a.code for a in plain] == [301, 301]
    assert [a.code for a in secure] == [200, 200]
    assert secure[1].header("Strict-Transport-Security") == "max-age=3600"
    assert django_app.calls == 3


@pytest.mark.usefixtures("plan")
def test_the_learned_request_shapes_are_bounded(
    lane: PoolFastLane, gateway: str, settings: Any
) -> None:
    settings.ALLOWED_HOSTS = ["*"]

    for index in range(MAX_SHAPES + 5):
        assert call(lane, token=gateway, HTTP_HOST=f"host-{index}.example").code == 200

    assert len(lane.headers) == MAX_SHAPES


@pytest.mark.usefixtures("plan")
def test_a_request_shape_with_oversized_values_is_never_learned(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str, settings: Any
) -> None:
    # 64 shapes of 8 KB proxy headers each would be half a megabyte kept for good.
    settings.ALLOWED_HOSTS = ["*"]
    long_host = "h" * 200 + ".example"
    oversized = {"HTTP_HOST": long_host, "HTTP_X_FORWARDED_PROTO": "x" * 2000}

    answers = [call(lane, token=gateway, **oversized) for _ in range(3)]

    assert [a.code for a in answers] == [200, 200, 200]
    assert django_app.calls == 3  # every one answered by Django, none by the lane
    assert lane.headers == {}
    assert call(lane, token=gateway, HTTP_HOST=long_host).code == 200
    assert len(lane.headers) == 1  # a long but plausible host is still learned


@pytest.mark.usefixtures("plan")
def test_a_database_error_in_the_lane_is_a_json_503(lane: PoolFastLane, gateway: str) -> None:
    call(lane, token=gateway)

    def fail(*args: Any) -> None:
        raise OperationalError("server closed the connection unexpectedly")

    with db_connection.execute_wrapper(fail):
        answer = call(lane, token=gateway)

    assert answer.code == 503
    assert answer.body == b'{"detail": "' + UNAVAILABLE_DETAIL.encode() + b'"}'
    assert answer.header("Retry-After") == "1"
    assert answer.header("Content-Type") == "application/json; charset=utf-8"
    assert answer.header("X-Content-Type-Options") == "nosniff"


@pytest.mark.usefixtures("plan")
def test_lane_answers_count_in_the_decision_metrics(lane: PoolFastLane, gateway: str) -> None:
    def served_count() -> float:
        value = metrics.REGISTRY.get_sample_value(
            "omniroute_decisions_total",
            {"auto_id": "auto/subscription", "outcome": "served"},
        )
        return value or 0.0

    before = served_count()
    for _ in range(3):
        call(lane, token=gateway)

    assert served_count() - before == 3


@pytest.fixture
def stuck_lookup(monkeypatch: pytest.MonkeyPatch) -> Iterator[threading.Event]:
    """The lane's lookup blocked until the test ends, as on a hung database."""
    release = threading.Event()

    def lookup(auto_id: str, secret: str, post_key: Any = None, tags: Any = None) -> None:
        release.wait(timeout=30)
        return None

    monkeypatch.setattr(fast_lane, "cached_pool_answer", lookup)
    yield release
    release.set()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("plan")
def test_a_hung_lookup_is_a_json_503_at_the_deadline(
    lane: PoolFastLane, gateway: str, settings: Any, request: pytest.FixtureRequest
) -> None:
    call(lane, token=gateway)  # learns the headers through Django
    settings.API_REQUEST_DEADLINE_SECONDS = 0.2
    request.getfixturevalue("stuck_lookup")

    answer = call(lane, token=gateway)

    assert answer.code == 503
    assert answer.body == b'{"detail": "' + DETAIL.encode() + b'"}'
    assert answer.header("Retry-After") == "1"


def post(app: Any, body: Any, token: str, **extra: Any) -> Answer:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    extra.setdefault("content_type", "application/json")
    return call(app, "/api/v1/pools/auto/thrifty", token, method="post", data=data, **extra)


def own_pool(size: int) -> dict[str, Any]:
    return {
        "candidates": [
            {
                "id": index,
                "provider": "claude",
                "model": f"model-{index}",
                "allowed_connection_ids": ["claude-max-1", f"key-{index}"],
            }
            for index in range(size)
        ]
    }


@pytest.mark.usefixtures("plan")
@pytest.mark.parametrize("size", [1, 200])
def test_a_repeated_pool_post_is_answered_by_the_lane_for_one_query(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str, size: int
) -> None:
    first = post(lane, own_pool(size), gateway)
    post(lane, own_pool(size), gateway)

    with CaptureQueriesContext(db_connection) as captured:
        answer = post(lane, own_pool(size), gateway)

    assert django_app.calls == 1
    assert (first.code, answer.code) == (200, 200)
    assert answer.body == first.body
    assert sorted(answer.headers) == sorted(first.headers)
    assert len(json.loads(answer.body)["candidates"]) == 2 * size  # a plan and a key each
    assert len(captured.captured_queries) == 1, captured.captured_queries


@pytest.mark.usefixtures("plan")
def test_a_different_post_body_goes_to_django(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str
) -> None:
    post(lane, own_pool(2), gateway)
    post(lane, own_pool(2), gateway)
    reordered = {"candidates": list(reversed(own_pool(2)["candidates"]))}

    answer = post(lane, reordered, gateway)
    spaced = post(lane, json.dumps(own_pool(2), indent=1).encode(), gateway)

    assert [c["id"] for c in json.loads(answer.body)["candidates"]] == [1, 0, 1, 0]
    assert spaced.code == 200
    assert django_app.calls == 3


@pytest.mark.usefixtures("plan")
@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"candidates": [{"provider": "claude"}]}', 422),
        (b"{not json", 400),
        (b"x" * 6_000_000, 413),
    ],
)
def test_a_refused_post_is_refused_by_django_every_time(
    lane: PoolFastLane, django_app: CountingDjango, gateway: str, body: bytes, code: int
) -> None:
    post(lane, own_pool(1), gateway)

    answers = [post(lane, body, gateway) for _ in range(2)]

    assert [a.code for a in answers] == [code, code]
    assert django_app.calls == 3
