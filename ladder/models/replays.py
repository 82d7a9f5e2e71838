"""The ledger replays an operator starts ("what a different purchase would have saved",
docs/FORECASTS.md): a past period's recorded requests replayed as bought and with one
change, run by a Celery worker, their state, progress and result kept here."""

from __future__ import annotations

from django.db import models


class LedgerReplayRun(models.Model):
    """One ledger replay: the period and the change asked for, its progress (stages and
    requests replayed) and, once done, the result (both runs' figures, the seats as
    measured) or the error in words. At most one is active (queued or running) at a time:
    `active` is True only then, and unique."""

    class State(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        SUCCEEDED = "succeeded"
        FAILED = "failed"

    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED)
    # True while queued or running, NULL after (NULLs are distinct under the unique index).
    active = models.BooleanField(null=True, unique=True, default=True)
    requested_by = models.CharField(max_length=150)
    created_at = models.DateTimeField()
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField()
    period_start = models.DateTimeField()
    period_end = models.DateTimeField()
    # {"add_seat_like": id|null, "remove_seat": id|null, "budgets": {"cheap": "12.50"|null}}
    change = models.JSONField(default=dict)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    stage = models.CharField(max_length=200, blank=True, default="")
    error = models.CharField(max_length=500, blank=True, default="")
    result = models.JSONField(null=True, blank=True)

    class Meta:
        app_label = "ladder"
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"ledger replay {self.pk}: {self.state}"

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
