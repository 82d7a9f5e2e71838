"""Connections, quota readings, hysteresis transitions, the ladder's tuning, candidates
and the spend ledger. There is deliberately no `enabled` flag anywhere (see the spec)."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q

from ladder.core.settings_bounds import DEFAULT_BUDGET_WINDOW, TUNING
from ladder.models_replay import LedgerReplayRun as LedgerReplayRun

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


class SpendEntry(models.Model):
    """One request's cost as reported by a gateway; request_id makes reporting idempotent."""

    request_id = models.CharField(max_length=200, unique=True)
    connection_id = models.CharField(max_length=128, validators=[connection_id_validator])
    provider = models.CharField(max_length=64)
    model = models.CharField(max_length=200)
    cost_usd = models.DecimalField(max_digits=16, decimal_places=8)
    is_cost_computed = models.BooleanField(default=False)
    # What the request cost (0 on the plan-included rungs), and what it would have cost
    # at the price catalog's metered price (the "saved" figure on those rungs).
    billed_usd = models.DecimalField(max_digits=16, decimal_places=8, default=Decimal(0))
    list_price_usd = models.DecimalField(max_digits=16, decimal_places=8, default=Decimal(0))
    input_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    output_tokens = models.PositiveBigIntegerField(null=True, blank=True)
    rung = models.CharField(max_length=16)
    occurred_at = models.DateTimeField()
    recorded_at = models.DateTimeField(auto_now_add=True)
    # The gateway token that reported it (null: reported before tokens were recorded, or
    # written by the dashboard's seed). No constraint and no index: a report costs no
    # lookup of the token row, and a token deleted in the admin leaves its id, read as
    # "a deleted token" by the spend page's breakdown.
    token = models.ForeignKey(
        "ApiToken",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        db_index=False,
        related_name="+",
    )

    class Meta:
        ordering = ("-occurred_at", "-id")
        indexes = (
            models.Index(fields=("rung", "occurred_at")),
            # GET /api/v1/spend: newest first, keyset on (occurred_at, id).
            models.Index(fields=("occurred_at", "id"), name="spend_occurred_id"),
        )
        verbose_name_plural = "spend entries"

    def __str__(self) -> str:
        return f"{self.request_id} {self.cost_usd} USD on {self.rung}"


class SpendDayTotal(models.Model):
    """The running total of the spend ledger per UTC calendar day, rung and shard, kept
    in the transaction of each ledger row (ladder.services.spend_totals): a budget
    window's spend is the sum of at most 31 days' rows per rung, never a scan of the
    ledger. A day's total is the sum of its shards: a single report on PostgreSQL adds to
    the shard of its database session (spend_write.SHARDS), so concurrent writers do not
    queue on one row's lock behind each other's commit; every other writer uses shard 0."""

    day = models.DateField()
    rung = models.CharField(max_length=16)
    shard = models.PositiveSmallIntegerField(default=0)
    # Wider than an entry's cost (16 digits): a day sums many of them.
    spent_usd = models.DecimalField(max_digits=24, decimal_places=8, default=Decimal(0))
    # The list price of that day's entries on the rung (saved_usd on plan-included rungs).
    list_price_usd = models.DecimalField(max_digits=24, decimal_places=8, default=Decimal(0))

    class Meta:
        ordering = ("day", "rung", "shard")
        constraints = (
            models.UniqueConstraint(
                fields=("day", "rung", "shard"), name="spend_day_total_day_rung_shard"
            ),
        )

    def __str__(self) -> str:
        return f"{self.day} {self.rung} (shard {self.shard}): {self.spent_usd} USD"


class BudgetCrossing(models.Model):
    """That a paid rung's spend reached its budget in one budget window: written once,
    by the first spend write that sees the window's total at or past the budget after
    its own commit (ladder.services.spend_totals.note_crossings), which then moves the
    change version. Keyed by the budget too, so a raised budget is crossed anew."""

    rung = models.CharField(max_length=16)
    window_start = models.DateTimeField()
    budget_usd = models.DecimalField(max_digits=16, decimal_places=6)
    crossed_at = models.DateTimeField()

    class Meta:
        ordering = ("window_start", "rung")
        constraints = (
            models.UniqueConstraint(
                fields=("rung", "window_start", "budget_usd"), name="budget_crossing_once"
            ),
        )

    def __str__(self) -> str:
        return f"{self.rung} reached {self.budget_usd} USD in the window of {self.window_start}"


