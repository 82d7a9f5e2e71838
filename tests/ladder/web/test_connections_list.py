"""The connections list's filters, sorts and search, kept in the URL and alike with and
without HTMX; a connection's page: its pools, the candidates that name it and, for a
push-only connection, the exact request; and the onboarding papercuts."""

from __future__ import annotations

import html
from datetime import timedelta

import pytest
from django.test import Client

from ladder.models import Candidate, Connection
from omniroute_admin import dashboard
from tests.ladder.factories import NOW, make_candidate, make_connection, make_reading
from tests.pages import Element, parse
from tests.worlds import htmx_headers, seed_demo_world, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


@pytest.fixture
def world() -> None:
    """A polled plan in play (60 %), a plan dropped out (1 %), a push-only plan never
    read, a metered key, a cooling-down key, and a connection no candidate names."""
    make_connection("plan-a", quota_source="claude")
    make_reading("plan-a", remaining_percent=60.0)
    make_connection("plan-b", quota_source="claude")
    make_reading("plan-b", remaining_percent=1.0)
    make_connection("push-c")
    make_connection("key-d", provider="openai", auth_type="api_key")
    make_connection("key-e", provider="openai", auth_type="api_key")
    Connection.objects.filter(connection_id="key-e").update(
        cooldown_until=NOW + timedelta(seconds=90)
    )
    make_connection("lone-f", provider="openai", auth_type="api_key")
    for connection_id in ("plan-a", "plan-b", "push-c"):
        make_candidate(connection_id=connection_id)
    make_candidate("openai", "gpt-4o", allowed_connection_ids=("key-d", "key-e"))


@pytest.fixture
def operator(client: Client) -> Client:
    return signed_in(client, "olga", "operator")


def _ids(html: bytes | str) -> list[str]:
    page = parse(html)
    return [
        str(row.attrs["data-connection"])
        for row in page.find_all(lambda e: "data-connection" in e.attrs)
    ]


def _states(html: bytes) -> dict[str, str]:
    page = parse(html)
    return {
        str(row.attrs["data-connection"]): row.by_class("stand")[0].text
        for row in page.find_all(lambda e: "data-connection" in e.attrs)
    }


def test_every_row_says_where_the_connection_stands(world: None, operator: Client) -> None:
    assert _states(operator.get("/connections/").content) == {
        "key-d": "in play",
        "key-e": "cooling down",
        "lone-f": "no candidate",
        "plan-a": "in play",
        "plan-b": "dropped out",
        "push-c": "in play",  # auto/thrifty fails open on an unknown quota
    }


@pytest.mark.parametrize(
    ("query", "ids"),
    [
        ("state=in-play", ["key-d", "plan-a", "push-c"]),
        ("state=dropped-out", ["plan-b"]),
        ("state=cooling-down", ["key-e"]),
        ("state=no-candidate", ["lone-f"]),
        ("rung=subscription", ["plan-a", "plan-b", "push-c"]),
        ("rung=premium", ["key-d", "key-e"]),
        ("billing=subscription", ["plan-a", "plan-b", "push-c"]),
        ("billing=unknown", ["key-d", "key-e", "lone-f"]),
        ("billing=subscription&state=in-play&q=plan", ["plan-a"]),
        ("sort=-connection", ["push-c", "plan-b", "plan-a", "lone-f", "key-e", "key-d"]),
        ("sort=quota", ["plan-b", "plan-a", "key-d", "key-e", "lone-f", "push-c"]),
        ("sort=-quota", ["plan-a", "plan-b", "key-d", "key-e", "lone-f", "push-c"]),
        ("sort=state", ["key-d", "plan-a", "push-c", "key-e", "plan-b", "lone-f"]),
        (
            "rung=nonsense&state=%00&sort=drop",
            ["key-d", "key-e", "lone-f", "plan-a", "plan-b", "push-c"],
        ),
    ],
)
def test_filters_and_sorts_with_and_without_htmx(
    world: None, operator: Client, query: str, ids: list[str]
) -> None:
    page = operator.get(f"/connections/?{query}")
    fragment = operator.get(f"/connections/?{query}", headers=htmx_headers("connections-table"))

    assert (page.status_code, fragment.status_code) == (200, 200)
    assert _ids(page.content) == ids
    assert "<html" not in fragment.content.decode()
    assert _ids(fragment.content) == ids


