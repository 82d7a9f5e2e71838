"""A deeply nested JSON body is a JSON 400 on every endpoint that reads one, never a 500
(json.loads raises RecursionError, not a ValueError). POST /spend has no road but
Django's; the pool fast lane never parses a body (it keys a POST by its digest)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from ladder.models import ApiToken
from omniroute_admin.api import api
from tests.ladder.factories import make_token

pytestmark = pytest.mark.django_db

# Far past the interpreter's recursion limit: json.loads raises RecursionError (not a
# ValueError) on either kind of nesting.
DEEP_BODIES = [
    pytest.param(b"[" * 5000 + b"]" * 5000, id="arrays"),
    pytest.param(b'{"a":' * 5000 + b"1" + b"}" * 5000, id="objects"),
]


def _operations_with_a_body() -> list[tuple[str, str]]:
    schema: dict[str, Any] = api.get_openapi_schema(path_prefix="/api/v1")
    return sorted(
        (method, re.sub(r"\{[^}]+\}", "1", path))
        for path, operations in schema["paths"].items()
        for method, operation in operations.items()
        if "requestBody" in operation
    )


OPERATIONS = _operations_with_a_body()


def test_the_endpoints_that_read_a_body_are_all_here() -> None:
    assert ("post", "/api/v1/spend") in OPERATIONS
    assert ("post", "/api/v1/events/batch") in OPERATIONS
    assert len(OPERATIONS) >= 10


@pytest.mark.parametrize("body", DEEP_BODIES)
@pytest.mark.parametrize(("method", "path"), OPERATIONS)
def test_a_deeply_nested_body_is_a_json_400_on_every_endpoint(
    method: str, path: str, body: bytes
) -> None:
    secret = make_token("op", ApiToken.Scope.OPERATOR)
    client = Client(raise_request_exception=False)

    response = getattr(client, method)(
        path, body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {secret}"
    )

    assert response.status_code == 400
    assert response.json() == {"detail": "Cannot parse request body"}