class ApiToken(models.Model):
    """A bearer token for the REST API. Only a SHA-256 of the secret is stored: tokens
    are long random strings, so a fast hash is safe and keeps the hot path cheap."""

    class Scope(models.TextChoices):
        GATEWAY = "gateway"
        OPERATOR = "operator"

    name = models.CharField(max_length=100)
    scope = models.CharField(max_length=16, choices=Scope.choices)
    prefix = models.CharField(max_length=12, help_text="The first characters, to recognise it.")
    secret_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    created_by = models.CharField(max_length=150, blank=True, default="")
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"{self.name} ({self.scope}, {self.prefix}...)"

    @property
    def is_revoked(self) -> bool:
        """Whether the token was revoked (it then authenticates nothing)."""
        return self.revoked_at is not None

    def allows(self, scope: str) -> bool:
        """Operator tokens can do everything gateway tokens can."""
        return self.scope == self.Scope.OPERATOR or scope == self.Scope.GATEWAY


class BeatHeartbeat(models.Model):
    """The beat's heartbeat, a single row (pk 1; ladder/beat.py): when the beat process
    last sent the heartbeat task (stamped by the beat itself) and when a worker last ran
    it. Together they tell a dead beat from a dead worker. Operational, not tuning."""

    last_run_at = models.DateTimeField(null=True)
    sent_at = models.DateTimeField(null=True)

    def __str__(self) -> str:
        return f"beat heartbeat @ {self.last_run_at}"


# --- notifications ------------------------------------------------------------------------


class Webhook(models.Model):
    """An operator-configured notification target. Its `is_active` switches this one
    webhook on and off; it is not a ladder switch (the ladder has none, deliberately)."""

    class Format(models.TextChoices):
        JSON = "json", "generic JSON (signed)"
        SLACK = "slack", "Slack-compatible"

    name = models.CharField(max_length=100, unique=True)
    # Checked at save and again at send (ladder/services/notifications.py); the path may hold a
    # secret (Slack's do), so pages show only the origin.
    url = models.CharField(max_length=2000)
    format = models.CharField(max_length=8, choices=Format.choices, default=Format.JSON)
    kinds = models.JSONField(default=list, blank=True)
    # The HMAC key, encrypted like credentials (ladder/crypto.py); never rendered, logged
    # or returned.
    secret_ciphertext = models.TextField()
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        ordering = ("name",)

    def __str__(self) -> str:
        return self.name


class NotificationState(models.Model):
    """What was last notified about one subject ("plan:<id>", "budget:cheap",
    "readings", ...): the dedupe memory, in the database so it survives restarts."""

    subject = models.CharField(max_length=200, unique=True)
    status = models.CharField(max_length=32)
    since = models.DateTimeField(null=True, blank=True)
    sequence = models.PositiveIntegerField(default=0)
    scope = models.CharField(max_length=200, blank=True, default="")
    updated_at = models.DateTimeField()

    class Meta:
        ordering = ("subject",)

    def __str__(self) -> str:
        return f"{self.subject}: {self.status} (#{self.sequence})"


