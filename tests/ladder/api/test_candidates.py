"""The candidates endpoints (ladder/api/candidates.py): register, list, replace, delete,
and the gateway's `ref` kept and echoed."""

from __future__ import annotations

from typing import Any

import pytest

from ladder import services as ladder_services
from ladder.models import (
    ApiToken,
    Candidate,
)
from tests.ladder.factories import api, make_candidate, make_connection, make_token

pytestmark = pytest.mark.django_db


def candidate_rows() -> list[tuple[Any, ...]]:
    return list(
        Candidate.objects.order_by("pk").values_list(
            "provider", "model", "categories", "priority", "connection_id", "allowed_connection_ids"
        )
    )


def test_post_candidate_registers_it_with_201(gateway: str) -> None:
    response = api(
        "post",
        "/api/v1/candidates",
        gateway,
        {
            "provider": "claude",
            "model": "claude-sonnet-4-5",
            "categories": ["coding", "coding", "chat"],
            "priority": -3,
            "allowed_connection_ids": ["claude-max-1", "claude-max-2"],
        },
    )

    candidate = Candidate.objects.get()
    assert response.status_code == 201
    assert response.json() == {
        "id": candidate.pk,
        "provider": "claude",
        "registered_provider": "claude",
        "model": "claude-sonnet-4-5",
        "categories": ["coding", "chat"],
        "priority": -3,
        "connection_id": None,
        "allowed_connection_ids": ["claude-max-1", "claude-max-2"],
        "ref": None,
    }


def test_post_candidate_defaults_categories_and_priority(gateway: str) -> None:
    response = api(
        "post",
        "/api/v1/candidates",
        gateway,
        {"provider": "openai", "model": "gpt-4o-mini", "connection_id": "openai-key"},
    )

    assert response.status_code == 201
    assert response.json() == {
        "id": Candidate.objects.get().pk,
        "provider": "openai",
        "registered_provider": "openai",
        "model": "gpt-4o-mini",
        "categories": [],
        "priority": 0,
        "connection_id": "openai-key",
        "allowed_connection_ids": None,
        "ref": None,
    }


@pytest.mark.parametrize(
    "target",
    [
        pytest.param({"connection_id": "a", "allowed_connection_ids": ["b"]}, id="both"),
        pytest.param({}, id="neither"),
        pytest.param({"allowed_connection_ids": []}, id="empty-allowlist"),
        pytest.param({"connection_id": None, "allowed_connection_ids": None}, id="both-null"),
    ],
)
def test_post_candidate_needs_exactly_one_target(gateway: str, target: dict[str, Any]) -> None:
    response = api(
        "post", "/api/v1/candidates", gateway, {"provider": "openai", "model": "m", **target}
    )

    assert response.status_code == 422
    assert response.json() == {
        "detail": [
            {
                "loc": ["body", "payload", "connection_id"],
                "msg": "Give exactly one of connection_id and a non-empty allowed_connection_ids.",
                "type": "value_error",
            }
        ]
    }
    assert candidate_rows() == []


@pytest.mark.parametrize(
    ("change", "loc", "error_type"),
    [
        pytest.param({"priority": "1"}, ["priority"], "int_type", id="string-priority"),
        pytest.param({"priority": True}, ["priority"], "int_type", id="boolean-priority"),
        pytest.param(
            {"categories": ["co ding"]},
            ["categories", 0],
            "string_pattern_mismatch",
            id="bad-category",
        ),
        pytest.param(
            {"connection_id": "a%20b"},
            ["connection_id"],
            "string_pattern_mismatch",
            id="hostile-id",
        ),
        pytest.param({"tags": []}, ["tags"], "extra_forbidden", id="unknown-field"),
        pytest.param({"model": ""}, ["model"], "string_too_short", id="empty-model"),
    ],
)
def test_post_candidate_refuses_an_invalid_body_and_stores_nothing(
    gateway: str, change: dict[str, Any], loc: list[Any], error_type: str
) -> None:
    body = {"provider": "openai", "model": "m", "connection_id": "openai-key", **change}

    response = api("post", "/api/v1/candidates", gateway, body)

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", *loc], error_type)
    ]
    assert candidate_rows() == []


def test_list_candidates_orders_by_priority_then_id(gateway: str) -> None:
    late = make_candidate("openai", "b", connection_id="k", priority=5)
    early = make_candidate("openai", "a", connection_id="k", priority=1)
    tie = make_candidate("openai", "c", connection_id="k", priority=5)

    response = api("get", "/api/v1/candidates", gateway)

    assert response.status_code == 200
    assert [c["id"] for c in response.json()] == [early.pk, late.pk, tie.pk]
    assert response.json()[0] == {
        "id": early.pk,
        "provider": "openai",
        "registered_provider": "openai",
        "model": "a",
        "categories": [],
        "priority": 1,
        "connection_id": "k",
        "allowed_connection_ids": None,
        "ref": None,
    }


