"""The rest of the ladder API: settings, spend, models, candidates, events, readings,
tokens and the create_api_token command."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from datetime import timezone as dt_timezone
from decimal import Decimal
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from billing import services as billing_services
from billing.models import AuditEntry
from ladder import services as ladder_services
from ladder.core import BudgetWindow, budget_window_bounds
from ladder.models import (
    ApiToken,
    Candidate,
    Connection,
    LadderSettings,
    QuotaReading,
    SpendEntry,
)
from ladder.services import config as services_config
from tests.ladder.factories import NOW, api, iso, make_candidate, make_connection, make_token

pytestmark = pytest.mark.django_db


@pytest.fixture
def gateway() -> str:
    return make_token("gw", ApiToken.Scope.GATEWAY)


@pytest.fixture
def operator() -> str:
    return make_token("ops", ApiToken.Scope.OPERATOR)


def between(text: str | None, low: datetime, high: datetime) -> bool:
    """A returned instant lies in [low, high] (the encoder truncates to milliseconds)."""
    assert text is not None
    moment = datetime.fromisoformat(text)
    return low.replace(microsecond=low.microsecond // 1000 * 1000) <= moment <= high


# --- settings -----------------------------------------------------------------------------

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
TUNED = {
    "exit_cutoff_percent": 3,
    "reentry_min_remaining_percent": 10.5,
    "rung_budget_usd": {"cheap": 20, "premium": 0},
    "budget_window": "week",
    "max_state_age_seconds": 300,
    "base_cooldown_seconds": 2.5,
    "max_cooldown_seconds": 60,
    "cheap_max_input_usd_per_mtok": 0.5,
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
        "The re-entry floor must not be below the exit cutoff "
        "(reentry_min_remaining_percent >= exit_cutoff_percent)."
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


def test_seed_demo_writes_the_settings_through_the_service_audited_and_counted() -> None:
    config_before, _ = billing_services.change_counters()

    call_command("seed_demo", stdout=StringIO())

    audit = [
        (a.actor, a.before["cheap_budget_usd"], a.after["cheap_budget_usd"])
        for a in AuditEntry.objects.filter(target_type="settings")
    ]
    assert audit == [("seed_demo", None, "5")]
    assert settings_row()[2:4] == (Decimal("5.000000"), Decimal("20.000000"))
    assert billing_services.change_counters()[0] > config_before


def test_the_demo_spend_is_a_fortnight_on_the_plans_and_the_paid_rungs_recorded_once() -> None:
    from django.db.models import Count, Sum

    from ladder.management.commands.seed_demo import record_demo_spend
    from ladder.models import SpendEntry

    call_command("seed_demo", stdout=StringIO())

    created = record_demo_spend(NOW)
    again = record_demo_spend(NOW)

    rows = (
        SpendEntry.objects.order_by("rung")
        .values("rung")
        .annotate(n=Count("id"), billed=Sum("billed_usd"), listed=Sum("list_price_usd"))
    )
    # Per request: the plan 40k/9k tokens of claude-sonnet-4-5 at 3/15 USD per M (0.255),
    # gpt-4o-mini 30k/6k at 0.15/0.6 (0.0081), the Anthropic key 20k/4k (0.12); requests
    # per day max(1, n - day % 4) over 14 days: 65, 51 and 14.
    assert (created, again) == (130, 0)
    assert [(r["rung"], r["n"], r["billed"], r["listed"]) for r in rows] == [
        ("cheap", 51, Decimal("0.41310000"), Decimal("0.41310000")),
        ("premium", 14, Decimal("1.68000000"), Decimal("1.68000000")),
        ("subscription", 65, Decimal("0E-8"), Decimal("16.57500000")),
    ]


# --- models -------------------------------------------------------------------------------


def test_models_lists_the_two_flat_auto_ids(gateway: str) -> None:
    response = api("get", "/api/v1/models", gateway)

    assert response.status_code == 200
    assert response.json() == {
        "object": "list",
        "data": [
            {"id": "auto/subscription", "object": "model", "created": 0, "owned_by": "omniroute"},
            {"id": "auto/thrifty", "object": "model", "created": 0, "owned_by": "omniroute"},
        ],
    }


def test_models_needs_a_token() -> None:
    response = api("get", "/api/v1/models")

    assert response.status_code == 401


# --- candidates -----------------------------------------------------------------------------


def candidate_rows() -> list[tuple[Any, ...]]:
    return list(
        Candidate.objects.order_by("pk").values_list(
            "provider", "model", "categories", "priority", "connection_id", "allowed_connection_ids"
        )
    )


def test_post_candidate_registers_it_with_201(gateway: str) -> None:
    response = api(
        "post",
        "/api/v1/candidates",
        gateway,
        {
            "provider": "claude",
            "model": "claude-sonnet-4-5",
            "categories": ["coding", "coding", "chat"],
            "priority": -3,
            "allowed_connection_ids": ["claude-max-1", "claude-max-2"],
        },
    )

    candidate = Candidate.objects.get()
    assert response.status_code == 201
    assert response.json() == {
        "id": candidate.pk,
        "provider": "claude",
        "registered_provider": "claude",
        "model": "claude-sonnet-4-5",
        "categories": ["coding", "chat"],
        "priority": -3,
        "connection_id": None,
        "allowed_connection_ids": ["claude-max-1", "claude-max-2"],
        "ref": None,
    }


def test_post_candidate_defaults_categories_and_priority(gateway: str) -> None:
    response = api(
        "post",
        "/api/v1/candidates",
        gateway,
        {"provider": "openai", "model": "gpt-4o-mini", "connection_id": "openai-key"},
    )

    assert response.status_code == 201
    assert response.json() == {
        "id": Candidate.objects.get().pk,
        "provider": "openai",
        "registered_provider": "openai",
        "model": "gpt-4o-mini",
        "categories": [],
        "priority": 0,
        "connection_id": "openai-key",
        "allowed_connection_ids": None,
        "ref": None,
    }


@pytest.mark.parametrize(
    "target",
    [
        pytest.param({"connection_id": "a", "allowed_connection_ids": ["b"]}, id="both"),
        pytest.param({}, id="neither"),
        pytest.param({"allowed_connection_ids": []}, id="empty-allowlist"),
        pytest.param({"connection_id": None, "allowed_connection_ids": None}, id="both-null"),
    ],
)
def test_post_candidate_needs_exactly_one_target(gateway: str, target: dict[str, Any]) -> None:
    response = api(
        "post", "/api/v1/candidates", gateway, {"provider": "openai", "model": "m", **target}
    )

    assert response.status_code == 422
    assert response.json() == {
        "detail": [
            {
                "loc": ["body", "payload", "connection_id"],
                "msg": "Give exactly one of connection_id and a non-empty allowed_connection_ids.",
                "type": "value_error",
            }
        ]
    }
    assert candidate_rows() == []


@pytest.mark.parametrize(
    ("change", "loc", "error_type"),
    [
        pytest.param({"priority": "1"}, ["priority"], "int_type", id="string-priority"),
        pytest.param({"priority": True}, ["priority"], "int_type", id="boolean-priority"),
        pytest.param(
            {"categories": ["co ding"]},
            ["categories", 0],
            "string_pattern_mismatch",
            id="bad-category",
        ),
        pytest.param(
            {"connection_id": "a%20b"},
            ["connection_id"],
            "string_pattern_mismatch",
            id="hostile-id",
        ),
        pytest.param({"tags": []}, ["tags"], "extra_forbidden", id="unknown-field"),
        pytest.param({"model": ""}, ["model"], "string_too_short", id="empty-model"),
    ],
)
def test_post_candidate_refuses_an_invalid_body_and_stores_nothing(
    gateway: str, change: dict[str, Any], loc: list[Any], error_type: str
) -> None:
    body = {"provider": "openai", "model": "m", "connection_id": "openai-key", **change}

    response = api("post", "/api/v1/candidates", gateway, body)

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", *loc], error_type)
    ]
    assert candidate_rows() == []


def test_list_candidates_orders_by_priority_then_id(gateway: str) -> None:
    late = make_candidate("openai", "b", connection_id="k", priority=5)
    early = make_candidate("openai", "a", connection_id="k", priority=1)
    tie = make_candidate("openai", "c", connection_id="k", priority=5)

    response = api("get", "/api/v1/candidates", gateway)

    assert response.status_code == 200
    assert [c["id"] for c in response.json()] == [early.pk, late.pk, tie.pk]
    assert response.json()[0] == {
        "id": early.pk,
        "provider": "openai",
        "registered_provider": "openai",
        "model": "a",
        "categories": [],
        "priority": 1,
        "connection_id": "k",
        "allowed_connection_ids": None,
        "ref": None,
    }


def test_put_candidate_replaces_its_fields(gateway: str) -> None:
    candidate = make_candidate(connection_id="claude-max-1", categories=("coding",))

    response = api(
        "put",
        f"/api/v1/candidates/{candidate.pk}",
        gateway,
        {"provider": "claude", "model": "claude-opus", "allowed_connection_ids": ["a", "b"]},
    )

    assert response.status_code == 200
    assert response.json() == {
        "id": candidate.pk,
        "provider": "claude",
        "registered_provider": "claude",
        "model": "claude-opus",
        "categories": [],
        "priority": 0,
        "connection_id": None,
        "allowed_connection_ids": ["a", "b"],
        "ref": None,
    }
    assert candidate_rows() == [("claude", "claude-opus", [], 0, None, ["a", "b"])]


def test_put_unknown_candidate_is_404(gateway: str) -> None:
    response = api(
        "put",
        "/api/v1/candidates/999999",
        gateway,
        {"provider": "claude", "model": "m", "connection_id": "c"},
    )

    assert response.status_code == 404
    assert response.json() == {"detail": "No candidate 999999."}
    assert candidate_rows() == []


def test_put_candidate_refused_changes_nothing(gateway: str) -> None:
    candidate = make_candidate(connection_id="claude-max-1")
    before = candidate_rows()

    response = api(
        "put",
        f"/api/v1/candidates/{candidate.pk}",
        gateway,
        {"provider": "claude", "model": "m", "connection_id": "c", "allowed_connection_ids": ["d"]},
    )

    assert response.status_code == 422
    assert candidate_rows() == before


def test_delete_candidate_answers_204(gateway: str) -> None:
    candidate = make_candidate()

    response = api("delete", f"/api/v1/candidates/{candidate.pk}", gateway)

    assert response.status_code == 204
    assert candidate_rows() == []


def test_delete_unknown_candidate_is_404(gateway: str) -> None:
    response = api("delete", "/api/v1/candidates/999999", gateway)

    assert response.status_code == 404
    assert response.json() == {"detail": "No candidate 999999."}


# --- readings -------------------------------------------------------------------------------


def post_reading(token: str, body: dict[str, Any], connection_id: str = "claude-max-1") -> Any:
    return api("post", f"/api/v1/connections/{connection_id}/readings", token, body)


def reading_rows() -> list[tuple[Any, ...]]:
    return list(
        QuotaReading.objects.order_by("pk").values_list(
            "status", "remaining_percent", "reset_at", "checked_at", "source"
        )
    )


def test_post_reading_stores_it_and_answers_201(gateway: str) -> None:
    make_connection("claude-max-1")
    checked_at = timezone.now().replace(microsecond=0) - timedelta(seconds=5)
    reset_at = checked_at + timedelta(hours=3)

    response = post_reading(
        gateway,
        {
            "remaining_percent": 41.5,
            "reset_at": reset_at.isoformat(),
            "checked_at": checked_at.isoformat(),
        },
    )

    assert response.status_code == 201
    assert response.json() == {
        "status": "SAFE",
        "remaining_percent": 41.5,
        "reset_at": iso(reset_at),
        "checked_at": iso(checked_at),
        "windows": [],
        "source": "push",
        "detail": "",
    }
    assert reading_rows() == [("SAFE", 41.5, reset_at, checked_at, "push")]
    assert Connection.objects.get().current_reading_id == QuotaReading.objects.get().pk


@pytest.mark.parametrize(
    ("body", "status"),
    [
        pytest.param({"remaining_percent": 0}, "EXHAUSTED", id="zero-is-exhausted"),
        pytest.param({"remaining_percent": 0.5}, "SAFE", id="positive-is-safe"),
        pytest.param({}, "UNKNOWN", id="no-number-is-unknown"),
        pytest.param(
            {"status": "EXHAUSTED", "remaining_percent": 30}, "EXHAUSTED", id="given-kept"
        ),
        pytest.param({"status": "UNKNOWN", "remaining_percent": 30}, "UNKNOWN", id="given-unknown"),
    ],
)
def test_post_reading_derives_the_status_only_when_absent(
    gateway: str, body: dict[str, Any], status: str
) -> None:
    make_connection("claude-max-1")

    response = post_reading(gateway, body)

    assert response.status_code == 201
    assert response.json()["status"] == status
    assert QuotaReading.objects.get().status == status


def test_post_reading_defaults_checked_at_to_now(gateway: str) -> None:
    make_connection("claude-max-1")
    before = timezone.now()

    response = post_reading(gateway, {"remaining_percent": 50})

    assert between(response.json()["checked_at"], before, timezone.now())


def test_post_reading_returns_times_in_utc(gateway: str) -> None:
    make_connection("claude-max-1")

    response = post_reading(
        gateway, {"remaining_percent": 50, "checked_at": "2026-01-01T08:00:00+05:30"}
    )

    assert response.json()["checked_at"] == "2026-01-01T02:30:00Z"
    assert QuotaReading.objects.get().checked_at == datetime(2026, 1, 1, 2, 30, tzinfo=UTC)


def test_post_reading_with_an_offset_beyond_the_databases_range_is_stored_in_utc(
    gateway: str,
) -> None:
    # Python allows offsets up to 23:59, PostgreSQL 15:59: this used to answer 500 there.
    make_connection("claude-max-1")

    response = post_reading(
        gateway, {"remaining_percent": 50, "checked_at": "2026-01-01T00:00:00-21:52"}
    )

    assert response.status_code == 201
    assert response.json()["checked_at"] == "2026-01-01T21:52:00Z"


def test_post_reading_with_an_instant_outside_the_calendar_in_utc_is_422(gateway: str) -> None:
    make_connection("claude-max-1")

    response = post_reading(
        gateway, {"remaining_percent": 50, "checked_at": "0001-01-01T00:00:00+05:00"}
    )

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", "checked_at"], "value_error")
    ]
    assert reading_rows() == []


def test_post_reading_more_than_60_s_in_the_future_is_422_and_stores_nothing(
    gateway: str,
) -> None:
    make_connection("claude-max-1")
    future = timezone.now() + timedelta(seconds=120)

    response = post_reading(gateway, {"remaining_percent": 50, "checked_at": future.isoformat()})

    assert response.status_code == 422
    assert response.json() == {
        "detail": [
            {
                "loc": ["body", "payload", "checked_at"],
                "msg": "More than 60 s in the future.",
                "type": "value_error",
            }
        ]
    }
    assert reading_rows() == []


def test_post_reading_slightly_in_the_future_is_accepted(gateway: str) -> None:
    make_connection("claude-max-1")
    future = timezone.now() + timedelta(seconds=30)

    response = post_reading(gateway, {"remaining_percent": 50, "checked_at": future.isoformat()})

    assert response.status_code == 201


def test_post_reading_slightly_in_the_future_is_stored_as_the_receive_time(gateway: str) -> None:
    make_connection("claude-max-1")
    before = timezone.now()

    response = post_reading(
        gateway,
        {"remaining_percent": 50, "checked_at": (before + timedelta(seconds=30)).isoformat()},
    )

    after = timezone.now()
    assert response.status_code == 201
    assert between(response.json()["checked_at"], before, after)
    assert before <= QuotaReading.objects.get().checked_at <= after


@pytest.mark.parametrize(
    "later_truth",
    [
        pytest.param({"kind": "quota_exhausted"}, id="quota-exhausted-event"),
        pytest.param({"remaining_percent": 0}, id="server-stamped-push"),
        pytest.param(
            {"kind": "success", "headers": {"anthropic-ratelimit-unified-status": "rejected"}},
            id="rate-limit-headers",
        ),
    ],
)
def test_after_a_future_dated_push_the_later_truth_is_current_and_the_pool_excludes_at_once(
    gateway: str, later_truth: dict[str, Any]
) -> None:
    make_connection("claude-max-1")
    make_candidate(connection_id="claude-max-1")
    ahead = timezone.now() + timedelta(seconds=50)
    post_reading(gateway, {"remaining_percent": 80, "checked_at": ahead.isoformat()})
    served_before = api("get", "/api/v1/pools/auto/subscription", gateway).json()["candidates"]

    if "kind" in later_truth:
        response = post_event(gateway, later_truth)
    else:
        response = post_reading(gateway, later_truth)

    status = api("get", "/api/v1/connections/claude-max-1/status", gateway).json()
    pool = api("get", "/api/v1/pools/auto/subscription", gateway).json()
    assert response.status_code in (200, 201)
    assert [c["connection_id"] for c in served_before] == ["claude-max-1"]
    assert (status["reading"]["status"], status["hysteresis"]["state"]) == (
        "EXHAUSTED",
        "dropped_out",
    )
    assert pool["candidates"] == []
    assert [e["connection_id"] for e in pool["excluded"]] == ["claude-max-1"]


def test_post_reading_reduces_windows_to_the_lowest_with_the_later_reset_on_a_tie(
    gateway: str,
) -> None:
    make_connection("claude-max-1")
    soon = datetime(2026, 11, 29, 17, 0, tzinfo=UTC)
    later = datetime(2026, 12, 3, 0, 0, tzinfo=UTC)
    windows = [
        {"name": "five_hour", "remaining_percent": 20, "reset_at": soon.isoformat()},
        {"name": "seven_day", "remaining_percent": 20, "reset_at": later.isoformat()},
        {"name": "opus", "remaining_percent": 70, "reset_at": None},
        {"name": "unknown", "remaining_percent": None},
    ]

    response = post_reading(gateway, {"windows": windows})

    assert response.status_code == 201
    body = response.json()
    assert (body["status"], body["remaining_percent"], body["reset_at"]) == (
        "SAFE",
        20.0,
        "2026-12-03T00:00:00Z",
    )
    assert body["windows"] == [
        {
            "name": "five_hour",
            "remaining_percent": 20,
            "reset_at": "2026-11-29T17:00:00+00:00",
            "model_scope": None,
        },
        {
            "name": "seven_day",
            "remaining_percent": 20,
            "reset_at": "2026-12-03T00:00:00+00:00",
            "model_scope": None,
        },
        {"name": "opus", "remaining_percent": 70, "reset_at": None, "model_scope": None},
        {"name": "unknown", "remaining_percent": None, "reset_at": None, "model_scope": None},
    ]


def test_post_reading_keeps_a_given_remaining_over_the_windows(gateway: str) -> None:
    make_connection("claude-max-1")

    response = post_reading(
        gateway, {"remaining_percent": 55, "windows": [{"name": "w", "remaining_percent": 10}]}
    )

    assert response.json()["remaining_percent"] == 55.0


def test_a_late_older_reading_is_kept_as_history_but_not_made_current(gateway: str) -> None:
    make_connection("claude-max-1")
    now = timezone.now()
    newest = post_reading(
        gateway, {"remaining_percent": 50, "checked_at": (now - timedelta(seconds=10)).isoformat()}
    )
    post_reading(
        gateway, {"remaining_percent": 1, "checked_at": (now - timedelta(seconds=100)).isoformat()}
    )

    status = api("get", "/api/v1/connections/claude-max-1/status", gateway).json()

    assert QuotaReading.objects.count() == 2
    assert status["reading"]["checked_at"] == newest.json()["checked_at"]
    assert status["reading"]["remaining_percent"] == 50.0
    assert status["hysteresis"]["state"] == "in_play"


def test_storing_a_reading_updates_the_hysteresis_state(gateway: str) -> None:
    make_connection("claude-max-1")

    post_reading(gateway, {"remaining_percent": 1.5})

    connection = Connection.objects.get()
    assert (connection.hysteresis_state, connection.hysteresis_reason) == (
        "dropped_out",
        "1.5 % left, at or below the exit cutoff of 2 %",
    )


def test_post_reading_for_an_unknown_connection_is_404(gateway: str) -> None:
    response = post_reading(gateway, {"remaining_percent": 50}, connection_id="nobody")

    assert response.status_code == 404
    assert response.json() == {"detail": "No connection 'nobody'."}
    assert reading_rows() == []


@pytest.mark.parametrize(
    ("body", "loc", "error_type"),
    [
        pytest.param(
            {"remaining_percent": 101}, ["remaining_percent"], "less_than_equal", id="over-100"
        ),
        pytest.param(
            {"remaining_percent": -0.1}, ["remaining_percent"], "greater_than_equal", id="negative"
        ),
        pytest.param(
            {"remaining_percent": True}, ["remaining_percent"], "float_type", id="boolean"
        ),
        pytest.param({"remaining_percent": "50"}, ["remaining_percent"], "float_type", id="string"),
        pytest.param({"status": "FINE"}, ["status"], "literal_error", id="unknown-status"),
        pytest.param(
            {"checked_at": "2026-01-01T00:00:00"}, ["checked_at"], "timezone_aware", id="naive"
        ),
        pytest.param({"checked_at": 0}, ["checked_at"], "value_error", id="unix-time"),
        pytest.param({"source": "me"}, ["source"], "extra_forbidden", id="read-only-source"),
        pytest.param(
            {"windows": [{"name": "w", "left": 3}]},
            ["windows", 0, "left"],
            "extra_forbidden",
            id="window-field",
        ),
    ],
)
def test_post_reading_refuses_an_invalid_body_and_stores_nothing(
    gateway: str, body: dict[str, Any], loc: list[Any], error_type: str
) -> None:
    make_connection("claude-max-1")

    response = post_reading(gateway, body)

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", *loc], error_type)
    ]
    assert reading_rows() == []


# --- numbers are not times (issue 12, item 8) --------------------------------------------

NOT_TIMES = [
    pytest.param("1796114593000", "value_error", id="digits-as-milliseconds"),
    pytest.param("-1", "value_error", id="minus-one"),
    pytest.param("0", "value_error", id="zero"),
    pytest.param("1764417600.5", "value_error", id="decimal-digits"),
    pytest.param(1764417600, "value_error", id="json-number"),
    pytest.param("2026-11-29", "value_error", id="date-only"),
    pytest.param("2026-11-29T12:00:00", "timezone_aware", id="no-offset"),
]
SPEND_BODY = {
    "request_id": "req-1",
    "connection_id": "openai-key",
    "provider": "openai",
    "model": "gpt-4o-mini",
    "cost_usd": 1.0,
}
# Every time field of every write body: (path, body holding the value, location).
TIME_FIELDS = [
    pytest.param(
        "/api/v1/connections/claude-max-1/readings",
        lambda v: {"remaining_percent": 50, "checked_at": v},
        ["checked_at"],
        id="reading-checked_at",
    ),
    pytest.param(
        "/api/v1/connections/claude-max-1/readings",
        lambda v: {"remaining_percent": 50, "reset_at": v},
        ["reset_at"],
        id="reading-reset_at",
    ),
    pytest.param(
        "/api/v1/connections/claude-max-1/readings",
        lambda v: {"windows": [{"name": "five_hour", "remaining_percent": 5, "reset_at": v}]},
        ["windows", 0, "reset_at"],
        id="window-reset_at",
    ),
    pytest.param(
        "/api/v1/connections/claude-max-1/events",
        lambda v: {"kind": "quota_exhausted", "reset_at": v},
        ["reset_at"],
        id="event-reset_at",
    ),
    pytest.param(
        "/api/v1/spend", lambda v: {**SPEND_BODY, "occurred_at": v}, ["occurred_at"], id="spend"
    ),
]


def written_state() -> tuple[Any, ...]:
    connection = Connection.objects.get()
    return (
        reading_rows(),
        list(SpendEntry.objects.values_list("request_id", flat=True)),
        connection.cooldown_until,
        connection.consecutive_failures,
        connection.hysteresis_state,
        billing_services.change_counters(),
    )


@pytest.mark.parametrize(("path", "body_of", "loc"), TIME_FIELDS)
@pytest.mark.parametrize(("value", "error_type"), NOT_TIMES)
def test_a_number_a_string_of_digits_or_a_time_without_an_offset_is_not_a_time_in_any_body(
    gateway: str, path: str, body_of: Any, loc: list[Any], value: Any, error_type: str
) -> None:
    make_connection("claude-max-1")
    before = written_state()

    response = api("post", path, gateway, body_of(value))

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", *loc], error_type)
    ]
    assert written_state() == before


def test_a_time_written_as_digits_is_refused_with_a_message_saying_so(gateway: str) -> None:
    make_connection("claude-max-1")

    response = post_reading(gateway, {"remaining_percent": 50, "checked_at": "1796114593000"})

    assert response.json()["detail"][0]["msg"] == (
        "Value error, expected an ISO 8601 time with an offset, such as 2026-11-29T12:00:00Z "
        "(a number or a string of digits is not a time)"
    )


@pytest.mark.parametrize(
    ("occurred_at", "message"),
    [
        pytest.param(
            lambda now: "0001-01-01T00:00:00Z",
            "Older than the retention period (14 days) and before the current budget window.",
            id="year-1",
        ),
        pytest.param(
            lambda now: "9999-12-31T23:59:59Z", "More than 60 s in the future.", id="year-9999"
        ),
        pytest.param(
            lambda now: (now + timedelta(seconds=61)).isoformat(),
            "More than 60 s in the future.",
            id="61-s-ahead",
        ),
        pytest.param(
            lambda now: (now - timedelta(days=15)).isoformat(),
            "Older than the retention period (14 days) and before the current budget window.",
            id="15-days-ago",
        ),
    ],
)
def test_spend_dated_beyond_a_minute_ahead_or_the_retention_period_back_is_422_and_not_recorded(
    gateway: str, occurred_at: Any, message: str
) -> None:
    # A daily budget window: every date beyond the retention period is before it.
    LadderSettings.objects.filter(pk=1).update(budget_window="day")
    counters = billing_services.change_counters()

    response = api(
        "post", "/api/v1/spend", gateway, {**SPEND_BODY, "occurred_at": occurred_at(timezone.now())}
    )

    assert response.status_code == 422
    assert response.json() == {
        "detail": [
            {"loc": ["body", "payload", "occurred_at"], "msg": message, "type": "value_error"}
        ]
    }
    assert not SpendEntry.objects.exists()
    assert billing_services.change_counters() == counters


@pytest.mark.parametrize(
    "offset",
    [
        pytest.param(timedelta(seconds=59), id="59-s-ahead"),
        pytest.param(-timedelta(days=13), id="13-days-ago"),
    ],
)
def test_spend_dated_within_a_minute_ahead_or_the_retention_period_back_is_recorded_as_given(
    gateway: str, offset: timedelta
) -> None:
    LadderSettings.objects.filter(pk=1).update(budget_window="day")
    occurred_at = timezone.now().replace(microsecond=0) + offset

    response = api(
        "post", "/api/v1/spend", gateway, {**SPEND_BODY, "occurred_at": occurred_at.isoformat()}
    )

    assert response.status_code == 201
    assert SpendEntry.objects.get().occurred_at == occurred_at


# --- events ----------------------------------------------------------------------------------


def post_event(token: str, body: dict[str, Any], connection_id: str = "claude-max-1") -> Any:
    return api("post", f"/api/v1/connections/{connection_id}/events", token, body)


def test_a_rate_limit_without_retry_after_cools_down_for_the_base_backoff(gateway: str) -> None:
    make_connection("claude-max-1")
    before = timezone.now()

    response = post_event(gateway, {"kind": "rate_limited"})

    after = timezone.now()
    body = response.json()
    assert response.status_code == 200
    assert {k: v for k, v in body.items() if k != "cooldown_until"} == {
        "connection_id": "claude-max-1",
        "cooldown_seconds": 5.0,
        "clamped_to_reset": False,
        "consecutive_failures": 1,
    }
    assert between(
        body["cooldown_until"], before + timedelta(seconds=5), after + timedelta(seconds=5)
    )
    connection = Connection.objects.get()
    assert iso(connection.cooldown_until) == body["cooldown_until"]
    assert connection.consecutive_failures == 1


def test_consecutive_failures_double_the_backoff(gateway: str) -> None:
    make_connection("claude-max-1")
    post_event(gateway, {"kind": "error"})

    response = post_event(gateway, {"kind": "rate_limited"})

    assert (response.json()["cooldown_seconds"], response.json()["consecutive_failures"]) == (
        10.0,
        2,
    )


def test_a_retry_after_is_used_as_given_past_the_backoff_cap(gateway: str) -> None:
    make_connection("claude-max-1")

    response = post_event(gateway, {"kind": "rate_limited", "retry_after_seconds": 600})

    assert response.json()["cooldown_seconds"] == 600.0


def test_a_retry_after_header_is_used_when_the_field_is_absent(gateway: str) -> None:
    make_connection("claude-max-1")

    response = post_event(gateway, {"kind": "rate_limited", "headers": {"Retry-After": "42"}})

    assert response.json()["cooldown_seconds"] == 42.0


def test_a_cooldown_is_clamped_to_an_earlier_reset(gateway: str) -> None:
    make_connection("claude-max-1")
    reset_at = (timezone.now() + timedelta(seconds=60)).replace(microsecond=0)

    response = post_event(
        gateway,
        {"kind": "rate_limited", "retry_after_seconds": 600, "reset_at": reset_at.isoformat()},
    )

    body = response.json()
    assert (body["cooldown_until"], body["clamped_to_reset"]) == (iso(reset_at), True)
    assert 0 < body["cooldown_seconds"] <= 60
    assert Connection.objects.get().cooldown_until == reset_at


def test_a_quota_exhausted_event_stores_an_exhausted_reading_until_the_reset(
    gateway: str,
) -> None:
    make_connection("claude-max-1")
    reset_at = (timezone.now() + timedelta(hours=2)).replace(microsecond=0)

    response = post_event(gateway, {"kind": "quota_exhausted", "reset_at": reset_at.isoformat()})

    assert response.status_code == 200
    reading = QuotaReading.objects.get()
    assert (reading.status, reading.remaining_percent, reading.reset_at, reading.source) == (
        "EXHAUSTED",
        0.0,
        reset_at,
        "event",
    )
    assert Connection.objects.get().hysteresis_state == "dropped_out"


def test_a_success_clears_the_failures_and_the_cooldown(gateway: str) -> None:
    make_connection("claude-max-1")
    post_event(gateway, {"kind": "rate_limited", "retry_after_seconds": 600})

    response = post_event(gateway, {"kind": "success"})

    assert response.json() == {
        "connection_id": "claude-max-1",
        "cooldown_until": None,
        "cooldown_seconds": 0.0,
        "clamped_to_reset": False,
        "consecutive_failures": 0,
    }
    connection = Connection.objects.get()
    assert (connection.cooldown_until, connection.consecutive_failures) == (None, 0)


def test_an_event_for_an_unknown_connection_is_404(gateway: str) -> None:
    response = post_event(gateway, {"kind": "error"}, connection_id="nobody")

    assert response.status_code == 404
    assert response.json() == {"detail": "No connection 'nobody'."}


@pytest.mark.parametrize(
    ("body", "loc", "error_type"),
    [
        pytest.param({"kind": "timeout"}, ["kind"], "literal_error", id="unknown-kind"),
        pytest.param({}, ["kind"], "missing", id="no-kind"),
        pytest.param(
            {"kind": "error", "retry_after_seconds": -1},
            ["retry_after_seconds"],
            "greater_than_equal",
            id="negative-retry",
        ),
        pytest.param(
            {"kind": "error", "retry_after_seconds": "30"},
            ["retry_after_seconds"],
            "float_type",
            id="string-retry",
        ),
        pytest.param(
            {"kind": "error", "headers": {"a": 1}},
            ["headers", "a"],
            "string_type",
            id="numeric-header",
        ),
        pytest.param(
            {"kind": "error", "status": 429}, ["status"], "extra_forbidden", id="unknown-field"
        ),
        pytest.param({"kind": "error", "reset_at": 0}, ["reset_at"], "value_error", id="unix-time"),
    ],
)
def test_an_invalid_event_is_422_and_changes_nothing(
    gateway: str, body: dict[str, Any], loc: list[Any], error_type: str
) -> None:
    make_connection("claude-max-1")

    response = post_event(gateway, body)

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", *loc], error_type)
    ]
    connection = Connection.objects.get()
    assert (connection.cooldown_until, connection.consecutive_failures) == (None, 0)


# --- spend ------------------------------------------------------------------------------------


def cheap_price() -> None:
    billing_services.upsert_price(
        billing_services.PriceInput("openai", "gpt-4o-mini", Decimal("0.15"), Decimal("0.6"), None),
        actor="t",
    )


def test_post_spend_records_it_with_the_rung_it_landed_on(gateway: str) -> None:
    cheap_price()
    make_connection("openai-key", provider="openai", auth_type="apikey")
    occurred_at = timezone.now().replace(microsecond=0) - timedelta(minutes=1)

    response = api(
        "post",
        "/api/v1/spend",
        gateway,
        {
            "request_id": "req-1",
            "connection_id": "openai-key",
            "provider": "openai",
            "model": "gpt-4o-mini",
            "cost_usd": 0.25,
            "occurred_at": occurred_at.isoformat(),
        },
    )

    assert response.status_code == 201
    assert response.json() == {
        "request_id": "req-1",
        "connection_id": "openai-key",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "cost_usd": 0.25,
        "input_tokens": None,
        "output_tokens": None,
        "occurred_at": iso(occurred_at),
        "rung": "cheap",
        "billed_usd": 0.25,
        "list_price_usd": 0.25,
    }
    entry = SpendEntry.objects.get()
    assert (entry.cost_usd, entry.is_cost_computed, entry.rung) == (
        Decimal("0.25000000"),
        False,
        "cheap",
    )


def test_post_spend_computes_a_null_cost_from_tokens_and_prices(gateway: str) -> None:
    cheap_price()

    response = api(
        "post",
        "/api/v1/spend",
        gateway,
        {
            "request_id": "req-1",
            "connection_id": "openai-key",
            "provider": "openai",
            "model": "gpt-4o-mini",
            "cost_usd": None,
            "input_tokens": 1_000_000,
            "output_tokens": 500_000,
        },
    )

    assert response.status_code == 201
    assert response.json()["cost_usd"] == 0.45
    assert SpendEntry.objects.get().is_cost_computed is True


def test_post_spend_with_a_seen_request_id_is_200_and_not_counted_again(gateway: str) -> None:
    body = {
        "request_id": "req-1",
        "connection_id": "openai-key",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "cost_usd": 1.0,
    }
    first = api("post", "/api/v1/spend", gateway, body)

    again = api("post", "/api/v1/spend", gateway, {**body, "cost_usd": 9.0})

    assert again.status_code == 200
    assert again.json() == first.json()
    assert SpendEntry.objects.count() == 1
    assert SpendEntry.objects.get().cost_usd == Decimal("1.00000000")


def test_spend_on_a_plan_connection_never_counts_against_a_paid_budget(
    gateway: str, operator: str
) -> None:
    make_connection("claude-max-1")
    api("put", "/api/v1/settings/ladder", operator, {**TUNED, "budget_window": "month"})

    response = api(
        "post",
        "/api/v1/spend",
        gateway,
        {
            "request_id": "req-1",
            "connection_id": "claude-max-1",
            "provider": "claude",
            "model": "claude-sonnet-4-5",
            "cost_usd": 50.0,
        },
    )

    assert response.json()["rung"] == "subscription"
    summary = api("get", "/api/v1/spend/summary", gateway).json()
    assert summary["rungs"]["cheap"]["spent_usd"] == 0.0
    assert summary["rungs"]["premium"]["spent_usd"] == 0.0


def test_spend_summary_reports_each_paid_rung_against_its_budget(
    gateway: str, operator: str
) -> None:
    api(
        "put",
        "/api/v1/settings/ladder",
        operator,
        {**TUNED, "budget_window": "month", "rung_budget_usd": {"cheap": 1.5, "premium": None}},
    )
    cheap_price()
    for n, cost in enumerate((1.0, 0.5)):
        api(
            "post",
            "/api/v1/spend",
            gateway,
            {
                "request_id": f"req-{n}",
                "connection_id": "openai-key",
                "provider": "openai",
                "model": "gpt-4o-mini",
                "cost_usd": cost,
            },
        )
    start, end = budget_window_bounds(BudgetWindow.MONTH, timezone.now())

    response = api("get", "/api/v1/spend/summary", gateway)

    assert response.status_code == 200
    assert response.json() == {
        "budget_window": "month",
        "window_start": iso(start),
        "window_end": iso(end),
        "rungs": {
            "cheap": {"spent_usd": 1.5, "budget_usd": 1.5, "exhausted": True},
            "premium": {"spent_usd": 0.0, "budget_usd": None, "exhausted": False},
        },
        "saved_usd": 0.0,
    }


def test_post_spend_with_an_out_of_range_offset_is_stored_in_utc(gateway: str) -> None:
    # Used to answer 500 on PostgreSQL, which refuses offsets beyond 15:59. Relative to
    # now: spend older than the retention period is refused.
    moment = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    far_west = moment.astimezone(dt_timezone(-timedelta(hours=18, minutes=54)))

    response = api(
        "post",
        "/api/v1/spend",
        gateway,
        {
            "request_id": "req-1",
            "connection_id": "openai-key",
            "provider": "openai",
            "model": "gpt-4o-mini",
            "cost_usd": 1,
            "occurred_at": far_west.isoformat(),
        },
    )

    assert far_west.isoformat().endswith("-18:54")
    assert response.status_code == 201
    assert response.json()["occurred_at"] == iso(moment)


@pytest.mark.parametrize(
    ("change", "loc", "error_type"),
    [
        pytest.param({"cost_usd": -1}, ["cost_usd"], "greater_than_equal", id="negative-cost"),
        pytest.param({"cost_usd": True}, ["cost_usd"], "float_type", id="boolean-cost"),
        pytest.param({"input_tokens": "10"}, ["input_tokens"], "int_type", id="string-tokens"),
        pytest.param(
            {"input_tokens": -1}, ["input_tokens"], "greater_than_equal", id="negative-tokens"
        ),
        pytest.param(
            {"connection_id": "a b"}, ["connection_id"], "string_pattern_mismatch", id="hostile-id"
        ),
        pytest.param({"request_id": ""}, ["request_id"], "string_too_short", id="empty-request-id"),
        pytest.param(
            {"occurred_at": "2026-11-29T12:00:00"}, ["occurred_at"], "timezone_aware", id="naive"
        ),
        pytest.param({"occurred_at": 1764417600}, ["occurred_at"], "value_error", id="unix-time"),
        pytest.param({"rung": "free"}, ["rung"], "extra_forbidden", id="read-only-rung"),
    ],
)
def test_post_spend_refuses_an_invalid_body_and_records_nothing(
    gateway: str, change: dict[str, Any], loc: list[str], error_type: str
) -> None:
    body = {
        "request_id": "req-1",
        "connection_id": "openai-key",
        "provider": "openai",
        "model": "gpt-4o-mini",
        "cost_usd": 1.0,
        **change,
    }

    response = api("post", "/api/v1/spend", gateway, body)

    assert response.status_code == 422
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "payload", *loc], error_type)
    ]
    assert not SpendEntry.objects.exists()


def test_post_spend_whose_computed_cost_overflows_is_422_not_500(
    gateway: str, operator: str
) -> None:
    api(
        "post",
        "/api/v1/prices",
        operator,
        {
            "provider": "openai",
            "model": "o1-pro",
            "input_usd_per_mtok": 150,
            "output_usd_per_mtok": 600,
        },
    )

    response = api(
        "post",
        "/api/v1/spend",
        gateway,
        {
            "request_id": "req-1",
            "connection_id": "openai-key",
            "provider": "openai",
            "model": "o1-pro",
            "input_tokens": 10**12,
            "output_tokens": 0,
        },
    )

    assert response.status_code == 422
    assert response.json() == {
        "detail": [
            {
                "loc": ["body", "payload", "cost_usd"],
                "msg": "A request's cost must be between 0 and 99,999,999.99999999 USD.",
                "type": "value_error",
            }
        ]
    }
    assert not SpendEntry.objects.exists()


# --- tokens ---------------------------------------------------------------------------------


def test_an_operator_token_can_call_gateway_endpoints(operator: str) -> None:
    response = api("get", "/api/v1/connections", operator)

    assert response.status_code == 200


def test_an_api_call_stamps_the_tokens_last_use(gateway: str) -> None:
    before = timezone.now()

    api("get", "/api/v1/models", gateway)

    last_used_at = ApiToken.objects.get().last_used_at
    assert last_used_at is not None
    assert before <= last_used_at <= timezone.now()


def test_create_api_token_prints_the_token_alone_on_stdout() -> None:
    out = StringIO()

    call_command("create_api_token", "edge-1", "--scope", "gateway", stdout=out)

    secret = out.getvalue().strip()
    token = ApiToken.objects.get()
    assert out.getvalue() == secret + "\n"
    assert secret.startswith("omr_")
    assert (token.name, token.scope, token.created_by, token.prefix) == (
        "edge-1",
        "gateway",
        "cli",
        secret[:12],
    )
    assert token.secret_hash == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in token.secret_hash


def test_a_token_from_the_command_authenticates_with_its_scope() -> None:
    out = StringIO()
    call_command("create_api_token", "edge-1", "--scope", "gateway", stdout=out)
    secret = out.getvalue().strip()

    read = api("get", "/api/v1/catalog", secret)
    write = api("put", "/api/v1/settings/ladder", secret, TUNED)

    assert (read.status_code, write.status_code) == (200, 403)


def test_an_operator_token_from_the_command_can_write() -> None:
    out = StringIO()
    call_command("create_api_token", "admin", "--scope", "operator", stdout=out)

    response = api("put", "/api/v1/settings/ladder", out.getvalue().strip(), TUNED)

    assert response.status_code == 200


def test_create_api_token_refuses_an_unknown_scope() -> None:
    with pytest.raises(CommandError, match="invalid choice: 'root'"):
        call_command("create_api_token", "x", "--scope", "root", stdout=StringIO())

    assert not ApiToken.objects.exists()


def test_create_api_token_refuses_a_blank_name() -> None:
    with pytest.raises(CommandError, match="name must be 1 to 100 characters"):
        call_command("create_api_token", "   ", "--scope", "gateway", stdout=StringIO())

    assert not ApiToken.objects.exists()


@pytest.mark.parametrize(
    "path", ["/api/v1/pools/auto/subscription", "/api/v1/prices", "/api/v1/nope", "/v1/models"]
)
def test_a_disallowed_host_on_an_api_path_is_a_json_400(gateway: str, path: str) -> None:
    response = Client().get(path, HTTP_HOST="evil.example", HTTP_AUTHORIZATION=f"Bearer {gateway}")

    assert response.status_code == 400
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Bad Request"}


def test_a_disallowed_host_on_a_dashboard_path_stays_an_html_400() -> None:
    response = Client().get("/prices/", HTTP_HOST="evil.example")

    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")


def test_a_candidate_keeps_its_ref_and_every_pool_entry_echoes_it() -> None:
    gateway = make_token("gw-ref", ApiToken.Scope.GATEWAY)
    make_connection("claude-max-1")
    created = api(
        "post",
        "/api/v1/candidates",
        gateway,
        {"provider": "claude", "model": "m", "connection_id": "claude-max-1", "ref": "dep/é-1"},
    )
    assert created.status_code == 201
    assert created.json()["ref"] == "dep/é-1"
    pool = api("get", "/api/v1/pools/auto/thrifty", gateway).json()
    assert [(c["id"], c["ref"]) for c in pool["candidates"]] == [(created.json()["id"], "dep/é-1")]
    too_long = api(
        "post",
        "/api/v1/candidates",
        gateway,
        {"provider": "claude", "model": "m", "connection_id": "claude-max-1", "ref": "x" * 257},
    )
    assert too_long.status_code == 422
    assert Candidate.objects.count() == 1


def test_the_ref_is_part_of_a_posted_pools_tag() -> None:
    gateway = make_token("gw-ref", ApiToken.Scope.GATEWAY)
    make_connection("claude-max-1")

    def post(ref: str | None) -> Any:
        body = {
            "candidates": [
                {"provider": "claude", "model": "m", "connection_id": "claude-max-1", "ref": ref}
            ]
        }
        return api("post", "/api/v1/pools/auto/thrifty", gateway, body)

    a, a_again, b = post("a"), post("a"), post("b")
    assert a["ETag"] == a_again["ETag"] != b["ETag"]
    assert b.json()["candidates"][0]["ref"] == "b"


def test_a_dashboard_edit_keeps_the_ref_the_gateway_set() -> None:
    make_connection("claude-max-1")
    candidate = ladder_services.save_candidate(
        ladder_services.CandidateInput("claude", "m", connection_id="claude-max-1", ref="dep-1")
    )
    ladder_services.save_candidate(
        ladder_services.CandidateInput(
            "claude", "m2", connection_id="claude-max-1", keeps_ref=True
        ),
        candidate.pk,
    )
    assert Candidate.objects.get().ref == "dep-1"
    ladder_services.save_candidate(
        ladder_services.CandidateInput("claude", "m2", connection_id="claude-max-1"), candidate.pk
    )
    assert Candidate.objects.get().ref is None
