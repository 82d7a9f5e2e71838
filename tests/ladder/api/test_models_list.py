"""`GET /api/v1/models` (ladder/api/models_list.py): the advertised auto ids."""

from __future__ import annotations

import pytest

from tests.ladder.factories import api

pytestmark = pytest.mark.django_db


def test_models_lists_the_two_flat_auto_ids(gateway: str) -> None:
    response = api("get", "/api/v1/models", gateway)

    assert response.status_code == 200
    assert response.json() == {
        "object": "list",
        "data": [
            {"id": "auto/subscription", "object": "model", "created": 0, "owned_by": "omniroute"},
            {"id": "auto/thrifty", "object": "model", "created": 0, "owned_by": "omniroute"},
        ],
    }


def test_models_needs_a_token() -> None:
    response = api("get", "/api/v1/models")

    assert response.status_code == 401
