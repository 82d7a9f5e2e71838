"""The Celery app. Configuration comes from Django settings (CELERY_* names)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "omniroute_admin.settings")

app = Celery("omniroute_admin")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
