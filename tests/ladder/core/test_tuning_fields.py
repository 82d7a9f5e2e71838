"""The nine tuning fields are declared once (ladder/core/settings_bounds.py): the model's
columns, the core's config, the dashboard's form and the API's schema follow it."""

from __future__ import annotations

import dataclasses
from decimal import Decimal

import pytest

from ladder.core import LadderConfig
from ladder.core.settings_bounds import SETTINGS_BOUNDS, TUNING_FIELD_NAMES
from ladder.core.types import BudgetWindow
from ladder.forms import SettingsForm
from ladder.models import LadderSettings
from ladder.schemas import SettingsSchema

NINE = (
    "exit_cutoff_percent",
    "reentry_min_remaining_percent",
    "cheap_budget_usd",
    "premium_budget_usd",
    "budget_window",
    "max_state_age_seconds",
    "base_cooldown_seconds",
    "max_cooldown_seconds",
    "cheap_max_input_usd_per_mtok",
)


def test_the_declaration_names_the_nine_tuning_fields_in_order() -> None:
    assert TUNING_FIELD_NAMES == NINE
    assert tuple(SETTINGS_BOUNDS) == tuple(name for name in NINE if name != "budget_window")


def test_the_model_form_and_config_carry_exactly_the_declared_fields() -> None:
    columns = tuple(
        f.name
        for f in LadderSettings._meta.fields
        if f.name not in ("id", "updated_at", "updated_by")
    )
    assert columns == NINE
    assert tuple(SettingsForm.base_fields) == NINE
    # ...plus two deployment facts no setting edits (the beat period, the reset grace).
    assert tuple(f.name for f in dataclasses.fields(LadderConfig)) == (
        *NINE,
        "beat_seconds",
        "reset_grace_seconds",
    )


def test_the_schema_carries_the_declared_fields_with_the_budgets_nested() -> None:
    flat = tuple(name for name in NINE if not name.endswith("_budget_usd"))
    assert tuple(n for n in SettingsSchema.model_fields if n != "rung_budget_usd") == flat
    assert "rung_budget_usd" in SettingsSchema.model_fields


def test_the_model_defaults_are_the_declared_defaults() -> None:
    row = LadderSettings()
    assert row.exit_cutoff_percent == 2.0
    assert row.reentry_min_remaining_percent == 5.0
    assert row.cheap_budget_usd is None
    assert row.premium_budget_usd is None
    assert row.budget_window == "month"
    assert row.max_state_age_seconds == 180
    assert row.base_cooldown_seconds == 5.0
    assert row.max_cooldown_seconds == 120.0
    assert row.cheap_max_input_usd_per_mtok == Decimal("1.0")


def test_a_config_is_built_from_a_full_set_of_tuning_values() -> None:
    values = {
        "exit_cutoff_percent": 3.0,
        "reentry_min_remaining_percent": 7.5,
        "cheap_budget_usd": Decimal("10"),
        "premium_budget_usd": None,
        "budget_window": "week",
        "max_state_age_seconds": 60,
        "base_cooldown_seconds": 2.0,
        "max_cooldown_seconds": 30.0,
        "cheap_max_input_usd_per_mtok": Decimal("0.5"),
    }
    assert LadderConfig.from_settings(values) == LadderConfig(
        exit_cutoff_percent=3.0,
        reentry_min_remaining_percent=7.5,
        cheap_budget_usd=Decimal("10"),
        premium_budget_usd=None,
        budget_window=BudgetWindow.WEEK,
        max_state_age_seconds=60,
        base_cooldown_seconds=2.0,
        max_cooldown_seconds=30.0,
        cheap_max_input_usd_per_mtok=Decimal("0.5"),
    )


def test_a_config_refuses_tuning_values_outside_the_rules() -> None:
    values = dict.fromkeys(NINE, None) | {"exit_cutoff_percent": 101.0, "budget_window": "month"}
    with pytest.raises(ValueError, match="exit_cutoff_percent"):
        LadderConfig.from_settings(values)
