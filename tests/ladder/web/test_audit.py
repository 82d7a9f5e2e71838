"""The audit page: every recorded change, newest first, with who, when (relative and
absolute), what (linked while the object exists) and a readable diff; filters and a
search kept in the URL, pages, the HTMX fragment; viewers read it, and no secret ever
reaches it (token writes record neither the secret nor its hash)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from billing.models import AuditEntry
from billing.services import record_audit
from ladder.core.audit_changes import FieldChange, field_changes, target_label
from ladder.models import ApiToken
from ladder.tokens import create_token, revoke_token
from omniroute_admin import dashboard
from tests.ladder.factories import NOW, make_candidate, make_connection
from tests.pages import Element, parse
from tests.worlds import htmx_headers, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


@pytest.fixture
def viewer(client: Client) -> Client:
    return signed_in(client, "vera", "viewer")


def _audit(
    target_type: str,
    target_id: object,
    action: str,
    actor: str,
    before: Any,
    after: Any,
    minutes_ago: int,
) -> AuditEntry:
    entry = record_audit(
        target_type=target_type,
        target_id=target_id,
        action=action,
        actor=actor,
        before=before,
        after=after,
        now=NOW - timedelta(minutes=minutes_ago),
    )
    assert entry is not None
    return entry


def _changes(row: Element) -> list[tuple[str, str]]:
    return [
        (div.by_tag("dt")[0].text, div.by_tag("dd")[0].text) for div in row.by_class("audit-change")
    ]


def _cells(row: Element) -> dict[str, str]:
    return {td.attrs["data-label"] or "": td.text for td in row.by_tag("td")}


# --- the diff, pure ------------------------------------------------------------------------


def test_an_update_lists_only_the_changed_fields_in_words() -> None:
    before = {
        "exit_cutoff_percent": 2.0,
        "reentry_min_remaining_percent": 5.0,
        "budget_window": "month",
    }
    after = {
        "exit_cutoff_percent": 10.0,
        "reentry_min_remaining_percent": 5.0,
        "budget_window": "week",
    }

    assert field_changes("update", before, after) == [
        FieldChange("exit_cutoff_percent", "Exit cutoff (%)", "2", "10"),
        FieldChange("budget_window", "Budget window", "month", "week"),
    ]


def test_a_create_and_a_delete_list_every_field_lists_and_booleans_in_words() -> None:
    snapshot = {"name": "ops", "kinds": ["pool_empty", "budget"], "is_active": False}

    assert field_changes("create", None, snapshot) == [
        FieldChange("name", "Name", None, "ops"),
        FieldChange("kinds", "Notify about", None, "pool_empty, budget"),
        FieldChange("is_active", "Active", None, "no"),
    ]
    assert [c.before for c in field_changes("delete", snapshot, None)] == [
        "ops",
        "pool_empty, budget",
        "no",
    ]


def test_prices_and_budgets_show_to_the_cent_not_the_stored_precision() -> None:
    changes = field_changes(
        "update",
        {"input_usd_per_mtok": "2.500000", "cheap_budget_usd": None, "model": "a.1000"},
        {"input_usd_per_mtok": "0.075000", "cheap_budget_usd": "5.000000", "model": "a.2000"},
    )

    assert [(c.before, c.after) for c in changes] == [
        ("a.1000", "a.2000"),  # not a price: as recorded
        ("2.50", "0.075"),
        ("none", "5.00"),
    ]


def test_a_field_named_like_a_secret_is_never_shown() -> None:
    changes = field_changes(
        "update",
        {"secret": "[previous]", "secret_hash": "abc", "name": "a"},
        {"secret": "[rotated]", "secret_hash": "def", "name": "a"},
    )

    assert changes == [
        FieldChange("secret", "Signing secret", "hidden", "changed (hidden)"),
        FieldChange("secret_hash", "Secret hash", "hidden", "changed (hidden)"),
    ]
    assert field_changes("create", None, {"credential": "sk-live"})[0].after == "hidden"


def test_the_target_is_named_from_its_snapshot() -> None:
    assert target_label("catalog", None, {"provider": "claude", "auth_type": "oauth"}) == (
        "claude / oauth"
    )
    assert (
        target_label("price", {"provider": "openai", "model": "gpt-4o"}, None) == "openai / gpt-4o"
    )
    assert target_label("settings", {}, {}) == ""
    assert target_label("mystery", None, {"name": "x"}) == ""


# --- tokens record no secret ------------------------------------------------------------------


def test_token_writes_are_audited_without_the_secret_or_its_hash() -> None:
    token, secret = create_token("ci-gateway", "gateway", created_by="olga")
    assert revoke_token(token.pk, actor="olga", now=NOW) is True
    assert revoke_token(token.pk, actor="olga", now=NOW) is False  # revoked already: no row

    rows = list(AuditEntry.objects.filter(target_type="token").order_by("id"))
    stored = ApiToken.objects.get(pk=token.pk)
    assert [(r.action, r.actor, r.target_id) for r in rows] == [
        ("create", "olga", str(token.pk)),
        ("update", "olga", str(token.pk)),
    ]
    assert rows[0].after == {
        "name": "ci-gateway",
        "scope": "gateway",
        "prefix": secret[:12],
        "revoked_at": None,
    }
    assert rows[1].before["revoked_at"] is None
    assert rows[1].after["revoked_at"] == NOW.isoformat()
    recorded = repr([(r.before, r.after) for r in rows])
    assert secret not in recorded
    assert secret[12:] not in recorded
    assert stored.secret_hash not in recorded


def test_the_audit_page_never_shows_a_token_secret_or_hash(client: Client) -> None:
    operator = signed_in(client, "olga", "operator")
    created = operator.post("/tokens/create/", {"name": "ci-gateway", "scope": "gateway"})
    secret = next(
        code.text for code in parse(created.content).by_tag("code") if code.text.startswith("omr_")
    )
    token = ApiToken.objects.get()
    operator.post(f"/tokens/{token.pk}/revoke/")

    page = operator.get("/audit/").content.decode()

    assert AuditEntry.objects.filter(target_type="token").count() == 2
    assert secret not in page
    assert secret[12:] not in page
    assert token.secret_hash not in page


# --- the page ----------------------------------------------------------------------------------


@pytest.fixture
def trail() -> dict[str, AuditEntry]:
    """Four changes over the last hours, newest first: a settings update, a candidate
    created (it still exists), a price deleted (gone), a catalog entry changed."""
    make_connection("claude-max-1")
    candidate = make_candidate()
    while "99" in str(candidate.pk):  # searching "99" must find objects 998 and 999 only
        candidate.delete()
        candidate = make_candidate()
    # Only the hand-written trail below: not the audit rows of these writes.
    AuditEntry.objects.all().delete()
    return {
        "catalog": _audit(
            "catalog",
            999,
            "update",
            "token:ops",
            {
                "provider": "kimi",
                "auth_type": "oauth",
                "billing": "metered",
                "overage": "unknown",
                "reason": "r",
            },
            {
                "provider": "kimi",
                "auth_type": "oauth",
                "billing": "subscription",
                "overage": "unknown",
                "reason": "r",
            },
            180,
        ),
        "price": _audit(
            "price",
            998,
            "delete",
            "olga",
            {"provider": "openai", "model": "gpt-4o", "input_usd_per_mtok": "2.50"},
            None,
            120,
        ),
        "candidate": _audit(
            "candidate",
            candidate.pk,
            "create",
            "olga",
            None,
            {
                "provider": "claude",
                "model": "claude-sonnet-4",
                "categories": ["coding"],
                "priority": 0,
            },
            65,
        ),
        "settings": _audit(
            "settings",
            1,
            "update",
            "pat",
            {"exit_cutoff_percent": 2.0, "reentry_min_remaining_percent": 5.0},
            {"exit_cutoff_percent": 10.0, "reentry_min_remaining_percent": 5.0},
            2,
        ),
    }


def test_a_viewer_reads_every_change_newest_first_with_who_when_what_and_the_diff(
    trail: dict[str, AuditEntry], viewer: Client
) -> None:
    response = viewer.get("/audit/")

    assert response.status_code == 200
    page = parse(response.content)
    rows = page.by_id("audit-table").by_tag("tbody")[0].by_tag("tr")
    assert [row.attrs["id"] for row in rows] == [
        f"audit-{trail[name].pk}" for name in ("settings", "candidate", "price", "catalog")
    ]
    settings_row, candidate_row, price_row, catalog_row = rows
    assert _cells(settings_row)["When"] == "2026-11-29 11:58:00 UTC (2 min ago)"
    assert settings_row.by_tag("time")[0].attrs["datetime"] == "2026-11-29T11:58:00+00:00"
    assert _cells(settings_row)["Who"] == "pat"
    assert _cells(settings_row)["What"] == "Changed Settings"
    assert settings_row.by_tag("a")[0].attrs["href"] == "/settings/"
    assert _changes(settings_row) == [("Exit cutoff (%)", "2 → to 10")]
    # a created candidate: linked to its page, every field as added
    assert _cells(candidate_row)["What"] == (
        f"Created Candidate {trail['candidate'].target_id} claude / claude-sonnet-4"
    )
    assert (
        candidate_row.by_tag("a")[0].attrs["href"] == f"/candidates/{trail['candidate'].target_id}/"
    )
    assert _cells(candidate_row)["When"] == "2026-11-29 10:55:00 UTC (1 h 5 min ago)"
    assert _changes(candidate_row) == [
        ("Provider", "claude"),
        ("Model", "claude-sonnet-4"),
        ("Categories", "coding"),
        ("Priority", "0"),
    ]
    # a deleted price: no link (it is gone), its fields as they were
    assert price_row.by_tag("a") == []
    assert _cells(price_row)["What"] == "Deleted Price 998 openai / gpt-4o"
    assert _changes(price_row)[2] == ("Input price (USD per M tokens)", "2.50")
    # an entry that no longer exists is not linked either; only the changed field shows
    assert catalog_row.by_tag("a") == []
    assert _changes(catalog_row) == [("Billing", "metered → to subscription")]
    assert page.by_class("search-count")[0].text == "4 changes"
    assert "audit" in [
        a.attrs.get("href", "").strip("/") for a in page.by_id("main-nav").by_tag("a")
    ]


def test_filters_by_type_and_actor_and_a_search_are_kept_in_the_url(
    trail: dict[str, AuditEntry], viewer: Client
) -> None:
    by_type = parse(viewer.get("/audit/?type=price").content)
    by_actor = parse(viewer.get("/audit/?actor=olga").content)
    searched = parse(viewer.get("/audit/?q=99").content)
    by_model = parse(viewer.get("/audit/?q=GPT-4O").content)
    unknown = parse(viewer.get("/audit/?type=nope&actor=%00").content)

    def ids(page: Element) -> list[str]:
        return [
            tr.attrs.get("id") or ""
            for tr in page.by_id("audit-table").by_tag("tbody")[0].by_tag("tr")
        ]

    assert ids(by_type) == [f"audit-{trail['price'].pk}"]
    assert ids(by_actor) == [f"audit-{trail['candidate'].pk}", f"audit-{trail['price'].pk}"]
    assert ids(searched) == [f"audit-{trail['price'].pk}", f"audit-{trail['catalog'].pk}"]
    assert ids(by_model) == [f"audit-{trail['price'].pk}"]  # in the recorded fields
    assert len(ids(unknown)) == 4  # an unknown filter is no filter, never a 500
    type_options = by_type.by_id("filter-type").by_tag("option")
    assert [(o.attrs["value"], o.text) for o in type_options] == [
        ("", "anything"),
        ("candidate", "Candidate"),
        ("catalog", "Catalog entry"),
        ("price", "Price"),
        ("settings", "Settings"),
    ]
    assert [o.attrs["value"] for o in type_options if "selected" in o.attrs] == ["price"]
    assert [o.text for o in by_actor.by_id("filter-actor").by_tag("option")] == [
        "anyone",
        "olga",
        "pat",
        "token:ops",
    ]
    assert by_type.by_id("audit-table").by_tag("form")[0].attrs["hx-push-url"] == "true"
    assert searched.by_id("audit-search").attrs["value"] == "99"


def test_the_htmx_fragment_is_the_table_alone(trail: dict[str, AuditEntry], viewer: Client) -> None:
    page = viewer.get("/audit/?type=settings")
    fragment = viewer.get("/audit/?type=settings", headers=htmx_headers("audit-table"))

    body = fragment.content.decode()
    assert fragment.status_code == 200
    assert "<html" not in body
    assert body.lstrip().startswith('<section id="audit-table">')
    assert [tr.attrs["id"] for tr in parse(body).by_tag("tbody")[0].by_tag("tr")] == [
        f"audit-{trail['settings'].pk}"
    ]
    assert fragment["Vary"] == page["Vary"]


def test_pages_of_fifty_keep_the_filters_in_their_links(viewer: Client) -> None:
    for index in range(120):
        _audit(
            "settings",
            1,
            "update",
            "pat",
            {"budget_window": "month"},
            {"budget_window": "week"},
            index,
        )
    _audit("catalog", 1, "create", "olga", None, {"provider": "x"}, 1)

    first = parse(viewer.get("/audit/?type=settings").content)
    third = parse(viewer.get("/audit/?type=settings&page=3").content)
    beyond = viewer.get("/audit/?type=settings&page=99")

    assert len(first.by_id("audit-table").by_tag("tbody")[0].by_tag("tr")) == 50
    pager = first.by_class("pager")[0]
    assert pager.by_tag("span")[0].text == "Page 1 of 3"
    assert pager.by_tag("a")[0].attrs["href"] == "/audit/?type=settings&page=2"
    assert len(third.by_id("audit-table").by_tag("tbody")[0].by_tag("tr")) == 20
    assert beyond.status_code == 200  # past the end: the last page


def test_with_nothing_recorded_the_page_says_so(viewer: Client) -> None:
    page = parse(viewer.get("/audit/").content)

    assert page.by_id("audit-table").by_tag("tbody")[0].text == "Nothing has been changed yet."


def test_the_page_runs_the_same_queries_at_five_and_at_500_rows(viewer: Client) -> None:
    def queries() -> int:
        viewer.get("/audit/")
        with CaptureQueriesContext(connection) as captured:
            assert viewer.get("/audit/").status_code == 200
        return sum(
            1
            for q in captured
            if '"billing_auditentry"' in q["sql"] or "ladder_" in q["sql"] or "billing_" in q["sql"]
        )

    kinds = ("catalog", "price", "candidate", "token", "webhook")
    for index in range(5):
        _audit(kinds[index], index + 1, "create", "olga", None, {"name": "x"}, index)
    small = queries()
    for index in range(495):
        _audit(
            kinds[index % 5], index + 10, "create", f"user-{index % 7}", None, {"name": "x"}, index
        )
    large = queries()

    # distinct types, distinct actors, the count, the page, one existence query per
    # linked type on the page (five)
    assert (small, large) == (9, 9)


# --- no-op changes, and a search of what the page shows (#35 point 8) ----------------------


def test_a_number_written_differently_is_no_change() -> None:
    before = {"cheap_budget_usd": "20.000000", "exit_cutoff_percent": 5.0, "priority": 3}
    after = {"cheap_budget_usd": "20", "exit_cutoff_percent": 5, "priority": 3}

    assert field_changes("update", before, after) == []
    assert [c.field for c in field_changes("update", before, {**after, "priority": 4})] == [
        "priority"
    ]


def test_an_update_that_changes_no_value_writes_no_audit_row() -> None:
    def update(before: dict[str, str], after: dict[str, str]) -> AuditEntry | None:
        return record_audit(
            target_type="settings",
            target_id=1,
            action="update",
            actor="pat",
            before=before,
            after=after,
        )

    assert update({"a": "20.00"}, {"a": "20"}) is None
    assert update({"a": "20.00"}, {"a": "21"}) is not None
    assert list(AuditEntry.objects.values_list("before", "after")) == [
        ({"a": "20.00"}, {"a": "21"})
    ]


def test_saving_the_settings_unchanged_or_written_differently_records_nothing() -> None:
    from decimal import Decimal

    from ladder import services

    row = services.get_settings_row()
    values = {name: getattr(row, name) for name in services.SETTINGS_FIELDS}
    services.update_settings({**values, "cheap_budget_usd": Decimal("20.00")}, actor="ana")
    services.update_settings({**values, "cheap_budget_usd": Decimal("20")}, actor="ana")
    services.update_settings({**values, "cheap_budget_usd": Decimal("20.0")}, actor="bo")
    services.update_settings({**values, "cheap_budget_usd": Decimal("25")}, actor="bo")

    rows = list(AuditEntry.objects.order_by("id"))
    assert [(r.actor, field_changes(r.action, r.before, r.after)) for r in rows] == [
        ("ana", [FieldChange("cheap_budget_usd", "Cheap rung budget (USD)", "none", "20.00")]),
        ("bo", [FieldChange("cheap_budget_usd", "Cheap rung budget (USD)", "20.00", "25.00")]),
    ]
    assert rows[1].after["cheap_budget_usd"] == "25.000000"  # the column's precision


def test_saving_a_price_written_differently_records_nothing() -> None:
    from decimal import Decimal

    from billing.services import PriceInput, upsert_price

    upsert_price(PriceInput("openai", "gpt-4o", Decimal("2.5"), Decimal("10"), None), actor="ana")
    upsert_price(
        PriceInput("openai", "gpt-4o", Decimal("2.50"), Decimal("10.000"), None), actor="bo"
    )

    assert list(AuditEntry.objects.values_list("action", "actor")) == [("create", "ana")]


def test_the_search_matches_what_the_page_shows_not_internal_keys(
    trail: dict[str, AuditEntry], viewer: Client
) -> None:
    def ids(query: str) -> list[str]:
        page = parse(viewer.get("/audit/", {"q": query}).content)
        return [
            tr.attrs.get("id") or ""
            for tr in page.by_id("audit-table").by_tag("tbody")[0].by_tag("tr")
            if tr.attrs.get("id")
        ]

    settings, price = f"audit-{trail['settings'].pk}", f"audit-{trail['price'].pk}"
    assert ids("Exit cutoff") == [settings]  # a field's label
    assert ids("exit_cutoff_percent") == []  # its internal key
    assert ids("input price") == [price]
    assert ids("input_usd") == []
    assert ids("2.50") == [price]  # a value as shown
    assert ids("reentry") == []  # a key of an unchanged field: the row does not show it
    assert ids("catalog entry") == [f"audit-{trail['catalog'].pk}"]  # the kind
