"""Seed the six curated entries of the spec's table (editable afterwards)."""

from django.db import migrations

CURATED = (
    (
        "claude",
        "oauth",
        "subscription",
        "hard-stop",
        "Pro/Max plan windows refuse past the limit until reset",
    ),
    (
        "codex",
        "oauth",
        "subscription",
        "hard-stop",
        "ChatGPT plan's included Codex quota; refused until the window resets",
    ),
    (
        "antigravity",
        "oauth",
        "subscription",
        "hard-stop",
        "Built-in plan quotas stop serving once consumed",
    ),
    (
        "cursor",
        "oauth",
        "subscription",
        "unknown",
        "Usage-based pricing past the plan can be enabled per account, unobservable",
    ),
    (
        "copilot",
        "apikey",
        "subscription",
        "unknown",
        "Per-seat plan; extra premium requests can be billed when the account opts in",
    ),
    (
        "devin-desktop",
        "oauth",
        "subscription",
        "meters-to-paid",
        "Draws on included units, then keeps billing",
    ),
)


def seed(apps, schema_editor):
    entry_model = apps.get_model("billing", "BillingCatalogEntry")
    for provider, auth_type, billing, overage, reason in CURATED:
        entry_model.objects.get_or_create(
            provider=provider,
            auth_type=auth_type,
            defaults={
                "billing": billing,
                "overage": overage,
                "reason": reason,
                "updated_by": "initial curation",
            },
        )


def unseed(apps, schema_editor):
    entry_model = apps.get_model("billing", "BillingCatalogEntry")
    for provider, auth_type, *_ in CURATED:
        entry_model.objects.filter(provider=provider, auth_type=auth_type).delete()


class Migration(migrations.Migration):
    dependencies = [("billing", "0001_initial")]
    operations = [migrations.RunPython(seed, unseed)]
