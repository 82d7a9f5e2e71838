"""`GET` and `PUT /api/v1/settings/ladder` (ladder/api/settings.py): the tuning, exactly
as the ladder applies it, replaced whole by an operator, audited, refused without a trace."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from billing import services as billing_services
from billing.models import AuditEntry
from ladder import services as ladder_services
from ladder.models import (
    LadderSettings,
)
from ladder.services import config as services_config
from tests.ladder.api.calls import TUNED
from tests.ladder.factories import api

pytestmark = pytest.mark.django_db


DEFAULTS = {
    "exit_cutoff_percent": 2.0,
    "reentry_min_remaining_percent": 5.0,
    "rung_budget_usd": {"cheap": None, "premium": None},
    "budget_window": "month",
    "max_state_age_seconds": 180,
    "base_cooldown_seconds": 5.0,
    "max_cooldown_seconds": 120.0,
    "cheap_max_input_usd_per_mtok": 1.0,
}


def settings_row() -> tuple[Any, ...]:
    row = LadderSettings.objects.get()
    return (
        row.exit_cutoff_percent,
        row.reentry_min_remaining_percent,
        row.cheap_budget_usd,
        row.premium_budget_usd,
        row.budget_window,
        row.max_state_age_seconds,
        row.base_cooldown_seconds,
        row.max_cooldown_seconds,
        row.cheap_max_input_usd_per_mtok,
    )


def test_get_settings_returns_exactly_the_defaults(gateway: str) -> None:
    response = api("get", "/api/v1/settings/ladder", gateway)

    assert response.status_code == 200
    assert response.json() == DEFAULTS


def test_put_settings_replaces_every_field(operator: str) -> None:
    response = api("put", "/api/v1/settings/ladder", operator, TUNED)

    assert response.status_code == 200
    assert response.json() == {
        "exit_cutoff_percent": 3.0,
        "reentry_min_remaining_percent": 10.5,
        "rung_budget_usd": {"cheap": 20.0, "premium": 0.0},
        "budget_window": "week",
        "max_state_age_seconds": 300,
        "base_cooldown_seconds": 2.5,
        "max_cooldown_seconds": 60.0,
        "cheap_max_input_usd_per_mtok": 0.5,
    }
    assert settings_row() == (
        3.0,
        10.5,
        Decimal("20.000000"),
        Decimal("0.000000"),
        "week",
        300,
        2.5,
        60.0,
        Decimal("0.500000"),
    )
    assert api("get", "/api/v1/settings/ladder", operator).json() == response.json()


def test_put_settings_writes_an_audit_row_naming_the_token(operator: str) -> None:
    api("put", "/api/v1/settings/ladder", operator, TUNED)

    audit = AuditEntry.objects.get()
    assert (audit.target_type, audit.target_id, audit.action, audit.actor) == (
        "settings",
        "1",
        "update",
        "token:ops",
    )
    assert audit.before == {
        "exit_cutoff_percent": 2.0,
        "reentry_min_remaining_percent": 5.0,
        "cheap_budget_usd": None,
        "premium_budget_usd": None,
        "budget_window": "month",
        "max_state_age_seconds": 180,
        "base_cooldown_seconds": 5.0,
        "max_cooldown_seconds": 120.0,
        "cheap_max_input_usd_per_mtok": "1.000000",
    }
    assert audit.after == {
        "exit_cutoff_percent": 3,
        "reentry_min_remaining_percent": 10.5,
        "cheap_budget_usd": "20.000000",
        "premium_budget_usd": "0.000000",
        "budget_window": "week",
        "max_state_age_seconds": 300,
        "base_cooldown_seconds": 2.5,
        "max_cooldown_seconds": 60,
        "cheap_max_input_usd_per_mtok": "0.500000",
    }


def test_put_settings_rounds_money_to_the_six_decimals_it_stores(operator: str) -> None:
    body = {**TUNED, "rung_budget_usd": {"cheap": 0.1234567, "premium": None}}

    response = api("put", "/api/v1/settings/ladder", operator, body)

    assert response.status_code == 200
    assert response.json()["rung_budget_usd"] == {"cheap": 0.123457, "premium": None}
    assert LadderSettings.objects.get().cheap_budget_usd == Decimal("0.123457")


def test_put_settings_with_a_gateway_token_is_403_before_the_body_is_validated(
    gateway: str,
) -> None:
    before = settings_row()

    response = api("put", "/api/v1/settings/ladder", gateway, {"enabled": False})

    assert response.status_code == 403
    assert response.json() == {"detail": "This endpoint needs a token with the operator scope."}
    assert settings_row() == before
    assert not AuditEntry.objects.exists()


def test_put_settings_with_an_enabled_field_is_422_and_changes_nothing(operator: str) -> None:
    before = settings_row()

    response = api("put", "/api/v1/settings/ladder", operator, {**TUNED, "enabled": False})

    assert response.status_code == 422
    assert response.json() == {
        "detail": [
            {
                "type": "extra_forbidden",
                "loc": ["body", "payload", "enabled"],
                "msg": "Extra inputs are not permitted",
            }
        ]
    }
    assert settings_row() == before
    assert not AuditEntry.objects.exists()


def test_put_settings_with_a_missing_field_is_422_and_changes_nothing(operator: str) -> None:
    before = settings_row()
    body = {k: v for k, v in TUNED.items() if k != "max_cooldown_seconds"}

    response = api("put", "/api/v1/settings/ladder", operator, body)

    assert response.status_code == 422
    assert response.json() == {
        "detail": [
            {
                "type": "missing",
                "loc": ["body", "payload", "max_cooldown_seconds"],
                "msg": "Field required",
            }
        ]
    }
    assert settings_row() == before


@pytest.mark.parametrize(
    ("change", "loc", "error_type"),
    [
        pytest.param(
            {"exit_cutoff_percent": 101},
            ["exit_cutoff_percent"],
            "less_than_equal",
            id="percent-over-100",
        ),
        pytest.param(
            {"exit_cutoff_percent": True},
            ["exit_cutoff_percent"],
            "float_type",
            id="percent-boolean",
        ),
        pytest.param(
            {"exit_cutoff_percent": "2"}, ["exit_cutoff_percent"], "float_type", id="percent-string"
        ),
        pytest.param(
            {"max_state_age_seconds": 1.5}, ["max_state_age_seconds"], "int_type", id="age-float"
        ),
        pytest.param(
            {"max_state_age_seconds": 0},
            ["max_state_age_seconds"],
            "greater_than_equal",
            id="age-zero",
        ),
        pytest.param(
            {"base_cooldown_seconds": 0}, ["base_cooldown_seconds"], "greater_than", id="base-zero"
        ),
        pytest.param({"budget_window": "year"}, ["budget_window"], "literal_error", id="window"),
        pytest.param(
            {"rung_budget_usd": {"cheap": -1, "premium": None}},
            ["rung_budget_usd", "cheap"],
            "greater_than_equal",
            id="negative-budget",
        ),
        pytest.param(
            {"rung_budget_usd": {"cheap": 1}},
            ["rung_budget_usd", "premium"],
            "missing",
            id="missing-budget",
        ),
        pytest.param(
            {"rung_budget_usd": {"cheap": 1, "premium": 1, "free": 1}},
            ["rung_budget_usd", "free"],
            "extra_forbidden",
            id="extra-budget",
        ),
        pytest.param(
            {"cheap_max_input_usd_per_mtok": None},
            ["cheap_max_input_usd_per_mtok"],
            "float_type",
            id="null-boundary",
        ),
    ],
)
def test_put_settings_refuses_an_invalid_value_and_changes_nothing(
    operator: str, change: dict[str, Any], loc: list[str], error_type: str
) -> None:
    before = settings_row()

    response = api("put", "/api/v1/settings/ladder", operator, {**TUNED, **change})

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", *loc], error_type)
    ]
    assert settings_row() == before
    assert not AuditEntry.objects.exists()


@pytest.mark.parametrize(
    ("change", "loc", "error_type"),
    [
        pytest.param(
            {"max_state_age_seconds": 86_401},
            ["max_state_age_seconds"],
            "less_than_equal",
            id="age-above-a-day",
        ),
        pytest.param(
            {"max_state_age_seconds": 40_000_000},
            ["max_state_age_seconds"],
            "less_than_equal",
            id="age-40-million",
        ),
        pytest.param(
            {"base_cooldown_seconds": 172_800},
            ["base_cooldown_seconds"],
            "less_than_equal",
            id="base-two-days",
        ),
        pytest.param(
            {"max_cooldown_seconds": 100_000},
            ["max_cooldown_seconds"],
            "less_than_equal",
            id="cap-100000",
        ),
        pytest.param(
            {"rung_budget_usd": {"cheap": 1_000_000.01, "premium": None}},
            ["rung_budget_usd", "cheap"],
            "less_than_equal",
            id="budget-above-a-million",
        ),
        pytest.param(
            {"rung_budget_usd": {"cheap": None, "premium": 5e7}},
            ["rung_budget_usd", "premium"],
            "less_than_equal",
            id="premium-budget-50-million",
        ),
    ],
)
def test_put_settings_refuses_values_above_the_spec_bounds(
    operator: str, change: dict[str, Any], loc: list[str], error_type: str
) -> None:
    before = settings_row()

    response = api("put", "/api/v1/settings/ladder", operator, {**TUNED, **change})

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", *loc], error_type)
    ]
    assert settings_row() == before
    assert not AuditEntry.objects.exists()


def test_put_settings_refuses_a_reentry_floor_below_the_exit_cutoff_naming_both(
    operator: str,
) -> None:
    before = settings_row()
    counters = billing_services.change_counters()
    body = {**TUNED, "exit_cutoff_percent": 10, "reentry_min_remaining_percent": 9.5}

    response = api("put", "/api/v1/settings/ladder", operator, body)

    assert response.status_code == 422
    message = (
        "The re-entry floor (%) must be at least the exit cutoff (%): a connection that drops "
        "out at the cutoff comes back only above the floor."
    )
    assert response.json() == {
        "detail": [
            {
                "loc": ["body", "payload", "reentry_min_remaining_percent"],
                "msg": message,
                "type": "value_error",
            },
            {
                "loc": ["body", "payload", "exit_cutoff_percent"],
                "msg": message,
                "type": "value_error",
            },
        ]
    }
    assert settings_row() == before
    assert billing_services.change_counters() == counters
    assert not AuditEntry.objects.exists()


def test_put_settings_accepts_the_spec_bounds_themselves(operator: str) -> None:
    body = {
        "exit_cutoff_percent": 7,
        "reentry_min_remaining_percent": 7,
        "rung_budget_usd": {"cheap": 1_000_000, "premium": 0},
        "budget_window": "day",
        "max_state_age_seconds": 86_400,
        "base_cooldown_seconds": 86_400,
        "max_cooldown_seconds": 86_400,
        "cheap_max_input_usd_per_mtok": 0,
    }

    response = api("put", "/api/v1/settings/ladder", operator, body)

    assert response.status_code == 200
    assert settings_row() == (
        7.0,
        7.0,
        Decimal("1000000.000000"),
        Decimal("0.000000"),
        "day",
        86_400,
        86_400.0,
        86_400.0,
        Decimal("0.000000"),
    )


OUT_OF_RANGE_ROW = {
    # What the old dashboard form accepted, plus what an old row or a hand edit can hold.
    "max_cooldown_seconds": 100_000.0,
    "base_cooldown_seconds": 172_800.0,
    "max_state_age_seconds": 40_000_000,
    "cheap_budget_usd": Decimal("5000000"),
    "premium_budget_usd": Decimal("-3"),
    "exit_cutoff_percent": 4.0,
    "reentry_min_remaining_percent": 1.0,
}
APPLIED = {
    "exit_cutoff_percent": 4.0,
    "reentry_min_remaining_percent": 4.0,
    "rung_budget_usd": {"cheap": 1_000_000.0, "premium": 0.0},
    "budget_window": "month",
    "max_state_age_seconds": 86_400,
    "base_cooldown_seconds": 86_400.0,
    "max_cooldown_seconds": 86_400.0,
    "cheap_max_input_usd_per_mtok": 1.0,
}


def test_a_stored_out_of_range_settings_row_answers_the_values_the_ladder_applies(
    gateway: str, operator: str
) -> None:
    LadderSettings.objects.filter(pk=1).update(**OUT_OF_RANGE_ROW)

    response = api("get", "/api/v1/settings/ladder", gateway)

    assert response.status_code == 200
    assert response.json() == APPLIED
    config = ladder_services.load_config()
    assert (
        config.max_state_age_seconds,
        config.base_cooldown_seconds,
        config.max_cooldown_seconds,
        config.cheap_budget_usd,
        config.premium_budget_usd,
        config.reentry_floor,
    ) == (86_400, 86_400.0, 86_400.0, Decimal("1000000"), Decimal("0"), 4.0)
    assert api("get", "/api/v1/pools/auto/subscription", gateway).status_code == 200
    # What GET answers is a legal PUT body: saving it back stores a legal row.
    assert api("put", "/api/v1/settings/ladder", operator, response.json()).status_code == 200
    assert api("get", "/api/v1/settings/ladder", gateway).json() == APPLIED


def test_a_stored_out_of_range_settings_row_is_logged_once_per_process(
    gateway: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(services_config, "_settings_warned", set())
    LadderSettings.objects.filter(pk=1).update(max_state_age_seconds=40_000_000)

    with caplog.at_level("WARNING", logger="ladder.services"):
        for _ in range(3):
            assert api("get", "/api/v1/settings/ladder", gateway).status_code == 200

    assert [r.getMessage() for r in caplog.records if r.name == "ladder.services"] == [
        "stored ladder settings outside the rules, applied as the nearest legal value: "
        "max_state_age_seconds"
    ]
