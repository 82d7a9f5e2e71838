"""What the gateway registered: its connections (and the connection id rule), their
quota readings, hysteresis transitions and window forecasts, and the candidates."""

from __future__ import annotations

import re

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models

# A connection id (spec: api.md "Conventions"): 1 to 128 of [A-Za-z0-9._:@-], and not
# `.` or `..`, which clients and proxies normalise out of URLs (such a connection could
# never be managed). Written without look-arounds, so the one pattern serves Python's
# re, pydantic's Rust engine, Django's URL converter and the OpenAPI document alike:
# a first character that is no dot; or a dot and then one that is no dot; or two dots
# and at least one more character.
_ID_CHAR = r"[A-Za-z0-9._:@-]"
_NOT_DOT = r"[A-Za-z0-9_:@-]"
CONNECTION_ID_BODY = (
    rf"{_NOT_DOT}{_ID_CHAR}{{0,127}}"
    rf"|\.{_NOT_DOT}{_ID_CHAR}{{0,126}}"
    rf"|\.\.{_ID_CHAR}{{1,126}}"
)
CONNECTION_ID_PATTERN = rf"^(?:{CONNECTION_ID_BODY})$"
CONNECTION_ID_MESSAGE = "Use 1 to 128 of A-Z a-z 0-9 . _ : @ -, and not . or .. alone."
_CONNECTION_ID = re.compile(CONNECTION_ID_PATTERN)
# The columns' validator as migrated (0001_initial): the characters and the length only.
# The full rule is `is_connection_id`, which every write and lookup path applies before
# it touches the database (services, API schemas, dashboard URLs and forms); changing
# this one would change the migrated field state.
connection_id_validator = RegexValidator(
    r"^[A-Za-z0-9._:@-]{1,128}$", "Use 1 to 128 of A-Z a-z 0-9 . _ : @ -"
)


def is_connection_id(value: object) -> bool:
    """Whether `value` is a legal connection id (checked before any lookup or store)."""
    return isinstance(value, str) and _CONNECTION_ID.fullmatch(value) is not None


def validate_connection_id(value: object) -> None:
    """A form or model validator: the full connection id rule."""
    if not is_connection_id(value):
        raise ValidationError(CONNECTION_ID_MESSAGE, code="invalid")


class QuotaStatusChoices(models.TextChoices):
    SAFE = "SAFE"
    EXHAUSTED = "EXHAUSTED"
    UNKNOWN = "UNKNOWN"


class HysteresisChoices(models.TextChoices):
    IN_PLAY = "in_play", "in play"
    DROPPED_OUT = "dropped_out", "dropped out"


class Connection(models.Model):
    """One provider connection of the gateway, keyed by the gateway's own string id."""

    connection_id = models.CharField(
        max_length=128, unique=True, validators=[connection_id_validator]
    )
    # The provider id it resolves to through the provider aliases (what every lookup
    # uses), and the name it was registered under (trimmed, lower-cased): an alias write
    # resolves the registered names again (billing.services.aliases, docs/GATEWAYS.md).
    provider = models.CharField(max_length=64)
    registered_provider = models.CharField(max_length=64, blank=True, default="")
    auth_type = models.CharField(max_length=64, help_text="`none` is the keyless no-auth path.")
    label = models.CharField(max_length=200, blank=True, default="")
    is_active = models.BooleanField(default=True)
    quota_source = models.CharField(max_length=32, default="none")
    # Fernet token with a key id prefix (ladder/crypto.py); never logged, rendered or returned.
    credential_ciphertext = models.TextField(blank=True, default="")
    cooldown_until = models.DateTimeField(null=True, blank=True)
    consecutive_failures = models.PositiveIntegerField(default=0)
    # When the failure that set the cooldown and the count was observed, and when the
    # success that last cleared them was: events apply in the order they were observed
    # (api.md "Events from the gateway"; within a minute the less safe one wins).
    failure_observed_at = models.DateTimeField(null=True, blank=True)
    success_observed_at = models.DateTimeField(null=True, blank=True)
    # Per-connection quota memory (not ladder state): written when a reading is stored.
    hysteresis_state = models.CharField(
        max_length=16, choices=HysteresisChoices.choices, default=HysteresisChoices.IN_PLAY
    )
    hysteresis_since = models.DateTimeField(null=True, blank=True)
    hysteresis_reason = models.CharField(max_length=300, default="never read")
    current_reading = models.ForeignKey(
        "QuotaReading", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Set when the usage endpoint rejected the credential; cleared by the next good poll.
    quota_error = models.CharField(max_length=300, blank=True, default="")
    poll_not_before = models.DateTimeField(null=True, blank=True)
    # A short lease: exactly one refresh of this connection polls upstream at a time.
    refresh_lease_until = models.DateTimeField(null=True, blank=True)
    # The newest billing evidence from the wire ({"says", "source", "seen_at", "detail"};
    # null: none seen). spec/ladder.md, "Billing evidence from the wire".
    overage_evidence = models.JSONField(null=True, blank=True)
    # Per model scope: the scope's binding window, hysteresis and cooldown
    # ({scope: {"remaining", "reset_at", "state", "since", "reason", "cooldown_until"}}),
    # written with the reading and the events. spec/ladder.md, "Windows scoped to a model".
    scoped_state = models.JSONField(default=dict, blank=True)
    # This connection's own reserve (null: the settings'). "A reserve per connection".
    exit_cutoff_percent = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0.0), MaxValueValidator(100.0)]
    )
    reentry_min_remaining_percent = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0.0), MaxValueValidator(100.0)]
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ("connection_id",)

    def __str__(self) -> str:
        return self.connection_id

    @property
    def has_credential(self) -> bool:
        """Whether a credential is stored (its value is never exposed)."""
        return bool(self.credential_ciphertext)


