"""Connections, their readings and their status (ladder/api/connections.py, the readings
of ladder/api/events.py)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, get_args

from ninja import Schema
from pydantic import ConfigDict, Field, StrictBool, StringConstraints

from billing.schemas import ProviderStr, WriteSchema
from ladder.schemas.common import NameStr, Percent, ShortText, UtcDatetime

# A Literal, so the OpenAPI document lists the values (a schema-valid body is accepted).
QuotaSourceLiteral = Literal[
    "none", "claude", "codex", "copilot", "gemini-cli", "antigravity", "simulated"
]
QUOTA_SOURCES: tuple[str, ...] = get_args(QuotaSourceLiteral)


class ConnectionIn(WriteSchema):
    provider: ProviderStr
    auth_type: Annotated[
        str,
        StringConstraints(
            strip_whitespace=True, min_length=1, max_length=64, pattern=r"^[^\x00]*$"
        ),
    ] = Field(description='"none" is the keyless no-auth path.')
    label: ShortText = ""
    active: StrictBool = True
    quota_source: QuotaSourceLiteral = Field(
        default="none", description="Which quota adapter polls it."
    )
    credential: Annotated[str, StringConstraints(max_length=8192, pattern=r"^[^\x00]*$")] | None = (
        Field(
            default=None,
            description='Write-only: never returned, never logged. Omit to keep; "" clears.',
        )
    )
    exit_cutoff_percent: Percent | None = Field(
        default=None, description="This connection's own exit cutoff (null: the settings')."
    )
    reentry_min_remaining_percent: Percent | None = Field(
        default=None, description="This connection's own re-entry floor (null: the settings')."
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "provider": "claude",
                    "auth_type": "oauth",
                    "label": "Team Max plan",
                    "active": True,
                    "quota_source": "claude",
                    "credential": "sk-ant-oat01-...",
                }
            ]
        },
    )


# A connection as the API shows it, read from the model: never its credential.
# (A comment, not a docstring: a docstring would become its OpenAPI description.)
class ConnectionOut(Schema):
    connection_id: str
    provider: str
    # The name it was registered under; `provider` is what that resolves to through the
    # provider aliases now (an alias write resolves it again).
    registered_provider: str
    auth_type: str
    label: str
    active: bool
    quota_source: str
    has_credential: bool
    exit_cutoff_percent: float | None
    reentry_min_remaining_percent: float | None

    @staticmethod
    def resolve_active(connection: Any) -> bool:
        return bool(connection.is_active)

    @staticmethod
    def resolve_registered_provider(connection: Any) -> str:
        return str(connection.registered_provider or connection.provider)


class WindowSchema(Schema):
    model_config = ConfigDict(extra="forbid")

    name: NameStr
    remaining_percent: Percent | None = None
    reset_at: UtcDatetime | None = None
    model_scope: NameStr | None = Field(default=None, description="null: binds every model.")


class ReadingIn(WriteSchema):
    status: Literal["SAFE", "EXHAUSTED", "UNKNOWN"] | None = None
    remaining_percent: Percent | None = None
    reset_at: UtcDatetime | None = None
    checked_at: UtcDatetime | None = None
    windows: Annotated[list[WindowSchema], Field(max_length=32)] | None = None
    overage_evidence: Literal["can_meter", "hard_stop"] | None = Field(
        default=None,
        description="What the gateway saw of this account's billing past its limit.",
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "remaining_percent": 41.5,
                    "reset_at": "2026-11-29T17:00:00Z",
                    "checked_at": "2026-11-29T12:00:00Z",
                }
            ]
        },
    )


# A stored reading as the API shows it, read from the model.
# (A comment, not a docstring: a docstring would become its OpenAPI description.)
class ReadingOut(Schema):
    status: Literal["SAFE", "EXHAUSTED", "UNKNOWN"]
    remaining_percent: float | None
    reset_at: datetime | None
    checked_at: datetime
    windows: list[dict[str, Any]]
    source: str
    detail: str

    @staticmethod
    def resolve_windows(reading: Any) -> list[dict[str, Any]]:
        return list(reading.windows or [])


class EvidenceOut(Schema):
    says: Literal["can_meter", "hard_stop"]
    source: str
    seen_at: datetime | None
    detail: str


class BillingOut(Schema):
    billing: str
    overage: str
    reason: str
    catalog_entry_id: int | None
    effective_overage: str
    evidence: EvidenceOut | None


class HysteresisOut(Schema):
    state: Literal["in_play", "dropped_out"]
    since: datetime | None
    reason: str


class ForecastFieldsOut(Schema):
    runs_out_at: datetime | None
    before_reset: bool | None
    paid_until_reset_usd: float | None
    basis: str
    reset_at: datetime | None
    paid_by_rung: dict[str, float]
    sentence: str


class ScopeForecastOut(ForecastFieldsOut):
    model_scope: str


class ForecastOut(ForecastFieldsOut):
    scopes: list[ScopeForecastOut]  # one per model scope (docs/FORECASTS.md)


class ScopedOut(Schema):
    model_scope: str
    remaining_percent: float | None
    reset_at: datetime | None
    hysteresis: HysteresisOut
    cooldown_until: datetime | None


class StatusOut(Schema):
    connection_id: str
    provider: str
    auth_type: str
    active: bool
    billing: BillingOut
    rung: Literal["subscription", "keyless"] | None
    reading: ReadingOut | None
    reading_current: bool
    hysteresis: HysteresisOut
    scoped: list[ScopedOut]
    forecast: ForecastOut | None
    cooldown_until: datetime | None
    consecutive_failures: int
    quota_error: str


class QueuedOut(Schema):
    queued: bool
