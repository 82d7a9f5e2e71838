"""The registered candidates (spec/api.md "Candidates"): list, create, replace, delete."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest
from ninja import Router, Status

from ladder import services
from ladder.api.params import detail
from ladder.models import Candidate
from ladder.schemas import CandidateIn as CandidateSchema
from ladder.schemas import CandidateOut
from omniroute_admin.auth import actor_of, gateway_auth
from omniroute_admin.errors import BODY_ERRORS, GATEWAY_ERRORS

router = Router(tags=["ladder"])


def _candidate_input(payload: CandidateSchema) -> services.CandidateInput:
    return services.CandidateInput(
        provider=payload.provider,
        model=payload.model,
        categories=tuple(payload.categories),
        priority=payload.priority,
        connection_id=payload.connection_id,
        allowed_connection_ids=tuple(payload.allowed_connection_ids)
        if payload.allowed_connection_ids
        else None,
        ref=payload.ref,
    )


@router.get("/candidates", response={200: list[CandidateOut], **GATEWAY_ERRORS}, auth=gateway_auth)
def list_candidates(request: HttpRequest) -> list[Candidate]:
    """Registered candidates, by priority (lower first), ties by id."""
    return list(Candidate.objects.order_by("priority", "id"))


@router.post(
    "/candidates", response={201: CandidateOut, **BODY_ERRORS, **GATEWAY_ERRORS}, auth=gateway_auth
)
def create_candidate(request: HttpRequest, payload: CandidateSchema) -> Any:
    """Register a candidate: exactly one of `connection_id` and a non-empty
    `allowed_connection_ids`."""
    return Status(201, services.save_candidate(_candidate_input(payload), actor=actor_of(request)))


@router.put(
    "/candidates/{int:candidate_id}",
    response={200: CandidateOut, 404: dict, **BODY_ERRORS, **GATEWAY_ERRORS},
    auth=gateway_auth,
)
def update_candidate(request: HttpRequest, candidate_id: int, payload: CandidateSchema) -> Any:
    """Replace a candidate's fields."""
    return services.save_candidate(_candidate_input(payload), candidate_id, actor=actor_of(request))


@router.delete(
    "/candidates/{int:candidate_id}",
    response={204: None, 404: dict, **GATEWAY_ERRORS},
    auth=gateway_auth,
)
def delete_candidate(request: HttpRequest, candidate_id: int) -> Any:
    """Remove a candidate."""
    if not services.delete_candidate(candidate_id, actor=actor_of(request)):
        return Status(404, detail(f"No candidate {candidate_id}."))
    return Status(204, None)
