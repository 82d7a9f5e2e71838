"""Dashboard forms of the billing catalog and the model prices. The services validate
again (and own the uniqueness rules); these give the browser field-level messages."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from django import forms

from billing.classify import Billing, Overage
from billing.models import (
    AUTH_TYPE_MAX_LENGTH,
    MODEL_MAX_LENGTH,
    PROVIDER_MAX_LENGTH,
    REASON_MAX_LENGTH,
)
from billing.names import KnownNames, did_you_mean
from billing.price_import import (
    MAX_PRICE_FILE_BYTES,
    PriceFileError,
    parse_provider_map,
    split_provider_map,
)
from billing.services import CatalogInput, PriceInput, price_limits
from billing.tiers import Tier


class CatalogEntryForm(forms.Form):
    """One curated catalog entry; `version` is the one the operator loaded (optimistic
    concurrency: a save over a newer version is a conflict, never a silent overwrite).
    A new entry starts at the safest answer (metered, overage unknown): curating a
    provider as a hard-stop subscription is a claim to make on purpose. A provider or
    auth type that nearly matches a known one ("kimmi" for "kimi") is held back with a
    "did you mean" until the operator ticks "keep as typed"."""

    provider = forms.CharField(
        max_length=PROVIDER_MAX_LENGTH,
        widget=forms.TextInput(attrs={"list": "curated-providers", "autocomplete": "off"}),
        help_text="The provider id connections register with (case and an alias do not matter).",
    )
    auth_type = forms.CharField(
        max_length=AUTH_TYPE_MAX_LENGTH,
        required=False,
        widget=forms.TextInput(attrs={"list": "curated-auth-types", "autocomplete": "off"}),
        help_text="Empty: the provider-wide entry, used when no auth-specific entry matches.",
    )
    billing = forms.ChoiceField(
        choices=[(b.value, b.value) for b in Billing], initial=Billing.METERED.value
    )
    overage = forms.ChoiceField(
        choices=[(o.value, o.value) for o in Overage], initial=Overage.UNKNOWN.value
    )
    reason = forms.CharField(
        max_length=REASON_MAX_LENGTH,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Why, from the provider's published terms (shown to operators).",
    )
    keep_as_typed = forms.BooleanField(
        required=False,
        label="Keep as typed",
        help_text="Save the provider and auth type exactly as typed, though they are "
        "close to a known name.",
    )
    version = forms.IntegerField(widget=forms.HiddenInput, required=False, min_value=1)

    def __init__(self, *args: Any, known: KnownNames | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.known = known or KnownNames()
        self.near_misses: dict[str, str] = {}  # field -> the known name it nearly is

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        data = self.cleaned_data
        for name, known in (
            ("provider", self.known.providers),
            ("auth_type", self.known.auth_types),
        ):
            meant = did_you_mean(data.get(name) or "", known)
            if meant is not None:
                self.near_misses[name] = meant
        if self.near_misses and not data.get("keep_as_typed"):
            for name, meant in self.near_misses.items():
                self.add_error(
                    name,
                    f"Did you mean “{meant}”? “{data[name]}” is not a known "
                    f"{'provider' if name == 'provider' else 'auth type'} (an entry for it "
                    "would match no connection). "
                    "Tick “Keep as typed” to save it anyway.",
                )
        return cleaned

    def catalog_input(self) -> CatalogInput:
        """The service's input from the cleaned data."""
        data = self.cleaned_data
        return CatalogInput(
            provider=data["provider"],
            auth_type=data["auth_type"] or None,
            billing=data["billing"],
            overage=data["overage"],
            reason=data["reason"],
        )


class PriceForm(forms.Form):
    """The price of one model of a provider (model `*`: every model without its own row)."""

    provider = forms.CharField(max_length=PROVIDER_MAX_LENGTH)
    model = forms.CharField(max_length=MODEL_MAX_LENGTH, help_text="`*` = every other model.")
    input_usd_per_mtok = forms.DecimalField(
        label="Input USD / M tokens", min_value=Decimal(0), max_digits=14, decimal_places=6
    )
    output_usd_per_mtok = forms.DecimalField(
        label="Output USD / M tokens", min_value=Decimal(0), max_digits=14, decimal_places=6
    )
    tier_override = forms.ChoiceField(
        label="Tier override",
        required=False,
        choices=[("", "by price"), *((t.value, t.value) for t in Tier)],
    )

    def price_input(self) -> PriceInput:
        """The service's input from the cleaned data."""
        data = self.cleaned_data
        return PriceInput(
            provider=data["provider"],
            model=data["model"],
            input_usd_per_mtok=data["input_usd_per_mtok"],
            output_usd_per_mtok=data["output_usd_per_mtok"],
            tier_override=data["tier_override"] or None,
        )


class PriceFileForm(forms.Form):
    """A `model_prices_and_context_window.json` upload and an optional provider map."""

    file = forms.FileField(label="Price file (JSON)")
    provider_map = forms.CharField(
        label="Provider map",
        required=False,
        max_length=2000,
        help_text="Rename litellm providers to this gateway's ids: anthropic=claude, "
        "gemini=gemini-cli (comma or space separated).",
    )

    def clean_file(self) -> object:
        upload = self.cleaned_data["file"]
        if upload.size > MAX_PRICE_FILE_BYTES:
            raise forms.ValidationError(
                f"The file is {upload.size:,} bytes; at most {MAX_PRICE_FILE_BYTES:,} are accepted."
            )
        return upload

    def clean_provider_map(self) -> dict[str, str]:
        try:
            return parse_provider_map(
                split_provider_map(self.cleaned_data["provider_map"]), price_limits()
            )
        except PriceFileError as error:
            raise forms.ValidationError(str(error)) from error
