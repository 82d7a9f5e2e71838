"""Registered candidates (ladder/api/candidates.py)."""

from __future__ import annotations

from typing import Annotated, Any

from ninja import Schema
from pydantic import ConfigDict, Field, StrictInt, StringConstraints

from billing.schemas import ModelStr, ProviderStr, WriteSchema
from ladder.schemas.common import CategoryStr, ConnectionIdStr

# A candidate's `ref`: the gateway's own opaque handle (a deployment id), echoed back.
RefStr = Annotated[str, StringConstraints(min_length=1, max_length=256, pattern=r"^[^\x00]*$")]


class CandidateIn(WriteSchema):
    provider: ProviderStr
    model: ModelStr
    categories: Annotated[list[CategoryStr], Field(max_length=32)] = []
    priority: StrictInt = Field(default=0, ge=-1_000_000, le=1_000_000)
    connection_id: ConnectionIdStr | None = None
    allowed_connection_ids: Annotated[list[ConnectionIdStr], Field(max_length=64)] | None = None
    ref: RefStr | None = None

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "provider": "claude",
                    "model": "claude-sonnet-4-5",
                    "categories": ["coding"],
                    "priority": 0,
                    "connection_id": None,
                    "allowed_connection_ids": ["claude-max-1", "claude-max-2"],
                }
            ]
        },
    )


# A registered candidate as the API shows it, read from the model.
# (A comment, not a docstring: a docstring would become its OpenAPI description.)
class CandidateOut(Schema):
    id: int
    provider: str
    registered_provider: str
    model: str
    categories: list[str]
    priority: int
    connection_id: str | None
    allowed_connection_ids: list[str] | None
    ref: str | None

    @staticmethod
    def resolve_id(candidate: Any) -> int:
        return int(candidate.pk)

    @staticmethod
    def resolve_categories(candidate: Any) -> list[str]:
        return list(candidate.categories or [])

    @staticmethod
    def resolve_registered_provider(candidate: Any) -> str:
        return str(getattr(candidate, "registered_provider", "") or candidate.provider)
