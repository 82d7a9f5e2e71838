"""The candidates pages: the list with the pools each candidate lands in and why not,
a candidate's page, and the operator's add, edit and delete (audited and counted, as
through the API); a viewer sees no form and gets a 403 on every write, nothing changed."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client

from billing import services as billing_services
from billing.models import AuditEntry
from ladder.models import Candidate
from omniroute_admin import dashboard
from tests.ladder.factories import NOW, make_candidate, make_connection, make_reading
from tests.pages import Element, parse
from tests.worlds import htmx_headers, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


@pytest.fixture
def world() -> dict[str, Candidate]:
    """A plan connection with 50 % left, a metered key, and two candidates: one pinned to
    the plan (category coding), one allowlisting the key and an unregistered id."""
    make_connection("claude-max-1")
    make_reading("claude-max-1", remaining_percent=50.0)
    make_connection("openai-key", provider="openai", auth_type="api_key")
    return {
        "plan": make_candidate(categories=("coding",)),
        "key": make_candidate(
            "openai", "gpt-4o", allowed_connection_ids=("openai-key", "ghost"), priority=5
        ),
    }


@pytest.fixture
def operator(client: Client) -> Client:
    return signed_in(client, "olga", "operator")


@pytest.fixture
def viewer(client: Client) -> Client:
    return signed_in(client, "vera", "viewer")


def _placements(element: Element) -> list[str]:
    return [li.text for li in element.by_class("placement")]


def _candidate_row(page: Element, candidate: Candidate) -> Element:
    return page.by_id(f"candidate-{candidate.pk}")


def _form_data(**fields: Any) -> dict[str, Any]:
    data = {
        "provider": "claude",
        "model": "claude-opus-4",
        "categories": "coding, chat",
        "priority": "3",
        "connection_id": "claude-max-1",
        "allowed_connection_ids": "",
    }
    data.update(fields)
    return data


# --- the list --------------------------------------------------------------------------------


def _cells(row: Element) -> list[str]:
    """A matrix row: the candidate (its row header), then every cell's text."""
    return [cell.text for cell in row.find_all(lambda e: e.tag in ("th", "td"))]


def test_the_list_shows_each_candidate_against_each_pool(
    world: dict[str, Candidate], viewer: Client
) -> None:
    page = parse(viewer.get("/candidates/").content)

    table = page.by_class("matrix")[0]
    assert [th.text for th in table.by_tag("thead")[0].by_tag("th")] == [
        "Candidate",
        "Priority",
        "Categories",
        "Served by",
        "auto/subscription",
        "auto/thrifty",
        "auto/coding:subscription",
        "auto/coding:thrifty",
    ]
    assert _cells(_candidate_row(page, world["plan"])) == [
        f"claude/claude-sonnet-4-5 #{world['plan'].pk}",
        "0",
        "coding",
        "pinned claude-max-1",
        "in subscription",
        "in subscription",
        "in subscription",
        "in subscription",
    ]
    # Uncurated connections are out of auto/subscription by design: nothing spelled out.
    assert _cells(_candidate_row(page, world["key"])) == [
        f"openai/gpt-4o #{world['key'].pk}",
        "5",
        "none",
        "allowlist openai-key, ghost not registered",
        "out by design uncurated",
        "in premium via openai-key, ghost",
        "out by design not coding",
        "out by design not coding",
    ]


def test_the_candidate_page_says_why_its_first_seat_comes_first(viewer: Client) -> None:
    make_connection("claude-max-1")
    make_connection("claude-max-2")
    make_reading("claude-max-1", remaining_percent=90.0, reset_at=NOW + timedelta(days=6))
    make_reading("claude-max-2", remaining_percent=40.0, reset_at=NOW + timedelta(hours=19))
    both = make_candidate(allowed_connection_ids=("claude-max-1", "claude-max-2"))

    page = parse(viewer.get(f"/candidates/{both.pk}/").content)

    subscription = page.by_class("placement")[0]
    assert subscription.text.startswith(
        "auto/subscription in subscription via claude-max-2, claude-max-1"
    )
    assert subscription.by_class("why-first")[0].text == (
        "claude-max-2 first: resets in 19 h with 40 % left; "
        "claude-max-1 resets in 6 d with 90 % left"
    )


