"""The human side of the rules: how numbers, instants and catalog entries read in the
sentences of causes and exclusions (operators read these)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from decimal import Decimal

from billing.classify import BillingVerdict


def number_text(value: float | int | Decimal) -> str:
    """A threshold or duration as written: "5", "2.5", "180" (no trailing ".0")."""
    # Thresholds and durations: "5", "2.5", "180" (no trailing ".0").
    number = float(value)
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    return repr(number)


def percent_text(value: float) -> str:
    """A remaining percent as given, with at least one decimal ("3.0")."""
    # A remaining percent keeps at least one decimal ("3.0 % left"), never rounds.
    return repr(float(value))


def money_text(value: Decimal) -> str:
    """A USD amount without trailing zeros ("12.5")."""
    return format(Decimal(value).normalize(), "f")


def instant_text(value: datetime) -> str:
    """An instant in whole seconds, UTC spelled out ("2026-11-29 17:00:00 UTC")."""
    # Operators read these: whole seconds, UTC spelled out ("2026-11-29 17:00:00 UTC").
    return f"{value.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def duration_text(seconds: float) -> str:
    """Whole seconds, rounded up ("0 s" never describes a cooldown still running)."""
    # Whole seconds, rounded up, so "0 s" never describes a cooldown still running.
    return str(math.ceil(seconds))


def catalog_entry_text(verdict: BillingVerdict) -> str:
    """The catalog entry behind a billing verdict, with its reason."""
    if verdict.catalog_entry_id is None:
        return verdict.reason
    return f"catalog entry {verdict.catalog_entry_id}: {verdict.reason}"
