"""Ninja schemas of the billing catalog and prices. Writes forbid unknown fields."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from ninja import Schema
from ninja.schema import DjangoGetter
from pydantic import (
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    StrictInt,
    StringConstraints,
    ValidationInfo,
    model_validator,
)

from billing.models import (
    AUTH_TYPE_MAX_LENGTH,
    MODEL_MAX_LENGTH,
    PROVIDER_MAX_LENGTH,
    REASON_MAX_LENGTH,
)

BillingLiteral = Literal["subscription", "metered", "keyless", "unknown"]
OverageLiteral = Literal["hard-stop", "meters-to-paid", "unknown"]
TierLiteral = Literal["free", "cheap", "premium"]

# Text without NUL bytes (databases refuse them) and with a length limit.
NO_NUL = r"^[^\x00]*$"
ProviderStr = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True, min_length=1, max_length=PROVIDER_MAX_LENGTH, pattern=NO_NUL
    ),
]
AuthTypeStr = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True, min_length=1, max_length=AUTH_TYPE_MAX_LENGTH, pattern=NO_NUL
    ),
]
ReasonStr = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True, min_length=1, max_length=REASON_MAX_LENGTH, pattern=NO_NUL
    ),
]
ModelStr = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True, min_length=1, max_length=MODEL_MAX_LENGTH, pattern=NO_NUL
    ),
]


# The largest USD amount a DecimalField(max_digits=14, decimal_places=6) holds. A bound
# of "< 100,000,000" is not enough: 99999999.9999999 passes it and then rounds to
# 100000000.000000 when stored with 6 decimals, which overflows the column (500).
MAX_USD_6DP = 99_999_999.999999


class WriteSchema(Schema):
    """Base of every write body: unknown fields are refused, not ignored."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="wrap")
    @classmethod
    def _run_root_validator(
        cls, values: Any, handler: ModelWrapValidatorHandler[Any], info: ValidationInfo
    ) -> Any:
        """A body (a dict, from JSON) is validated once. ninja's Schema validates it
        twice when unknown fields are refused: as it is, for the refusal, then again
        through its Django getter, which gives a dict nothing when the class has no
        `resolve_` methods (it reads the same keys). That second pass was 40 % of a
        spend report's validation, and of every batch entry's. Anything else (an
        object, or a class with resolvers) goes the Django getter's way, as ninja does."""
        if isinstance(values, dict) and not cls._ninja_resolvers:
            return handler(values)
        if cls.model_config.get("extra") == "forbid":
            handler(values)
        return handler(DjangoGetter(values, cls, info.context))


class EntryIn(WriteSchema):
    provider: ProviderStr
    auth_type: AuthTypeStr | None = None
    billing: BillingLiteral
    overage: OverageLiteral
    reason: ReasonStr
    version: StrictInt | None = Field(
        default=None,
        description="On PUT: the version you read; a newer stored version answers 409.",
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "provider": "claude",
                    "auth_type": "oauth",
                    "billing": "subscription",
                    "overage": "hard-stop",
                    "reason": "Pro/Max plan windows refuse past the limit until reset",
                }
            ]
        },
    )


class EntryOut(Schema):
    id: int
    provider: str
    auth_type: str | None
    billing: BillingLiteral
    overage: OverageLiteral
    reason: str
    version: int
    updated_at: datetime
    updated_by: str | None


class PriceIn(WriteSchema):
    provider: ProviderStr
    model: ModelStr = Field(description='"*" prices every model of the provider without a row.')
    # Strict: a JSON boolean or string is never taken for a price.
    input_usd_per_mtok: float = Field(strict=True, ge=0, le=MAX_USD_6DP, allow_inf_nan=False)
    output_usd_per_mtok: float = Field(strict=True, ge=0, le=MAX_USD_6DP, allow_inf_nan=False)
    tier_override: TierLiteral | None = None

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "provider": "openai",
                    "model": "gpt-4o-mini",
                    "input_usd_per_mtok": 0.15,
                    "output_usd_per_mtok": 0.6,
                    "tier_override": None,
                }
            ]
        },
    )


class PriceOut(Schema):
    id: int
    provider: str
    model: str
    input_usd_per_mtok: float
    output_usd_per_mtok: float
    tier_override: TierLiteral | None
    source: Literal["manual", "import"] = Field(
        description="manual: entered by an operator; import: loaded from a price file."
    )
    needs_review: bool = Field(
        description="An imported zero awaiting an operator: tiered as unpriced (premium, "
        "$5/$15) until confirmed with a `free` override or entered by hand."
    )
    tier: TierLiteral


# Query text: no control characters (PostgreSQL refuses NUL in a parameter).
NO_CONTROL = r"^[^\x00-\x1f\x7f]*$"


ProviderFilter = Annotated[
    str,
    StringConstraints(
        strip_whitespace=True, min_length=1, max_length=PROVIDER_MAX_LENGTH, pattern=NO_CONTROL
    ),
]
PRICES_DEFAULT_LIMIT = 100
PRICES_MAX_LIMIT = 500


class PriceFilters(Schema):
    """The query of `GET /prices`: one page, and optional filters."""

    limit: int = Field(
        default=PRICES_DEFAULT_LIMIT,
        ge=1,
        le=PRICES_MAX_LIMIT,
        description=f"Rows per page (at most {PRICES_MAX_LIMIT}).",
    )
    cursor: Annotated[str, StringConstraints(max_length=1024)] | None = Field(
        default=None, description="From the previous page's `X-Next-Cursor` header."
    )
    provider: ProviderFilter | None = Field(default=None, description="Only this provider's rows.")
    q: Annotated[str, StringConstraints(max_length=100, pattern=NO_CONTROL)] | None = Field(
        default=None, description="Provider or model contains this (case-insensitive)."
    )
    tier: TierLiteral | None = Field(default=None, description="Only rows of this computed tier.")
    needs_review: bool | None = Field(
        default=None, description="true: only rows awaiting review; false: only the others."
    )


class Detail(Schema):
    detail: str
