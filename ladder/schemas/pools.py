"""A pool asked for and its decision (ladder/api/pools.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from ninja import Schema
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from billing.schemas import ModelStr, ProviderStr
from ladder.schemas.candidates import RefStr
from ladder.schemas.common import CategoryStr, ConnectionIdStr, RungLiteral

ReasonLiteral = Literal[
    "uncurated",
    "metered",
    "keyless_not_subscription",
    "overage_not_hard_stop",
    "quota_exhausted",
    "below_reentry",
    "quota_unknown",
    "quota_stale",
    "reset_passed",
    "cooling_down",
    "inactive",
    "rung_disabled",
    "budget_exhausted",
]


class PlainWriteModel(BaseModel):
    """A plain pydantic body for the hot path: same forbid-unknown-fields rule as
    WriteSchema, without ninja's per-object Django getter (measurably slower at 2,000
    candidates)."""

    model_config = ConfigDict(extra="forbid")


class PoolCandidateIn(PlainWriteModel):
    id: StrictInt | None = Field(default=None, ge=-(2**53), le=2**53)
    provider: ProviderStr
    model: ModelStr
    categories: Annotated[list[CategoryStr], Field(max_length=32)] = []
    priority: StrictInt | None = Field(default=None, description="Ignored: order is the ranking.")
    connection_id: ConnectionIdStr | None = None
    allowed_connection_ids: Annotated[list[ConnectionIdStr], Field(max_length=64)] | None = None
    ref: RefStr | None = None


class PoolRequestIn(PlainWriteModel):
    candidates: Annotated[list[PoolCandidateIn], Field(max_length=5000)]

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "candidates": [
                        {
                            "id": 1,
                            "provider": "claude",
                            "model": "claude-sonnet-4-5",
                            "allowed_connection_ids": ["claude-max-1", "claude-api"],
                        },
                        {
                            "provider": "openai",
                            "model": "gpt-4o-mini",
                            "connection_id": "openai-key",
                        },
                    ]
                }
            ]
        },
    )


class DecidedOut(Schema):
    id: int | None
    ref: str | None
    provider: str
    model: str
    rung: RungLiteral
    connection_id: str | None
    allowed_connection_ids: list[str] | None = Field(
        description=(
            "The connections that passed, in order of preference: on the subscription "
            "rung the plan capacity that expires soonest first (reset of the binding "
            "window, soonest first; ties by most remaining; no known reset last); other "
            "rungs in the given order. Enforce it as a set; a gateway may keep a "
            "conversation on the connection it used last while it stays in the list."
        )
    )


class ExcludedOut(Schema):
    provider: str
    model: str
    connection_id: str
    rung: RungLiteral | None
    reason: ReasonLiteral
    detail: str


class BudgetLeftOut(Schema):
    cheap: float | None
    premium: float | None


class DecisionOut(Schema):
    auto_id: str
    grouping: Literal["subscription", "thrifty"]
    category: str | None
    fail_mode: Literal["closed", "open"]
    computed_at: datetime
    candidates: list[DecidedOut]
    excluded: list[ExcludedOut]
    next_change_at: datetime | None
    budget_left_usd: BudgetLeftOut = Field(
        description="What each paid rung's budget still allowed when this decision was "
        "computed (null: no budget). Part of the decision's inputs: it does not move the "
        "change version (spec: 'Budgets under bursts')."
    )
    valid_until: datetime | None = Field(
        description="The earliest instant at which this decision can change on its own, "
        "with no write (a reading turning stale, a reset, a cooldown ending, a budget "
        "window ending); null when none. Writes are announced by GET /api/v1/changes."
    )
