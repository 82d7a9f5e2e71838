"""API tokens, the beat's heartbeat and the dashboard's simulation runs."""

from __future__ import annotations

from django.db import models


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
