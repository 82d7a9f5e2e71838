from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("ladder", "0008_spend_day_totals"),
    ]

    operations = [
        migrations.CreateModel(
            name="SimulationRun",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "state",
                    models.CharField(
                        choices=[
                            ("queued", "Queued"),
                            ("running", "Running"),
                            ("succeeded", "Succeeded"),
                            ("failed", "Failed"),
                        ],
                        default="queued",
                        max_length=16,
                    ),
                ),
                ("active", models.BooleanField(default=True, null=True, unique=True)),
                ("requested_by", models.CharField(max_length=150)),
                ("created_at", models.DateTimeField()),
                ("started_at", models.DateTimeField(blank=True, null=True)),
                ("finished_at", models.DateTimeField(blank=True, null=True)),
                ("updated_at", models.DateTimeField()),
                ("days", models.PositiveSmallIntegerField(default=7)),
                ("requests_per_weekday", models.PositiveIntegerField(default=4000)),
                ("progress_done", models.PositiveIntegerField(default=0)),
                ("progress_total", models.PositiveIntegerField(default=0)),
                ("stage", models.CharField(blank=True, default="", max_length=200)),
                ("error", models.CharField(blank=True, default="", max_length=500)),
                ("report", models.JSONField(blank=True, null=True)),
            ],
            options={
                "ordering": ("-created_at", "-id"),
            },
        ),
    ]