def test_the_filters_and_sort_stay_in_the_url_of_the_poll_and_the_sort_links(
    world: None, operator: Client
) -> None:
    response = operator.get(
        "/connections/?q=plan&state=in-play&sort=-quota", headers=htmx_headers("connections-table")
    )

    table = parse(response.content).by_id("connections-table")
    assert table.attrs["hx-get"] == "/connections/?q=plan&state=in-play&sort=-quota&page=1"
    headers = {a.text: a.attrs["href"] for a in table.by_class("sort-link")}
    assert headers["Quota ▼"] == "/connections/?q=plan&state=in-play&sort=quota"
    assert headers["Connection ↕"] == "/connections/?q=plan&state=in-play&sort=connection"
    sorted_by = [th.attrs["aria-sort"] for th in table.by_tag("th") if "aria-sort" in th.attrs]
    assert sorted_by == ["descending"]
    # Every sortable header looks sortable: a mark, ↕ until it is the sorted column.
    marks = [
        (a.text, a.by_class("sort-mark")[0].attrs["aria-hidden"])
        for a in table.by_class("sort-link")
    ]
    assert all(hidden == "true" for _, hidden in marks)
    assert [text for text, _ in marks if not text.endswith("↕")] == ["Quota ▼"]
    selected = [
        (select.attrs["name"], option.attrs["value"])
        for select in table.by_tag("select")
        for option in select.by_tag("option")
        if "selected" in option.attrs
    ]
    assert selected == [("state", "in-play")]


def test_a_connection_no_candidate_names_is_said_with_a_link_to_create_one(
    world: None, operator: Client
) -> None:
    page = parse(operator.get("/connections/").content)

    assert page.by_id("unnamed-notice").text == (
        "1 connection is in no pool: a new connection is in no pool until a candidate names "
        "it. Show it, then use “Create a candidate” on a row."
    )
    row = page.by_id("row-lone-f")
    links = {a.text: a.attrs["href"] for a in row.by_tag("a")}
    assert links["Create a candidate"] == "/candidates/?connection=lone-f#candidate-add"


def test_refresh_now_is_offered_only_on_polled_connections(world: None, operator: Client) -> None:
    page = parse(operator.get("/connections/").content)

    offered = {
        row.attrs["data-connection"]: [b.text for b in row.by_tag("button")]
        + [a.text for a in row.by_class("small-button") if a.tag == "a"]
        for row in page.find_all(lambda e: "data-connection" in e.attrs)
    }
    assert offered["plan-a"] == ["Refresh now", "Edit…"]
    assert offered["push-c"] == ["Push readings…", "Edit…"]


# --- a connection's page -------------------------------------------------------------------------


def _card(page: Element, element_id: str) -> Element:
    return page.by_id(element_id)


def test_a_push_only_connection_page_shows_how_often_and_the_exact_request(
    world: None, operator: Client
) -> None:
    response = operator.get("/connections/push-c/")
    page = parse(response.content)

    push = _card(page, "push-readings")
    assert push.by_tag("h2")[0].text == "Readings must be pushed"
    assert push.by_tag("strong")[0].text == "3 min"
    assert "push one at least every 3 min; every 1 min 30 s leaves room" in push.text
    assert (
        'curl -X POST "http://testserver/api/v1/connections/push-c/readings" \\\n'
        '  -H "Authorization: Bearer $T" \\\n'
        '  -H "Content-Type: application/json" \\\n'
        """  -d '{"remaining_percent": 41.5, "reset_at": "2026-11-29T17:00:00Z"}'</code></pre>"""
    ) in html.unescape(response.content.decode())
    assert "A quota adapter exists for claude" in push.text
    assert page.find_all(lambda e: e.tag == "button" and e.text == "Refresh now") == []


