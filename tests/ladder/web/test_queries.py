"""Pages run a fixed number of queries, the same on the demo world and with 500 more
connections; and the pools page's decisions are exactly the API's."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from ladder import services
from ladder.core import parse_auto_id
from omniroute_admin import dashboard
from tests.ladder.factories import NOW
from tests.worlds import grow_world, seed_demo_world, signed_in

pytestmark = pytest.mark.django_db

# Queries each page runs itself: the session (read, and saved by the idle-timeout
# middleware in a savepoint) and the signed-in user belong to the middleware and are not
# counted (see `page_queries`).
PAGE_QUERIES = {
    "/": 11,  # the beat heartbeat; the forecasts: newest readings, catalog, ledger pace
    "/connections/": 13,  # the published decisions: where each connection stands
    # the same, the candidates naming it, settings changes; its forecast: its newest
    # readings, the ledger's paid pace, the budget window's spend; forecast against outcome
    "/connections/claude-max-1/": 20,
    "/connections/?state=in-play&rung=subscription&sort=-quota&q=a": 12,  # whole, no count
    "/candidates/": 11,  # and the registered connection ids the add form offers
    "/candidates/?q=claude&page=2": 11,
    "/pools/": 7,
    "/pools/?auto_id=auto/thrifty": 7,
    # the settings, the day totals, the breakdown's totals, connections, models and tokens,
    # and the plans' windows that reset in the period
    "/spend/": 8,
    "/catalog/": 4,
    "/prices/": 5,
    "/settings/": 5,
    "/tokens/": 2,
    "/notifications/": 3,
    # types, actors, count, page, and whether the linked objects exist (a query per
    # linked type on the page: the world's connections and candidates among them)
    "/audit/": 9,
    # the role, the latest run, the latest successful one; the ledger replay panel's newest
    # replay, and the plan seats its form offers (the catalog, the active connections)
    "/reports/simulation/": 6,
}
SESSION_OR_USER = re.compile(
    r'"django_session"|FROM "auth_user" WHERE "auth_user"\."id" =|^(RELEASE )?SAVEPOINT'
)


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


def page_queries(client: Client, url: str) -> int:
    """Queries of one warm request to `url`, without the session and user lookups."""
    assert client.get(url).status_code == 200
    with CaptureQueriesContext(connection) as captured:
        response = client.get(url)
    assert response.status_code == 200
    return sum(1 for query in captured.captured_queries if not SESSION_OR_USER.search(query["sql"]))


def test_query_counts_of_every_page_on_the_demo_world(client: Client) -> None:
    seed_demo_world(NOW, history=False)
    signed_in(client, "olga", "operator")

    counts = {url: page_queries(client, url) for url in PAGE_QUERIES}

    assert counts == PAGE_QUERIES


def test_query_counts_stay_the_same_with_500_more_connections(client: Client) -> None:
    seed_demo_world(NOW, history=False)
    grow_world(500, NOW)
    signed_in(client, "olga", "operator")

    counts = {url: page_queries(client, url) for url in PAGE_QUERIES}

    assert counts == PAGE_QUERIES


@pytest.mark.parametrize("size", [0, 500])
def test_published_decisions_equal_the_api_decisions(size: int) -> None:
    seed_demo_world(NOW, history=False)
    grow_world(size, NOW)

    published = services.decide_published(now=NOW)

    assert [decision.auto_id.auto_id for decision in published] == [
        "auto/subscription",
        "auto/thrifty",
        "auto/chat:subscription",
        "auto/chat:thrifty",
        "auto/coding:subscription",
        "auto/coding:thrifty",
        "auto/reasoning:subscription",
        "auto/reasoning:thrifty",
    ]
    for decision in published:
        assert decision == services.decide_registered(decision.auto_id, now=NOW)


def test_published_decisions_take_six_queries_whatever_the_categories() -> None:
    seed_demo_world(NOW, history=False)
    grow_world(500, NOW)

    with CaptureQueriesContext(connection) as captured:
        decisions = services.decide_published(now=NOW)

    assert (len(decisions), len(captured.captured_queries)) == (8, 6)
    assert decisions[1].auto_id == parse_auto_id("auto/thrifty")
