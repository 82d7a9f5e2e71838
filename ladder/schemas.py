"""Ninja schemas of the ladder API (spec/api.md). Writes forbid unknown fields; booleans
and integers are strict (a boolean is never "yes" or 0); times carry an offset."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, get_args

from ninja import Schema
from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    StringConstraints,
    WithJsonSchema,
    create_model,
)

from billing.schemas import ModelStr, ProviderStr, WriteSchema
from ladder.core.settings_bounds import SETTINGS_BOUNDS
from ladder.models import CONNECTION_ID_PATTERN

CONNECTION_ID_REGEX = CONNECTION_ID_PATTERN  # not `.` or `..` (ladder/models.py)
ConnectionIdStr = Annotated[str, StringConstraints(pattern=CONNECTION_ID_REGEX)]
ShortText = Annotated[str, StringConstraints(max_length=200, pattern=r"^[^\x00]*$")]
NameStr = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=64, pattern=r"^[^\x00]*$"),
]
CategoryStr = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._-]{1,64}$")]
# Numbers are strict too: a JSON boolean or string is never taken for a number (lax
# parsing would store `"remaining_percent": true` as 1 %). JSON integers are accepted.
Percent = Annotated[float, Field(strict=True, ge=0, le=100, allow_inf_nan=False)]


def _to_utc(value: datetime) -> datetime:
    # The server stores and returns UTC. Converting here also refuses instants that
    # exist only with their offset (year 1 at +05:00) and offsets the database refuses
    # (PostgreSQL allows at most 15:59, Python 23:59): a 422, never a 500.
    try:
        return value.astimezone(UTC)
    except OverflowError:
        raise ValueError("the instant is out of range once converted to UTC") from None


# An ISO 8601 date and time of day: what every time in a body must start with. Pydantic
# alone would read "1796114593000" or "-1" as a Unix timestamp (seconds or milliseconds).
_ISO_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}")
TIME_FORMAT_MESSAGE = (
    "expected an ISO 8601 time with an offset, such as 2026-11-29T12:00:00Z "
    "(a number or a string of digits is not a time)"
)


def _time_text(value: Any) -> Any:
    # Times are ISO 8601 text with an offset (api.md "Conventions"): a JSON number, or a
    # string of digits, is never taken for a Unix time. The offset is AwareDatetime's.
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _ISO_DATE_TIME.match(value):
        raise ValueError(TIME_FORMAT_MESSAGE)
    return value


# The one type of every time in an API write body.
UtcDatetime = Annotated[AwareDatetime, BeforeValidator(_time_text), AfterValidator(_to_utc)]
RungLiteral = Literal["subscription", "keyless", "free", "cheap", "premium"]
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
# A Literal, so the OpenAPI document lists the values (a schema-valid body is accepted).
QuotaSourceLiteral = Literal[
    "none", "claude", "codex", "copilot", "gemini-cli", "antigravity", "simulated"
]
QUOTA_SOURCES: tuple[str, ...] = get_args(QuotaSourceLiteral)


# --- connections -----------------------------------------------------------------------


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


# --- events ---------------------------------------------------------------------------------


class EventIn(WriteSchema):
    kind: Literal["rate_limited", "quota_exhausted", "success", "error"]
    retry_after_seconds: (
        Annotated[float, Field(strict=True, ge=0, le=31_536_000, allow_inf_nan=False)] | None
    ) = None
    reset_at: UtcDatetime | None = None
    model: ModelStr | None = Field(
        default=None,
        description="The model the request asked for: scopes what the headers say about "
        "one model, and the cooldown of a model-scoped rejection.",
    )
    observed_at: UtcDatetime | None = Field(
        default=None,
        description="When the gateway saw the upstream's answer (default: receive time; "
        "more than 60 s in the future is refused, up to 60 s ahead is stored as the "
        "receive time). Events apply in the order they were observed: a success clears "
        "only the failures observed at least 60 s before it (or once their cooldown "
        "ended), and within 60 s the less safe of two truths wins.",
    )
    headers: (
        Annotated[
            dict[
                Annotated[str, StringConstraints(max_length=200)],
                Annotated[str, StringConstraints(max_length=2000)],
            ],
            Field(max_length=100),
        ]
        | None
    ) = None

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "kind": "rate_limited",
                    "retry_after_seconds": None,
                    "reset_at": "2026-11-29T12:05:00Z",
                    "headers": {"anthropic-ratelimit-unified-status": "rejected"},
                }
            ]
        },
    )


class EventResultOut(Schema):
    connection_id: str
    cooldown_until: datetime | None
    cooldown_seconds: float
    clamped_to_reset: bool
    consecutive_failures: int


# The batch of events (api.md "Events from the gateway"): entries are validated one by
# one by the endpoint, so that one bad entry is answered in its slot.
# api.md allows 1,000 "or the documented maximum is lowered until" the batch answers
# inside the request deadline: 100 events answer in about half of it under load
# (bench/events_batch.py; 200 take about all of it).
MAX_EVENT_BATCH = 100


class BatchEventIn(EventIn):
    connection_id: ConnectionIdStr
    event_id: Annotated[str, StringConstraints(min_length=1, max_length=128)] | None = Field(
        default=None,
        description="The gateway's id for this entry: one applied before is answered as "
        "then and never applied again, so a retried batch doubles nothing.",
    )


class EventBatchIn(WriteSchema):
    events: Annotated[list[Any], Field(max_length=MAX_EVENT_BATCH)]

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "events": [
                        {
                            "connection_id": "claude-max-1",
                            "kind": "success",
                            "observed_at": "2026-11-29T12:00:00Z",
                            "event_id": "9f1c2e7a4b5d4c3e8a6f0b1d2c3e4f5a",
                        },
                        {"connection_id": "codex-1", "kind": "rate_limited"},
                    ]
                }
            ]
        },
    )


class EventBatchErrorOut(Schema):
    error: str


class EventBatchOut(Schema):
    results: list[EventResultOut | EventBatchErrorOut]


# --- candidates and pools --------------------------------------------------------------------


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


# --- models list ----------------------------------------------------------------------------


class ModelOut(Schema):
    id: str
    object: Literal["model"]
    created: int
    owned_by: str


class ModelListOut(Schema):
    object: Literal["list"]
    data: list[ModelOut]


# --- settings ---------------------------------------------------------------------------------


Money = Annotated[float, Field(strict=True, ge=0, lt=100_000_000, allow_inf_nan=False)]


def _bounded(name: str) -> Any:
    """The pydantic Field of a setting, from its one definition (ladder/core/settings_bounds.py)."""
    bound = SETTINGS_BOUNDS[name]
    return Field(
        strict=True,
        gt=bound.low if bound.low_open else None,
        ge=None if bound.low_open else bound.low,
        le=bound.high,
        allow_inf_nan=False,
    )


BudgetUsd = Annotated[float, _bounded("cheap_budget_usd")]


class BudgetsSchema(Schema):
    model_config = ConfigDict(extra="forbid")

    cheap: BudgetUsd | None
    premium: Annotated[float, _bounded("premium_budget_usd")] | None


class SettingsSchema(WriteSchema):
    """Exactly the tuning fields; every one is required on PUT. No `enabled` field, ever."""

    exit_cutoff_percent: float = _bounded("exit_cutoff_percent")
    reentry_min_remaining_percent: float = _bounded("reentry_min_remaining_percent")
    rung_budget_usd: BudgetsSchema
    budget_window: Literal["day", "week", "month"]
    max_state_age_seconds: StrictInt = _bounded("max_state_age_seconds")
    base_cooldown_seconds: float = _bounded("base_cooldown_seconds")
    max_cooldown_seconds: float = _bounded("max_cooldown_seconds")
    cheap_max_input_usd_per_mtok: float = _bounded("cheap_max_input_usd_per_mtok")

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "exit_cutoff_percent": 2,
                    "reentry_min_remaining_percent": 5,
                    "rung_budget_usd": {"cheap": 20, "premium": None},
                    "budget_window": "month",
                    "max_state_age_seconds": 180,
                    "base_cooldown_seconds": 5,
                    "max_cooldown_seconds": 120,
                    "cheap_max_input_usd_per_mtok": 1.0,
                }
            ]
        },
    )


# --- spend --------------------------------------------------------------------------------------


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
