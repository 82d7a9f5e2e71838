"""Every connection and candidate write is audited in its own transaction, whoever makes
it (the API's token, a dashboard user, a script as "system"), and no audit row ever
holds a credential."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from billing.models import AuditEntry
from ladder import services
from ladder.models import ApiToken
from tests.ladder.factories import api, make_connection, make_token
from tests.worlds import signed_in

pytestmark = pytest.mark.django_db

SECRET = "sk-live-do-not-show-4242"


def _rows(target_type: str) -> list[tuple[str, str, str, object, object]]:
    return [
        (e.target_id, e.action, e.actor, e.before, e.after)
        for e in AuditEntry.objects.filter(target_type=target_type).order_by("id")
    ]


def _snapshot(**changed: object) -> dict[str, object]:
    return {
        "provider": "openai",
        "registered_provider": "openai",
        "auth_type": "apikey",
        "label": "",
        "active": True,
        "quota_source": "none",
        "authentication": "none",
        "exit_cutoff_percent": None,
        "reentry_min_remaining_percent": None,
        **changed,
    }


def test_a_connection_written_by_a_script_is_audited_as_the_system() -> None:
    make_connection("key", provider="openai", auth_type="apikey")

    assert _rows("connection") == [("key", "create", "system", None, _snapshot())]


def test_api_connection_writes_are_audited_as_their_token_and_never_hold_the_credential() -> None:
    gateway = make_token("gw", ApiToken.Scope.GATEWAY)
    body = {"provider": "openai", "auth_type": "apikey", "credential": SECRET}

    created = api("put", "/api/v1/connections/key", gateway, body)
    replaced = api("put", "/api/v1/connections/key", gateway, {**body, "label": "main"})
    kept = api("put", "/api/v1/connections/key", gateway, {**body, "credential": None})
    deleted = api("delete", "/api/v1/connections/key", gateway)

    assert [r.status_code for r in (created, replaced, kept, deleted)] == [200, 200, 200, 204]
    stored = _snapshot(authentication="stored")
    assert _rows("connection") == [
        ("key", "create", "token:gw", None, stored),
        (
            "key",
            "update",
            "token:gw",
            stored,
            {**stored, "label": "main", "authentication": "replaced"},
        ),
        ("key", "update", "token:gw", {**stored, "label": "main"}, stored),
        ("key", "delete", "token:gw", stored, None),
    ]
    assert SECRET not in json.dumps(list(AuditEntry.objects.values("before", "after")))


def test_a_refused_delete_records_nothing() -> None:
    assert (services.delete_connection("missing", actor="ann"), _rows("connection")) == (
        False,
        [],
    )


def test_api_candidate_writes_are_audited_as_their_token() -> None:
    make_connection("plan")
    gateway = make_token("gw", ApiToken.Scope.GATEWAY)
    body = {"provider": "claude", "model": "claude-sonnet-4-5", "connection_id": "plan"}

    created = api("post", "/api/v1/candidates", gateway, body).json()
    api("delete", f"/api/v1/candidates/{created['id']}", gateway)

    assert [(action, actor) for _, action, actor, _, _ in _rows("candidate")] == [
        ("create", "token:gw"),
        ("delete", "token:gw"),
    ]


def test_dashboard_connection_writes_are_audited_as_the_signed_in_operator(
    client: Client,
) -> None:
    signed_in(client, "olga", "operator")
    form = {"connection_id": "key", "provider": "openai", "auth_type": "apikey"}

    client.post("/connections/add/", {**form, "quota_source": "none", "active": "on"})
    client.post("/connections/key/delete/")

    assert [(action, actor) for _, action, actor, _, _ in _rows("connection")] == [
        ("create", "olga"),
        ("delete", "olga"),
    ]


def test_the_audit_page_names_and_links_a_connection_while_it_exists(client: Client) -> None:
    make_connection("key", provider="openai", auth_type="apikey")
    make_connection("gone", provider="openai", auth_type="apikey")
    services.delete_connection("gone", actor="ann")
    signed_in(client, "vera", "viewer")

    page = client.get("/audit/").content.decode()

    assert 'href="/connections/key/"' in page
    assert 'href="/connections/gone/"' not in page
    assert "Connection key" in page
    assert "Connection gone" in page


def test_the_longest_connection_id_is_audited_whole() -> None:
    longest = "k" * 128

    make_connection(longest, provider="openai", auth_type="apikey")
    services.delete_connection(longest, actor="ann")

    assert [(target, action) for target, action, _, _, _ in _rows("connection")] == [
        (longest, "create"),
        (longest, "delete"),
    ]
