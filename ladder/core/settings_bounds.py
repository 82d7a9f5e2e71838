"""The bounds of the ladder's settings, declared once (spec: api.md "Ladder settings").

Every write path derives its checks from here: the services (validate_settings), the
API's schema (ladder/schemas/settings.py), the dashboard's form (ladder/forms.py) and the
pure core's config (ladder.core.types.LadderConfig). So no path can store a value another
path cannot answer. A stored row outside them (written by an older release, or by hand) is
read through `effective_settings`, which applies the nearest safe value, so reading the
settings never fails. Pure: no ORM, no clock."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Final

# The settings' USD columns hold 14 digits, 6 after the point.
MAX_USD_6DP: Final = 99_999_999.999999
MAX_BUDGET_USD: Final = 1_000_000
MAX_SECONDS: Final = 86_400


def _number(value: float) -> str:
    # 86400 -> "86,400", 99999999.999999 -> "99,999,999.999999", 2.0 -> "2"
    return f"{value:,.6f}".rstrip("0").rstrip(".")


@dataclass(frozen=True, slots=True)
class Bound:
    """The legal range of one numeric setting: low (inclusive, or exclusive when
    `low_open`) to high (inclusive); `nullable`: None (unset) is legal too."""

    low: float
    high: float
    default: float | None
    low_open: bool = False
    nullable: bool = False
    integer: bool = False

    @property
    def text(self) -> str:
        """The range in words, for help texts."""
        if self.low_open:
            return f"greater than {_number(self.low)} and at most {_number(self.high)}"
        return f"{_number(self.low)} to {_number(self.high)}"

    def problem(self, value: Any) -> str | None:
        """Why `value` is not legal (None: it is)."""
        if value is None:
            return None if self.nullable else "This field is required."
        if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
            return "Must be a number."
        if self.integer and not (isinstance(value, int) or value == int(value)):
            return "Must be a whole number."
        if isinstance(value, Decimal) and not value.is_finite():
            return "Must be a finite number."
        if isinstance(value, float) and not math.isfinite(value):
            return "Must be a finite number."
        if self.low_open and not value > self.low:
            return f"Must be greater than {_number(self.low)}."
        if not self.low_open and not value >= self.low:
            return f"Must be at least {_number(self.low)}."
        if not value <= self.high:
            return f"Must be at most {_number(self.high)}."
        return None

    def nearest(self, value: Any) -> Any:
        """The legal value nearest a stored one; a value that is no number at all (NaN)
        takes the default. Only ever used to read a row stored outside the bounds."""
        if self.problem(value) is None:
            return value
        if value is None or isinstance(value, bool) or not isinstance(value, int | float | Decimal):
            return self.default
        if isinstance(value, Decimal) and value.is_nan():
            return self.default
        if isinstance(value, float) and math.isnan(value):
            return self.default
        kind = type(value)
        if value > self.high:
            return kind(Decimal(str(self.high))) if kind is Decimal else kind(self.high)
        if self.low_open:  # nothing is "just above" the low end: take the default
            return kind(str(self.default)) if kind is Decimal else kind(self.default)
        return kind(Decimal(str(self.low))) if kind is Decimal else kind(self.low)


# An out-of-range stored budget reads as 0 (the rung disabled) or the cap, never as unset.
BUDGET = Bound(0, MAX_BUDGET_USD, default=0, nullable=True)
BUDGET_HELP = "USD per budget window. 0 disables the rung; empty = no budget, never gated."


@dataclass(frozen=True, slots=True)
class TuningField:
    """One of the ladder's tuning fields, declared once: the model's column, the core's
    config, the dashboard's form and the API's schema derive from it. `kind` names the
    value's type: "float", "usd" (a Decimal with 6 decimals), "int" or "window" (one of
    BUDGET_WINDOWS); `bound` is its legal range (None for the window)."""

    name: str
    kind: str
    bound: Bound | None
    label: str
    help: str

    @property
    def help_text(self) -> str:
        """The help text with the legal range first, as the form shows it."""
        return f"{self.bound.text}. {self.help}" if self.bound is not None else self.help


TUNING_FIELDS: Final[tuple[TuningField, ...]] = (
    TuningField(
        "exit_cutoff_percent",
        "float",
        Bound(0, 100, default=2.0),
        "Exit cutoff (%)",
        "A connection in play drops out at or below this remaining %.",
    ),
    TuningField(
        "reentry_min_remaining_percent",
        "float",
        Bound(0, 100, default=5.0),
        "Re-entry floor (%)",
        "A dropped-out connection comes back only above this remaining %. "
        "Not below the exit cutoff.",
    ),
    TuningField("cheap_budget_usd", "usd", BUDGET, "Cheap rung budget (USD)", BUDGET_HELP),
    TuningField("premium_budget_usd", "usd", BUDGET, "Premium rung budget (USD)", BUDGET_HELP),
    TuningField(
        "budget_window",
        "window",
        None,
        "Budget window",
        "Calendar window in UTC over which spend counts against a budget.",
    ),
    TuningField(
        "max_state_age_seconds",
        "int",
        Bound(1, MAX_SECONDS, default=180, integer=True),
        "Max reading age (s)",
        "An older reading counts as none (an EXHAUSTED one with a future reset "
        "stays current until that reset).",
    ),
    TuningField(
        "base_cooldown_seconds",
        "float",
        Bound(0, MAX_SECONDS, default=5.0, low_open=True),
        "Cooldown base (s)",
        "Backoff of the n-th consecutive failure: min(base x 2^(n-1), max).",
    ),
    TuningField(
        "max_cooldown_seconds",
        "float",
        Bound(0, MAX_SECONDS, default=120.0, low_open=True),
        "Cooldown cap (s)",
        "A Retry-After from upstream is used as given, not capped.",
    ),
    TuningField(
        "cheap_max_input_usd_per_mtok",
        "usd",
        Bound(0, MAX_USD_6DP, default=1.0),
        "Cheap / premium boundary (USD per M input tokens)",
        "A model whose input price is at or below this is cheap; above, premium.",
    ),
)
TUNING: Final[Mapping[str, TuningField]] = {field.name: field for field in TUNING_FIELDS}
TUNING_FIELD_NAMES: Final[tuple[str, ...]] = tuple(TUNING)
SETTINGS_BOUNDS: Final[Mapping[str, Bound]] = {
    field.name: field.bound for field in TUNING_FIELDS if field.bound is not None
}
BUDGET_WINDOWS: Final = ("day", "week", "month")
DEFAULT_BUDGET_WINDOW: Final = "month"
# In the operator's words, the fields by their labels (never their internal names): the
# form shows it under both fields, the API beside both fields' names.
REENTRY_BELOW_EXIT = (
    "The re-entry floor (%) must be at least the exit cutoff (%): a connection that drops "
    "out at the cutoff comes back only above the floor."
)


def settings_problems(values: Mapping[str, Any]) -> dict[str, list[str]]:
    """Every rule a full set of settings breaks, by field (empty: it is legal). The
    re-entry floor below the exit cutoff names both fields."""
    problems: dict[str, list[str]] = {}
    for name, bound in SETTINGS_BOUNDS.items():
        problem = bound.problem(values.get(name))
        if problem is not None:
            problems.setdefault(name, []).append(problem)
    if values.get("budget_window") not in BUDGET_WINDOWS:
        problems.setdefault("budget_window", []).append("Must be day, week or month.")
    percents = ("reentry_min_remaining_percent", "exit_cutoff_percent")
    if not problems.keys() & set(percents) and values[percents[0]] < values[percents[1]]:
        for name in percents:
            problems.setdefault(name, []).append(REENTRY_BELOW_EXIT)
    return problems


def effective_settings(stored: Mapping[str, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The settings the ladder applies for a stored row, and the names of the fields
    that were outside the rules (each then takes its nearest legal value, and a re-entry
    floor below the exit cutoff is raised to it, as the core always did)."""
    values = {name: bound.nearest(stored.get(name)) for name, bound in SETTINGS_BOUNDS.items()}
    window = stored.get("budget_window")
    values["budget_window"] = window if window in BUDGET_WINDOWS else DEFAULT_BUDGET_WINDOW
    if values["reentry_min_remaining_percent"] < values["exit_cutoff_percent"]:
        values["reentry_min_remaining_percent"] = values["exit_cutoff_percent"]
    changed = tuple(
        name for name in (*SETTINGS_BOUNDS, "budget_window") if values[name] != stored.get(name)
    )
    return values, changed
