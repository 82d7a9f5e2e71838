"""A canary credential and a canary token pushed through every flow never show up in a
response, a log record, a task's arguments, a reading or a database dump."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.test import Client, override_settings

from ladder import refresh, services, tasks
from ladder.models import Connection
from tests.ladder.factories import make_token
from tests.ladder.quota.fake_upstream import FakeUpstream

pytestmark = pytest.mark.django_db

CREDENTIAL = "sk-ant-oat01-CANARYCREDENTIAL0123456789"
ROTATED = "sk-ant-oat01-CANARYROTATED9876543210"
CANARIES = (CREDENTIAL, ROTATED, "CANARYCREDENTIAL", "CANARYROTATED")


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    server = FakeUpstream()
    server.start()
    with override_settings(QUOTA_URL_OVERRIDES={"claude": server.url("/api/oauth/usage")}):
        yield server
    server.stop()


def _assert_clean(text: str, where: str) -> None:
    for canary in CANARIES:
        assert canary not in text, f"{canary} leaked into {where}"


def _put(client: Client, token: str, body: dict[str, Any]) -> Any:
    return client.put(
        "/api/v1/connections/plan",
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


def test_a_canary_credential_leaks_nowhere(
    client: Client, caplog: pytest.LogCaptureFixture, upstream: FakeUpstream, monkeypatch: Any
) -> None:
    caplog.set_level(logging.DEBUG)
    token = make_token()
    sent: list[Any] = []
    monkeypatch.setattr(
        tasks.refresh_connection_task, "apply_async", lambda *a, **k: sent.append((a, k))
    )
    bodies: list[str] = []
    base = {"provider": "claude", "auth_type": "oauth", "quota_source": "claude"}

    # create, update, refused writes
    bodies.append(_put(client, token, {**base, "credential": CREDENTIAL}).content.decode())
    bodies.append(_put(client, token, {**base, "credential": ROTATED}).content.decode())
    bodies.append(_put(client, token, {**base, "credential": ROTATED + "\x00"}).content.decode())
    bodies.append(_put(client, token, {**base, "credential": ROTATED * 400}).content.decode())
    bodies.append(
        _put(client, token, {**base, "credential": ROTATED, "extra": ROTATED}).content.decode()
    )
    # reads
    auth: dict[str, Any] = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    for path in (
        "/api/v1/connections",
        "/api/v1/connections/plan",
        "/api/v1/connections/plan/status",
        "/api/v1/openapi.json",
        "/metrics",
    ):
        bodies.append(client.get(path, **auth).content.decode())
    # a refresh request, then the poll itself, against an upstream that echoes the token
    bodies.append(client.post("/api/v1/connections/plan/refresh", **auth).content.decode())
    upstream.respond(status=500, body=f'{{"error": "bad token {ROTATED}"}}')
    refresh.refresh_quota("plan")
    upstream.respond(status=401, body=f"rejected {ROTATED}")
    refresh.refresh_quota("plan", requested_at=None)
    # the dashboard, as an operator
    user = User.objects.create_user("ops", password="a-long-test-password")
    user.groups.add(Group.objects.get(name="operator"))
    client.force_login(user)
    for path in ("/connections/", "/connections/plan/", "/", "/pools/"):
        response = client.get(path)
        assert response.status_code == 200
        bodies.append(response.content.decode())

    for index, body in enumerate(bodies):
        _assert_clean(body, f"response #{index}")
    for record in caplog.records:
        _assert_clean(record.getMessage(), f"log record {record.name}")
    _assert_clean(repr(sent), "task arguments")
    assert sent  # the refresh was enqueued, with ids only
    readings = list(
        Connection.objects.get(connection_id="plan").readings.values_list("detail", flat=True)
    )
    assert len(readings) == 2
    for detail in readings:
        _assert_clean(detail, "a reading's detail")
    dump = StringIO()
    call_command("dumpdata", stdout=dump)
    _assert_clean(dump.getvalue(), "the database dump")
    # ... while the credential is really stored, and usable
    stored = Connection.objects.get(connection_id="plan")
    assert stored.has_credential
    assert [r.headers["authorization"] for r in upstream.received] == [f"Bearer {ROTATED}"] * 2


def test_a_canary_token_leaks_nowhere(client: Client, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    token = make_token()
    services.upsert_connection("plan", services.ConnectionInput("claude", "oauth"))
    bodies = [
        client.get("/api/v1/connections", HTTP_AUTHORIZATION=f"Bearer {token}").content,
        client.get("/api/v1/connections", HTTP_AUTHORIZATION=f"Bearer {token}x").content,
        client.get("/v1/models", HTTP_AUTHORIZATION=f"Bearer {token}").content,
        client.put(
            "/api/v1/settings/ladder",
            "{}",
            content_type="application/json",
            HTTP_AUTHORIZATION=f"Bearer {token}",
        ).content,
    ]
    dump = StringIO()
    call_command("dumpdata", stdout=dump)

    for body in bodies:
        assert token not in body.decode()
    for record in caplog.records:
        assert token not in record.getMessage()
    assert token not in dump.getvalue()
    assert token[4:] not in dump.getvalue()  # not even without its prefix
