"""A live poll of an unchanged page costs a 304 with no body: each page and fragment has a
strong ETag of its bytes (ages and countdowns are told by the browser, so they do not
move the bytes), kept privately and revalidated on every poll; a change answers 200 with
the new content; an ETag never answers for another user; a 304 runs no more queries
than the 200 it replaces."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import cast

import pytest
from django.db import connection
from django.http import HttpResponse
from django.test import Client
from django.test.utils import CaptureQueriesContext

from ladder import services
from omniroute_admin import dashboard
from tests.ladder.factories import NOW, make_reading
from tests.pages import parse
from tests.worlds import htmx_headers, make_user, seed_demo_world

pytestmark = pytest.mark.django_db

# Each live part: its poll's URL (as the page's hx-get writes it) and its element id.
POLLS = {
    "candidates": ("/candidates/?page=1", "candidates-table"),
    "connections": ("/connections/?page=1", "connections-table"),
    "connection": ("/connections/claude-max-1/", "connection-status"),
    "overview": ("/", "ladder-status"),
}
# Polls 7 s apart within one minute (the connection's chart and the forecasts' "about
# 3 min ago" move once a minute).
FIRST_POLL = NOW + timedelta(seconds=1)
SECOND_POLL = NOW + timedelta(seconds=8)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[datetime], None]:
    """Sets the dashboard's `now`."""

    def set_now(now: datetime) -> None:
        monkeypatch.setattr(dashboard, "current_time", lambda: now)

    set_now(FIRST_POLL)
    return set_now


@pytest.fixture
def world() -> None:
    seed_demo_world(NOW, history=False)


def _client(username: str, role: str) -> Client:
    client = Client()
    client.force_login(make_user(username, role))
    return client


def _poll(client: Client, name: str, etag: str | None = None) -> HttpResponse:
    """The live part's poll, as htmx sends it (with the kept ETag, as the browser does)."""
    url, target = POLLS[name]
    headers = htmx_headers(target)
    if etag is not None:
        headers["If-None-Match"] = etag
    return cast(HttpResponse, client.get(url, headers=headers))


@pytest.mark.parametrize("name", list(POLLS))
def test_a_second_poll_of_an_unchanged_page_answers_304_with_no_body(
    world: None, clock: Callable[[datetime], None], name: str
) -> None:
    operator = _client("olga", "operator")
    first = _poll(operator, name)
    clock(SECOND_POLL)

    second = _poll(operator, name, first["ETag"])

    assert (first.status_code, second.status_code, second.content) == (200, 304, b"")
    assert second["ETag"] == first["ETag"]


@pytest.mark.parametrize("name", list(POLLS))
def test_a_poll_after_a_new_reading_answers_200_with_the_new_content(
    world: None, clock: Callable[[datetime], None], name: str
) -> None:
    operator = _client("olga", "operator")
    first = _poll(operator, name)
    make_reading("claude-max-1", remaining_percent=0.5, now=NOW)
    clock(SECOND_POLL)

    second = _poll(operator, name, first["ETag"])

    assert second.status_code == 200
    assert second["ETag"] != first["ETag"]
    assert "0.5 % left" in second.content.decode()
    assert "0.5 % left" not in first.content.decode()
    # What it answered is the page as it is now: the next poll is a 304 again.
    assert _poll(operator, name, second["ETag"]).status_code == 304


def test_a_poll_after_a_settings_change_answers_200_with_the_new_content(
    world: None, clock: Callable[[datetime], None]
) -> None:
    operator = _client("olga", "operator")
    first = _poll(operator, "connection")
    values, _ = services.effective_settings_of(services.get_settings_row())
    services.update_settings({**values, "exit_cutoff_percent": 3.0}, actor="olga")

    second = _poll(operator, "connection", first["ETag"])

    assert second.status_code == 200
    assert "Exit at or below 3 %" in second.content.decode()
    assert "Exit at or below 2 %" in first.content.decode()


def test_a_poll_is_kept_privately_and_revalidated_every_time(
    world: None, clock: Callable[[datetime], None]
) -> None:
    response = _poll(_client("olga", "operator"), "candidates")

    assert response["Cache-Control"] == "no-cache, private"
    assert response["Vary"] == "HX-Request, Cookie, Accept-Encoding"
    assert (response["ETag"][0], response["ETag"][-1], len(response["ETag"])) == ('"', '"', 42)


@pytest.mark.parametrize("name", list(POLLS))
def test_an_etag_never_answers_for_another_user(
    world: None, clock: Callable[[datetime], None], name: str
) -> None:
    operator = _client("olga", "operator")
    viewer = _client("victor", "viewer")
    other_viewer = _client("vera", "viewer")
    seen_by_viewer = _poll(viewer, name)["ETag"]

    for client in (operator, other_viewer):
        answer = _poll(client, name, seen_by_viewer)

        assert answer.status_code == 200
        assert answer["ETag"] != seen_by_viewer


@pytest.mark.parametrize("name", list(POLLS))
def test_another_user_signing_in_in_the_same_browser_is_never_answered_304(
    world: None, clock: Callable[[datetime], None], name: str
) -> None:
    browser = _client("olga", "operator")
    kept = _poll(browser, name)["ETag"]
    # The same cookie jar (the same CSRF cookie), another user.
    browser.force_login(make_user("victor", "viewer"))

    answer = _poll(browser, name, kept)

    assert answer.status_code == 200
    assert answer["ETag"] != kept


def test_the_forms_csrf_tokens_do_not_defeat_the_etag(
    world: None, clock: Callable[[datetime], None]
) -> None:
    operator = _client("olga", "operator")
    first = _poll(operator, "connections")
    second = _poll(operator, "connections")

    tokens = [
        response.content.decode().count('name="csrfmiddlewaretoken"')
        for response in (first, second)
    ]
    # Each render masks the token afresh (the bytes differ), the ETag is the same.
    assert tokens == [4, 4]
    assert first.content != second.content
    assert second["ETag"] == first["ETag"]


@pytest.mark.parametrize("name", list(POLLS))
def test_a_304_runs_no_more_queries_than_the_200(
    world: None, clock: Callable[[datetime], None], name: str
) -> None:
    operator = _client("olga", "operator")
    etag = _poll(operator, name)["ETag"]

    counts = []
    for conditional in (None, etag):
        with CaptureQueriesContext(connection) as captured:
            answer = _poll(operator, name, conditional)
        counts.append((answer.status_code, len(captured.captured_queries)))

    assert [status for status, _ in counts] == [200, 304]
    assert counts[1][1] == counts[0][1]


def test_the_page_says_when_it_was_drawn_and_a_poll_leaves_that_to_the_browser(
    world: None, clock: Callable[[datetime], None]
) -> None:
    operator = _client("olga", "operator")

    page = parse(operator.get("/candidates/").content).by_class("updated")[0]
    fragment = parse(_poll(operator, "candidates").content).by_class("updated")[0]

    assert (page.text, page.by_tag("time")[0].attrs) == (
        "Live: updated 12:00:01 UTC · reload",
        {"datetime": "2026-11-29T12:00:01Z", "data-polled-at": None},
    )
    # dashboard.js writes the time each answer came, a 304's included.
    assert (fragment.text, fragment.by_tag("time")[0].attrs) == (
        "Live: updated now · reload",
        {"data-polled-at": None},
    )
