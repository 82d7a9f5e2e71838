"""Body limits and security headers, on any URL."""

from __future__ import annotations

import pytest
from django.test import Client, override_settings

from tests.ladder.factories import make_token


def test_every_response_carries_a_strict_csp_and_friends(client: Client) -> None:
    response = client.get("/healthz")

    csp = response.headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp
    assert "script-src 'self';" in csp
    assert "unsafe-inline" not in csp
    assert "unsafe-eval" not in csp
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["Referrer-Policy"] == "same-origin"
    assert response.headers["X-Frame-Options"] == "DENY"


@pytest.mark.django_db
@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_an_api_body_over_the_limit_is_a_json_413_and_writes_nothing(client: Client) -> None:
    from ladder.models import Candidate

    token = make_token()
    body = '{"provider": "claude", "model": "' + "m" * 2000 + '", "connection_id": "x"}'

    response = client.post(
        "/api/v1/candidates",
        body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )

    assert response.status_code == 413
    assert response.json() == {"detail": "The request body is larger than the limit of 1000 bytes."}
    assert Candidate.objects.count() == 0
