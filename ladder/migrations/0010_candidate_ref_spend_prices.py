"""Candidates gain `ref`; spend entries gain `billed_usd` and `list_price_usd`, and the
day totals `list_price_usd`, all backfilled from the ledger.

Backfill of an existing entry: on a plan-included rung (subscription, keyless) nothing
was billed, and its list price is the cost the ledger computed from the tokens when the
gateway sent none, else the cost of its tokens at today's price catalog; on any other
rung both are its cost. Each day total's list price is the sum of its entries'."""

from datetime import UTC
from decimal import Decimal

from django.db import migrations, models
from django.db.models import Sum
from django.db.models.functions import TruncDate

from billing.tiers import PriceBook

PLAN_RUNGS = ("subscription", "keyless")
BOOK_FIELDS = (
    "provider",
    "model",
    "input_usd_per_mtok",
    "output_usd_per_mtok",
    "tier_override",
    "needs_review",
)
COLUMN = Decimal("0.00000001")
COLUMN_MAX = Decimal("99999999.99999999")


def backfill(apps, schema_editor):
    entry_model = apps.get_model("ladder", "SpendEntry")
    total_model = apps.get_model("ladder", "SpendDayTotal")
    price_model = apps.get_model("billing", "ModelPrice")
    entry_model.objects.exclude(rung__in=PLAN_RUNGS).update(
        billed_usd=models.F("cost_usd"), list_price_usd=models.F("cost_usd")
    )
    plan = entry_model.objects.filter(rung__in=PLAN_RUNGS)
    plan.filter(is_cost_computed=True).update(
        billed_usd=Decimal(0), list_price_usd=models.F("cost_usd")
    )
    book = None
    changed = []
    for entry in plan.filter(is_cost_computed=False).iterator(chunk_size=2000):
        if book is None:
            book = PriceBook(price_model.objects.order_by().values_list(*BOOK_FIELDS))
        cost = book.cost_usd(
            entry.provider, entry.model, entry.input_tokens or 0, entry.output_tokens or 0
        )
        entry.billed_usd = Decimal(0)
        entry.list_price_usd = min(cost.quantize(COLUMN), COLUMN_MAX)
        changed.append(entry)
        if len(changed) >= 2000:
            entry_model.objects.bulk_update(changed, ["billed_usd", "list_price_usd"])
            changed = []
    entry_model.objects.bulk_update(changed, ["billed_usd", "list_price_usd"])
    sums = (
        entry_model.objects.annotate(day=TruncDate("occurred_at", tzinfo=UTC))
        .order_by()
        .values("day", "rung")
        .annotate(total=Sum("list_price_usd"))
    )
    for row in sums:
        total_model.objects.filter(day=row["day"], rung=row["rung"]).update(
            list_price_usd=row["total"] or Decimal(0)
        )


class Migration(migrations.Migration):
    dependencies = [
        ("ladder", "0009_simulation_run"),
        ("billing", "0007_seed_provider_aliases"),
    ]

    operations = [
        migrations.AddField(
            model_name="candidate",
            name="ref",
            field=models.CharField(blank=True, max_length=256, null=True),
        ),
        migrations.AddField(
            model_name="spenddaytotal",
            name="list_price_usd",
            field=models.DecimalField(decimal_places=8, default=Decimal("0"), max_digits=24),
        ),
        migrations.AddField(
            model_name="spendentry",
            name="billed_usd",
            field=models.DecimalField(decimal_places=8, default=Decimal("0"), max_digits=16),
        ),
        migrations.AddField(
            model_name="spendentry",
            name="list_price_usd",
            field=models.DecimalField(decimal_places=8, default=Decimal("0"), max_digits=16),
        ),
        migrations.AddIndex(
            model_name="spendentry",
            index=models.Index(fields=["occurred_at", "id"], name="spend_occurred_id"),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
