"""The provider name a connection or a candidate was registered under, next to the id it
resolves to through the aliases: an alias write resolves the registered names again
(rows from before keep their resolved id as their registered name: the name they were
registered under was not kept)."""

from typing import Any

from django.db import migrations, models
from django.db.models import F


def backfill(apps: Any, schema_editor: Any) -> None:
    for name in ("Connection", "Candidate"):
        apps.get_model("ladder", name).objects.update(registered_provider=F("provider"))


class Migration(migrations.Migration):
    dependencies = [
        ("ladder", "0014_window_forecast"),
    ]

    operations = [
        migrations.AddField(
            model_name="candidate",
            name="registered_provider",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.AddField(
            model_name="connection",
            name="registered_provider",
            field=models.CharField(blank=True, default="", max_length=64),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
