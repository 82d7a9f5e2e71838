"""The core types: rungs, reasons and the frozen config."""

from __future__ import annotations

import re
from decimal import Decimal

import pytest

from ladder.core import LadderConfig, Reason, Rung


def test_rung_labels_are_the_api_strings() -> None:
    assert [rung.label for rung in Rung] == ["subscription", "keyless", "free", "cheap", "premium"]
    assert Rung.from_label("cheap") is Rung.CHEAP


def test_rung_from_label_refuses_unknown_names() -> None:
    with pytest.raises(ValueError, match="unknown rung 'gold'"):
        Rung.from_label("gold")


def test_reason_codes_are_the_api_contract() -> None:
    assert [reason.value for reason in Reason] == [
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
    assert all(reason.summary for reason in Reason)


def test_reentry_floor_below_the_exit_cutoff_is_raised_to_it() -> None:
    config = LadderConfig(exit_cutoff_percent=10.0, reentry_min_remaining_percent=5.0)

    assert config.reentry_floor == 10.0


def test_budget_for_only_paid_rungs_have_budgets() -> None:
    config = LadderConfig(cheap_budget_usd=Decimal("10"), premium_budget_usd=Decimal("0"))

    assert [config.budget_for(rung) for rung in Rung] == [
        None,
        None,
        None,
        Decimal("10"),
        Decimal("0"),
    ]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        pytest.param(
            {"exit_cutoff_percent": 101.0},
            "exit_cutoff_percent: Must be at most 100. Got 101.0.",
            id="cutoff-above-100",
        ),
        pytest.param(
            {"reentry_min_remaining_percent": -1.0},
            "reentry_min_remaining_percent: Must be at least 0. Got -1.0.",
            id="reentry-negative",
        ),
        pytest.param(
            {"cheap_budget_usd": Decimal("-1")},
            "cheap_budget_usd: Must be at least 0. Got Decimal('-1').",
            id="negative-budget",
        ),
        pytest.param(
            {"max_state_age_seconds": 0},
            "max_state_age_seconds: Must be at least 1. Got 0.",
            id="zero-max-age",
        ),
        pytest.param(
            {"base_cooldown_seconds": 0.0},
            "base_cooldown_seconds: Must be greater than 0. Got 0.0.",
            id="zero-base",
        ),
        pytest.param(
            {"max_cooldown_seconds": float("inf")},
            "max_cooldown_seconds: Must be a finite number. Got inf.",
            id="infinite-cap",
        ),
        pytest.param(
            {"max_state_age_seconds": 86_401},
            "max_state_age_seconds: Must be at most 86,400. Got 86401.",
            id="max-age-above-a-day",
        ),
        pytest.param(
            {"premium_budget_usd": Decimal("1000000.01")},
            "premium_budget_usd: Must be at most 1,000,000. Got Decimal('1000000.01').",
            id="budget-above-a-million",
        ),
        pytest.param({"budget_window": "year"}, "'year' is not a valid BudgetWindow", id="window"),
    ],
)
def test_config_refuses_out_of_range_settings(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        LadderConfig(**overrides)  # type: ignore[arg-type]