def test_the_list_fragment_is_the_table_alone(world: dict[str, Candidate], viewer: Client) -> None:
    response = viewer.get("/candidates/?q=gpt", headers=htmx_headers("candidates-table"))

    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert html.lstrip().startswith('<section id="candidates-table"')
    assert [row.attrs["id"] for row in parse(html).by_tag("tr")[1:]] == [
        f"candidate-{world['key'].pk}"
    ]
    assert response["Vary"] == "HX-Request, Cookie, Accept-Encoding"


def test_an_operator_sees_the_add_form_and_a_viewer_does_not(
    world: dict[str, Candidate], operator: Client, client: Client
) -> None:
    assert parse(operator.get("/candidates/").content).by_id("candidate-add").tag == "section"

    signed_in(client, "vera", "viewer")
    page = parse(client.get("/candidates/").content)
    assert page.find_all(lambda e: e.attrs.get("id") == "candidate-add") == []
    assert page.by_tag("form")[-1].attrs.get("role") == "search"  # the search, no write form


def test_the_add_form_is_filled_in_for_a_connection_named_in_the_query(
    world: dict[str, Candidate], operator: Client
) -> None:
    page = parse(operator.get("/candidates/?connection=openai-key").content)

    assert page.by_id("add-connection_id").attrs["value"] == "openai-key"
    assert page.by_id("add-provider").attrs["value"] == "openai"
    assert "open" in page.by_id("candidate-add").by_tag("details")[0].attrs


# --- add, edit, delete -------------------------------------------------------------------------


def test_an_operator_adds_a_candidate_audited_and_counted(
    world: dict[str, Candidate], operator: Client
) -> None:
    before = billing_services.change_counters()

    response = operator.post("/candidates/add/", _form_data())

    added = Candidate.objects.get(model="claude-opus-4")
    assert (response.status_code, response["Location"]) == (302, f"/candidates/{added.pk}/")
    assert (added.provider, added.categories, added.priority, added.connection_id) == (
        "claude",
        ["coding", "chat"],
        3,
        "claude-max-1",
    )
    assert added.allowed_connection_ids is None
    assert billing_services.change_counters()[1] == before[1] + 1
    audit = AuditEntry.objects.exclude(actor="system").get(target_type="candidate")
    assert (audit.action, audit.actor, audit.target_id, audit.before) == (
        "create",
        "olga",
        str(added.pk),
        None,
    )
    assert audit.after == {
        "provider": "claude",
        "model": "claude-opus-4",
        "categories": ["coding", "chat"],
        "priority": 3,
        "connection_id": "claude-max-1",
        "allowed_connection_ids": None,
        "ref": None,
    }
    page = parse(operator.get(f"/candidates/{added.pk}/").content)
    assert _placements(page.by_id("candidate-status")) == [
        "auto/subscription in subscription via claude-max-1",
        "auto/thrifty in subscription via claude-max-1",
        "auto/chat:subscription in subscription via claude-max-1",
        "auto/chat:thrifty in subscription via claude-max-1",
        "auto/coding:subscription in subscription via claude-max-1",
        "auto/coding:thrifty in subscription via claude-max-1",
    ]


def test_an_htmx_add_answers_the_panel_and_tells_the_table_to_reload(
    world: dict[str, Candidate], operator: Client
) -> None:
    response = operator.post(
        "/candidates/add/",
        _form_data(connection_id="", allowed_connection_ids="openai-key claude-max-1"),
        headers=htmx_headers("candidate-add"),
    )

    added = Candidate.objects.get(model="claude-opus-4")
    html = response.content.decode()
    assert (response.status_code, response["HX-Trigger"]) == (200, "candidate-saved")
    assert "<html" not in html
    assert parse(html).by_class("notice")[0].text == (
        f"Added candidate {added.pk}: claude/claude-opus-4. Open its page"
    )
    assert (added.connection_id, added.allowed_connection_ids) == (
        None,
        ["openai-key", "claude-max-1"],
    )


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        (
            {"connection_id": "", "allowed_connection_ids": ""},
            "connection_id",
            "Give exactly one: a pinned connection, or an allowlist of connections.",
        ),
        (
            {"allowed_connection_ids": "openai-key"},
            "connection_id",
            "Give exactly one: a pinned connection, or an allowlist of connections.",
        ),
        (
            {"categories": "coding, bad/one"},
            "categories",
            "Not a category: 'bad/one' (letters, digits, '.', '_' and '-', at most 64 characters).",
        ),
        (
            {"priority": "2000000"},
            "priority",
            "Ensure this value is less than or equal to 1000000.",
        ),
        ({"provider": ""}, "provider", "This field is required."),
    ],
)
def test_a_bad_candidate_is_a_422_with_the_field_error_and_nothing_changes(
    world: dict[str, Candidate],
    operator: Client,
    fields: dict[str, str],
    field: str,
    message: str,
) -> None:
    before = billing_services.change_counters()

    response = operator.post(
        "/candidates/add/", _form_data(**fields), headers=htmx_headers("candidate-add")
    )

    assert response.status_code == 422
    errors = [e.text for e in parse(response.content).by_class("field-error")]
    assert errors == [message]
    assert Candidate.objects.count() == 2
    assert billing_services.change_counters() == before
    assert not AuditEntry.objects.exclude(actor="system").filter(target_type="candidate").exists()


