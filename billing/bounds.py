"""Bounds of stored numbers, derived from their model fields.

Every write checks a number against its column before it is written, on every backend:
SQLite stores a decimal beyond the column's `max_digits` without complaint and then
raises on every later read of the table, so one absurd value could brick every query of
it. The bounds come from the field itself (its digits, decimal places and validators),
so a column and its check cannot drift apart.

Pure: `bounds_of` reads a model's field definitions (`_meta`, no query); `fit_decimal`
and `check_float` are plain functions the pure price-file parser uses too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation
from typing import Any

from omniroute_admin.text import BAD_CHARACTER


class OutOfRange(ValueError):
    """The number does not fit its column; the message says which bounds apply."""


@dataclass(frozen=True, slots=True)
class Bounds:
    """What a numeric column accepts. `decimal_places` is None for a float column."""

    low: Decimal | float | None
    high: Decimal | float | None
    decimal_places: int | None = None
    max_digits: int | None = None

    def message(self) -> str:
        """The accepted range, in words."""
        if self.low is not None and self.high is not None:
            return f"Must be between {_text(self.low)} and {_text(self.high)}."
        if self.low is not None:
            return f"Must be at least {_text(self.low)}."
        if self.high is not None:
            return f"Must be at most {_text(self.high)}."
        return "Must be a finite number."


def decimal_max(max_digits: int, decimal_places: int) -> Decimal:
    """The largest value a DecimalField holds (14, 6 -> 99,999,999.999999)."""
    return Decimal(1).scaleb(max_digits - decimal_places) - Decimal(1).scaleb(-decimal_places)


def bounds_of(model: Any, name: str) -> Bounds:
    """The bounds of a model's numeric field: its Min/MaxValueValidators, narrowed by a
    DecimalField's digits."""
    field = model._meta.get_field(name)
    low: Any = None
    high: Any = None
    for validator in field.validators:
        code = getattr(validator, "code", None)
        if code == "min_value":
            low = validator.limit_value if low is None else max(low, validator.limit_value)
        elif code == "max_value":
            high = validator.limit_value if high is None else min(high, validator.limit_value)
    places = getattr(field, "decimal_places", None)
    digits = getattr(field, "max_digits", None)
    if places is not None and digits is not None:
        top = decimal_max(digits, places)
        high = top if high is None else min(Decimal(high), top)
        low = -top if low is None else max(Decimal(low), -top)
        return Bounds(low, high, places, digits)
    return Bounds(low, high)


def fit_decimal(value: Decimal | float | int | str, bounds: Bounds) -> Decimal:
    """The value rounded to the column's decimal places, or OutOfRange unless it is a
    finite number within the bounds once rounded (rounding can carry a value just below
    the limit over it: 99,999,999.9999999 becomes 100,000,000.000000)."""
    if isinstance(value, bool):
        raise OutOfRange("Must be a number.")
    try:
        number = value if isinstance(value, Decimal) else Decimal(str(value))
    except (InvalidOperation, ValueError):
        raise OutOfRange("Must be a number.") from None
    if not number.is_finite():
        raise OutOfRange("Must be a finite number.")
    places = bounds.decimal_places if bounds.decimal_places is not None else 6
    # Reject huge exponents before rounding: quantizing 1e999999 would itself overflow.
    if bounds.max_digits is not None and number.adjusted() >= bounds.max_digits:
        raise OutOfRange(bounds.message())
    try:
        rounded = number.quantize(Decimal(1).scaleb(-places), ROUND_HALF_EVEN)
    except (InvalidOperation, ArithmeticError):
        raise OutOfRange(bounds.message()) from None
    if (bounds.low is not None and rounded < bounds.low) or (
        bounds.high is not None and rounded > bounds.high
    ):
        raise OutOfRange(bounds.message())
    return abs(rounded) if rounded.is_zero() else rounded  # never a stored "-0"


def check_float(value: float | int, bounds: Bounds) -> float:
    """The value when it is a finite number within the bounds, else OutOfRange."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise OutOfRange("Must be a number.")
    if not math.isfinite(value):
        raise OutOfRange("Must be a finite number.")
    if (bounds.low is not None and value < bounds.low) or (
        bounds.high is not None and value > bounds.high
    ):
        raise OutOfRange(bounds.message())
    return float(value)


def _text(bound: Decimal | float) -> str:
    if isinstance(bound, Decimal):
        return f"{bound.normalize():,f}"
    return f"{bound:,}"


def text_problem(value: str, max_length: int) -> str | None:
    """Why a stored name is refused (empty, too long, a control character or a lone
    surrogate, which no database stores), or None when it is fine."""
    if not value:
        return "This field must not be empty."
    if len(value) > max_length:
        return f"At most {max_length} characters."
    found = BAD_CHARACTER.search(value)
    if found is None:
        return None
    if found.group() >= "\ud800":
        return "Invalid characters (a lone surrogate) are not allowed."
    return "Control characters are not allowed."
