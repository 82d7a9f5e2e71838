"""The tuning settings (ladder/api/settings.py), bounded by their one definition."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from ninja import Schema
from pydantic import ConfigDict, Field, StrictInt

from billing.schemas import WriteSchema
from ladder.core.settings_bounds import SETTINGS_BOUNDS


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
