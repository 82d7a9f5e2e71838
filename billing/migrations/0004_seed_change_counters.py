"""The two change counters start at zero."""

from django.db import migrations


def create_counters(apps, schema_editor):
    counter = apps.get_model("billing", "ChangeCounter")
    for name in ("config", "state"):
        counter.objects.get_or_create(name=name)


class Migration(migrations.Migration):
    dependencies = [("billing", "0003_change_counters")]
    operations = [migrations.RunPython(create_counters, migrations.RunPython.noop)]
