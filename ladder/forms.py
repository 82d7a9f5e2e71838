"""Dashboard forms of the ladder: the tuning settings, API tokens, connections and
webhooks. The services validate again; these give the browser field-level messages first."""

from __future__ import annotations

import re
from collections.abc import Collection
from decimal import Decimal
from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from billing.models import MODEL_MAX_LENGTH as CANDIDATE_MODEL_MAX_LENGTH
from billing.models import PROVIDER_MAX_LENGTH as CANDIDATE_PROVIDER_MAX_LENGTH
from billing.names import did_you_mean
from ladder.core.notifications import SUBSCRIBABLE_KINDS
from ladder.core.settings_bounds import SETTINGS_BOUNDS, TUNING_FIELDS, TuningField
from ladder.core.webhooks import MAX_URL_LENGTH
from ladder.models import ApiToken, LadderSettings, Webhook, validate_connection_id
from ladder.schemas import QUOTA_SOURCES
from ladder.services import CandidateInput, ConnectionInput, validate_settings
from ladder.services.registry import reserve_problems
from ladder.services.webhooks import NAME_MAX_LENGTH as NAME_MAX_LENGTH_WEBHOOK
from ladder.services.webhooks import SECRET_MAX_LENGTH, SECRET_MIN_LENGTH, WebhookInput


def _limits(name: str, kind: type = float) -> dict[str, Any]:
    """A form field's min/max, from the setting's one definition (ladder/core/settings_bounds.py).
    An exclusive low end (cooldowns > 0) has no form equivalent: clean() applies it,
    with every other rule, through the services' validate_settings."""
    bound = SETTINGS_BOUNDS[name]

    def cast(value: float) -> Any:
        # As declared (100, not 100.0, in a message), unless the field needs its own type.
        return Decimal(str(value)) if kind is Decimal else int(value) if kind is int else value

    limits = {"max_value": cast(bound.high)}
    if not bound.low_open:
        limits["min_value"] = cast(bound.low)
    return limits


def tuning_form_field(field: TuningField) -> forms.Field:
    """The form field of a tuning field, from its declaration."""
    text: dict[str, Any] = {"label": field.label, "help_text": field.help_text}
    if field.kind == "window":
        return forms.ChoiceField(choices=LadderSettings.BudgetWindowChoices.choices, **text)
    if field.kind == "usd":
        assert field.bound is not None
        return forms.DecimalField(
            required=not field.bound.nullable,
            **_limits(field.name, Decimal),
            max_digits=14,
            decimal_places=6,
            **text,
        )
    if field.kind == "int":
        return forms.IntegerField(**_limits(field.name, int), **text)
    return forms.FloatField(**_limits(field.name), **text)


class SettingsForm(forms.Form):
    """Every tuning field of the ladder (ladder/core/settings_bounds.py declares them).
    There is deliberately no `enabled` field: a switch that could turn the ladder off
    would let auto/subscription quietly serve paid models under a name that promises
    the opposite."""

    def clean(self) -> dict[str, object] | None:
        cleaned = super().clean()
        valid = set(self.cleaned_data)  # a field with an error of its own is not here
        try:
            validate_settings(self.cleaned_data)
        except ValidationError as error:
            for name, messages in error.message_dict.items():
                if name in valid:
                    for message in messages:
                        self.add_error(name, message)
        return cleaned


# The nine fields, in their declared order (the metaclass has already run).
SettingsForm.base_fields = SettingsForm.declared_fields = {
    field.name: tuning_form_field(field) for field in TUNING_FIELDS
}


class TokenForm(forms.Form):
    """A new API token: a name to recognise it by and a scope."""

    name = forms.CharField(label="Name", max_length=100, strip=True)
    scope = forms.ChoiceField(
        label="Scope",
        choices=ApiToken.Scope.choices,
        help_text="gateway: pools, readings, events, spend. operator: also catalog and settings.",
    )


# The API's rules for a connection (ladder/schemas/connections.py `ConnectionIn`); every CharField
# also refuses NUL characters (Django adds that validator to each one).
NAME_MAX_LENGTH = 64
LABEL_MAX_LENGTH = 200
CREDENTIAL_MAX_LENGTH = 8192


