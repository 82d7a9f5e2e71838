"""The Celery app. Configuration comes from Django settings (CELERY_* names)."""

import logging
import os
from typing import Any

from celery import Celery
from celery.signals import after_setup_logger, after_setup_task_logger
from kombu.transport import TRANSPORT_ALIASES

from omniroute_admin.log_escape import escape_handlers

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "omniroute_admin.settings")

# `filesystem://` (the embedded default) names kombu's filesystem transport with messages
# written whole before they appear (omniroute_admin/broker.py), in every process: the web
# and the beat publish, the worker reads.
TRANSPORT_ALIASES["filesystem"] = "omniroute_admin.broker:Transport"

app = Celery("omniroute_admin")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@after_setup_logger.connect
@after_setup_task_logger.connect
def escape_celery_log_handlers(logger: logging.Logger, **kwargs: Any) -> None:
    """Celery (worker and beat) installs handlers of its own, replacing settings.LOGGING's:
    wrap their formatters so a logged value cannot forge a line (log_escape.py)."""
    escape_handlers(logger)


def _close_redis_channels_after_a_lost_connection() -> None:
    """kombu 5.7's Redis transport: Channel.close() lets a lost connection's error escape
    from the pending BRPOP read; the consumer's second close then crashes the worker with
    AttributeError ('NoneType' object has no attribute 'hostname'). Read that reply first,
    ignoring its failure, so the close finishes and the worker reconnects."""
    import contextlib
    from typing import Any

    from kombu.transport import redis as kombu_redis

    close = kombu_redis.Channel.close

    def close_after_a_lost_connection(self: Any) -> None:
        if self._in_poll:
            with contextlib.suppress(Exception):  # Empty, or the connection is gone
                self._brpop_read()
        close(self)

    kombu_redis.Channel.close = close_after_a_lost_connection  # type: ignore[method-assign]


_close_redis_channels_after_a_lost_connection()
