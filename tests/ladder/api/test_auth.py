"""Tokens on the API (omniroute_admin.auth): scopes, last use, the create_api_token
command, and a disallowed host answered as JSON on API paths."""

from __future__ import annotations

import hashlib
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from ladder.models import (
    ApiToken,
)
from tests.ladder.api.calls import TUNED
from tests.ladder.factories import api

pytestmark = pytest.mark.django_db


def test_an_operator_token_can_call_gateway_endpoints(operator: str) -> None:
    response = api("get", "/api/v1/connections", operator)

    assert response.status_code == 200


def test_an_api_call_stamps_the_tokens_last_use(gateway: str) -> None:
    before = timezone.now()

    api("get", "/api/v1/models", gateway)

    last_used_at = ApiToken.objects.get().last_used_at
    assert last_used_at is not None
    assert before <= last_used_at <= timezone.now()


def test_create_api_token_prints_the_token_alone_on_stdout() -> None:
    out = StringIO()

    call_command("create_api_token", "edge-1", "--scope", "gateway", stdout=out)

    secret = out.getvalue().strip()
    token = ApiToken.objects.get()
    assert out.getvalue() == secret + "\n"
    assert secret.startswith("omr_")
    assert (token.name, token.scope, token.created_by, token.prefix) == (
        "edge-1",
        "gateway",
        "cli",
        secret[:12],
    )
    assert token.secret_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in token.secret_hash


def test_a_token_from_the_command_authenticates_with_its_scope() -> None:
    out = StringIO()
    call_command("create_api_token", "edge-1", "--scope", "gateway", stdout=out)
    secret = out.getvalue().strip()

    read = api("get", "/api/v1/catalog", secret)
    write = api("put", "/api/v1/settings/ladder", secret, TUNED)

    assert (read.status_code, write.status_code) == (200, 403)


def test_an_operator_token_from_the_command_can_write() -> None:
    out = StringIO()
    call_command("create_api_token", "admin", "--scope", "operator", stdout=out)

    response = api("put", "/api/v1/settings/ladder", out.getvalue().strip(), TUNED)

    assert response.status_code == 200


def test_create_api_token_refuses_an_unknown_scope() -> None:
    with pytest.raises(CommandError, match="invalid choice: 'root'"):
        call_command("create_api_token", "x", "--scope", "root", stdout=StringIO())

    assert not ApiToken.objects.exists()


def test_create_api_token_refuses_a_blank_name() -> None:
    with pytest.raises(CommandError, match="name must be 1 to 100 characters"):
        call_command("create_api_token", "   ", "--scope", "gateway", stdout=StringIO())

    assert not ApiToken.objects.exists()


@pytest.mark.parametrize(
    "path", ["/api/v1/pools/auto/subscription", "/api/v1/prices", "/api/v1/nope", "/v1/models"]
)
def test_a_disallowed_host_on_an_api_path_is_a_json_400(gateway: str, path: str) -> None:
    response = Client().get(path, HTTP_HOST="evil.example", HTTP_AUTHORIZATION=f"Bearer {gateway}")

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Bad Request"}


def test_a_disallowed_host_on_a_dashboard_path_stays_an_html_400() -> None:
    response = Client().get("/prices/", HTTP_HOST="evil.example")

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")
