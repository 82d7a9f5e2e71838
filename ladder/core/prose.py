"""The human side of the rules: how numbers, instants and catalog entries read in the
sentences of causes and exclusions (operators read these)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from decimal import Decimal

from billing.classify import BillingVerdict


def number_text(value: float | int | Decimal) -> str:
    """A threshold or duration as written: "5", "2.5", "180" (no trailing ".0")."""
    # Thresholds and durations: "5", "2.5", "180" (no trailing ".0").
    number = float(value)
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    return repr(number)


def percent_text(value: float, *, beside: float | None = None) -> str:
    """A remaining percent for people: one decimal ("99.6", "3.0"). `beside`: the
    threshold the sentence compares it with; a rounding that would land on it, or on its
    other side, keeps as many decimals as it takes to stay on the true side
    ("4.96 % left, re-entry needs more than 5 %", never "5.0 % left, ... 5 %")."""
    number = float(value)
    if not math.isfinite(number):
        return repr(number)
    for places in range(1, 7):
        text = f"{number:.{places}f}"
        if beside is None or _side(float(text), beside) == _side(number, beside):
            return text
    return repr(number)


def _side(value: float, threshold: float) -> int:
    return (value > threshold) - (value < threshold)


def money_text(value: Decimal) -> str:
    """A USD amount to the cent ("12.50", "0.00"); a fraction of a cent keeps its
    digits ("0.0042"), so a small spend never reads as nothing."""
    amount = Decimal(value)
    cents = amount.quantize(Decimal("0.01"))
    if cents == amount or not amount.is_finite():
        return format(cents, "f") if amount.is_finite() else str(amount)
    return format(amount.normalize(), "f")


def instant_text(value: datetime) -> str:
    """An instant in whole seconds, UTC spelled out ("2026-11-29 17:00:00 UTC")."""
    # Operators read these: whole seconds, UTC spelled out ("2026-11-29 17:00:00 UTC").
    return f"{value.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def window_text(start: datetime, end: datetime) -> str:
    """A budget window [start, end) by its first and last UTC days, the one way every page
    and sentence writes it ("2026-11-01 to 2026-11-30 UTC"), never by the next window's
    first instant."""
    last = (end - timedelta(microseconds=1)).astimezone(UTC)
    return f"{start.astimezone(UTC):%Y-%m-%d} to {last:%Y-%m-%d} UTC"


def duration_text(seconds: float) -> str:
    """Whole seconds, rounded up ("0 s" never describes a cooldown still running)."""
    # Whole seconds, rounded up, so "0 s" never describes a cooldown still running.
    return str(math.ceil(seconds))


def catalog_entry_text(verdict: BillingVerdict) -> str:
    """The catalog entry behind a billing verdict, with its reason."""
    if verdict.catalog_entry_id is None:
        return verdict.reason
    return f"catalog entry {verdict.catalog_entry_id}: {verdict.reason}"
