"""The spend ledger, its running day totals and the budget crossings."""

from __future__ import annotations

from decimal import Decimal

from django.db import models

from ladder.models.connections import connection_id_validator


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