def test_an_operator_edits_a_candidate_audited_with_before_and_after(
    world: dict[str, Candidate], operator: Client
) -> None:
    plan = world["plan"]

    response = operator.post(
        f"/candidates/{plan.pk}/edit/",
        _form_data(model="claude-sonnet-4-5", categories="", priority="-2"),
        headers=htmx_headers("candidate-edit"),
    )

    assert (response.status_code, response["HX-Trigger"]) == (200, "candidate-saved")
    assert parse(response.content).by_class("notice")[0].text == f"Saved candidate {plan.pk}."
    plan.refresh_from_db()
    assert (plan.categories, plan.priority) == ([], -2)
    audit = AuditEntry.objects.exclude(actor="system").get(target_type="candidate")
    assert (audit.action, audit.before["categories"], audit.after["categories"]) == (
        "update",
        ["coding"],
        [],
    )
    assert (audit.before["priority"], audit.after["priority"]) == (0, -2)


def test_an_operator_deletes_a_candidate_after_confirming(
    world: dict[str, Candidate], operator: Client
) -> None:
    key = world["key"]
    page = parse(operator.get(f"/candidates/{key.pk}/?confirm-delete").content)
    assert page.by_class("confirm")[0].attrs["action"] == f"/candidates/{key.pk}/delete/"

    response = operator.post(f"/candidates/{key.pk}/delete/")

    assert (response.status_code, response["Location"]) == (302, "/candidates/")
    assert not Candidate.objects.filter(pk=key.pk).exists()
    audit = AuditEntry.objects.exclude(actor="system").get(target_type="candidate")
    assert (audit.action, audit.before["model"], audit.after) == ("delete", "gpt-4o", None)
    messages = parse(operator.get("/candidates/").content).by_class("notice")
    assert messages[0].text == f"Deleted candidate {key.pk}: its pools no longer list it."


# --- viewers -----------------------------------------------------------------------------------


def test_a_viewer_gets_a_403_on_every_write_and_nothing_changes(
    world: dict[str, Candidate], viewer: Client
) -> None:
    plan = world["plan"]
    before = (billing_services.change_counters(), list(Candidate.objects.values()))

    statuses = [
        viewer.post("/candidates/add/", _form_data()).status_code,
        viewer.post(f"/candidates/{plan.pk}/edit/", _form_data()).status_code,
        viewer.post(f"/candidates/{plan.pk}/delete/").status_code,
        viewer.post("/candidates/add/", _form_data(), headers=htmx_headers("x")).status_code,
        # Pages too: "you may not change this", not "this URL takes no POST".
        viewer.post("/candidates/").status_code,
        viewer.post(f"/candidates/{plan.pk}/").status_code,
    ]

    assert statuses == [403] * 6
    assert (billing_services.change_counters(), list(Candidate.objects.values())) == before
    assert not AuditEntry.objects.exclude(actor="system").exists()


def test_a_viewer_sees_the_candidate_page_without_forms(
    world: dict[str, Candidate], viewer: Client
) -> None:
    page = parse(viewer.get(f"/candidates/{world['plan'].pk}/").content)

    assert page.by_id("candidate-edit").text == "Viewers read the candidate; operators change it."
    assert [f.attrs.get("method") for f in page.by_tag("form")] == ["post"]  # sign out only