class NotificationDelivery(models.Model):
    """One notification to one webhook, with its attempts. At most one per (webhook,
    transition): the constraint holds even if two evaluators race."""

    class Status(models.TextChoices):
        PENDING = "pending"
        SENDING = "sending"
        DELIVERED = "delivered"
        FAILED = "failed"

    # Sent in the body and a header: the receiver's key to drop a repeat.
    delivery_id = models.UUIDField(unique=True)
    webhook = models.ForeignKey(
        Webhook, null=True, on_delete=models.SET_NULL, related_name="deliveries"
    )
    webhook_name = models.CharField(max_length=100)  # the log outlives a deleted webhook
    event_key = models.CharField(max_length=240)
    kind = models.CharField(max_length=32)
    summary = models.CharField(max_length=1000)
    details = models.JSONField(default=dict, blank=True)
    occurred_at = models.DateTimeField()
    created_at = models.DateTimeField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # While SENDING: an attempt is in flight until then; past it, the sender is presumed
    # dead and the delivery may be claimed again.
    lease_until = models.DateTimeField(null=True, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=300, blank=True, default="")

    class Meta:
        ordering = ("-created_at", "-id")
        constraints = (
            models.UniqueConstraint(
                fields=("webhook", "event_key"), name="notification_delivery_once_per_webhook"
            ),
        )
        indexes = (
            models.Index(fields=("status", "next_attempt_at")),
            models.Index(fields=("-created_at", "-id")),
        )
        verbose_name_plural = "notification deliveries"

    def __str__(self) -> str:
        return f"{self.kind} to {self.webhook_name}: {self.status}"


class SimulationRun(models.Model):
    """One what-if simulation started from the dashboard and run by a Celery worker:
    its state, its progress (simulated policy-days replayed) and, once done, the report
    (the context `ladder.simulator.report.report_context` computed, every number
    already formatted) or the error in words. At most one run is active (queued or
    running) at a time: `active` is True only then, and unique."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    # True while queued or running, NULL after: NULLs are distinct, so the unique index
    # admits any number of finished runs and one active one.
    active = models.BooleanField(null=True, unique=True, default=True)
    requested_by = models.CharField(max_length=150)
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Bumped with every progress step: an active run not heard from for long is dead.
    updated_at = models.DateTimeField()
    days = models.PositiveSmallIntegerField(default=7)
    requests_per_weekday = models.PositiveIntegerField(default=4000)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    stage = models.CharField(max_length=200, blank=True, default="")
    error = models.CharField(max_length=500, blank=True, default="")
    report = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"simulation {self.pk}: {self.state}"

    @property
    def is_active(self) -> bool:
        """Queued or running."""
        return self.state in (self.State.QUEUED, self.State.RUNNING)

    @property
    def percent(self) -> int:
        """Progress in whole percent (0 until the total is known)."""
        if not self.progress_total:
            return 0
        return min(100, self.progress_done * 100 // self.progress_total)


# --- the pool timeline (ladder/core/timeline.py, docs/HOT_PATH.md "The pool timeline") ---


class PoolMembership(models.Model):
    """The last recorded membership of one published auto id: the recorders compare a
    decision's membership with it and move it by compare-and-set on `version`."""

    auto_id = models.CharField(max_length=100, unique=True)
    members = models.JSONField(default=list)  # sorted [provider, model, connection_id, rung]
    version = models.PositiveBigIntegerField(default=1)
    computed_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.auto_id} v{self.version}"


class PoolTransition(models.Model):
    """One (provider, model, connection) pair entering or leaving a published pool."""

    at = models.DateTimeField()
    auto_id = models.CharField(max_length=100)
    # The membership version this transition produced: one recorder wins each version.
    version = models.PositiveBigIntegerField()
    change = models.CharField(max_length=8, choices=[("entered", "entered"), ("left", "left")])
    provider = models.CharField(max_length=100)
    model = models.CharField(max_length=200)
    connection_id = models.CharField(max_length=128)
    rung = models.CharField(max_length=16, null=True)
    reason = models.CharField(max_length=32, null=True)
    detail = models.CharField(max_length=300)

    class Meta:
        ordering = ("-at", "-id")
        indexes = (models.Index(fields=("auto_id", "-at", "-id")), models.Index(fields=("at",)))
        constraints = (
            models.UniqueConstraint(
                fields=("auto_id", "version", "change", "provider", "model", "connection_id"),
                name="pool_transition_once_per_version",
            ),
        )

    def __str__(self) -> str:
        return f"{self.auto_id} {self.change} {self.connection_id} @ {self.at}"


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
