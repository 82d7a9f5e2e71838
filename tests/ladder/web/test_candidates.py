"""The candidates pages: the list with the pools each candidate lands in and why not,
a candidate's page, and the operator's add, edit and delete (viewers: 403, nothing
changed)."""

from __future__ import annotations

import pytest
from django.test import Client

from billing.models import AuditEntry, ChangeCounter
from ladder.models import Candidate
from omniroute_admin import dashboard
from tests.ladder.factories import NOW, make_candidate, make_connection, make_reading
from tests.pages import parse
from tests.worlds import htmx_headers, signed_in

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _pinned_now(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dashboard, "current_time", lambda: NOW)


def test_smoke(client: Client) -> None:
    make_connection("claude-max-1")
    make_reading("claude-max-1", remaining_percent=50.0)
    make_connection("openai-key", provider="openai", auth_type="api_key")
    c = make_candidate(categories=("coding",))
    make_candidate("openai", "gpt-4o", connection_id=None, allowed_connection_ids=("openai-key", "ghost"))
    signed_in(client, "olga", "operator")
    r = client.get("/candidates/")
    print(r.content.decode())
    r = client.get(f"/candidates/{c.pk}/")
    assert r.status_code == 200
    r = client.get("/candidates/999/")
    print(r.status_code, r.content.decode()[-800:])


def test_smoke_connections(client: Client) -> None:
    make_connection("claude-max-1")
    make_reading("claude-max-1", remaining_percent=50.0)
    make_connection("openai-key", provider="openai", auth_type="api_key")
    make_candidate()
    signed_in(client, "olga", "operator")
    for url in ["/connections/", "/connections/?state=no-candidate&sort=-quota", "/connections/?sort=-connection&rung=zz"]:
        r = client.get(url)
        assert r.status_code == 200, url
    print(r.content.decode()[r.content.decode().index("<thead"):][:6000])


def test_smoke_detail(client: Client) -> None:
    make_connection("claude-max-1")
    make_connection("openai-key", provider="openai", auth_type="api_key")
    make_candidate()
    signed_in(client, "olga", "operator")
    r = client.get("/connections/claude-max-1/")
    html = r.content.decode()
    print(html[html.index('id="connection-pools"'):html.index('class="card chart-card"')])
    r = client.get("/connections/nope/")
    print(r.status_code, r.content.decode()[-700:])
