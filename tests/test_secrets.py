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

from ladder import services
from ladder.models import Connection
from ladder.services import enqueue, polling
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
    monkeypatch.setattr(enqueue, "send_refresh", lambda *a, **k: sent.append((a, k)))
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
    polling.refresh_quota("plan")
    upstream.respond(status=401, body=f"rejected {ROTATED}")
    polling.refresh_quota("plan", requested_at=None)
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


# --- item 9: the credential stays out of stored errors, end to end ----------------------

ADAPTER_TOKEN = "sk-ant-oat01-CANARYADAPTER0123456789"


def _representative_answers(token: str) -> list[tuple[int, str, dict[str, str]]]:
    """One upstream answer per way a poll goes wrong (or names a window), each echoing."""
    as_json = {"Content-Type": "application/json"}
    return [
        (500, json.dumps({"error": f"bad Authorization: Bearer {token}"}), as_json),
        (401, f"rejected {token}", as_json),
        (429, f"slow down {token}", {**as_json, "Retry-After": "1"}),
        (302, "", {"Location": f"https://{token.lower()}.example/"}),
        (200, f"not json {token}", {"Content-Type": f"text/plain; t={token}"}),
        (200, json.dumps({f"seven_day_{token}": token, "models": {token: token}}), as_json),
        (
            200,
            json.dumps(
                {
                    f"seven_day_{token}": {"utilization": 10},
                    "buckets": [{"modelId": token, "remainingFraction": 0.5}],
                    "models": {token: {"quotaInfo": {"remainingFraction": 0.5}}},
                }
            ),
            as_json,
        ),
    ]


@pytest.fixture
def every_upstream() -> Iterator[FakeUpstream]:
    """One fake upstream standing in for every HTTP adapter's endpoint."""
    from ladder.quota.registry import REGISTRY

    server = FakeUpstream()
    server.start()
    overrides = {name: server.url(f"/{name}") for name in REGISTRY if name != "simulated"}
    with override_settings(QUOTA_URL_OVERRIDES=overrides):
        yield server
    server.stop()


def test_a_canary_credential_stays_out_of_every_stored_error_shown_or_logged(
    client: Client, caplog: pytest.LogCaptureFixture, every_upstream: FakeUpstream, monkeypatch: Any
) -> None:
    from ladder.quota.registry import REGISTRY

    caplog.set_level(logging.DEBUG)
    monkeypatch.setattr(enqueue, "send_refresh", lambda *a, **k: None)
    token = ADAPTER_TOKEN
    credentials = {
        "claude": token,
        "copilot": token,
        "codex": json.dumps({"access_token": token}),
        "gemini-cli": json.dumps({"access_token": token, "project": "proj-1"}),
        "antigravity": token,
    }
    cases: list[tuple[str, str]] = []
    for name in REGISTRY:
        if name == "simulated":
            continue
        for index, (status, body, headers) in enumerate(_representative_answers(token)):
            connection_id = f"{name}-{index}"
            services.upsert_connection(
                connection_id,
                services.ConnectionInput(
                    "claude", "oauth", quota_source=name, credential=credentials[name]
                ),
            )
            every_upstream.respond(status=status, body=body, headers=headers)
            outcome = polling.refresh_quota(connection_id)
            assert outcome.polled
            cases.append((connection_id, f"{name} answering {status} {body[:60]!r}"))
    # the reported case: the simulated parser quoted its config (the credential)
    for index, config in enumerate(
        ({"epoch": token}, {token: 1}, {"plan_size": 5, "burn_per_minute": -1, token: token})
    ):
        connection_id = f"simulated-{index}"
        services.upsert_connection(
            connection_id,
            services.ConnectionInput(
                "claude", "oauth", quota_source="simulated", credential=json.dumps(config)
            ),
        )
        assert polling.refresh_quota(connection_id).polled
        cases.append((connection_id, f"the simulated config {config}"))

    def assert_clean(text: str, where: str) -> None:
        assert "canary" not in text.lower(), f"the credential leaked into {where}"

    gateway = make_token()
    user = User.objects.create_user("ops", password="a-long-test-password")
    user.groups.add(Group.objects.get(name="operator"))
    client.force_login(user)
    for connection_id, how in cases:
        row = Connection.objects.get(connection_id=connection_id)
        assert row.current_reading is not None
        for reading in row.readings.all():
            assert_clean(f"{reading.detail} {json.dumps(reading.windows)}", f"a reading ({how})")
        assert_clean(f"{row.quota_error} {row.hysteresis_reason}", f"the connection ({how})")
        answer = client.get(
            f"/api/v1/connections/{connection_id}/status", HTTP_AUTHORIZATION=f"Bearer {gateway}"
        )
        assert answer.status_code == 200
        assert_clean(answer.content.decode(), f"the status API ({how})")
        page = client.get(f"/connections/{connection_id}/")
        assert page.status_code == 200
        assert_clean(page.content.decode(), f"the connection page ({how})")
    for path in ("/", "/connections/", "/pools/"):
        assert_clean(client.get(path).content.decode(), f"the dashboard page {path}")
    formatter = logging.Formatter("%(name)s %(message)s")
    for record in caplog.records:
        assert_clean(formatter.format(record), f"the log record {record.name}")
    # ... while the credential really was sent, and a window was named from the payload
    assert f"Bearer {token}" in {r.headers.get("authorization") for r in every_upstream.received}
    windows = [json.dumps(r.current_reading.windows) for r in Connection.objects.all()]
    assert any('"name": "[redacted]"' in names for names in windows)
