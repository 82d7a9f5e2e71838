"""Spend reports, one or a batch, the ledger and the budgets' summary (ladder/api/spend.py,
ladder/api/spend_answers.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from ninja import Schema
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StringConstraints,
    WithJsonSchema,
    create_model,
)

from billing.schemas import ModelStr, ProviderStr, WriteSchema
from ladder.schemas.common import ConnectionIdStr, RungLiteral, UtcDatetime

Money = Annotated[float, Field(strict=True, ge=0, lt=100_000_000, allow_inf_nan=False)]


class SpendIn(WriteSchema):
    request_id: Annotated[
        str, StringConstraints(min_length=1, max_length=200, pattern=r"^[^\x00]*$")
    ]
    connection_id: ConnectionIdStr
    provider: ProviderStr
    model: ModelStr
    cost_usd: Money | None = None
    input_tokens: StrictInt | None = Field(default=None, ge=0, le=10**12)
    output_tokens: StrictInt | None = Field(default=None, ge=0, le=10**12)
    occurred_at: UtcDatetime | None = None

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "request_id": "req_01HZX",
                    "connection_id": "openai-key",
                    "provider": "openai",
                    "model": "gpt-4o-mini",
                    "cost_usd": None,
                    "input_tokens": 1200,
                    "output_tokens": 300,
                }
            ]
        },
    )


# A ledger entry as the API shows it, read from the model.
# (A comment, not a docstring: a docstring would become its OpenAPI description.)
class SpendOut(Schema):
    request_id: str
    connection_id: str
    provider: str
    model: str
    cost_usd: float
    input_tokens: int | None
    output_tokens: int | None
    occurred_at: datetime
    rung: RungLiteral
    billed_usd: float
    list_price_usd: float

    @staticmethod
    def resolve_cost_usd(entry: Any) -> float:
        return float(entry.cost_usd)

    @staticmethod
    def resolve_billed_usd(entry: Any) -> float:
        return float(entry.billed_usd)

    @staticmethod
    def resolve_list_price_usd(entry: Any) -> float:
        return float(entry.list_price_usd)


# --- spend batches (POST /api/v1/spend/batch) ---------------------------------------------

# The most entries one batch may hold (ladder.services.MAX_SPEND_BATCH).
SPEND_BATCH_MAX = 1000


def _at_most_a_batch(entries: list[Any]) -> list[Any]:
    if len(entries) > SPEND_BATCH_MAX:
        raise ValueError(
            f"a batch holds at most {SPEND_BATCH_MAX:,} entries; this one has "
            f"{len(entries):,}. Nothing was recorded: send them in smaller batches"
        )
    return entries


# Each entry is checked on its own (a bad one is refused in its slot of the results and
# stops none of the others), so the body takes any JSON values and documents SpendIn.
class SpendBatchIn(WriteSchema):
    entries: Annotated[
        list[Any],
        AfterValidator(_at_most_a_batch),
        WithJsonSchema(
            {
                "type": "array",
                "maxItems": SPEND_BATCH_MAX,
                "items": {
                    key: value
                    for key, value in SpendIn.model_json_schema().items()
                    if key != "examples"
                },
                "description": f"At most {SPEND_BATCH_MAX:,} SpendIn entries.",
            },
            mode="validation",
        ),
    ]

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "entries": [
                        {
                            "request_id": "req_01HZX",
                            "connection_id": "openai-key",
                            "provider": "openai",
                            "model": "gpt-4o-mini",
                            "input_tokens": 1200,
                            "output_tokens": 300,
                        },
                        {
                            "request_id": "req_01HZY",
                            "connection_id": "openai-key",
                            "provider": "openai",
                            "model": "gpt-4o-mini",
                            "cost_usd": 0.0004,
                        },
                    ]
                }
            ]
        },
    )


# Batch entries are validated one by one with a plain pydantic twin of SpendIn (the same
# fields, rules and messages): a ninja Schema wraps every input for attribute access,
# which costs more than the rest of a 1,000-entry batch. Likewise the batch's answer is
# plain pydantic models, validated from plain dicts.
SpendEntryIn: type[BaseModel] = create_model(
    "SpendIn",
    __config__=ConfigDict(extra="forbid"),
    **{name: (field.annotation, field) for name, field in SpendIn.model_fields.items()},  # type: ignore[call-overload]
)


class SpendBatchEntryOut(BaseModel):
    request_id: str
    connection_id: str
    provider: str
    model: str
    cost_usd: float
    input_tokens: int | None
    output_tokens: int | None
    occurred_at: datetime
    rung: RungLiteral
    billed_usd: float
    list_price_usd: float


# One refused entry: its errors as the single endpoint's 422 lists them, located at the
# entry in the body (["body", "payload", "entries", index, field]).
class SpendBatchErrorItem(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class SpendBatchErrorOut(BaseModel):
    error: list[SpendBatchErrorItem]


class SpendBatchOut(BaseModel):
    created: int
    duplicates: int
    results: list[SpendBatchEntryOut | SpendBatchErrorOut]


class RungBudgetOut(Schema):
    spent_usd: float
    budget_usd: float | None
    exhausted: bool


class SpendSummaryOut(Schema):
    budget_window: str
    window_start: datetime
    window_end: datetime
    rungs: dict[str, RungBudgetOut]
    saved_usd: float
