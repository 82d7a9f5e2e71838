"""gunicorn's logger with escaped lines (named by `logger_class` in gunicorn.conf.py).

gunicorn formats its error log and its access log (request line, Referer, User-Agent and
any other header an access_log_format names) with handlers of its own, which Django's
LOGGING never reaches: each of them is wrapped in EscapingWrapper, so a hostile header
value cannot forge an access-log line. Formats, files and the access log's on/off
switch stay gunicorn's.
"""

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