class ConnectionFieldsForm(forms.Form):
    """The fields of a connection the operator sets. The credential is write-only: its
    input never renders a value (not even the one just typed, when the form comes back
    with errors), and an empty input keeps what is stored."""

    provider = forms.CharField(label="Provider", max_length=NAME_MAX_LENGTH)
    auth_type = forms.CharField(
        label="Auth type",
        max_length=NAME_MAX_LENGTH,
        help_text="`none` is the keyless no-auth path: billed keyless by rule, never "
        "looked up in the catalog.",
    )
    label = forms.CharField(label="Label", max_length=LABEL_MAX_LENGTH, required=False)
    active = forms.BooleanField(
        label="Active",
        required=False,
        help_text="An inactive connection stays registered but is never chosen.",
    )
    quota_source = forms.ChoiceField(
        label="Quota source",
        choices=[(source, source) for source in QUOTA_SOURCES],
        help_text="Which quota adapter polls it; `none`: readings are pushed, never polled.",
    )
    credential = forms.CharField(
        label="Credential",
        required=False,
        max_length=CREDENTIAL_MAX_LENGTH,
        # Deliberately never rendered back: render_value=False, and no initial value.
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )
    credential_help = "Encrypted at rest and write-only: never shown again, not even here."
    exit_cutoff_percent = forms.FloatField(
        label="Own exit cutoff (%)",
        required=False,
        **_limits("exit_cutoff_percent"),
        help_text="This connection's own reserve: it leaves the plan rungs at or below this "
        "much left. Empty: the settings' exit cutoff applies.",
    )
    reentry_min_remaining_percent = forms.FloatField(
        label="Own re-entry floor (%)",
        required=False,
        **_limits("reentry_min_remaining_percent"),
        help_text="Once out, it comes back only above this much left; not below its exit "
        "cutoff. Empty: the settings' re-entry floor applies.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["credential"].help_text = self.credential_help

    def clean(self) -> dict[str, object] | None:
        cleaned = super().clean()
        names = ("exit_cutoff_percent", "reentry_min_remaining_percent")
        if all(name in self.cleaned_data for name in names):
            problems = reserve_problems(
                ConnectionInput(
                    provider="",
                    auth_type="",
                    exit_cutoff_percent=self.cleaned_data[names[0]],
                    reentry_min_remaining_percent=self.cleaned_data[names[1]],
                )
            )
            for name, messages in problems.items():
                for message in messages:
                    self.add_error(name, message)
        return cleaned

    def credential_change(self) -> str | None:
        """The service's credential: None keeps the stored one, "" clears it."""
        return self.cleaned_data["credential"] or None

    def connection_input(self) -> ConnectionInput:
        """The service's input from the cleaned data."""
        data = self.cleaned_data
        return ConnectionInput(
            provider=data["provider"],
            auth_type=data["auth_type"],
            label=data["label"],
            active=data["active"],
            quota_source=data["quota_source"],
            credential=self.credential_change(),
            exit_cutoff_percent=data.get("exit_cutoff_percent"),
            reentry_min_remaining_percent=data.get("reentry_min_remaining_percent"),
        )


class ConnectionEditForm(ConnectionFieldsForm):
    """An existing connection: a new credential replaces the stored one, an empty input
    keeps it, and the separate checkbox clears it."""

    clear_credential = forms.BooleanField(label="Clear the stored credential", required=False)
    credential_help = (
        "Leave empty to keep the stored credential. A new one replaces it; it is encrypted "
        "at rest and never shown again."
    )

    def clean(self) -> dict[str, object] | None:
        cleaned = super().clean()
        if self.cleaned_data.get("clear_credential") and self.cleaned_data.get("credential"):
            self.add_error(
                "credential",
                "Type a new credential or tick “clear the stored credential”, not both.",
            )
        return cleaned

    def credential_change(self) -> str | None:
        if self.cleaned_data["clear_credential"]:
            return ""
        return super().credential_change()


class ConnectionAddForm(ConnectionFieldsForm):
    """A new connection under the gateway's own id."""

    connection_id = forms.CharField(
        label="Connection id",
        max_length=128,
        validators=[validate_connection_id],
        help_text="The gateway's own id for it: 1 to 128 of A-Z a-z 0-9 . _ : @ -, "
        "not . or .. alone.",
    )

    field_order = ("connection_id",)
    credential_help = "Optional. Encrypted at rest and write-only: never shown again."


# --- notifications ------------------------------------------------------------------------

KIND_CHOICES = [(kind.value, kind.headline) for kind in SUBSCRIBABLE_KINDS]


class WebhookForm(forms.Form):
    """A new webhook. The secret is write-only: its input never renders a value, and an
    empty input has a random secret generated (and shown once)."""

    name = forms.CharField(label="Name", max_length=NAME_MAX_LENGTH_WEBHOOK)
    url = forms.CharField(
        label="URL",
        max_length=MAX_URL_LENGTH,
        help_text="http or https. Link-local, metadata, loopback and private addresses are "
        "refused (the last two unless NOTIFY_ALLOW_PRIVATE_TARGETS is on).",
    )
    format = forms.ChoiceField(
        label="Format",
        choices=Webhook.Format.choices,
        help_text="json: the generic body, signed (X-OmniRoute-Signature). slack: "
        '{"text": ...} for a Slack incoming webhook.',
    )
    kinds = forms.MultipleChoiceField(
        label="Notify about",
        choices=KIND_CHOICES,
        widget=forms.CheckboxSelectMultiple,
    )
    is_active = forms.BooleanField(
        label="Active",
        required=False,
        help_text="Switches this webhook alone on or off.",
    )
    secret = forms.CharField(
        label="Signing secret",
        required=False,
        strip=False,
        min_length=SECRET_MIN_LENGTH,
        max_length=SECRET_MAX_LENGTH,
        # Deliberately never rendered back: render_value=False, and no initial value.
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Empty: a random secret is generated and shown once. Encrypted at rest.",
    )

    def webhook_input(self) -> WebhookInput:
        """The service's input from the cleaned data."""
        data = self.cleaned_data
        return WebhookInput(
            name=data["name"],
            url=data["url"] or None,
            format=data["format"],
            kinds=tuple(data["kinds"]),
            is_active=data["is_active"],
            secret=data["secret"] or None,
        )


class WebhookEditForm(WebhookForm):
    """An existing webhook: an empty URL or secret keeps the stored one (neither is ever
    shown: the URL's path may be a secret too)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["url"].required = False
        self.fields["url"].help_text = "Leave empty to keep the stored URL. " + str(
            self.fields["url"].help_text
        )
        self.fields["secret"].help_text = (
            "Leave empty to keep the stored secret; a new one replaces it (or use "
            "“New secret” to have one generated)."
        )


# The API's rules for a candidate (ladder/schemas/candidates.py `CandidateIn`).
CATEGORY_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,64}")
MAX_CATEGORIES = 32
MAX_ALLOWED_CONNECTIONS = 64
PRIORITY_LIMIT = 1_000_000


def _words(value: str) -> list[str]:
    """Items typed separated by commas, spaces or new lines, each once, in order."""
    return list(dict.fromkeys(item for item in re.split(r"[\s,]+", value) if item))


# The datalist of registered connection ids the candidate form's connection fields offer.
REGISTERED_CONNECTIONS_LIST = "registered-connections"


class CandidateForm(forms.Form):
    """A registered candidate: a (provider, model) pair, its categories and priority, and
    where it may be served: one pinned connection, or an allowlist of them. Connection
    ids are picked from the registered ones; an id that is not registered (a typo such as
    "groq-kye" would publish a candidate no connection serves) is held back, with a "did
    you mean", until the operator ticks "keep as typed". `registered`: the registered ids
    and, on an edit, the ids the candidate already names (confirmed when first saved)."""

    provider = forms.CharField(label="Provider", max_length=CANDIDATE_PROVIDER_MAX_LENGTH)
    model = forms.CharField(label="Model", max_length=CANDIDATE_MODEL_MAX_LENGTH)
    categories = forms.CharField(
        label="Categories",
        required=False,
        help_text="Separated by commas or spaces, such as coding, chat. Each category "
        "publishes auto/<category>:subscription and auto/<category>:thrifty.",
    )
    priority = forms.IntegerField(
        label="Priority",
        initial=0,
        min_value=-PRIORITY_LIMIT,
        max_value=PRIORITY_LIMIT,
        help_text="Lower first: the order of the candidates within a rung.",
    )
    connection_id = forms.CharField(
        label="Pinned connection",
        required=False,
        max_length=128,
        validators=[validate_connection_id],
        widget=forms.TextInput(
            attrs={
                "list": REGISTERED_CONNECTIONS_LIST,
                "autocomplete": "off",
                "spellcheck": "false",
            }
        ),
        help_text="Served only by this connection (pick a registered one). Leave empty to "
        "use the allowlist.",
    )
    allowed_connection_ids = forms.CharField(
        label="Allowlist",
        required=False,
        widget=forms.TextInput(
            attrs={
                "list": REGISTERED_CONNECTIONS_LIST,
                "autocomplete": "off",
                "spellcheck": "false",
                "data-multi-list": "",
            }
        ),
        help_text="Or: registered connection ids separated by commas or spaces; the pool "
        "keeps the ones that pass, in this order.",
    )
    keep_as_typed = forms.BooleanField(
        required=False,
        label="Keep as typed",
        help_text="Save the connection ids exactly as typed, though no connection is "
        "registered under them yet (the candidate lands in no pool until one is).",
    )

    def __init__(self, *args: Any, registered: Collection[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.registered = frozenset(registered)
        self.unknown_ids: list[str] = []  # named ids no connection is registered under

    def clean_categories(self) -> list[str]:
        categories = _words(self.cleaned_data["categories"])
        bad = [c for c in categories if not CATEGORY_PATTERN.fullmatch(c)]
        if bad:
            raise ValidationError(
                f"Not a category: {bad[0][:64]!r} (letters, digits, '.', '_' and '-', "
                "at most 64 characters)."
            )
        if len(categories) > MAX_CATEGORIES:
            raise ValidationError(f"At most {MAX_CATEGORIES} categories.")
        return categories

    def clean_allowed_connection_ids(self) -> list[str]:
        allowed = _words(self.cleaned_data["allowed_connection_ids"])
        for connection_id in allowed:
            validate_connection_id(connection_id)
        if len(allowed) > MAX_ALLOWED_CONNECTIONS:
            raise ValidationError(f"At most {MAX_ALLOWED_CONNECTIONS} connections.")
        return allowed

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        if "connection_id" in self.cleaned_data and "allowed_connection_ids" in self.cleaned_data:
            pinned = self.cleaned_data["connection_id"] or None
            allowed = self.cleaned_data["allowed_connection_ids"]
            if (pinned is None) == (not allowed):
                self.add_error(
                    "connection_id",
                    "Give exactly one: a pinned connection, or an allowlist of connections.",
                )
            else:
                self._hold_back_unknown(pinned, allowed)
        return cleaned

    def _hold_back_unknown(self, pinned: str | None, allowed: list[str]) -> None:
        """An id no connection is registered under is an error until "keep as typed"."""
        for name, ids in (
            ("connection_id", [pinned] if pinned else []),
            ("allowed_connection_ids", allowed),
        ):
            unknown = [i for i in ids if i not in self.registered]
            self.unknown_ids.extend(unknown)
            if not unknown or self.cleaned_data.get("keep_as_typed"):
                continue
            hints = []
            for connection_id in unknown:
                meant = did_you_mean(connection_id, self.registered)
                hints.append(
                    f"“{connection_id}”" + (f" (did you mean “{meant}”?)" if meant else "")
                )
            self.add_error(
                name,
                f"No connection is registered as {', '.join(hints)}. Pick a registered one, "
                "or tick “Keep as typed” to save it anyway.",
            )

    def candidate_input(self) -> CandidateInput:
        data = self.cleaned_data
        return CandidateInput(
            provider=data["provider"],
            model=data["model"],
            categories=tuple(data["categories"]),
            priority=data["priority"],
            connection_id=data["connection_id"] or None,
            allowed_connection_ids=tuple(data["allowed_connection_ids"]) or None,
            keeps_ref=True,  # the form has no `ref`: an edit keeps the gateway's
        )
