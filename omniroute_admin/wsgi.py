"""WSGI entry point: Django's handler behind the pool fast lane (omniroute_admin.fast_lane)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "omniroute_admin.settings")

django_application = get_wsgi_application()

from omniroute_admin.fast_lane import PoolFastLane  # noqa: E402  (needs the apps loaded)

application = PoolFastLane(django_application)