def test_put_candidate_replaces_its_fields(gateway: str) -> None:
    candidate = make_candidate(connection_id="claude-max-1", categories=("coding",))

    response = api(
        "put",
        f"/api/v1/candidates/{candidate.pk}",
        gateway,
        {"provider": "claude", "model": "claude-opus", "allowed_connection_ids": ["a", "b"]},
    )

    assert response.status_code == 200
    assert response.json() == {
        "id": candidate.pk,
        "provider": "claude",
        "registered_provider": "claude",
        "model": "claude-opus",
        "categories": [],
        "priority": 0,
        "connection_id": None,
        "allowed_connection_ids": ["a", "b"],
        "ref": None,
    }
    assert candidate_rows() == [("claude", "claude-opus", [], 0, None, ["a", "b"])]


def test_put_unknown_candidate_is_404(gateway: str) -> None:
    response = api(
        "put",
        "/api/v1/candidates/999999",
        gateway,
        {"provider": "claude", "model": "m", "connection_id": "c"},
    )

    assert response.status_code == 404
    assert response.json() == {"detail": "No candidate 999999."}
    assert candidate_rows() == []


def test_put_candidate_refused_changes_nothing(gateway: str) -> None:
    candidate = make_candidate(connection_id="claude-max-1")
    before = candidate_rows()

    response = api(
        "put",
        f"/api/v1/candidates/{candidate.pk}",
        gateway,
        {"provider": "claude", "model": "m", "connection_id": "c", "allowed_connection_ids": ["d"]},
    )

    assert response.status_code == 422
    assert candidate_rows() == before


def test_delete_candidate_answers_204(gateway: str) -> None:
    candidate = make_candidate()

    response = api("delete", f"/api/v1/candidates/{candidate.pk}", gateway)

    assert response.status_code == 204
    assert candidate_rows() == []


def test_delete_unknown_candidate_is_404(gateway: str) -> None:
    response = api("delete", "/api/v1/candidates/999999", gateway)

    assert response.status_code == 404
    assert response.json() == {"detail": "No candidate 999999."}


def test_a_candidate_keeps_its_ref_and_every_pool_entry_echoes_it() -> None:
    gateway = make_token("gw-ref", ApiToken.Scope.GATEWAY)
    make_connection("claude-max-1")
    created = api(
        "post",
        "/api/v1/candidates",
        gateway,
        {"provider": "claude", "model": "m", "connection_id": "claude-max-1", "ref": "dep/é-1"},
    )
    assert created.status_code == 201
    assert created.json()["ref"] == "dep/é-1"
    pool = api("get", "/api/v1/pools/auto/thrifty", gateway).json()
    assert [(c["id"], c["ref"]) for c in pool["candidates"]] == [(created.json()["id"], "dep/é-1")]
    too_long = api(
        "post",
        "/api/v1/candidates",
        gateway,
        {"provider": "claude", "model": "m", "connection_id": "claude-max-1", "ref": "x" * 257},
    )
    assert too_long.status_code == 422
    assert Candidate.objects.count() == 1


def test_the_ref_is_part_of_a_posted_pools_tag() -> None:
    gateway = make_token("gw-ref", ApiToken.Scope.GATEWAY)
    make_connection("claude-max-1")

    def post(ref: str | None) -> Any:
        body = {
            "candidates": [
                {"provider": "claude", "model": "m", "connection_id": "claude-max-1", "ref": ref}
            ]
        }
        return api("post", "/api/v1/pools/auto/thrifty", gateway, body)

    a, a_again, b = post("a"), post("a"), post("b")
    assert a["ETag"] == a_again["ETag"] != b["ETag"]
    assert b.json()["candidates"][0]["ref"] == "b"


def test_a_dashboard_edit_keeps_the_ref_the_gateway_set() -> None:
    make_connection("claude-max-1")
    candidate = ladder_services.save_candidate(
        ladder_services.CandidateInput("claude", "m", connection_id="claude-max-1", ref="dep-1")
    )
    ladder_services.save_candidate(
        ladder_services.CandidateInput(
            "claude", "m2", connection_id="claude-max-1", keeps_ref=True
        ),
        candidate.pk,
    )
    assert Candidate.objects.get().ref == "dep-1"
    ladder_services.save_candidate(
        ladder_services.CandidateInput("claude", "m2", connection_id="claude-max-1"), candidate.pk
    )
    assert Candidate.objects.get().ref is None
