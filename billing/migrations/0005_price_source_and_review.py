"""Prices gain `source` (manual | import) and `needs_review` (free must be explicit).

Existing rows: a row last written by `import_prices` is marked `import`. A row whose
input and output prices are both zero and that has no `free` override is marked
`import` and `needs_review` too, whoever wrote it: the table cannot prove such a zero
was entered by hand (the dashboard's upload audits under the operator's own name), and
an unproven zero left on the free rung is spend with no budget to stop it. Confirming
one is a single click; each flagged row gets an audit row and the config counter moves,
so warm processes re-tier it at once. Every other row is `manual`.
"""

from django.db import migrations, models
from django.db.models import F, Q
from django.utils import timezone

ACTOR = "migration billing.0005"


def _snapshot(price):
    return {
        "provider": price.provider,
        "model": price.model,
        "input_usd_per_mtok": str(price.input_usd_per_mtok),
        "output_usd_per_mtok": str(price.output_usd_per_mtok),
        "tier_override": price.tier_override,
        "source": price.source,
        "needs_review": price.needs_review,
    }


def mark_existing(apps, schema_editor):
    price_model = apps.get_model("billing", "ModelPrice")
    audit_model = apps.get_model("billing", "AuditEntry")
    counter_model = apps.get_model("billing", "ChangeCounter")
    price_model.objects.filter(updated_by="import_prices").update(source="import")
    unproven_zeros = price_model.objects.filter(
        Q(tier_override__isnull=True) | ~Q(tier_override="free"),
        input_usd_per_mtok=0,
        output_usd_per_mtok=0,
    )
    now = timezone.now()
    audits = []
    for price in unproven_zeros.iterator():
        before = _snapshot(price)
        price.source = "import"
        price.needs_review = True
        price.save(update_fields=["source", "needs_review"])
        audits.append(
            audit_model(
                target_type="price",
                target_id=str(price.pk),
                action="update",
                actor=ACTOR,
                at=now,
                before=before,
                after=_snapshot(price),
            )
        )
    audit_model.objects.bulk_create(audits, batch_size=500)
    if audits:
        counter_model.objects.filter(name="config").update(value=F("value") + 1)


class Migration(migrations.Migration):
    dependencies = [("billing", "0004_seed_change_counters")]

    operations = [
        migrations.AddField(
            model_name="modelprice",
            name="needs_review",
            field=models.BooleanField(
                default=False,
                help_text="An imported zero price: not evidence of free, so it is tiered as "
                "unpriced until an operator confirms it (a `free` override, or entering it "
                "by hand).",
            ),
        ),
        migrations.AddField(
            model_name="modelprice",
            name="source",
            field=models.CharField(
                choices=[("manual", "Manual"), ("import", "Import")],
                default="manual",
                max_length=8,
            ),
        ),
        migrations.AddIndex(
            model_name="modelprice",
            index=models.Index(
                condition=models.Q(("needs_review", True)),
                fields=["provider", "model"],
                name="price_needs_review",
            ),
        ),
        migrations.RunPython(mark_existing, migrations.RunPython.noop),
    ]
