"""Webhooks, what was last notified about each subject, and the delivery log."""

from __future__ import annotations

from django.db import models


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
