"""WSGI entry point: Django's handler behind the pool fast lane (omniroute_admin.fast_lane)
and the change feed's blocking hold (omniroute_admin.change_feed)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "omniroute_admin.settings")

django_application = get_wsgi_application()

from omniroute_admin.change_feed import ChangeFeedWait  # noqa: E402  (needs the apps loaded)
from omniroute_admin.fast_lane import PoolFastLane  # noqa: E402

# Everything but the feed's hold; the ASGI entry point runs this on its thread pool.
lanes = PoolFastLane(django_application)
application = ChangeFeedWait(lanes)

# Last: what is loaded now lives as long as the process (omniroute_admin.heap).
from omniroute_admin.heap import settle  # noqa: E402

settle()
