"""Dashboard forms of the ladder: the tuning settings and API tokens. The services
validate again; these give the browser field-level messages first."""

from __future__ import annotations

from decimal import Decimal

from django import forms

from ladder.models import ApiToken, LadderSettings

PERCENT_HELP = "0 to 100."
BUDGET_HELP = "USD per budget window. 0 disables the rung; empty = no budget, never gated."


class SettingsForm(forms.Form):
    """Every tuning field of the ladder. There is deliberately no `enabled` field: a
    switch that could turn the ladder off would let auto/subscription quietly serve
    paid models under a name that promises the opposite."""

    exit_cutoff_percent = forms.FloatField(
        label="Exit cutoff (%)",
        min_value=0,
        max_value=100,
        help_text="A connection in play drops out at or below this remaining %.",
    )
    reentry_min_remaining_percent = forms.FloatField(
        label="Re-entry floor (%)",
        min_value=0,
        max_value=100,
        help_text="A dropped-out connection comes back only above this remaining %. "
        "Below the exit cutoff it is raised to the cutoff (no gap).",
    )
    cheap_budget_usd = forms.DecimalField(
        label="Cheap rung budget (USD)",
        required=False,
        min_value=Decimal(0),
        max_digits=14,
        decimal_places=6,
        help_text=BUDGET_HELP,
    )
    premium_budget_usd = forms.DecimalField(
        label="Premium rung budget (USD)",
        required=False,
        min_value=Decimal(0),
        max_digits=14,
        decimal_places=6,
        help_text=BUDGET_HELP,
    )
    budget_window = forms.ChoiceField(
        label="Budget window",
        choices=LadderSettings.BudgetWindowChoices.choices,
        help_text="Calendar window in UTC over which spend counts against a budget.",
    )
    max_state_age_seconds = forms.IntegerField(
        label="Max reading age (s)",
        min_value=1,
        help_text="An older reading counts as none (an EXHAUSTED one with a future reset "
        "stays current until that reset).",
    )
    base_cooldown_seconds = forms.FloatField(
        label="Cooldown base (s)",
        help_text="Backoff of the n-th consecutive failure: min(base x 2^(n-1), max).",
    )
    max_cooldown_seconds = forms.FloatField(
        label="Cooldown cap (s)",
        help_text="A Retry-After from upstream is used as given, not capped.",
    )
    cheap_max_input_usd_per_mtok = forms.DecimalField(
        label="Cheap / premium boundary (USD per M input tokens)",
        min_value=Decimal(0),
        max_digits=14,
        decimal_places=6,
        help_text="A model whose input price is at or below this is cheap; above, premium.",
    )

    def clean(self) -> dict[str, object] | None:
        cleaned = super().clean()
        for name in ("base_cooldown_seconds", "max_cooldown_seconds"):
            value = self.cleaned_data.get(name)
            if value is not None and value <= 0:
                self.add_error(name, "Must be greater than 0.")
        return cleaned


class TokenForm(forms.Form):
    """A new API token: a name to recognise it by and a scope."""

    name = forms.CharField(label="Name", max_length=100, strip=True)
    scope = forms.ChoiceField(
        label="Scope",
        choices=ApiToken.Scope.choices,
        help_text="gateway: pools, readings, events, spend. operator: also catalog and settings.",
    )