class QuotaReading(models.Model):
    """One observation of a connection's quota; history is kept and pruned after retention."""

    connection = models.ForeignKey(Connection, on_delete=models.CASCADE, related_name="readings")
    status = models.CharField(max_length=16, choices=QuotaStatusChoices.choices)
    remaining_percent = models.FloatField(
        null=True, blank=True, validators=[MinValueValidator(0), MaxValueValidator(100)]
    )
    reset_at = models.DateTimeField(null=True, blank=True)
    checked_at = models.DateTimeField()
    windows = models.JSONField(default=list, blank=True)
    source = models.CharField(max_length=32, default="push")
    detail = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        ordering = ("-checked_at", "-id")
        indexes = (
            models.Index(fields=("connection", "-checked_at")),
            # The spend page's plan utilisation: the windows that reset in a period.
            models.Index(fields=("reset_at",), name="reading_reset_at"),
        )

    def __str__(self) -> str:
        return f"{self.connection_id} {self.status} {self.remaining_percent} @ {self.checked_at}"


class HysteresisTransition(models.Model):
    """A flip of a connection's hysteresis state, stored when it happens (why and when)."""

    connection = models.ForeignKey(Connection, on_delete=models.CASCADE, related_name="transitions")
    state = models.CharField(max_length=16, choices=HysteresisChoices.choices)
    at = models.DateTimeField()
    reason = models.CharField(max_length=300)

    class Meta:
        ordering = ("-at", "-id")
        indexes = (models.Index(fields=("connection", "-at")),)

    def __str__(self) -> str:
        return f"{self.connection_id} -> {self.state} @ {self.at}"


class WindowForecast(models.Model):
    """The first forecast made in one window of a plan connection (the warning an operator
    had) and what happened: whether and when the window ran out before its reset. Kept so
    the dashboard can show forecast against outcome (docs/FORECASTS.md)."""

    connection = models.ForeignKey(
        Connection, on_delete=models.CASCADE, related_name="window_forecasts"
    )
    # The window, named by its reset (a reset that moves by less than 60 s is the same).
    window_reset_at = models.DateTimeField()
    forecast_at = models.DateTimeField()
    runs_out_at = models.DateTimeField()
    before_reset = models.BooleanField()
    paid_until_reset_usd = models.DecimalField(
        max_digits=16, decimal_places=2, null=True, blank=True
    )
    basis = models.CharField(max_length=300)
    # The outcome: when it ran out (null: it did not, or not yet), and when the window
    # ended (null: still open, the outcome may change).
    ran_out_at = models.DateTimeField(null=True, blank=True)
    closed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-window_reset_at", "-id")
        constraints = (
            models.UniqueConstraint(
                fields=("connection", "window_reset_at"), name="window_forecast_once"
            ),
        )
        indexes = (models.Index(fields=("connection", "-window_reset_at")),)

    def __str__(self) -> str:
        return f"{self.connection_id} window to {self.window_reset_at}: out {self.runs_out_at}"


class Candidate(models.Model):
    """A registered (provider, model) candidate of the gateway's pool, ranked by priority."""

    provider = models.CharField(max_length=64)
    # The name it was registered under (see Connection.registered_provider).
    registered_provider = models.CharField(max_length=64, blank=True, default="")
    model = models.CharField(max_length=200)
    categories = models.JSONField(default=list, blank=True)
    priority = models.IntegerField(default=0)
    connection_id = models.CharField(
        max_length=128, null=True, blank=True, validators=[connection_id_validator]
    )
    allowed_connection_ids = models.JSONField(null=True, blank=True)
    # The gateway's own opaque handle for it (a deployment id), echoed in pool entries.
    ref = models.CharField(max_length=256, null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ("priority", "id")

    def __str__(self) -> str:
        return f"{self.provider}/{self.model}"


class AppliedEvent(models.Model):
    """A batch entry's `event_id` once applied, with the answer it got: an entry whose id
    was applied before is answered as then and applied never again (api.md, the events
    batch). Written in the entry's own transaction; pruned with the readings."""

    event_id = models.CharField(max_length=128, unique=True)
    result = models.JSONField()
    applied_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return self.event_id