# --- a candidate's page and its partials ----------------------------------------------------


def test_the_candidate_page_and_its_fragments(
    world: dict[str, Candidate], operator: Client
) -> None:
    key = world["key"]
    page = parse(operator.get(f"/candidates/{key.pk}/").content)
    assert page.by_tag("h1")[0].text == f"openai/gpt-4o #{key.pk}"
    assert [d.text for d in page.by_id("candidate-status").by_tag("dd")] == [
        "5",
        "none",
        "openai-key, ghost not registered",
    ]

    for target in ("candidate-status", "candidate-edit"):
        response = operator.get(f"/candidates/{key.pk}/", headers=htmx_headers(target))
        html = response.content.decode()
        assert "<html" not in html
        assert html.lstrip().startswith(f'<section id="{target}"')


@pytest.mark.parametrize("url", ["/candidates/999/", "/connections/nope/"])
def test_a_missing_candidate_or_connection_is_the_dashboards_404_page(
    viewer: Client, url: str
) -> None:
    response = viewer.get(url)

    page = parse(response.content)
    assert response.status_code == 404
    assert page.by_id("not-found").by_tag("p")[0].text in (
        "No candidate 999.",
        "No connection 'nope'.",
    )
    assert page.by_class("main-nav")  # the dashboard's own page, with its navigation
    fragment = viewer.get(url, headers=htmx_headers("candidate-status"))
    assert fragment.status_code == 404
    assert fragment.content.decode().lstrip().startswith('<section id="not-found"')


# --- connections are picked, not typed ---------------------------------------------------------


def test_the_form_offers_the_registered_connections_to_pick(
    world: dict[str, Candidate], operator: Client
) -> None:
    page = parse(operator.get("/candidates/").content)

    offered = [o.attrs["value"] for o in page.by_id("registered-connections").by_tag("option")]
    assert offered == ["claude-max-1", "openai-key"]
    assert page.by_id("add-connection_id").attrs["list"] == "registered-connections"
    assert page.by_id("add-allowed_connection_ids").attrs["list"] == "registered-connections"


@pytest.mark.parametrize(
    ("fields", "field", "message"),
    [
        (
            {"connection_id": "claude-max-l"},
            "connection_id",
            "No connection is registered as “claude-max-l” (did you mean “claude-max-1”?). "
            "Pick a registered one, or tick “Keep as typed” to save it anyway.",
        ),
        (
            {"connection_id": "", "allowed_connection_ids": "openai-key, nowhere-9"},
            "allowed_connection_ids",
            "No connection is registered as “nowhere-9”. "
            "Pick a registered one, or tick “Keep as typed” to save it anyway.",
        ),
    ],
    ids=["pinned-typo", "allowlist-unknown"],
)
def test_an_unknown_connection_is_refused_until_kept_as_typed(
    world: dict[str, Candidate], operator: Client, fields: dict[str, str], field: str, message: str
) -> None:
    before = billing_services.change_counters()

    refused = operator.post(
        "/candidates/add/", _form_data(**fields), headers=htmx_headers("candidate-add")
    )

    assert refused.status_code == 422
    page = parse(refused.content)
    assert [e.text for e in page.by_class("field-error")] == [message]
    assert page.by_id("add-keep_as_typed").attrs["type"] == "checkbox"
    assert Candidate.objects.count() == 2
    assert billing_services.change_counters() == before

    kept = operator.post("/candidates/add/", _form_data(keep_as_typed="on", **fields))

    assert kept.status_code == 302
    assert Candidate.objects.count() == 3


def test_an_edit_does_not_ask_again_about_an_id_the_candidate_already_names(
    world: dict[str, Candidate], operator: Client
) -> None:
    key = world["key"]  # allowlists the unregistered "ghost"

    response = operator.post(
        f"/candidates/{key.pk}/edit/",
        _form_data(
            provider="openai",
            model="gpt-4o",
            connection_id="",
            allowed_connection_ids="openai-key ghost",
            priority="7",
        ),
    )

    key.refresh_from_db()
    assert response.status_code == 302
    assert (key.priority, key.allowed_connection_ids) == (7, ["openai-key", "ghost"])
