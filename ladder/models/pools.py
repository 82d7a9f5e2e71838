"""The pool timeline (ladder/core/timeline.py, docs/HOT_PATH.md "The pool timeline"):
each published auto id's last membership and the transitions between them."""

from __future__ import annotations

from django.db import models


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
