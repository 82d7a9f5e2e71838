"""The ladder's tuning (spec/api.md "Settings"): read with a gateway token, replaced with
an operator's."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.http import HttpRequest
from ninja import Router

from ladder import services
from ladder.core.settings_bounds import TUNING_FIELDS
from ladder.schemas import SettingsSchema
from omniroute_admin.auth import actor_of, gateway_auth, operator_auth
from omniroute_admin.errors import BODY_ERRORS, GATEWAY_ERRORS, OPERATOR_ERRORS, located

router = Router(tags=["ladder"])


def _money(value: Decimal | None) -> float | None:
    return float(value) if value is not None else None


def settings_out() -> dict[str, Any]:
    """The tuning fields, exactly, as the ladder applies them: a stored row outside the
    rules (an older release's, or edited by hand) answers its nearest legal values, the
    ones every decision uses, never a 500 (ladder.services.effective_settings_of)."""
    values, _ = services.effective_settings_of(services.get_settings_row())
    body: dict[str, Any] = {}
    for field in TUNING_FIELDS:
        value = values[field.name]
        *parents, key = SETTINGS_LOCATIONS.get(field.name, [field.name])
        place = body
        for parent in parents:
            place = place.setdefault(parent, {})
        place[key] = _money(value) if field.kind == "usd" else value
    return body


# The services name the budgets by column; the API nests them. Every other tuning field
# (ladder/core/settings_bounds.TUNING_FIELDS) sits at the top level under its own name.
SETTINGS_LOCATIONS = {
    "cheap_budget_usd": ["rung_budget_usd", "cheap"],
    "premium_budget_usd": ["rung_budget_usd", "premium"],
}


@router.get("/settings/ladder", response={200: SettingsSchema, **GATEWAY_ERRORS}, auth=gateway_auth)
def get_settings(request: HttpRequest) -> dict[str, Any]:
    """The ladder's tuning. There is no `enabled` field, deliberately."""
    return settings_out()


def _usd_6dp(value: float | None) -> Decimal | None:
    # The settings columns hold 6 decimals: round, rather than refuse 0.1234567 with a
    # 422 that names a model field the API does not have.
    return Decimal(str(value)).quantize(Decimal("0.000001")) if value is not None else None


@router.put(
    "/settings/ladder",
    response={200: SettingsSchema, **BODY_ERRORS, **OPERATOR_ERRORS},
    auth=operator_auth,
)
def put_settings(request: HttpRequest, payload: SettingsSchema) -> Any:
    """Replace every tuning field (a missing field, or an `enabled` field, is a 422)."""
    body = payload.model_dump()
    values: dict[str, Any] = {}
    for field in TUNING_FIELDS:
        value: Any = body
        for key in SETTINGS_LOCATIONS.get(field.name, [field.name]):
            value = value[key]
        values[field.name] = _usd_6dp(value) if field.kind == "usd" else value
    with located(SETTINGS_LOCATIONS):
        services.update_settings(values, actor=actor_of(request))
    return settings_out()
