"""Seed LiteLLM's provider ids as aliases of the curated catalog's providers.

Only for a provider the catalog holds when this runs, and never for a name that is
itself a provider with catalog entries (docs/GATEWAYS.md, "Provider aliases and
normalisation", has the table and why `openai` and `gemini` are left out). Like the
curated catalog's seed (0002) it writes no audit rows: the audit trail records what
people and tokens changed; `updated_by` names this migration. The config counter moves
so warm processes load the map."""

from django.db import migrations
from django.db.models import F

ACTOR = "migration billing.0007"

# (LiteLLM's provider id, the catalog's provider id)
SEED = (
    ("anthropic", "claude"),
    ("github_copilot", "copilot"),
    ("chatgpt", "codex"),
)


def seed(apps, schema_editor):
    alias_model = apps.get_model("billing", "ProviderAlias")
    entry_model = apps.get_model("billing", "BillingCatalogEntry")
    counter_model = apps.get_model("billing", "ChangeCounter")
    providers = set(entry_model.objects.values_list("provider", flat=True))
    seeded = 0
    for alias, provider in SEED:
        if provider not in providers or alias in providers:
            continue
        _, created = alias_model.objects.get_or_create(
            alias=alias, defaults={"provider": provider, "updated_by": ACTOR}
        )
        if not created:
            continue
        seeded += 1
    if seeded:
        counter_model.objects.filter(name="config").update(value=F("value") + 1)


def unseed(apps, schema_editor):
    alias_model = apps.get_model("billing", "ProviderAlias")
    for alias, provider in SEED:
        alias_model.objects.filter(alias=alias, provider=provider, updated_by=ACTOR).delete()


class Migration(migrations.Migration):
    dependencies = [("billing", "0006_provider_alias")]

    operations = [migrations.RunPython(seed, unseed)]
