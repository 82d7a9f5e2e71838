"""The dashboard page of the provider aliases: viewers read it, operators add, replace
and delete (audited, through the service), a viewer's POST is a 403."""

from __future__ import annotations

import pytest
from django.test import Client

from billing.models import AuditEntry, ProviderAlias
from tests.pages import Element, parse
from tests.worlds import signed_in

pytestmark = pytest.mark.django_db


def test_a_viewer_reads_the_aliases_but_cannot_write_them(client: Client) -> None:
    viewer = signed_in(client, "vera", "viewer")
    page = viewer.get("/aliases/")
    assert page.status_code == 200
    assert b"<code>anthropic</code>" in page.content
    assert b"Save alias" not in page.content
    assert viewer.post("/aliases/save/", {"alias": "x", "provider": "y"}).status_code == 403
    assert viewer.post("/aliases/anthropic/delete/").status_code == 403
    assert ProviderAlias.objects.count() == 3


def test_an_operator_adds_normalised_replaces_and_deletes(client: Client) -> None:
    operator = signed_in(client, "olga", "operator")
    saved = operator.post("/aliases/save/", {"alias": " Gemini ", "provider": "Antigravity"})
    assert saved.status_code == 302
    assert ProviderAlias.objects.get(alias="gemini").provider == "antigravity"
    conflict = operator.post("/aliases/save/", {"alias": "claude", "provider": "x"})
    assert conflict.status_code == 409
    assert b"is a provider with catalog entries" in conflict.content
    chain = operator.post("/aliases/save/", {"alias": "x", "provider": "anthropic"})
    assert chain.status_code == 422
    assert operator.post("/aliases/gemini/delete/").status_code == 302
    assert operator.post("/aliases/gemini/delete/").status_code == 404
    assert list(
        AuditEntry.objects.filter(target_type="provider_alias")
        .order_by("id")
        .values_list("action", "actor")
    ) == [("create", "olga"), ("delete", "olga")]


def test_the_aliases_are_linked_from_the_navigation_and_the_catalog(client: Client) -> None:
    viewer = signed_in(client, "vera", "viewer")
    catalog = parse(viewer.get("/catalog/").content)
    aliases = parse(viewer.get("/aliases/").content)

    def hrefs(element: Element) -> list[str]:
        return [a.attrs.get("href") or "" for a in element.by_tag("a")]

    assert "/aliases/" in hrefs(catalog.by_id("main-nav"))
    assert hrefs(catalog.by_id("catalog-aliases")) == ["/aliases/"]
    current = [a for a in aliases.by_id("main-nav").by_tag("a") if "aria-current" in a.attrs]
    assert [(a.attrs["href"], a.text) for a in current] == [("/aliases/", "Aliases")]