def test_the_push_example_is_dated_from_now_never_in_the_past(
    world: None, operator: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    later = NOW + timedelta(days=8, hours=3, minutes=25)  # 2026-12-07 15:25 UTC
    monkeypatch.setattr(dashboard, "current_time", lambda: later)

    response = operator.get("/connections/push-c/")

    body = """  -d '{"remaining_percent": 41.5, "reset_at": "2026-12-07T20:00:00Z"}'</code></pre>"""
    assert body in html.unescape(response.content.decode())
    assert "checked_at" not in html.unescape(response.content.decode())


def test_a_polled_connection_page_has_no_push_card(world: None, operator: Client) -> None:
    page = parse(operator.get("/connections/plan-a/").content)

    assert page.find_all(lambda e: e.attrs.get("id") == "push-readings") == []


def test_the_push_interval_follows_the_current_settings(world: None, operator: Client) -> None:
    from ladder.models import LadderSettings

    LadderSettings.objects.update_or_create(pk=1, defaults={"max_state_age_seconds": 600})
    from billing import services as billing_services
    from billing.models import ChangeCounter

    billing_services.bump(ChangeCounter.CONFIG)

    push = parse(operator.get("/connections/push-c/").content).by_id("push-readings")

    assert push.by_tag("strong")[0].text == "10 min"


@pytest.mark.parametrize(
    ("connection_id", "hysteresis", "state"),
    [
        ("key-e", "not in play above the floor, but cooling down: see Pools", "cooling down"),
        ("plan-b", "dropped out", "dropped out"),
        ("plan-a", "in play", "in play"),
    ],
)
def test_a_connection_page_says_in_play_only_when_it_is_in_a_pool(
    world: None, operator: Client, connection_id: str, hysteresis: str, state: str
) -> None:
    page = parse(operator.get(f"/connections/{connection_id}/").content)

    first = page.by_id("hysteresis-card").by_tag("p")[0]
    assert " ".join(s.text for s in first.by_tag("span")[:2]).startswith(
        hysteresis.split(" above")[0]
    )
    assert page.by_id("connection-pools").by_tag("h2")[0].text == f"Pools {state}"
    if connection_id == "key-e":
        assert first.text.startswith(hysteresis)


def test_the_connection_page_lists_its_pools_and_the_candidates_naming_it(
    world: None, operator: Client
) -> None:
    key = Candidate.objects.get(model="gpt-4o")

    page = parse(operator.get("/connections/key-d/").content)

    pools = page.by_id("connection-pools")
    assert pools.by_tag("h2")[0].text == "Pools in play"
    assert pools.by_tag("p")[0].text == "In play in auto/thrifty."
    assert [li.text for li in pools.by_class("why-not")[0].by_tag("li")] == [
        "Left out of auto/subscription for openai/gpt-4o premium: uncurated No catalog "
        "entry covers openai with auth api_key: uncurated is treated as metered"
    ]
    assert [
        (li.text, li.by_tag("a")[0].attrs["href"])
        for li in pools.by_class("naming")[0].by_tag("li")
    ] == [(f"openai/gpt-4o #{key.pk} · in its allowlist", f"/candidates/{key.pk}/")]


def test_an_unnamed_connection_page_links_to_create_a_candidate(
    world: None, operator: Client
) -> None:
    page = parse(operator.get("/connections/lone-f/").content)

    note = page.by_id("no-candidate")
    assert note.text == (
        "In no pool: a new connection is in no pool until a candidate names it. "
        "Create a candidate for lone-f."
    )
    assert note.by_tag("a")[0].attrs["href"] == "/candidates/?connection=lone-f#candidate-add"


def test_the_status_fragment_carries_the_pools_and_push_cards(
    world: None, operator: Client
) -> None:
    response = operator.get("/connections/push-c/", headers=htmx_headers("connection-status"))

    html = response.content.decode()
    assert "<html" not in html
    fragment = parse(html)
    assert fragment.by_id("push-readings").by_tag("h2")[0].text == "Readings must be pushed"
    assert fragment.by_id("connection-pools").by_tag("h2")[0].text == "Pools in play"


# --- papercuts -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url", ["/", "/connections/", "/connections/plan-a/", "/pools/", "/settings/", "/catalog/"]
)
def test_a_viewers_post_to_a_page_is_a_403_not_a_405(world: None, client: Client, url: str) -> None:
    signed_in(client, "vera", "viewer")

    assert client.post(url).status_code == 403


def test_an_operators_post_to_a_page_stays_a_405(world: None, operator: Client) -> None:
    assert operator.post("/connections/").status_code == 405


def test_a_viewer_may_still_sign_out(world: None, client: Client) -> None:
    signed_in(client, "vera", "viewer")

    assert client.post("/accounts/logout/").status_code == 302


def test_the_django_admin_says_why_a_dashboard_account_is_refused(client: Client) -> None:
    signed_in(client, "olga", "operator")

    response = client.get("/admin/", follow=True)

    note = parse(response.content).by_id("not-staff")
    assert note.by_tag("p")[0].text == (
        "You are signed in as olga, a dashboard account (operator), which is not a staff "
        "account: the Django admin is only for staff accounts."
    )
    assert "python manage.py createsuperuser" in note.text


def test_the_connection_page_says_one_exclusion_once_whatever_the_pools(
    operator: Client,
) -> None:
    # The demo's backup plan at 1.5 %: left out of the six pools its candidate lands in
    # for one reason, said once with the six pools (it was six sentences).
    seed_demo_world(NOW, history=False)

    page = parse(operator.get("/connections/claude-max-2/").content)

    assert [
        li.text for li in page.by_id("connection-pools").by_class("why-not")[0].by_tag("li")
    ] == [
        "Left out of auto/subscription, auto/thrifty, auto/coding:subscription, "
        "auto/coding:thrifty, auto/reasoning:subscription, auto/reasoning:thrifty for "
        "claude/claude-sonnet-4-5 subscription: quota_exhausted 1.5 % left, at or below "
        "the exit cutoff of 2 %"
    ]
