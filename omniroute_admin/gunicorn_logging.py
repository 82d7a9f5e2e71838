"""gunicorn's logger with escaped lines (named by `logger_class` in gunicorn.conf.py):
its error and access logs have handlers of their own, which Django's LOGGING never
reaches, so each is wrapped and a hostile header value cannot forge a log line."""

from __future__ import annotations

from typing import Any

from gunicorn.glogging import Logger

from omniroute_admin.log_escape import escape_handlers


class EscapingLogger(Logger):
    """gunicorn's Logger whose every handler escapes control characters."""

    def setup(self, cfg: Any) -> None:
        """Set gunicorn's handlers up (again, on a reload), then wrap their formatters."""
        super().setup(cfg)
        escape_handlers(self.error_log)
        escape_handlers(self.access_log)
