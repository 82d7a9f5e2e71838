"""The tokens change counter starts at zero: revoking a token bumps it, so a process
that keeps live tokens in memory (omniroute_admin.loop_lane) forgets them all."""

from django.db import migrations


def create_counter(apps, schema_editor):
    apps.get_model("billing", "ChangeCounter").objects.get_or_create(name="tokens")


class Migration(migrations.Migration):
    dependencies = [("billing", "0008_audit_target_id_128")]
    operations = [migrations.RunPython(create_counter, migrations.RunPython.noop)]
