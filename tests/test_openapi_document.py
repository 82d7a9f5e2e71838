"""The served OpenAPI document: one key per mapping (Swagger UI refuses a duplicated
key, where Python's JSON reader silently keeps the last), valid OpenAPI 3.1, built once
per process and served outside the API deadline."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from openapi_spec_validator import validate
from openapi_spec_validator.validation.exceptions import OpenAPIValidationError

from omniroute_admin import deadline
from omniroute_admin.api import api


class DuplicateKey(ValueError):
    """A JSON object names one key twice."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise DuplicateKey(f"duplicated keys {repeated}")
    return dict(pairs)


def _served() -> dict[str, Any]:
    response = Client().get("/api/v1/openapi.json")
    assert response.status_code == 200
    document: dict[str, Any] = json.loads(response.content, object_pairs_hook=_unique_keys)
    return document


def test_the_duplicate_key_reader_refuses_a_repeated_key() -> None:
    with pytest.raises(DuplicateKey, match=r"\['200'\]"):
        json.loads('{"200": {}, "200": {"headers": {}}}', object_pairs_hook=_unique_keys)


def test_the_served_document_has_one_key_per_mapping_and_is_valid_openapi_3_1() -> None:
    document = _served()

    assert document["openapi"] == "3.1.0"
    validate(document)  # raises on any violation of the OpenAPI 3.1 schema


def test_the_validator_refuses_a_document_that_breaks_the_schema() -> None:
    document = _served()
    document["paths"]["/api/v1/connections"]["get"]["responses"] = "none"

    with pytest.raises(OpenAPIValidationError):
        validate(document)


def test_a_pool_answer_documents_its_caching_headers_on_its_one_200() -> None:
    responses = _served()["paths"]["/api/v1/pools/{auto_id}"]["get"]["responses"]

    assert set(responses["200"]["headers"]) == {"ETag", "Cache-Control"}
    assert "content" in responses["200"]  # ninja's own body schema, merged, not replaced
    assert set(responses["304"]["headers"]) == {"ETag", "Cache-Control"}


def test_the_document_is_built_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    first = api.get_openapi_schema()
    builds: list[str] = []

    def counted(schema: dict[str, Any]) -> dict[str, Any]:
        builds.append("built")
        return schema

    monkeypatch.setattr("omniroute_admin.api.add_examples", counted)

    second = api.get_openapi_schema()
    second["info"]["title"] = "edited by a caller"

    assert builds == []
    assert second["paths"] == first["paths"]
    assert api.get_openapi_schema()["info"]["title"] == "OmniRoute Admin API"


@pytest.mark.parametrize("path", ["/api/v1/openapi.json", "/api/v1/docs"])
def test_the_docs_are_served_outside_the_api_deadline(
    path: str, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings.API_REQUEST_DEADLINE_SECONDS = 0.001

    def no_pool(*args: Any) -> Any:
        raise AssertionError("the docs went through the deadline's pool")

    monkeypatch.setattr(deadline, "call_within_deadline", no_pool)

    assert Client().get(path).status_code == 200
