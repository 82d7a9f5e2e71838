"""The ladder's settings: the stored row, the frozen config the core takes, and the
audited update of every tuning field at once."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models, transaction

from billing import services as billing_services
from billing.models import AuditEntry, ChangeCounter
from ladder.core import LadderConfig, settings_bounds
from ladder.core.settings_bounds import TUNING_FIELD_NAMES
from ladder.models import LadderSettings
from ladder.services.common import logger


def get_settings_row() -> LadderSettings:
    """The single settings row (created with the defaults if a database lost it)."""
    row, _ = LadderSettings.objects.get_or_create(pk=1)
    return row


def effective_settings_of(row: LadderSettings) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The tuning the ladder applies for the stored row, and the fields the row holds
    outside the rules (a row from an older release, or edited by hand: each such field
    takes its nearest legal value, so neither a decision nor a read of the settings
    fails on it). Logged, so an operator can save the settings again."""
    values, out_of_range = settings_bounds.effective_settings(
        {name: getattr(row, name) for name in SETTINGS_FIELDS}
    )
    if out_of_range and out_of_range not in _settings_warned:
        # Once per process and set of fields: the config is read on every write path.
        _settings_warned.add(out_of_range)
        logger.warning(
            "stored ladder settings outside the rules, applied as the nearest legal value: %s",
            ", ".join(out_of_range),
        )
    return values, out_of_range


_settings_warned: set[tuple[str, ...]] = set()


def config_from_row(row: LadderSettings) -> LadderConfig:
    """The frozen config the pure core takes (out-of-range fields as applied), with the
    deployment's beat period and reset-refresh delay (when a due refresh is expected)."""
    config = LadderConfig.from_settings(effective_settings_of(row)[0])
    return dataclasses.replace(
        config,
        beat_seconds=float(settings.QUOTA_BEAT_SECONDS),
        reset_grace_seconds=float(settings.QUOTA_RESET_GRACE_SECONDS),
    )


def load_config() -> LadderConfig:
    """The current tuning (one query)."""
    return config_from_row(get_settings_row())


SETTINGS_FIELDS = TUNING_FIELD_NAMES


def settings_snapshot(row: LadderSettings) -> dict[str, Any]:
    """The audited tuning fields (decimals as strings at the column's precision, as the
    database returns them: "20.000000" whether the form said "20" or "20.00")."""
    return {
        name: (_column_text(row, name, value) if isinstance(value, Decimal) else value)
        for name in SETTINGS_FIELDS
        for value in [getattr(row, name)]
    }


def _column_text(row: LadderSettings, name: str, value: Decimal) -> str:
    field = LadderSettings._meta.get_field(name)
    places = field.decimal_places if isinstance(field, models.DecimalField) else None
    return str(value.quantize(Decimal(1).scaleb(-places))) if places is not None else str(value)


def validate_settings(values: dict[str, Any]) -> None:
    """Every settings rule (ladder/core/settings_bounds.py, the one definition); raises
    ValidationError by field. The re-entry floor below the exit cutoff names both."""
    problems = settings_bounds.settings_problems(values)
    if problems:
        raise ValidationError(problems)


def update_settings(values: dict[str, Any], *, actor: str) -> LadderSettings:
    """Replace every tuning field at once, audited in the same transaction."""
    validate_settings(values)
    with transaction.atomic():
        row = LadderSettings.objects.select_for_update().get_or_create(pk=1)[0]
        before = settings_snapshot(row)
        for name in SETTINGS_FIELDS:
            setattr(row, name, values[name])
        row.updated_by = actor
        row.full_clean()
        row.save()
        billing_services.bump(ChangeCounter.CONFIG)
        billing_services.record_audit(
            target_type="settings",
            target_id=1,
            action="update",
            actor=actor,
            before=before,
            after=settings_snapshot(row),
        )
    return row


def settings_changes_since(
    since: datetime,
) -> list[tuple[datetime, dict[str, Any], dict[str, Any]]]:
    """The audited settings changes after `since`, oldest first: (at, before, after), so a
    chart draws each threshold over the period it applied (one query)."""
    rows = AuditEntry.objects.filter(target_type="settings", at__gt=since).order_by("at", "id")
    return [(row.at, row.before or {}, row.after or {}) for row in rows]
