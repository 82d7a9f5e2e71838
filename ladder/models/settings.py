"""The ladder's tuning: a single row, its columns from the one declaration of the
tuning fields (ladder/core/settings_bounds.py). There is deliberately no `enabled` flag
anywhere (see the spec)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.db.models import Q

from ladder.core.settings_bounds import DEFAULT_BUDGET_WINDOW, TUNING


class BudgetWindowChoices(models.TextChoices):
    DAY = "day"
    WEEK = "week"
    MONTH = "month"


def tuning_column(name: str) -> Any:
    """The column of a tuning field, from its declaration: percents and USD amounts at
    least their low end (percents at most 100 too), whole seconds a positive integer,
    the cooldowns' exclusive low end a check constraint (Meta), a budget nullable."""
    field = TUNING[name]
    bound = field.bound
    if field.kind == "window":
        return models.CharField(
            max_length=8,
            choices=BudgetWindowChoices.choices,
            default=BudgetWindowChoices(DEFAULT_BUDGET_WINDOW),
        )
    assert bound is not None
    if field.kind == "usd":
        low = MinValueValidator(Decimal(str(bound.low)))
        if bound.nullable:
            return models.DecimalField(
                max_digits=14, decimal_places=6, null=True, blank=True, validators=[low]
            )
        return models.DecimalField(
            max_digits=14, decimal_places=6, default=Decimal(str(bound.default)), validators=[low]
        )
    if field.kind == "int":
        return models.PositiveIntegerField(
            default=int(bound.default or 0), validators=[MinValueValidator(int(bound.low))]
        )
    if bound.low_open:  # the cooldowns: "> 0" is the check constraint
        return models.FloatField(default=bound.default)
    return models.FloatField(
        default=bound.default,
        validators=[MinValueValidator(int(bound.low)), MaxValueValidator(int(bound.high))],
    )


class LadderSettings(models.Model):
    """The ladder's tuning: a single row (pk 1). Tuning only; no enabled flag, ever."""

    BudgetWindowChoices = BudgetWindowChoices

    # The nine tuning columns, from their one declaration (ladder/core/settings_bounds.py).
    exit_cutoff_percent = tuning_column("exit_cutoff_percent")
    reentry_min_remaining_percent = tuning_column("reentry_min_remaining_percent")
    cheap_budget_usd = tuning_column("cheap_budget_usd")
    premium_budget_usd = tuning_column("premium_budget_usd")
    budget_window = tuning_column("budget_window")
    max_state_age_seconds = tuning_column("max_state_age_seconds")
    base_cooldown_seconds = tuning_column("base_cooldown_seconds")
    max_cooldown_seconds = tuning_column("max_cooldown_seconds")
    cheap_max_input_usd_per_mtok = tuning_column("cheap_max_input_usd_per_mtok")
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=150, null=True, blank=True)

    class Meta:
        verbose_name_plural = "ladder settings"
        constraints = (
            models.CheckConstraint(condition=Q(pk=1), name="ladder_settings_single_row"),
            models.CheckConstraint(
                condition=Q(exit_cutoff_percent__gte=0, exit_cutoff_percent__lte=100)
                & Q(reentry_min_remaining_percent__gte=0, reentry_min_remaining_percent__lte=100),
                name="ladder_settings_percent_range",
            ),
            models.CheckConstraint(
                condition=Q(base_cooldown_seconds__gt=0) & Q(max_cooldown_seconds__gt=0),
                name="ladder_settings_cooldown_positive",
            ),
        )

    def __str__(self) -> str:
        return "ladder settings"
