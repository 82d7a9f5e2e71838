"""The dashboard page of the provider aliases: viewers read it, operators add, replace
and delete (audited, through the service), a viewer's POST is a 403."""

from __future__ import annotations

import pytest
from django.test import Client

from billing.models import AuditEntry, ProviderAlias
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
